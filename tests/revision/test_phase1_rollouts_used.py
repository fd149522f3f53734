"""04's ``rollouts_used`` (App. F): incorrect rollouts with no step boundary are counted, not silently left out
of Retention's denominator."""
import pandas as pd

from edit_lib.revision import phase1

R = ["dataset", "response_id", "rollout_id"]


def test_no_boundary_rollouts_are_counted():
    rollouts = pd.DataFrame([
        ("a", "r1", 0, True, 3), ("a", "r1", 1, False, 2), ("a", "r2", 0, False, 0),  # a/r2/0: no step
        ("a", "r2", 1, False, 0), ("a", "r3", 0, False, 4), ("a", "r3", 1, True, 0),   # a correct one with no step
        ("b", "r1", 0, False, 1), ("b", "r1", 1, True, 2),
    ], columns=[*R, "correct", "n_steps"])
    probed = pd.DataFrame([("a", "r1", 1, 1), ("a", "r1", 1, 2), ("a", "r3", 0, 1), ("b", "r1", 0, 1)],
                          columns=[*R, "k"])
    keys = probed[R].drop_duplicates().iloc[[0, 2]]  # a seeded sample: a/r1/1 and b/r1/0
    sample = phase1.RepairSample(probed, keys, probed.merge(keys, on=R))
    got = phase1.rollouts_used(rollouts, sample).set_index("dataset")
    assert got.loc["a", ["incorrect_in_01", "no_boundary", "incorrect_probed_and_audited", "repaired",
                         "steps"]].tolist() == [4, 2, 2, 1, 2]
    assert got.loc["b", ["incorrect_in_01", "no_boundary", "incorrect_probed_and_audited", "repaired",
                         "steps"]].tolist() == [1, 0, 1, 1, 1]
    # every incorrect rollout is either without a boundary or probed and audited (02 and 03 read them all)
    assert (got.incorrect_in_01 == got.no_boundary + got.incorrect_probed_and_audited).all()
    assert "repaired" in phase1.RETENTION_DENOMINATOR and "no_boundary" in phase1.RETENTION_DENOMINATOR
