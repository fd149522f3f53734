"""Alg. 1 (candidate step selection) and its rivals on hand-built signal tables."""
import numpy as np
import pandas as pd
import pytest

from edit_lib.config import ConfigError, SelectionConfig
from edit_lib.selection import (dataset_percentiles, select_candidates, select_random_matched,
                                select_steps, shortlist, weakly_grounded)

P25 = {"G_rho": 1.0, "G_a": 1.0, "G_p_tilde": 0.0}


def test_near_tie_and_positive_shifts_are_discarded():
    # tau = 0.1: -0.1 is a near tie (not < -tau), +0.5 helps; only -0.3 and -0.2 remain
    assert shortlist([0.5, -0.1, -0.3, -0.2, 0.0], k=5, tau=0.1) == [2, 3]


def test_shortlist_cut_keeps_the_k_most_negative_ties_by_position():
    assert shortlist([-0.4, -0.9, -0.4, -0.2], k=2, tau=0.0) == [1, 0]  # -0.4 tie: earlier step first
    assert shortlist([-0.4, -0.9, -0.4, -0.2], k=3, tau=0.0) == [1, 0, 2]


def test_nan_shift_is_never_shortlisted():
    assert shortlist([np.nan, -1.0], k=3, tau=0.0) == [1]


def test_weak_grounding_needs_all_three_signals_below_p25():
    assert weakly_grounded(0.5, 0.5, -1.0, P25)
    assert not weakly_grounded(0.5, 0.5, 0.0, P25)  # strict: equal to the percentile is not below it
    assert not weakly_grounded(2.0, 0.5, -1.0, P25)
    assert not weakly_grounded(0.5, 2.0, -1.0, P25)


def test_stable_rerank_promotes_weak_steps_and_keeps_delta_eps_order_among_ties():
    d = [-0.9, -0.8, -0.7, -0.6]
    g_rho = [5.0, 0.1, 5.0, 0.1]  # steps 1 and 3 (0-based) weakly grounded on all three
    g_a = [5.0, 0.1, 5.0, 0.1]
    g_p = [5.0, -1.0, 5.0, -1.0]
    params = SelectionConfig(shortlist_k=4, budget_n=4, tie_margin=0.0)
    assert select_steps(d, g_rho, g_a, g_p, P25, params) == [(1, True), (3, True), (0, False), (2, False)]
    assert [j for j, _ in select_steps(d, g_rho, g_a, g_p, P25, params, rerank=False)] == [0, 1, 2, 3]


def test_rerank_never_reaches_outside_the_shortlist():
    # the weakly grounded step 3 has the smallest harmful shift and falls outside top-2: it is not promoted in
    d = [-0.9, -0.8, -0.7, -0.6]
    g = [5.0, 5.0, 5.0, 0.1]
    gp = [5.0, 5.0, 5.0, -1.0]
    params = SelectionConfig(shortlist_k=2, budget_n=2, tie_margin=0.0)
    assert select_steps(d, g, g, gp, P25, params) == [(0, False), (1, False)]


def test_strongly_grounded_step_with_large_harmful_shift_stays_eligible():
    params = SelectionConfig(shortlist_k=3, budget_n=1, tie_margin=0.05)
    picked = select_steps([-2.0, 0.3], [9.0, 0.0], [9.0, 0.0], [9.0, -9.0], P25, params)
    assert picked == [(0, False)]


def test_budget_n_cuts_after_rerank():
    d = [-0.9, -0.8, -0.7]
    g = [5.0, 5.0, 0.1]
    gp = [5.0, 5.0, -1.0]
    params = SelectionConfig(shortlist_k=3, budget_n=1, tie_margin=0.0)
    assert select_steps(d, g, g, gp, P25, params) == [(2, True)]


def _table():
    rows = []
    # rollout a: 4 steps; rollout b: 3 steps, no harmful shift
    for k, (d, r, a, p) in enumerate([(0.1, 3, 3, 1), (-0.5, 0.2, 0.1, -2), (-0.9, 3, 3, 1), (0.0, 3, 3, 1)], 1):
        rows.append(dict(dataset="x", response_id="r1", rollout_id=0, k=k, n_steps=4, delta_eps=d,
                         G_rho=r, G_a=a, G_p_tilde=p))
    for k in range(1, 4):
        rows.append(dict(dataset="x", response_id="r2", rollout_id=1, k=k, n_steps=3, delta_eps=0.2,
                         G_rho=2.0, G_a=2.0, G_p_tilde=0.5))
    return pd.DataFrame(rows)


def test_dataset_percentiles_match_numpy():
    t = _table()
    pct = dataset_percentiles(t, 25)
    for s in ("G_rho", "G_a", "G_p_tilde"):
        assert pct[s].iloc[0] == pytest.approx(np.percentile(t[s], 25))


def test_select_candidates_over_a_table():
    t = _table()
    out = select_candidates(t, SelectionConfig(shortlist_k=3, budget_n=2, tie_margin=0.05))
    assert out[["response_id", "k", "rank", "weak"]].values.tolist() == [["r1", 2, 0, True], ["r1", 3, 1, False]]
    assert out["u"].tolist() == [0.5, 0.75]
    base = select_candidates(t, SelectionConfig(shortlist_k=3, budget_n=2, tie_margin=0.05), rule="belief_shift_only")
    assert base["k"].tolist() == [3, 2]


def test_random_matched_draws_distinct_steps_at_matched_positions_reproducibly():
    t = _table()
    ref = pd.DataFrame([dict(dataset="x", response_id="r1", rollout_id=0, u=0.5, rank=0),
                        dict(dataset="x", response_id="r1", rollout_id=0, u=0.75, rank=1)])
    a = select_random_matched(t, ref, seed=3)
    b = select_random_matched(t, ref, seed=3)
    pd.testing.assert_frame_equal(a, b)
    assert len(a) == 2 and a["k"].nunique() == 2
    assert set(a["k"]) <= {2, 3}  # u in {0.5, 0.75} on T = 4 maps to steps 2 and 3 only


def test_missing_column_is_named():
    with pytest.raises(KeyError, match="G_p_tilde"):
        select_candidates(_table().drop(columns="G_p_tilde"), SelectionConfig())


def test_bad_params_are_rejected():
    with pytest.raises(ConfigError, match="shortlist_k must be >= 1"):
        SelectionConfig(shortlist_k=0)
    with pytest.raises(ConfigError, match="tie_margin must be >= 0"):
        SelectionConfig(tie_margin=-1)
