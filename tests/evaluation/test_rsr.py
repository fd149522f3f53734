"""App. I / Tables 7 and 14: RSR, floor rate, in-rubric RSR and AE-RSR on hand-built rows."""
import math

import numpy as np
import pandas as pd
import pytest

from edit_lib.evaluation import rsr


def _rows(gold, gold_edit, mark, mark_edit, system="s", edit="pts_x2.0"):
    return pd.DataFrame(dict(system=system, dataset="d", edit=edit, response_id=[f"r{i}" for i in range(len(gold))],
                             gold=gold, gold_edit=gold_edit, mark=pd.array(mark, dtype="Int64"),
                             mark_edit=pd.array(mark_edit, dtype="Int64")))


def test_faithful_grader_has_rsr_one():
    m = rsr.condition_metrics(_rows([1, 2, 3], [2, 4, 6], [1, 2, 3], [2, 4, 6]))
    assert m["rsr"] == 1.0 and m["ib_rsr"] == 1.0 and m["floor_rate"] == 0.0


def test_floor_confound():
    # gold moves 2 -> 4 on both rows; the grader floors one row at 0 (it cannot move) and follows the other
    rows = _rows([2, 2], [4, 4], [0, 2], [0, 4])
    m = rsr.condition_metrics(rows)
    assert m["rsr"] == pytest.approx((0 + 2) / 2 / 2)           # 0.5: the floored row looks unresponsive
    assert m["floor_rate"] == 0.5
    assert m["ib_rsr"] == 1.0 and m["n_in_rubric"] == 1           # in-rubric: the remaining row is faithful
    # a grader that floors everything has no in-rubric rows: IB-RSR undefined, not 0
    m0 = rsr.condition_metrics(_rows([2, 2], [4, 4], [0, 0], [0, 0]))
    assert m0["floor_rate"] == 1.0 and math.isnan(m0["ib_rsr"]) and m0["rsr"] == 0.0


def test_rsr_against_a_plain_loop():
    rng = np.random.default_rng(0)
    g = rng.integers(0, 5, 40)
    ge = g * 2
    mk = np.clip(g + rng.integers(-1, 2, 40), 0, 4)
    me = np.clip(mk + rng.integers(0, 4, 40), 0, 8)
    m = rsr.condition_metrics(_rows(g.tolist(), ge.tolist(), mk.tolist(), me.tolist()))
    num = sum(abs(b - a) for a, b in zip(mk, me)) / 40
    den = sum(abs(b - a) for a, b in zip(g, ge)) / 40
    assert m["rsr"] == pytest.approx(num / den)
    keep = [i for i in range(40) if me[i] != 0]
    assert m["ib_rsr"] == pytest.approx(np.mean([abs(me[i] - mk[i]) for i in keep])
                                        / np.mean([abs(ge[i] - g[i]) for i in keep]))
    assert m["floor_rate"] == pytest.approx(np.mean(me == 0))


def test_parse_failures_are_counted_and_left_out():
    m = rsr.condition_metrics(_rows([1, 2, 3], [2, 4, 6], [1, None, 3], [2, 4, None]))
    assert (m["n"], m["n_invalid"], m["n_scored"]) == (3, 2, 1) and m["rsr"] == 1.0


def test_no_gold_change_gives_nan_not_zero():
    m = rsr.condition_metrics(_rows([0, 0], [0, 0], [1, 1], [2, 2]))
    assert math.isnan(m["rsr"]) and math.isnan(m["ib_rsr"])


def test_over_and_under_reaction_cancel_in_signed_mean_but_not_in_ae_rsr():
    # one condition over-reacts (IB-RSR 1.5), another under-reacts (0.5): signed mean 0, AE-RSR 0.5
    over = _rows([2, 2], [4, 4], [2, 2], [5, 5], edit="lor_a2")     # 3 / 2 = 1.5
    under = _rows([2, 2], [4, 4], [2, 2], [3, 3], edit="pts_x2.0")  # 1 / 2 = 0.5
    cond = rsr.condition_table(pd.concat([over, under]))
    assert cond.set_index("edit")["ib_rsr"].to_dict() == {"lor_a2": 1.5, "pts_x2.0": 0.5}
    summary = rsr.summary_table(cond).iloc[0]
    assert summary["signed_overall"] == pytest.approx(0.0)
    assert summary["ae_rsr_overall"] == pytest.approx(0.5)
    assert summary["ae_rsr_lor"] == pytest.approx(0.5) and summary["ae_rsr_pts"] == pytest.approx(0.5)
    assert summary["floor_rate_pct_lor"] == 0.0 and summary["conditions_lor"] == 1


def test_pair_predictions_joins_by_id_and_refuses_missing_originals():
    orig = pd.DataFrame(dict(response_id=["a", "b"], question_id="q", gold=[1, 2],
                             mark=pd.array([1, None], dtype="Int64")))
    edited = pd.DataFrame(dict(response_id=["b", "a"], question_id="q", gold=[4, 2],
                               mark=pd.array([3, 2], dtype="Int64")))
    p = rsr.pair_predictions(orig, edited)
    assert p["response_id"].tolist() == ["b", "a"]
    assert p["gold"].tolist() == [2, 1] and p["gold_edit"].tolist() == [4, 2]
    assert p["mark"].isna().tolist() == [True, False]
    with pytest.raises(KeyError, match="no original prediction"):
        rsr.pair_predictions(orig.iloc[:1], edited)


def test_sample_is_seeded_and_ordered():
    from edit_lib.random_streams import seeded_subset
    items = list(range(100))
    a = seeded_subset(items, 10, 3)
    assert a == seeded_subset(items, 10, 3) and a == sorted(a) and len(a) == 10
    assert a != seeded_subset(items, 10, 4)
    assert seeded_subset(items, 0, 3) == items and seeded_subset(items, 200, 3) == items
    rng = np.random.default_rng(3)  # numpy's own draw without replacement, put back in order
    assert a == sorted(rng.choice(100, size=10, replace=False).tolist())
