"""The headline comparisons of the results page as one figure: per comparison the suite's estimate with its 95%
interval, the smallest effect the run could detect (MDE, 80% power; Table 3's at its Holm threshold, as the
claims ledger judges it) and the paper's value beside it, one panel per table (Table 3: EDIT-SFT and EDIT-RL
against Base; Table 4: EDIT-RL minus GRPO over seeds; Table 12: EDIT minus random Success@N, paired by rollout).
Numbers come from the results JSON and ``paper_reference`` only. ``figure_data``: the README's figure (each main
system's held-out QWK with its interval per dataset), read by ``book.readme`` and ``book.conclusions``.

What a run can detect against the power goals (``GOALS``, for the profiles sized for power: demo and study): per
headline comparison the MDE at 80% power and 5% (the goals were set on it; Table 3's Holm-adjusted MDE beside
it), the profile's goal, whether it is met, and the sample it would take at the run's own spread: questions or
rollouts from MDE ~ 1/sqrt(n) (``power.normal_mde``), seeds from the exact noncentral t (``power.seed_mde``);
Table 3's goal is on the paper's SAS analogue only, as Table 3 is."""
from __future__ import annotations

import math
from numbers import Real
from pathlib import Path

import pandas as pd

from edit_lib.book.claim_rules import SCOPES, extra, first_in_scopes, holm_mde, paper_datasets, paper_value, rows
from edit_lib.power import normal_mde, seed_mde
from edit_lib.systems import EDIT_RL, EDIT_SFT, SYSTEMS

COLUMNS = ["panel", "comparison", "dataset", "estimate", "ci_low", "ci_high", "mde", "paper"]  # shown
EXTRA = ["mde_5pct", "n", "delta_sd"]  # kept for the power goals (``goal_rows``)
S09 = "09_significance"
MAIN = [s for s in SYSTEMS if s.main_column]  # the paper's columns of Tables 1-3, Base first
T12_PAPER = {"SAS": ("SAS", "History"), "Private-Biology": ("Private-Science", "Biology")}


def headline_rows(results: dict) -> pd.DataFrame:
    """One row per headline comparison the run has (``COLUMNS``); the paper's value where it reports one."""
    known, out = paper_datasets(results), []
    table3 = rows(results, "09_significance", "significance") or []
    alpha = 1 - float(extra(results, "09_significance", "ci", 0.95))
    for system, what in ((EDIT_SFT, "EDIT-SFT − Base"), (EDIT_RL, "EDIT-RL − Base")):
        sig = [r for r in table3 if r.get("system") == system]
        for d in sorted({r["dataset"] for r in sig}):
            r = first_in_scopes([r for r in sig if r["dataset"] == d])
            sas = all(known.get(part) == "SAS" for part in d.split("+"))  # Table 3 is the paper's SAS only
            if r and r.get("delta") is not None:
                out.append(dict(panel="Table 3: QWK vs Base (questions)", comparison=what, dataset=d,
                                estimate=r["delta"], ci_low=r.get("delta_ci_low"), ci_high=r.get("delta_ci_high"),
                                mde=holm_mde(r, table3, alpha)[0],  # as the ledger judges it (Holm)
                                paper=paper_value("Table 3", "delta_vs_base", system, "SAS")
                                if sas else None, mde_5pct=r.get("mde"), n=r.get("n_questions")))
    for r in rows(results, "07_evaluation", "table4") or []:
        if r.get("metric", "qwk") == "qwk" and r.get("delta") is not None:
            paper_ds = {"SAS": "SAS-History"}.get(known.get(r["dataset"]), known.get(r["dataset"]))
            out.append(dict(panel="Table 4: EDIT-RL − GRPO (seeds)", comparison="EDIT-RL − GRPO",
                            dataset=r["dataset"],
                            estimate=r["delta"], ci_low=r.get("delta_ci_low"), ci_high=r.get("delta_ci_high"),
                            mde=r.get("mde"), paper=paper_value("Table 4", "delta", EDIT_RL, paper_ds)
                            if paper_ds else None, mde_5pct=r.get("mde"), n=r.get("n_seeds"),
                            delta_sd=r.get("delta_sd")))
    for r in rows(results, "04_counterfactual_selection", "table12_contrasts") or []:
        if r.get("rival") == "random" and r.get("delta") is not None:
            where = T12_PAPER.get(known.get(r["dataset"]))
            e, rnd = ((paper_value("Table 12", "success_at_4_pct", s, *where) for s in ("edit", "random"))
                      if where else (None, None))
            mde = normal_mde(r.get("delta_se"))  # no Holm here: Table 12's MDE is at 5%
            out.append(dict(panel="Table 12: Success@N, EDIT − random", comparison="EDIT − random",
                            dataset=r["dataset"], estimate=r["delta"], ci_low=r.get("delta_ci_low"),
                            ci_high=r.get("delta_ci_high"), mde=mde,
                            paper=(e - rnd) / 100 if e is not None and rnd is not None else None,
                            mde_5pct=mde, n=r.get("rollouts")))
    return pd.DataFrame(out, columns=COLUMNS + EXTRA)


def held_out(results: dict) -> tuple[dict[str, list[dict]], str]:
    """({dataset: 09's rows of its widest held-out scope ('all held-out', else 'ood_test', as the claims ledger
    reads them)}, '') or ({}, the 'n/a (...)' line saying what is missing)."""
    if S09 not in results:
        return {}, f"n/a (stage {S09} not run)"
    sig = rows(results, S09, "significance") or []
    out = {}
    for d in dict.fromkeys(r.get("dataset") for r in sig):
        for scope in SCOPES:
            got = [r for r in sig if r.get("dataset") == d and r.get("scope") == scope and r.get("qwk") is not None]
            if got:
                out[d] = got
                break
    return out, "" if out else f"n/a ({S09} has no `significance` rows with a QWK)"


def figure_data(results: dict) -> list[dict]:
    """What the headline figure plots, one panel per dataset: scope, question count and, per main system the
    run has, its QWK and 95% interval (rounded to 4 decimals, so that a re-render compares equal)."""
    r4 = lambda v: None if v is None else round(float(v), 4)  # noqa: E731
    panels = []
    for d, rows in held_out(results)[0].items():
        by = {r.get("system"): r for r in rows}
        systems = [dict(system=s.name, label=s.label, qwk=r4(by[s.name]["qwk"]), ci_low=r4(by[s.name].get("ci_low")),
                        ci_high=r4(by[s.name].get("ci_high"))) for s in MAIN if s.name in by]
        panels.append(dict(dataset=d, scope=rows[0].get("scope"), n_questions=rows[0].get("n_questions"),
                           systems=systems))
    return panels


def draw(table: pd.DataFrame, path: Path) -> Path | None:
    """The figure of ``headline_rows`` (None when the table is empty): per panel, each comparison's estimate and
    interval, a grey band of +-MDE around 0 (an effect inside it could not be told from none), the paper's value
    as a red diamond."""
    if table.empty:
        return None
    from matplotlib.figure import Figure  # no pyplot: leaves the caller's backend alone

    panels = list(dict.fromkeys(table["panel"]))
    fig = Figure(figsize=(4.2 * len(panels), 0.55 * table.groupby("panel").size().max() + 1.6))
    for ax, panel in zip(fig.subplots(1, len(panels), squeeze=False)[0], panels):
        t = table[table["panel"] == panel].reset_index(drop=True)
        ys = list(range(len(t)))[::-1]
        for y, r in zip(ys, t.itertuples()):
            if r.mde == r.mde and r.mde is not None:
                ax.fill_betweenx([y - 0.3, y + 0.3], -r.mde, r.mde, color="0.88", lw=0)
            if r.ci_low is not None and r.ci_high is not None:
                ax.plot([r.ci_low, r.ci_high], [y, y], color="C0", lw=2)
            ax.plot([r.estimate], [y], "o", color="C0")
            if r.paper is not None and r.paper == r.paper:
                ax.plot([r.paper], [y], "D", color="C3", ms=6)
        ax.axvline(0, color="0.4", lw=0.8)
        ax.set_yticks(ys, [f"{r.comparison}\n{r.dataset}" for r in t.itertuples()], fontsize=8)
        ax.set_title(panel, fontsize=9)
        ax.set_xlabel("difference")
    fig.suptitle("Suite: estimate (dot) and 95% interval; grey: ±MDE (80% power); red diamond: the paper", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    return path


def headline_section(name: str, table: pd.DataFrame, figure: str | None, md_table) -> list[str]:
    """The results page's first section: the figure and its numbers, then what the run can detect against its
    profile's power goals (``goals``; [] when the run has no comparison)."""
    if table.empty:
        return []
    return ["## The headline comparisons", "", f"![The headline comparisons of run {name}]({figure})" if figure else "",
            "", "Each comparison's estimate with its 95% interval, the smallest effect this run could detect at 80% "
            "power (MDE), and the paper's value (Qwen3-8B; blank where the paper reports no such comparison). Where "
            "the MDE is above the paper's effect, the run could not have told an effect of the paper's size from none.",
            "", md_table(table[COLUMNS].round(4)), "", *goal_section(name, table, md_table)]


# ------------------------------------------------------------------ what the run can detect: the power goals

#: the goal for the MDE of each headline panel, per profile, set when the study was sized (None: reported, no goal).
GOALS = {"demo": {"Table 3": 0.10, "Table 12": 0.10, "Table 4": None},
         "study": {"Table 3": 0.07, "Table 12": 0.06, "Table 4": 0.05}}
UNITS = {"Table 3": "questions", "Table 12": "rollouts", "Table 4": "seeds"}
MAX_SEEDS = 200  # the seed count searched for Table 4's need


def _number(x) -> bool:
    return isinstance(x, Real) and not isinstance(x, bool) and math.isfinite(x)


def _needed(table: str, mde: float, goal: float, n, sd) -> int | None:
    """The sample size at which the run's MDE would reach ``goal``, the spread held fixed (None: not computable)."""
    if not (_number(mde) and _number(n)) or n < 2:
        return None
    if table == "Table 4":
        if not _number(sd):
            return None
        return next((k for k in range(2, MAX_SEEDS + 1) if seed_mde(sd, k) <= goal), None)
    return math.ceil(n * (mde / goal) ** 2)


def goal_rows(headline: pd.DataFrame, profile: str) -> pd.DataFrame:
    """One row per headline comparison with a goal under ``profile`` (empty for a profile without goals)."""
    goals, out = GOALS.get(profile), []
    if goals is None or headline.empty:
        return pd.DataFrame()
    for r in headline.itertuples():
        table = r.panel.split(":")[0]
        if table not in goals or (table == "Table 3" and not _number(r.paper)):  # Table 3: the SAS analogue only
            continue
        goal, mde = goals[table], r.mde_5pct
        need = _needed(table, mde, goal, r.n, r.delta_sd) if goal is not None else None
        met = "reported" if goal is None else ("yes" if mde <= goal else "no") if _number(mde) else "no MDE"
        out.append({"comparison": f"{table}: {r.comparison}", "dataset": r.dataset, "paper": r.paper,
                    "estimate [95% CI]": f"{r.estimate:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}]",
                    "n": f"{int(r.n)} {UNITS[table]}" if _number(r.n) else "", "MDE (5%)": mde,
                    "MDE (ledger)": r.mde, "goal": f"<= {goal:g}" if goal is not None else "none", "met?": met,
                    "needed at this spread": f"{need} {UNITS[table]}" if need and met == "no" else ""})
    return pd.DataFrame(out)


def goal_section(profile: str, headline: pd.DataFrame, md_table) -> list[str]:
    """The results page's "What this run can detect" section ([] for a profile without goals)."""
    t = goal_rows(headline, profile)
    if t.empty:
        return []
    return ["## What this run can detect (the power goals)", "",
            f"The smallest effect each headline comparison of this run could detect at 80% power (the MDE at 5%, "
            f"on which the `{profile}` profile's goals were set, `edit_lib/book/headline.py`; `MDE (ledger)`: Table "
            "3's at its Holm threshold, "
            "as the claims ledger judges it), beside the paper's effect and the goal. `needed at this spread`: the "
            "questions or rollouts (the MDE falls with their square root) or seeds (noncentral t at this run's "
            "seed-difference SD) at which the MDE would reach an unmet goal, if the spread held. Differences are "
            "in QWK (Tables 3, 4) or in Success@N as a fraction (Table 12: 0.10 is 10 points).", "",
            md_table(t), ""]
