"""The tables built from 07's greedy predictions (``evaluate``): Tables 1 and 2 (main results), 4 (seeds),
5 (the SFT x RL grid), 6 (ablations) and 13 (zero-score recall), with the metrics of App. B.

Which dataset goes to which table (Table 1 vs Table 2) follows from its splits: a dataset evaluated on OOD
questions only is laid out like Table 1 (one row block per subject and a subject average, as the paper's
SAS-Avg, which is the plain mean of its three subjects), a dataset with an ID test split like Table 2 (one
row block per split).

What 07 shows is assembled here too: the graded policies and the systems without one (``graded_plan``), Tables 1
and 2 beside the paper's own numbers (``main_table_view``; reference data, ``paper_reference``) and the metrics
under the forced read (``forced_read_metrics``; cpu-real's departure).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from edit_lib import paper_reference
from edit_lib.data.schema import Dataset
from edit_lib.metrics import METRICS, frame_metrics
from edit_lib.systems import BY_NAME, all_systems, initialisation, main_systems, names, resolve

TABLE_METRICS = ("acc", "within1", "mae", "qwk")  # the order of Tables 1 and 2


def add_subjects(preds: pd.DataFrame, datasets: dict[str, Dataset]) -> pd.DataFrame:
    """A ``subject`` column from each response's question."""
    subj = {(n, q.id): q.subject for n, ds in datasets.items() for q in ds.questions.values()}
    return preds.assign(subject=[subj[(d, q)] for d, q in zip(preds["dataset"], preds["question_id"])])


def metrics_long(preds: pd.DataFrame, invalid_as: str = "wrong") -> pd.DataFrame:
    """Metrics (App. B: macro QWK over questions, ACC, within-1, MAE, pooled QWK, parse failures) of every
    system and seed on every dataset, split and subject (``subject`` = 'all' for the whole split)."""
    rows = []
    keys = ["system", "seed", "dataset", "split"]
    p = preds.assign(seed=preds["seed"].astype("Int64").astype(object).where(preds["seed"].notna(), None))
    for key, g in p.groupby(keys, sort=False, dropna=False):
        base = dict(zip(keys, key))
        rows.append(dict(base, subject="all", **frame_metrics(g, invalid_as)))
        if "subject" in g and g["subject"].nunique() > 1:
            for subj, gs in g.groupby("subject", sort=True):
                rows.append(dict(base, subject=subj, **frame_metrics(gs, invalid_as)))
    return pd.DataFrame(rows)


def first_seed(m: pd.DataFrame) -> pd.DataFrame:
    """Rows of seedless systems and of each seeded system's smallest seed (the paper's main tables and Table 5
    report one run per system)."""
    seeded = m["seed"].notna()
    first = m[seeded].groupby("system")["seed"].transform("min")
    keep = ~seeded
    keep[seeded] = m.loc[seeded, "seed"] == first
    return m[keep]


def table_kind(datasets: dict[str, Dataset]) -> dict[str, str]:
    """'Table 1' for a dataset evaluated on OOD questions only, 'Table 2' for one with an ID test split."""
    return {n: ("Table 2" if ds.split("id_test") else "Table 1") for n, ds in datasets.items()}


def main_table(m: pd.DataFrame, datasets: dict[str, Dataset], systems: list[str], table: str) -> pd.DataFrame:
    """Tables 1 and 2 in the paper's layout: one row per (dataset, subject or split, metric), one column per
    system (first seed), ``best`` naming the best column of the row (ties: all of them, joined by ' / ').

    Table 1 rows: each subject's OOD metrics, over every Table 1 dataset (one dataset with several subjects,
    as the demo's, or one dataset per subject, as the paper profile's SAS-Bench files), and 'Avg', the mean over
    those subjects (the paper's SAS-Avg is the plain mean of its three subjects);
    Table 2 rows: each split (ID, OOD) of each dataset. ``paper_subject`` names the paper's row it sits beside
    (``beside_paper``): the subject's name ('SAS-Avg' for the average) or a one-subject dataset's subject."""
    kinds = table_kind(datasets)
    m = first_seed(m[m["system"].isin(systems)])
    names = [n for n in datasets if kinds[n] == table]
    rows = []
    if table == "Table 1":
        blocks = []  # (dataset, subject, metrics of that subject's OOD split)
        for name in names:
            d = m[(m["dataset"] == name) & (m["split"] == "ood_test")]
            subj = d[d["subject"] != "all"]
            if subj.empty:  # one subject: the dataset's split is the subject
                only = {q.subject for q in datasets[name].questions.values()}
                subj = d.assign(subject=only.pop() if len(only) == 1 else name)
            blocks += [(name, s, subj[subj["subject"] == s]) for s in sorted(subj["subject"].unique())]
        if len(blocks) > 1:  # the subject average, as the paper's SAS-Avg (the plain mean of its subjects)
            allb = pd.concat([b for _, _, b in blocks])
            blocks.append(("+".join(names), "Avg", allb.groupby("system")[list(TABLE_METRICS)].mean().reset_index()))
        for name, label, b in blocks:
            paper = "SAS-Avg" if label == "Avg" else str(label).title()
            for metric in TABLE_METRICS:
                rows.append(dict(dataset=name, subject=label, split="ood", metric=metric, paper_subject=paper,
                                 **{s: _cell(b, s, metric) for s in systems}))
    else:
        for name in names:
            d = m[m["dataset"] == name]
            subjects = {q.subject for q in datasets[name].questions.values()}
            paper = subjects.pop().title() if len(subjects) == 1 else name
            for split in ("id_test", "ood_test"):
                b = d[(d["subject"] == "all") & (d["split"] == split)]
                for metric in TABLE_METRICS:
                    rows.append(dict(dataset=name, subject=name, split=split.removesuffix("_test"), metric=metric,
                                     paper_subject=paper, **{s: _cell(b, s, metric) for s in systems}))
    out = pd.DataFrame(rows)
    if len(out):
        out["best"] = [best_of(r, systems) for r in out.to_dict("records")]
    return out


def _cell(b: pd.DataFrame, system: str, metric: str) -> float:
    v = b.loc[b["system"] == system, metric]
    return float(v.iloc[0]) if len(v) else float("nan")


def best_of(row: dict, systems: list[str]) -> str:
    """The best system(s) of one table row (direction from ``metrics.METRICS``; NaN cells never win)."""
    vals = {s: row[s] for s in systems if s in row and not pd.isna(row[s])}
    if not vals:
        return ""
    if len(vals) > 1 and len(set(np.round(list(vals.values()), 12))) == 1:
        return "all tie"
    higher = METRICS[row["metric"]].higher_is_better
    target = max(vals.values()) if higher else min(vals.values())
    return " / ".join(s for s, v in vals.items() if np.isclose(v, target, rtol=0, atol=1e-12))


def seeds_table(m: pd.DataFrame, a: str = names("Table 4")[0], b: str = names("Table 4")[1], split: str = "ood_test",
                metric: str = "qwk", ci: float = 0.95) -> pd.DataFrame:
    """Table 4: per dataset, ``metric`` on ``split`` of arms ``a`` and ``b`` over their common seeds: mean and
    SD (ddof 1) of each, the mean seed-wise paired difference b - a and its t-interval (``ci``; n - 1 degrees
    of freedom; NaN with fewer than two seeds), the seeds that paired, and beside the difference its SD
    (``delta_sd``) and the smallest difference the paired t test detects at 80% power, two-sided 1 - ``ci``
    (``mde``, exact noncentral t: ``power.seed_mde``; ``mde_sd_multiple`` = mde / delta_sd)."""
    from scipy import stats
    from edit_lib.power import seed_mde, seed_mde_multiple
    d = m[(m["subject"] == "all") & (m["split"] == split) & m["system"].isin([a, b]) & m["seed"].notna()]
    rows = []
    for name, g in d.groupby("dataset", sort=True):
        wide = g.pivot_table(index="seed", columns="system", values=metric).dropna()
        if a not in wide or b not in wide or wide.empty:
            continue
        diff = wide[b] - wide[a]
        n = len(diff)
        half = (stats.t.ppf(0.5 + ci / 2, n - 1) * diff.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
        rows.append(dict(dataset=name, split=split, metric=metric, n_seeds=n,
                         seeds=" ".join(str(int(s)) for s in wide.index),
                         **{f"{a}_mean": wide[a].mean(), f"{a}_sd": wide[a].std(ddof=1) if n > 1 else float("nan"),
                            f"{b}_mean": wide[b].mean(), f"{b}_sd": wide[b].std(ddof=1) if n > 1 else float("nan")},
                         delta=diff.mean(), delta_ci_low=diff.mean() - half, delta_ci_high=diff.mean() + half,
                         wins=int((diff > 0).sum()), ci_excludes_zero=bool(n > 1 and abs(diff.mean()) > half),
                         delta_sd=diff.std(ddof=1) if n > 1 else float("nan"),
                         mde=seed_mde(diff.std(ddof=1), n, 1 - ci) if n > 1 else float("nan"),
                         mde_sd_multiple=seed_mde_multiple(n, 1 - ci) if n > 1 else float("nan")))
    return pd.DataFrame(rows)


def grid_table(m: pd.DataFrame, systems=names("Table 5"),
               rl_datasets: list[str] | None = None) -> pd.DataFrame:
    """Table 5: QWK and ACC on ID and OOD of the SFT x RL grid (first seed), per dataset RL trained on."""
    d = first_seed(m[(m["subject"] == "all") & m["system"].isin(systems)])
    if rl_datasets is not None:
        d = d[d["dataset"].isin(rl_datasets)]
    rows = []
    for (name, system), g in d.groupby(["dataset", "system"], sort=True):
        row = dict(dataset=name, system=system, label=BY_NAME[system].label)
        for split in ("id_test", "ood_test"):
            s = g[g["split"] == split]
            for metric in ("qwk", "acc"):
                row[f"{split.removesuffix('_test')}_{metric}"] = float(s[metric].iloc[0]) if len(s) else float("nan")
        rows.append(row)
    out = pd.DataFrame(rows)
    if len(out):
        out["order"] = out["system"].map({s: i for i, s in enumerate(systems)})
        out = out.sort_values(["dataset", "order"]).drop(columns="order").reset_index(drop=True)
    return out


def ablation_table(m: pd.DataFrame, systems=names("Table 6")) -> pd.DataFrame:
    """Table 6: the four metrics of EDIT-SFT and its ablations on every dataset and split all four were
    trained for."""
    d = m[(m["subject"] == "all") & m["system"].isin(systems)]
    present = d.groupby(["dataset", "split"])["system"].nunique()
    keep = present[present == len(systems)].index
    d = d.set_index(["dataset", "split"]).loc[keep].reset_index() if len(keep) else d.iloc[0:0]
    cols = ["dataset", "split", "system", "qwk", "acc", "within1", "mae", "n", "n_invalid"]
    out = d[cols].copy()
    out["order"] = out["system"].map({s: i for i, s in enumerate(systems)})
    return out.sort_values(["dataset", "split", "order"]).drop(columns="order").reset_index(drop=True)


def zero_recall(preds: pd.DataFrame, by=("system", "dataset", "split", "subject")) -> pd.DataFrame:
    """Table 13: share of gold-zero responses a system marks zero (a failed parse is not a zero), with the
    number of gold-zero responses and their share of all responses, per group."""
    rows = []
    for key, g in first_seed(preds).groupby(list(by), sort=True):
        z = g[g["gold"] == 0]
        hit = int((z["mark"].fillna(-1) == 0).sum())
        rows.append(dict(zip(by, key), gold_zero=len(z), gold_zero_share=len(z) / len(g),
                         zero_recall=hit / len(z) if len(z) else float("nan"), marked_zero=hit,
                         zero_recall_pct=100 * hit / len(z) if len(z) else float("nan")))
    return pd.DataFrame(rows)


def beside_paper(ours: pd.DataFrame, paper: pd.DataFrame, systems: list[str]) -> pd.DataFrame:
    """Long comparison of a main table with the paper's reference numbers (``paper_reference.table``): one row
    per (dataset, subject, split, metric, system) with ``suite`` and ``paper`` (NaN where the paper has no
    such row, e.g. a subject it does not report) and the paper value's citation. The paper's numbers are
    Qwen3-8B on SAS-Bench and a private dataset: reference data, never results."""
    ref = {(r["subject"], r["split"], r["metric"], r["system"]): (r["value"], r["cite"])
           for r in paper.to_dict("records")}
    rows = []
    for r in ours.to_dict("records"):
        for s in systems:
            v, cite = ref.get((r["paper_subject"], r["split"], r["metric"], s), (float("nan"), ""))
            rows.append(dict(dataset=r["dataset"], subject=r["subject"], split=r["split"], metric=r["metric"],
                             system=s, suite=r.get(s, float("nan")), paper=v, paper_cite=cite))
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- what 07 shows

def graded_plan(datasets, sft_adapters: dict, rl_adapters: dict) -> tuple[list, pd.DataFrame]:
    """(every policy 05 and 06 saved, per system in ``SYSTEMS`` order, a profile's baselines last; the table of
    them with each RL system's initialisation)."""
    graded = [g for s in all_systems() for g in resolve(s.name, list(datasets), sft_adapters, rl_adapters)]
    plan = pd.DataFrame([dict(system=g.system, label=BY_NAME[g.system].label, dataset=g.dataset, seed=g.seed,
                              initialisation=initialisation(g, sft_adapters)) for g in graded])
    return graded, plan


def absent_systems(plan: pd.DataFrame, skipped: list[str]) -> list[str]:
    """Systems with no saved policy that the profile did not leave out (e.g. an empty SFT pool in 05)."""
    have = set(plan["system"]) if len(plan) else set()
    return [s.name for s in all_systems() if s.name not in have and s.name not in skipped]


@dataclass
class MainTableView:
    """One of Tables 1-2 as 07 shows it: the tables it records, a sentence, and the frames to display."""
    tables: dict
    note: str
    frames: list = field(default_factory=list)


def main_table_view(m: pd.DataFrame, datasets, table: str, profile_name: str) -> MainTableView:
    """``table`` ('Table 1' or 'Table 2') in the paper's layout (``tables.main_table``) and, where the paper has a
    counterpart row, the paper's values beside it (``tables.beside_paper``). A profile's baselines
    (``run.baselines``) are columns after the paper's."""
    main = list(main_systems())
    labels = {n: BY_NAME[n].main_column for n in main}
    tab = main_table(m, datasets, main, table)
    key = table.lower().replace(" ", "")
    if tab.empty:
        return MainTableView({key: tab}, f"{table}: no dataset of this run has that layout")
    comp = beside_paper(tab, paper_reference.table(table), main)
    view = MainTableView({key: tab, f"{key}_beside_paper": comp},
                         f"{table} (suite: {', '.join(tab['dataset'].unique())}; profile {profile_name})",
                         [tab.drop(columns="paper_subject").rename(columns=labels).round(3)])
    have = comp.dropna(subset=["paper"])
    if len(have):
        view.note += f"; below it, {table} as the paper reports it (Qwen3-8B), rows with a counterpart here"
        view.frames.append(have.pivot_table(index=["subject", "split", "metric"], columns="system", values="paper",
                                            sort=False)[[s for s in main if s in set(have["system"])]]
                           .rename(columns=labels))
    return view


def forced_read_metrics(preds: pd.DataFrame, m: pd.DataFrame, invalid_as: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the metrics with the forced read filling failed parses, with ``n_forced``; QWK under both reads side by
    side) for ``eval.forced_read`` (a departure: reported beside the parse-only metrics, never mixed)."""
    from edit_lib.evaluation.predictions import FORCED, forced_view  # loads the model layer: 09 imports this module
    view = forced_view(preds)
    forced = view.assign(n_forced=view["parse_status"].eq(FORCED)).groupby(
        ["system", "dataset", "split"], dropna=False)["n_forced"].sum().reset_index()
    mf = metrics_long(view, invalid_as).merge(forced, on=["system", "dataset", "split"])
    both = pd.concat([m[m["subject"] == "all"].assign(read="parsed"), mf[mf["subject"] == "all"].assign(read="parsed+forced")])
    return mf, both.pivot_table(index=["dataset", "split", "read"], columns="system", values="qwk", aggfunc="first")
