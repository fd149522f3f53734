"""The GRPO-only seed pilot (edit_lib.tools.pilot_rl.py): its summary against scipy, and a small run end to end."""
import json
import math

import numpy as np
import pytest
from scipy import stats

from edit_lib.power import seed_mde
from edit_lib.tools.pilot_rl import summarise


def test_summary_against_scipy_and_the_noncentral_t():
    q = [0.61, 0.64, 0.58, 0.66, 0.60]
    r = summarise(0.55, [dict(ood_qwk=x) for x in q], target=0.05)
    lo, hi = stats.ttest_1samp(np.array(q) - 0.55, 0.0).confidence_interval(0.95)
    assert r["move"] == pytest.approx(np.mean(q) - 0.55) and r["moves"]
    assert (r["move_ci_low"], r["move_ci_high"]) == pytest.approx((lo, hi))
    sd = np.std(q, ddof=1)
    assert r["sd_ood_qwk"] == pytest.approx(sd) and r["paired_diff_sd_assumed"] == pytest.approx(sd * math.sqrt(2))
    assert r["mde_by_seeds"]["5"] == pytest.approx(seed_mde(sd * math.sqrt(2), 5))
    first = r["seeds_for_target"]
    assert first is None or (r["mde_by_seeds"][str(first)] <= 0.05 and
                             (first == 3 or r["mde_by_seeds"][str(first - 1)] > 0.05))
    assert seed_mde(r["sd_needed_at_8"] * math.sqrt(2), 8) == pytest.approx(0.05)


def test_a_regime_that_does_not_move_says_so_and_a_wide_spread_needs_more_than_8_seeds():
    r = summarise(0.6, [dict(ood_qwk=x) for x in (0.5, 0.7, 0.6)], target=0.05)
    assert not r["moves"] and r["seeds_for_target"] is None


@pytest.mark.slow
def test_pilot_trains_grades_and_reuses_its_seeds(tmp_path):
    from edit_lib.tools.pilot_rl import pilot_rl_seeds
    over = ["rl.steps=1", "rl.decoding.max_new_tokens=24", "rl.checkpoint_every=0", "rl.workers=1"]
    r = pilot_rl_seeds("smoke", over, "synth_sas", [1, 2], run_root=tmp_path, progress=False)
    assert [p["seed"] for p in r["per_seed"]] == [1, 2] and r["n_ood"] > 0
    assert all(0 <= p["ood_acc"] <= 1 and p["last_kl"] is not None for p in r["per_seed"])
    saved = json.loads((tmp_path / "smoke" / "pilot" / f"rl_seeds_{r['key']}.json").read_text())
    assert saved["per_seed"] == r["per_seed"]
    again = pilot_rl_seeds("smoke", over, "synth_sas", [1, 2], run_root=tmp_path, progress=False)
    assert again["per_seed"] == r["per_seed"]           # reused, not retrained
    other = pilot_rl_seeds("smoke", over + ["rl.learning_rate=0.002"], "synth_sas", [1], run_root=tmp_path,
                           progress=False)
    assert other["key"] != r["key"]                      # a changed recipe trains afresh
    with pytest.raises(ValueError, match="not a dataset of profile smoke"):
        pilot_rl_seeds("smoke", over, "synth_zz", [1], run_root=tmp_path)
    with pytest.raises(ValueError, match="outcome-reward arm from Base"):
        pilot_rl_seeds("smoke", over, "synth_sas", [1], system="edit_sft_grpo", run_root=tmp_path)


def test_phase1_sample_size_per_dataset_and_its_checks():
    from edit_lib.config import ConfigError, RolloutConfig, load_profile
    cfg = RolloutConfig(responses_per_dataset=24, responses_by_dataset={"synth_sas": 64})
    assert cfg.responses_for("synth_sas") == 64 and cfg.responses_for("synth_bio") == 24
    study = load_profile("study").rollouts  # the study's larger SAS-like sample (Table 12's power)
    assert study.responses_for("synth_sas") > study.responses_for("synth_bio") == study.responses_per_dataset
    with pytest.raises(ConfigError, match="responses_by_dataset values must be integers >= 0"):
        RolloutConfig(responses_by_dataset={"a": -1})
    with pytest.raises(ConfigError, match=r"rollouts.responses_by_dataset names unknown dataset\(s\) \['zz'\]"):
        load_profile("demo", overrides=["rollouts.responses_by_dataset={zz: 3}"])
