"""What a run can detect against the power goals (``GOALS``): per headline comparison (``headline.headline_rows``) the
smallest effect the run detects at 80% power and 5% (the MDE the goals were set on; Table 3's Holm-adjusted MDE,
as the claims ledger judges it, beside it), the goal of the run's profile, whether it is met, and the sample the
goal would take at the run's own spread: questions or rollouts from MDE ~ 1/sqrt(n) (the normal approximation of
``power.normal_mde``), seeds from the exact noncentral t (``power.seed_mde``). Goals exist for the profiles sized
for power (``GOALS``: demo and study); Table 3's goal is on the paper's SAS analogue only, as Table 3 is."""
from __future__ import annotations

import math
from numbers import Real

import pandas as pd

from edit_lib.power import seed_mde

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
            f"on which the `{profile}` profile's goals were set, `edit_lib/book/goals.py`; `MDE (ledger)`: Table "
            "3's at its Holm threshold, "
            "as the claims ledger judges it), beside the paper's effect and the goal. `needed at this spread`: the "
            "questions or rollouts (the MDE falls with their square root) or seeds (noncentral t at this run's "
            "seed-difference SD) at which the MDE would reach an unmet goal, if the spread held. Differences are "
            "in QWK (Tables 3, 4) or in Success@N as a fraction (Table 12: 0.10 is 10 points).", "",
            md_table(t), ""]
