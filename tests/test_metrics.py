"""Metrics against independent computations (scikit-learn's kappa), App. B conventions."""
import math

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from edit_lib.metrics import grading_metrics, per_question_qwk, quadratic_weighted_kappa


def _random_grading(seed, n_q=12):
    rng = np.random.default_rng(seed)
    qids, gold, pred, mm = [], [], [], {}
    for q in range(n_q):
        m = int(rng.integers(2, 27))
        mm[f"q{q}"] = m
        n = int(rng.integers(3, 40))
        g = rng.integers(0, m + 1, n)
        p = np.clip(g + rng.integers(-3, 4, n), 0, m)
        qids += [f"q{q}"] * n
        gold += g.tolist()
        pred += p.tolist()
    return qids, gold, pred, mm


@pytest.mark.parametrize("seed", range(5))
def test_macro_qwk_matches_sklearn(seed):
    qids, gold, pred, mm = _random_grading(seed)
    got = grading_metrics(qids, gold, pred, mm)
    ref = []
    for q, m in mm.items():
        g = [a for a, b in zip(gold, qids) if b == q]
        p = [a for a, b in zip(pred, qids) if b == q]
        ref.append(cohen_kappa_score(g, p, weights="quadratic", labels=list(range(m + 1))))
    assert abs(got["qwk"] - float(np.mean(ref))) < 1e-9
    g, p = np.array(gold), np.array(pred)
    assert got["acc"] == pytest.approx(np.mean(g == p), abs=1e-12)
    assert got["within1"] == pytest.approx(np.mean(np.abs(g - p) <= 1), abs=1e-12)
    assert got["mae"] == pytest.approx(np.mean(np.abs(g - p)), abs=1e-12)
    pooled = cohen_kappa_score(gold, pred, weights="quadratic", labels=list(range(max(mm.values()) + 1)))
    assert abs(got["qwk_pooled"] - pooled) < 1e-9
    assert got["n_questions"] == len(mm) and got["qwk_undefined"] == 0


def test_label_range_matters():
    # Unused labels change nothing for QWK's value here, but the range must be [0, M_q]: check vs sklearn
    g, p = [1, 2, 2, 3], [1, 2, 3, 3]
    for m in (3, 5, 12):
        ref = cohen_kappa_score(g, p, weights="quadratic", labels=list(range(m + 1)))
        assert abs(quadratic_weighted_kappa(g, p, m) - ref) < 1e-12


def test_undefined_kappa_is_excluded_and_counted():
    # q1: every gold and prediction is 2 -> expected disagreement 0 -> undefined
    qids = ["q0"] * 4 + ["q1"] * 3
    gold = [0, 1, 2, 3, 2, 2, 2]
    pred = [0, 1, 3, 3, 2, 2, 2]
    out = grading_metrics(qids, gold, pred, {"q0": 3, "q1": 4})
    q0 = cohen_kappa_score(gold[:4], pred[:4], weights="quadratic", labels=list(range(4)))
    assert out["qwk_undefined"] == 1
    assert abs(out["qwk"] - q0) < 1e-12
    assert math.isnan(quadratic_weighted_kappa([2, 2], [2, 2], 4))
    only_undefined = grading_metrics(["a"], [1], [1], {"a": 2})
    assert math.isnan(only_undefined["qwk"]) and only_undefined["acc"] == 1.0
    # constant gold but varying predictions is defined (and not perfect)
    assert quadratic_weighted_kappa([2, 2, 2], [1, 2, 3], 4) == pytest.approx(0.0)


def test_parse_failures_are_counted_not_silent():
    qids, gold, pred = ["a"] * 4, [0, 1, 2, 2], [0, None, 2, 1]
    z = grading_metrics(qids, gold, pred, {"a": 2})
    e = grading_metrics(qids, gold, pred, {"a": 2}, invalid="exclude")
    assert z["n_invalid"] == 1 and e["n_invalid"] == 1
    assert z["n"] == 4 and e["n"] == 3
    assert z["acc"] == pytest.approx(2 / 4) and e["acc"] == pytest.approx(2 / 3)


def test_out_of_range_prediction_is_an_error():
    with pytest.raises(ValueError, match="outside"):
        grading_metrics(["a", "a"], [0, 1], [0, 5], {"a": 2})
    with pytest.raises(ValueError, match="outside"):
        grading_metrics(["a"], [3], [0], [2])


def test_per_question_qwk():
    qids, gold, pred, mm = _random_grading(7, n_q=4)
    pq = per_question_qwk(qids, gold, pred, mm)
    assert set(pq) == set(mm)
    assert np.mean(list(pq.values())) == pytest.approx(grading_metrics(qids, gold, pred, mm)["qwk"])
