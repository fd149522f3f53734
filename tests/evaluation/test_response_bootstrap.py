"""The response-level bootstrap beside App. G's question-level one (edit_lib/evaluation/significance.py):
QWK from counts against scikit-learn on the responses repeated as counted, paired differences, MDE and seeds."""
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from edit_lib.evaluation.significance import response_bootstrap, scored_marks, weighted_qwk
from edit_lib.power import normal_mde


def test_qwk_from_counts_equals_sklearn_on_the_repeated_responses():
    rng = np.random.default_rng(0)
    gold, pred = rng.integers(0, 4, 30), rng.integers(0, 4, 30)
    counts = rng.multinomial(30, np.full(30, 1 / 30), size=5).astype(float)
    got = weighted_qwk(gold, pred, 3, counts)
    for b in range(5):
        rep = np.repeat(np.arange(30), counts[b].astype(int))
        want = cohen_kappa_score(gold[rep], pred[rep], weights="quadratic", labels=[0, 1, 2, 3])
        assert got[b] == pytest.approx(want, abs=1e-12)
    assert np.isnan(weighted_qwk(np.zeros(4, int), np.zeros(4, int), 3, np.ones((1, 4))))[0]


def _preds():
    rng = np.random.default_rng(1)
    rows = []
    for q in ("a", "b", "c"):
        for i in range(40):
            g = int(rng.integers(0, 4))
            good = g if rng.random() < 0.8 else int(rng.integers(0, 4))
            for s, m in (("base", int(rng.integers(0, 4))), ("edit_sft", good), ("same", None)):
                rows.append(dict(system=s, seed=np.nan, dataset="d", split="id_test", question_id=q,
                                 response_id=f"{q}{i}", gold=g, max_mark=3, mark=m))
    df = pd.DataFrame(rows)
    df.loc[df.system == "same", "mark"] = df.loc[df.system == "base", "mark"].to_numpy()
    df["mark"] = df["mark"].astype("Int64")
    return df


def test_paired_differences_intervals_and_mde():
    t = response_bootstrap(_preds(), ["edit_sft", "same"], n_boot=400, seed=3).set_index("system")
    assert t.loc["base", "n_questions"] == 3 and t.loc["base", "n_responses"] == 40 * 3
    assert np.isnan(t.loc["base", "delta"]) and t.loc["base", "qwk_lo"] <= t.loc["base", "qwk"] <= t.loc["base", "qwk_hi"]
    e = t.loc["edit_sft"]
    assert e["delta"] > 0.3 and 0 < e["delta_lo"] < e["delta"] < e["delta_hi"]
    assert e["mde"] == pytest.approx(normal_mde(e["delta_se"]))
    assert t.loc["same", "delta"] == 0 and t.loc["same", "delta_se"] == 0 and np.isnan(t.loc["same", "mde"])
    again = response_bootstrap(_preds(), ["edit_sft", "same"], n_boot=400, seed=3).set_index("system")
    pd.testing.assert_frame_equal(t, again)


def test_a_failed_parse_is_scored_as_the_farthest_mark():
    df = pd.DataFrame(dict(gold=[0, 3, 1], max_mark=[3, 3, 3], mark=pd.array([None, None, 2], dtype="Int64")))
    assert scored_marks(df).tolist() == [3, 0, 2] and scored_marks(df, "zero").tolist() == [0, 0, 2]
    with pytest.raises(ValueError, match="wrong"):
        scored_marks(df, "exclude")
