"""Metrics against independent computations (scikit-learn's kappa), App. B conventions."""
import math

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from edit_lib.metrics import farthest_mark, grading_metrics, quadratic_weighted_kappa


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


def test_qwk_weights_use_mark_values_not_label_ranks():
    # Hand-computed: gold [0, 1, 4], pred [0, 4, 4], M = 4. sum w*O = (1-4)^2 = 9; with marginals gold {0,1,4},
    # pred {0: 1, 4: 2}: sum w*E = (0 + 2*16 + 1 + 2*9 + 16 + 0) / 3 = 67/3, so kappa = 1 - 27/67 = 40/67.
    # An implementation that indexes the observed labels {0, 1, 4} as 0, 1, 2 (sklearn without ``labels``)
    # gets 1 - 1/5 = 0.8; linear weights get 1 - 3/(21/3) = 4/7.
    assert quadratic_weighted_kappa([0, 1, 4], [0, 4, 4], 4) == pytest.approx(40 / 67, abs=1e-12)
    assert cohen_kappa_score([0, 1, 4], [0, 4, 4], weights="quadratic") == pytest.approx(0.8)


@pytest.mark.parametrize("seed", range(6))
def test_qwk_matches_sklearn_on_gapped_labels(seed):
    # Sparse marks over a wide range: the observed labels have uneven gaps, so the full range [0, M] changes
    # the answer of a wrong implementation (labels taken from the data, i.e. weights on label ranks).
    rng = np.random.default_rng(seed)
    m = int(rng.integers(6, 20))
    support = np.array([0, 1, int(rng.integers(3, m - 1)), m])  # gaps 1, >= 2, >= 1: uneven
    g = rng.choice(support, 12)
    p = np.where(rng.random(12) < 0.5, g, rng.choice(support, 12))
    ref = cohen_kappa_score(g, p, weights="quadratic", labels=list(range(m + 1)))
    wrong = cohen_kappa_score(g, p, weights="quadratic")
    assert abs(ref - wrong) > 1e-6  # the case discriminates
    assert quadratic_weighted_kappa(g, p, m) == pytest.approx(ref, abs=1e-12)
    # labels beyond every observed mark add empty rows and columns: kappa unchanged
    assert quadratic_weighted_kappa(g, p, m + 7) == pytest.approx(ref, abs=1e-12)


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
    w = grading_metrics(qids, gold, pred, {"a": 2})
    z = grading_metrics(qids, gold, pred, {"a": 2}, invalid="zero")
    e = grading_metrics(qids, gold, pred, {"a": 2}, invalid="exclude")
    assert w["n_invalid"] == z["n_invalid"] == e["n_invalid"] == 1
    assert w["n"] == z["n"] == 4 and e["n"] == 3
    # gold 1 of M 2 is a tie (0 and 2 both 1 away): the failure scores 0, so 'wrong' and 'zero' agree here
    assert w["acc"] == z["acc"] == pytest.approx(2 / 4) and e["acc"] == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="invalid"):
        grading_metrics(qids, gold, pred, {"a": 2}, invalid="skip")


def test_parse_failure_on_gold_zero_is_not_an_exact_match():
    # The case: gold [0, 2], pred [None, 2]. Scored as 0 it is a perfect grader; as the farthest mark
    # (2) it is half wrong. Hand-computed for pred [2, 2]: sum w*O = 4; marginals gold {0, 2}, pred {2: 2}:
    # sum w*E = (2 * 4 + 0) / 2 = 4, so kappa = 0.
    z = grading_metrics(["a", "a"], [0, 2], [None, 2], {"a": 2}, invalid="zero")
    assert z["acc"] == 1.0 and z["qwk"] == pytest.approx(1.0)
    w = grading_metrics(["a", "a"], [0, 2], [None, 2], {"a": 2})
    assert w["n_invalid"] == 1 and w["n"] == 2
    assert w["acc"] == 0.5 and w["within1"] == 0.5 and w["mae"] == 1.0
    assert w["qwk"] == pytest.approx(0.0, abs=1e-12) and w["qwk_pooled"] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("gold,max_mark,expected", [(0, 4, 4), (1, 4, 4), (2, 4, 0), (3, 4, 0), (4, 4, 0),
                                                    (1, 2, 0), (0, 1, 1), (1, 1, 0), (2, 5, 5), (3, 5, 0)])
def test_farthest_mark(gold, max_mark, expected):
    assert farthest_mark(gold, max_mark) == expected


@pytest.mark.parametrize("seed", range(4))
def test_invalid_wrong_in_every_metric_matches_substitution(seed):
    qids, gold, pred, mm = _random_grading(seed, n_q=6)
    rng = np.random.default_rng(100 + seed)
    fail = rng.random(len(pred)) < 0.3
    pred_none = [None if f else p for p, f in zip(pred, fail)]
    # independent substitution: the mark of [0, M_q] with the largest |mark - gold|, ties to the smaller mark
    sub = [int(max(range(mm[q] + 1), key=lambda x: (abs(x - g), -x))) if f else p
           for q, g, p, f in zip(qids, gold, pred, fail)]
    got = grading_metrics(qids, gold, pred_none, mm)
    ref = grading_metrics(qids, gold, sub, mm)
    assert got["n_invalid"] == int(fail.sum()) and ref["n_invalid"] == 0
    for key in ("qwk", "acc", "within1", "mae", "qwk_pooled"):
        assert got[key] == pytest.approx(ref[key], abs=1e-12)
    g, s = np.array(gold), np.array(sub)
    assert got["mae"] == pytest.approx(np.mean(np.abs(g - s)))
    assert not np.any((g == s)[fail])  # never exact (every M_q here is >= 2)


def test_out_of_range_prediction_is_an_error():
    with pytest.raises(ValueError, match="outside"):
        grading_metrics(["a", "a"], [0, 1], [0, 5], {"a": 2})
    with pytest.raises(ValueError, match="outside"):
        grading_metrics(["a"], [3], [0], [2])
