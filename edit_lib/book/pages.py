"""The book's generated pages (MyST markdown), from one run's results JSON, never from typed numbers: ``results_page``
(the headline figure, the paper's Tables 1-7, 9-14 beside the run's, ``paper_reference``, a computed best-system
sentence), ``claims_page`` (the ledger) and ``reproducibility_page`` (versions, keys); ``performance`` has the
performance page."""
from __future__ import annotations

import importlib.metadata as metadata
import os
import platform
from dataclasses import dataclass
from typing import Callable

import pandas as pd
from jinja2 import Environment, PackageLoader, StrictUndefined

from edit_lib import paper_reference
from edit_lib.book import claims
from edit_lib.book.claim_rules import extra
from edit_lib.book.headline import headline_section
from edit_lib.runner.keys import STAGES
from edit_lib.systems import BY_NAME, label as system_label, names


PAPER_SETTING = "Qwen3-8B on SAS-Bench and a private dataset"
PACKAGES = ("torch", "transformers", "peft", "trl", "accelerate", "datasets", "numpy", "pandas", "scipy",
            "scikit-learn", "statsmodels", "matplotlib", "papermill", "nbformat", "jupyter-book", "sphinx",
            "myst-nb", "sphinx-book-theme", "sphinx-mathjax-offline")


def label(name: str, results: dict) -> str:
    """The line every generated chapter starts with: which run, profile and datasets its numbers come from."""
    ds = sorted(extra(results, "00_data", "datasets", {})) or ["(00_data not run)"]
    return (f"*Run `{name}`: every number on this page comes from profile `{name}` on datasets "
            f"{', '.join(f'`{d}`' for d in ds)} (`runs/{name}/results/`).*")


def _cell(x) -> str:
    if x is None or (isinstance(x, float) and x != x):
        return ""
    if isinstance(x, float):
        return f"{x:.3f}" if x == 0 or 1e-3 <= abs(x) < 1e5 else f"{x:.2e}"
    return str(x).replace("|", "\\|").replace("$", "\\$").replace("<", "&lt;")


def md_table(df: pd.DataFrame) -> str:
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(_cell(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


# The pages' text lives in templates (edit_lib/book/templates/<page>.md.j2); the functions that call ``render`` work
# out what a page shows. Undefined names are errors, so a template and its caller cannot drift apart silently.
TEMPLATES = Environment(loader=PackageLoader("edit_lib.book", "templates"), undefined=StrictUndefined,
                        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
TEMPLATES.filters.update(md_table=md_table, tick=lambda x: f"`{x}`")


def render(page: str, **shown) -> str:
    """A page of the book from its template, ``templates/<page>.md.j2``, and what it shows (``shown``)."""
    return TEMPLATES.get_template(f"{page}.md.j2").render(**shown)


# ------------------------------------------------------------------ results beside the paper

@dataclass(frozen=True)
class TableSpec:
    """A paper table, the results table that reproduces it and its headline: ``suite`` and ``paper`` turn the
    suite's rows / the paper's reference rows into (dataset, system, value) for the 'best' sentence."""

    number: str
    title: str
    stage: str
    table: str
    headline: str
    suite: Callable[[pd.DataFrame], pd.DataFrame] | None
    paper: Callable[[pd.DataFrame], pd.DataFrame] | None = None
    lower: bool = False
    headline_table: str | None = None  # the results table ``suite`` reads, when not ``table``


def _melt(df: pd.DataFrame, cols) -> pd.DataFrame:
    cols = [c for c in cols if c in df]
    return df.melt(id_vars=["dataset"], value_vars=cols, var_name="system").dropna(subset=["value"])


def _pick(df, col, value):
    return df[df[col] == value] if (df[col] == value).any() else df


def _ref(metric=None, split=None, subject=None, fn=None):
    """Reference rows of one headline (a metric ending in ':' is a prefix), averaged per dataset and system."""
    def get(ref):
        for col, v in (("metric", metric), ("split", split), ("subject", subject)):
            if v is not None:
                ref = ref[ref[col].str.startswith(v) if v.endswith(":") else ref[col] == v]
        if fn is not None:
            ref = ref.assign(value=fn(ref))
        return ref.groupby(["dataset", "system"], as_index=False)["value"].mean()
    return get


def _col(system_col, value_col, **where):
    def get(df):
        df = df if "dataset" in df else df.assign(dataset="all")
        for k, v in where.items():
            df = df[df[k] == v]
        return df.rename(columns={system_col: "system", value_col: "value"})[["dataset", "system", "value"]]
    return get


_SYS = list(BY_NAME)
SPECS = (
    TableSpec("Table 1", "main results on SAS (OOD)", "07_evaluation", "table1", "QWK, subject average",
              lambda d: _melt(_pick(d[d.metric == "qwk"], "subject", "Avg"), _SYS), _ref("qwk", subject="SAS-Avg")),
    TableSpec("Table 2", "main results on Private-Science (ID and OOD)", "07_evaluation", "table2", "OOD QWK",
              lambda d: _melt(d[(d.metric == "qwk") & (d.split == "ood")], _SYS), _ref("qwk", "ood")),
    TableSpec("Table 3", "question-level pooled QWK, cluster-bootstrap CIs, Holm p vs Base", "09_significance",
              "table3", "question-pooled QWK", lambda d: _table3_long(d), _ref("qwk_question_pooled"),
              headline_table="significance"),
    TableSpec("Table 4", "EDIT-SFT+GRPO vs EDIT-SFT+EDIT-RL over seeds", "07_evaluation", "table4",
              "mean OOD QWK over seeds", lambda d: _melt(d.rename(columns=lambda c: c.removesuffix("_mean")),
                                                         list(names("Table 4"))), _ref("qwk_mean")),
    TableSpec("Table 5", "RL on Base or on EDIT-SFT (SFT x RL grid)", "07_evaluation", "table5", "OOD QWK",
              _col("system", "ood_qwk"), _ref("qwk", "ood")),
    TableSpec("Table 6", "ablation of EDIT-SFT", "07_evaluation", "table6", "QWK", _col("system", "qwk"), _ref("qwk")),
    TableSpec("Table 7", "rule faithfulness under interventions", "08_rsr_interventions", "table7",
              "overall AE-RSR (lower is better)", _col("system", "ae_rsr_overall"), _ref("ae_rsr_overall"), True),
    TableSpec("Table 9", "calibrated beta_drift and gamma (lower block)", "06_rl", "table9_calibration", "", None),
    TableSpec("Table 10", "step-boundary belief divergence from the frozen EDIT-SFT probe", "06_rl",
              "table10_divergence", "KL (lower: closer to the probe)", _col("system", "kl"), None, True),
    TableSpec("Table 11", "grounding-audit validation", "03_audit_validation", "table11",
              "rank-biserial r per step (sum reduction)", _col("signal", "r", level="step", reduction="sum")),
    TableSpec("Table 12", "counterfactual step selection", "04_counterfactual_selection", "table12",
              "Success@N", _col("rule", "success_at_n")),
    TableSpec("Table 13", "zero-score recall", "07_evaluation", "table13", "zero recall (%), mean over subjects",
              lambda d: _col("system", "zero_recall_pct")(d).groupby(["dataset", "system"], as_index=False).mean(),
              _ref("zero_recall_pct")),
    TableSpec("Table 14", "full intervention results (per edit)", "08_rsr_interventions", "table14",
              "mean |IB-RSR - 1| over edits (lower is better)",
              lambda d: d.assign(value=(d.ib_rsr - 1).abs()).groupby(["dataset", "system"], as_index=False)["value"]
              .mean().dropna(), _ref("ib_rsr:", fn=lambda r: (r.value - 1).abs()), True),
)


def _table3_long(d: pd.DataFrame) -> pd.DataFrame:
    d = pd.concat([_pick(g, "scope", "all held-out") for _, g in d.groupby("dataset")])
    return d.rename(columns={"qwk": "value"})[["dataset", "system", "value"]]


def _best(long: pd.DataFrame, lower: bool) -> dict[str, tuple[list[str], float]]:
    out = {}
    for d, g in long.dropna(subset=["value"]).groupby("dataset"):
        v = g.value.min() if lower else g.value.max()
        out[d] = (sorted(system_label(s) for s in g[abs(g.value - v) <= 1e-12].system), v)
    return out


def best_sentence(spec: TableSpec, suite: pd.DataFrame, paper: pd.DataFrame | None) -> str:
    """'Best by <headline>': the suite's best system per dataset, the paper's, and where they differ."""
    s_best = _best(suite, spec.lower)
    if not s_best:
        return ""
    fmt = lambda b: "; ".join(f"{d}: {' / '.join(n)} ({_cell(float(v))})" for d, (n, v) in b.items())  # noqa: E731
    text = f"**Best by {spec.headline}.** The suite — {fmt({f'`{d}`': b for d, b in s_best.items()})}."
    if paper is None or not len(paper):
        return text
    p_best = _best(paper, spec.lower)
    top = {n for names, _ in p_best.values() for n in names}
    sole = [d for d, (n, _) in s_best.items() if set(n) <= top]
    tied = [d for d, (n, _) in s_best.items() if d not in sole and top & set(n)]
    other = [d for d in s_best if d not in sole + tied]
    parts = [f"the suite's only best on {len(sole)}", f"tied for best with other systems on {len(tied)}",
             f"not the suite's best on {len(other)}" + (f" ({', '.join(f'`{d}`' for d in other)})" if other else "")]
    return text + (f" The paper — {fmt(p_best)}. The paper's best ({' / '.join(sorted(top))}) is "
                   + ", ".join(p for p, n in zip(parts, (sole, tied, other)) if n) + f" of {len(s_best)} "
                   f"dataset{'s' * (len(s_best) > 1)}.")


_KEYS = ("dataset", "subject", "paper_subject", "split", "scope", "metric", "system", "Method", "rule", "signal",
         "level", "reduction", "edit", "family", "init")


def _readable(df: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Key columns first, then systems in the paper's order (as the paper names them), then the rest; a key
    column with one value in every row is left out and named in the returned note."""
    same = {c: df[c].iloc[0] for c in _KEYS[1:] if c in df and df[c].astype(str).nunique() == 1 and len(df) > 1}
    first = [c for c in _KEYS if c in df and c not in same] + [s for s in _SYS if s in df]
    df = df[first + [c for c in df.columns if c not in first and c not in same]]
    if "system" in df:
        df = df.assign(system=df.system.map(lambda s: system_label(s) if isinstance(s, str) else s))
    return df.rename(columns=system_label), ", ".join(f"{k} `{v}`" for k, v in same.items())


def results_page(name: str, results: dict, headline: pd.DataFrame | None = None, figure: str | None = None) -> str:
    """Every paper table of ``SPECS`` the run made, beside the paper's where ``paper_reference`` has it, with its
    computed best-system sentence (``templates/results.md.j2``)."""
    sections, missing = [], []
    for spec in SPECS:
        rows = claims.rows(results, spec.stage, spec.table)
        if not rows:
            missing.append(spec.number)
            continue
        ref = paper_reference.table(spec.number) if spec.number in paper_reference.tables() else None
        suite, note = beside_cells(spec.number, pd.DataFrame(rows), ref, _SYS)
        table, same = _readable(suite)
        section = dict(number=spec.number, title=spec.title, stage=spec.stage, table=spec.table, same=same,
                       note=note, suite=table, paper=None, paper_same="", sentence="")
        if ref is not None:
            keep = [c for c in ("dataset", "subject", "split", "metric") if (ref[c] != "").any()]
            wide = ref.pivot_table(index=keep, columns="system", values="value", sort=False).reset_index()
            section["paper"], section["paper_same"] = _readable(
                wide[keep + [s for s in dict.fromkeys(_SYS + list(ref["system"])) if s in wide]])
        head = claims.rows(results, spec.stage, spec.headline_table or spec.table)
        if spec.suite is not None and head:
            paper_long = spec.paper(ref) if (spec.paper and ref is not None) else None
            section["sentence"] = best_sentence(spec, spec.suite(pd.DataFrame(head)), paper_long)
        sections.append(section)
    top = headline_section(name, headline, figure, md_table) if headline is not None else []
    return render("results", name=name, label=label(name, results), headline="\n".join(top),
                  paper_setting=PAPER_SETTING, sections=sections, missing=missing)


# ------------------------------------------------------------------ claims, reproducibility

def claims_page(name: str, results: dict) -> str:
    """The claims ledger (``templates/claims.md.j2``): every claim's verdict by ``claims.evaluate``."""
    verdicts = claims.evaluate(results)
    counts = pd.Series([v.verdict for v in verdicts]).value_counts()
    sizes = pd.Series([v.magnitude for v in verdicts if v.magnitude]).value_counts()
    summary = pd.DataFrame([{"claim": v.claim.id, "where": v.claim.where, "verdict": v.verdict,
                             "magnitude": v.magnitude or "-"} for v in verdicts])
    return render("claims", name=name, label=label(name, results), verdicts=verdicts, summary=summary,
                  counts=", ".join(f"{n} {v}" for v, n in counts.items()),
                  sizes=", ".join(f"{n} {v}" for v, n in sizes.items()))


def stage_table(results: dict) -> pd.DataFrame:
    rows = [dict(stage=s, title=STAGES[s].title, key=r.get("key"), seconds=float(r.get("seconds") or 0),
                 reused_stale=bool(r.get("reused_stale")), warnings=len(r.get("warnings") or []))
            for s, r in results.items() if s in STAGES]
    return pd.DataFrame(rows)


def reproducibility_page(name: str, results: dict, profile) -> str:
    """Versions, keys and the machine (``templates/reproducibility.md.j2``)."""
    def version(p):
        try:
            return metadata.version(p)
        except metadata.PackageNotFoundError:
            return "not installed"
    seed = (results.get("00_data", {}).get("params") or {}).get("run.seed", profile.run.seed)
    pk = pd.DataFrame([{"package": "python", "version": platform.python_version()}]
                      + [{"package": p, "version": version(p)} for p in PACKAGES])
    machine = pd.DataFrame([{"fact": k, "value": v} for k, v in (
        ("platform", platform.platform()), ("machine", platform.machine()),
        ("processor", platform.processor() or "unknown"), ("CPU count", os.cpu_count()))])
    return render("reproducibility", name=name, label=label(name, results), profile=profile, seed=seed,
                  stages=stage_table(results), packages=pk, machine=machine)


# ------------------------------------------------------------------ the paper's value beside each wide-table cell
# Tables 1 and 2 (subjects as rows, systems as columns): a suite cell becomes ``suite (paper)`` where
# ``paper_reference`` has the same subject, split, metric and system, and stays the suite's number alone where the
# paper has no such row (e.g. a subject the paper lacks).

TABLES = ("Table 1", "Table 2")  # the wide result tables


def _fmt(x) -> str:
    return f"{x:.3f}" if isinstance(x, float) and abs(x) < 1e5 else str(x)


def paper_lookup(ref: pd.DataFrame) -> dict[tuple, float]:
    """(subject, split, metric, system) -> the paper's value (a row the paper reports once)."""
    return {(r.subject, r.split, r.metric, r.system): float(r.value) for r in ref.itertuples()}


def with_paper_values(suite: pd.DataFrame, ref: pd.DataFrame, systems: list[str]) -> tuple[pd.DataFrame, int]:
    """``suite`` with each system cell written ``suite (paper)`` where the paper reports that subject / split /
    metric / system (Table 1: SAS subjects and SAS-Avg; Table 2: Private-Biology and Private-Physics ID / OOD), and
    the number of cells that got one. A suite row without ``paper_subject`` or ``metric`` is returned unchanged."""
    if not {"paper_subject", "metric"} <= set(suite.columns):
        return suite, 0
    paper, out, n = paper_lookup(ref), suite.copy().astype(object), 0
    for i, row in suite.iterrows():
        for system in systems:
            if system not in suite.columns or pd.isna(row[system]):
                continue
            key = (row["paper_subject"], row.get("split", ""), row["metric"], system)
            if key in paper:
                out.at[i, system], n = f"{_fmt(float(row[system]))} ({_fmt(paper[key])})", n + 1
    return out, n


def beside_cells(number: str, suite: pd.DataFrame, ref: pd.DataFrame | None, systems: list[str]
                 ) -> tuple[pd.DataFrame, str]:
    """The results page's suite table of ``number``: with the paper's values beside its cells when it is one of
    ``TABLES`` and the paper's rows match, and the note the table's caption gets ('' when no cell got one)."""
    if ref is None or number not in TABLES:
        return suite, ""
    out, n = with_paper_values(suite, ref, systems)
    return out, ("; each cell: suite (paper), where the paper reports that subject, split and metric" if n else "")
