"""06's Table 9 (lower block) rows and run table (edit_lib/train/calibration.py, rl_runs.py; App. B,
Table 9): the paper profiles use Table 9's beta_drift / gamma on SAS-Bench and say so, the sweep's cap and gamma's
cap warn, and the
run table's `paper_steps` is Table 9's horizon, not the profile's."""
import json
from pathlib import Path

import pandas as pd
import pytest

from edit_lib.config import ConfigError, load_profile
from edit_lib.data.synthetic import WorldConfig, generate_world
from edit_lib.train import calibration as cal
from edit_lib.train import rl_runs
from edit_lib.train.calibration import CalibRollout
from edit_lib.train.rl_runs import RunOutcome

# Table 9, lower block, typed from the paper: beta_drift (marks) / gamma_Phi
TABLE9 = {"private_biology": (0.75, 0.3), "private_physics": (0.5, 0.15), "sas_history": (0.75, 0.05),
          "sas_geography": (0.75, 0.10), "sas_physics": (0.75, 0.10)}


def test_the_paper_profile_fixes_table9_on_sas_and_calibrates_the_private_science_places():
    """Table 9's values are the paper's calibration of the paper's data: they apply to SAS-Bench's datasets; the
    Private-Science places hold a user's own files, so EDIT-RL calibrates them unless the profile fixes them."""
    p = load_profile("paper")
    assert p.rl.shaping.calibrate is True and p.rl.shaping.flip_safe_rule == "literal"
    assert {d.name for d in p.data.datasets} == set(TABLE9)
    for name, values in TABLE9.items():
        assert cal.values_source(name, *values) == "paper (Table 9)"
        if name.startswith("sas_"):
            s = p.rl.shaping_for(name)
            assert (s.beta_drift, s.gamma) == values and not p.rl.calibrates(name)
        else:
            assert p.rl.calibrates(name) and name not in p.rl.shaping_by_dataset
    assert all(load_profile("paper", ["rl.shaping_by_dataset={}"]).rl.calibrates(n) for n in TABLE9)
    assert not any(load_profile("paper", ["rl.shaping.calibrate=false"]).rl.calibrates(n) for n in TABLE9)
    assert cal.values_source("sas_history", 0.75, 0.1) == "profile"   # not Table 9's pair
    assert cal.values_source("synth_bio", 0.75, 0.3) == "profile"     # not a Table 9 dataset
    with pytest.raises(ConfigError, match="flip_safe_rule"):
        load_profile("paper", ["rl.shaping.flip_safe_rule=strict"])


def _edge_rows():
    """One group, M = 4: the incorrect rollouts' beliefs drift 2.5 and 3 marks, the correct ones' 1.8 and 0. Only
    beta 2.0 (the top of the default grid) separates them fully, and 2.5 above it less: 2.0 is a maximum; at 2.0
    no correct rollout is penalised, so no pair binds gamma and it sits on its cap."""
    return [CalibRollout("g", 0.75, False, 4, 0, (2.5,)),
            CalibRollout("g", 0.5, False, 4, 0, (3.0,)),
            CalibRollout("g", 1.0, True, 4, 2, (3.8,)),
            CalibRollout("g", 1.0, True, 4, 2, (2.0,))]


def test_table9_row_flags_the_cap_and_says_which_values_are_used():
    rows = _edge_rows()
    paper = load_profile("paper")
    r = cal.table9_row(paper, "edit_sft", "sas_history", rows, 5, 1)
    assert r.row["beta_drift"] == 2.0 and r.row["gamma"] == 1.0
    assert [s["beta_drift"] for s in r.sweep][-5:] == [2.0, 2.5, 3.0, 3.5, 4.0]  # above the grid, up to M_q
    assert r.row["flags"] == "gamma_at_cap"
    assert r.row["used"] == "paper (Table 9)" and r.used == (0.75, 0.05)
    assert (r.row["beta_drift_used"], r.row["gamma_used"]) == (0.75, 0.05)
    assert (r.row["paper_beta_drift"], r.row["paper_gamma"]) == (0.75, 0.05)  # from Table 9, beside the calibration
    assert r.row["flip_safe_rule"] == "literal" and r.row["without_steps"] == 1
    assert len(r.warnings) == 1 and "reported only" in r.warnings[0] and "gamma_cap" in r.warnings[0]
    assert sum(s["chosen"] for s in r.sweep) == 1
    r = cal.table9_row(paper, "edit_sft", "private_biology", rows, 5, 0)  # a place for the user's own files
    assert r.row["used"] == "calibrated" and r.used == (2.0, 1.0) and r.row["paper_gamma"] == 0.3
    assert all("used by EDIT-RL" in w for w in r.warnings)
    flat = [CalibRollout("g", 0.75, False, 4, 2, (2.0,)), CalibRollout("g", 1.0, True, 4, 2, (4.0,)),
            CalibRollout("g", 1.0, True, 4, 0, (4.0,))]  # no tolerance below M_q = 4 separates: the sweep's cap
    r = cal.table9_row(paper, "edit_sft", "private_biology", flat, 3, 0)
    assert "beta_drift_at_cap" in r.row["flags"] and any("largest maximum mark" in w for w in r.warnings)
    # no incorrect rollout: the calibration fails, the profile's (here the paper's) values are used, with a warning
    r = cal.table9_row(paper, "base", "sas_history", [x for x in rows if x.correct], 2, 0)
    assert r.row["used"] == "paper (Table 9) (calibration failed)" and r.used == (0.75, 0.05)
    assert len(r.warnings) == 1 and "not possible" in r.warnings[0]
    demo = load_profile("demo", ["rl.shaping.calibrate=false"])
    assert cal.table9_row(demo, "base", "synth_bio", rows, 5, 0).row["used"] == "profile"


def test_run_table_paper_steps_is_table9_horizon():
    sas = generate_world(WorldConfig(shape="sas_like", n_questions=4, answers_per_question=2, ood_questions=1,
                                     seed=3))
    sci = generate_world(WorldConfig(shape="science_like", n_questions=2, answers_per_question=10,
                                     ood_questions=1, id_test_fraction=0.2, subjects=["biology"], seed=1))
    assert (rl_runs.paper_horizon(sas), rl_runs.paper_horizon(sci)) == (200, 500)
    plan = pd.DataFrame([dict(system="base_grpo", dataset="s", seed=0), dict(system="base_grpo", dataset="b", seed=0),
                         dict(system="int_sft_int_rl", dataset="b", seed=0)])
    done = RunOutcome("trained", {"steps": 12, "paper_steps": 12, "seconds": 1.0, "log_history": []})
    outcomes = {("base_grpo", "s", 0): done, ("base_grpo", "b", 0): done,
                ("int_sft_int_rl", "b", 0): RunOutcome("skipped", {"reason": "no adapter"})}
    t = rl_runs.run_table(plan, outcomes, {"s": sas, "b": sci})
    assert t["paper_steps"].tolist() == [200, 500, 500]
    assert t["profile_steps"].tolist()[:2] == [12, 12] and t["steps"].tolist()[:2] == [12, 12]


def test_06_warns_on_flags_and_reports_table9_horizons():
    nb = json.loads((Path(__file__).resolve().parents[2] / "notebooks" / "06_rl.ipynb").read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "rl_runs.calibrate_plan(" in code and "ctx.warn(calib.warnings)" in code
    assert "rl_runs.run_table(plan, outcomes, datasets)" in code
