"""What a run can detect against the power goals (edit_lib/book/headline.py): the goal of the run's profile, met or
not on the MDE at 5%, and the sample an unmet goal would take at the run's spread."""
import math

import pandas as pd
import pytest

from edit_lib.book.headline import GOALS, goal_rows, goal_section
from edit_lib.book.headline import COLUMNS, EXTRA
from edit_lib.book.pages import md_table
from edit_lib.power import seed_mde


def _headline(**t3):
    row = lambda **kw: {c: kw.get(c) for c in COLUMNS + EXTRA}  # noqa: E731
    return pd.DataFrame([
        row(panel="Table 3: QWK vs Base (questions)", comparison="EDIT-SFT − Base", dataset="sas", estimate=0.07,
            ci_low=-0.06, ci_high=0.19, mde=0.214, paper=0.072, mde_5pct=t3.get("mde", 0.18), n=20),
        row(panel="Table 3: QWK vs Base (questions)", comparison="EDIT-SFT − Base", dataset="bio", estimate=0.28,
            ci_low=0.19, ci_high=0.38, mde=0.16, paper=None, mde_5pct=0.14, n=6),
        row(panel="Table 4: EDIT-RL − GRPO (seeds)", comparison="EDIT-RL − GRPO", dataset="bio", estimate=-0.01,
            ci_low=-0.11, ci_high=0.09, mde=0.137, paper=0.021, mde_5pct=0.137, n=3, delta_sd=0.042),
        row(panel="Table 12: Success@N, EDIT − random", comparison="EDIT − random", dataset="sas", estimate=0.066,
            ci_low=-0.004, ci_high=0.132, mde=0.096, paper=0.054, mde_5pct=0.096, n=141)])


def test_demo_goals_met_and_not_met_with_the_sample_an_unmet_goal_needs():
    t = goal_rows(_headline(), "demo").set_index(["comparison", "dataset"])
    t3 = t.loc[("Table 3: EDIT-SFT − Base", "sas")]
    assert (t3["goal"], t3["met?"], t3["MDE (5%)"], t3["MDE (ledger)"]) == ("<= 0.1", "no", 0.18, 0.214)
    assert t3["needed at this spread"] == f"{math.ceil(20 * (0.18 / 0.10) ** 2)} questions"  # 65
    assert ("Table 3: EDIT-SFT − Base", "bio") not in t.index  # Table 3's goal is on the SAS analogue only
    t12 = t.loc[("Table 12: EDIT − random", "sas")]
    assert (t12["met?"], t12["needed at this spread"], t12["n"]) == ("yes", "", "141 rollouts")
    assert t.loc[("Table 4: EDIT-RL − GRPO", "bio"), "met?"] == "reported"  # the demo has no Table 4 goal


def test_study_goals_and_the_seeds_table_4_would_need():
    t = goal_rows(_headline(mde=0.06), "study").set_index(["comparison", "dataset"])
    assert t.loc[("Table 3: EDIT-SFT − Base", "sas"), "met?"] == "yes"  # 0.06 <= 0.07
    need = int(t.loc[("Table 4: EDIT-RL − GRPO", "bio"), "needed at this spread"].split()[0])
    assert seed_mde(0.042, need) <= GOALS["study"]["Table 4"] < seed_mde(0.042, need - 1)


def test_profiles_without_goals_get_no_section():
    assert goal_rows(_headline(), "smoke").empty and goal_section("smoke", _headline(), md_table) == []
    assert goal_rows(pd.DataFrame(columns=COLUMNS + EXTRA), "demo").empty
    text = "\n".join(goal_section("demo", _headline(), md_table))
    assert text.startswith("## What this run can detect") and "&lt;= 0.1" in text


@pytest.mark.parametrize("profile", sorted(GOALS))
def test_every_goal_profile_exists(profile):
    from edit_lib.config import load_profile
    assert load_profile(profile).name == profile
