"""Notebook 02's summaries (Eq. 1-2) as library functions, each against a small table computed by hand."""
import numpy as np
import pandas as pd
import pytest

from edit_lib.signals.probe_summary import (compare_reads, delta_eps_histogram, delta_eps_summary, example_rollouts,
                                        final_agreement, read_boundaries, single_step_warnings,
                                        step_count_summary, trajectory_by_position)


def _beliefs(probs_by_rollout, gold, dataset="d", read="next_token", correct=None, mark=None, status="ok"):
    """A probe table (tables.probe_table layout) built from explicit p_k rows."""
    rows = []
    for i, probs in enumerate(probs_by_rollout):
        probs = np.asarray(probs, float)
        T = len(probs) - 1
        expected = probs @ np.arange(probs.shape[1])
        eps = np.abs(expected - gold[i])
        for k in range(T + 1):
            rows.append(dict(dataset=dataset, response_id=f"r{i}", rollout_id=0, k=k, n_steps=T, u=k / max(T, 1),
                             expected=expected[k], eps=eps[k], delta_eps=eps[k - 1] - eps[k] if k else np.nan,
                             argmax=int(np.argmax(probs[k])), p_max=float(probs[k].max()), gold=gold[i],
                             probs=probs[k].tolist(), read=read, max_mark=probs.shape[1] - 1,
                             correct=True if correct is None else correct[i],
                             mark=None if mark is None else mark[i], parse_status=status))
    return pd.DataFrame(rows)


def test_step_count_summary_and_warning():
    r = pd.DataFrame(dict(dataset=["a"] * 4 + ["b"] * 2, n_steps=[0, 1, 3, 5, 2, 4],
                          step_rule=["lines", "lines", "markers", "markers", "markers", "markers"]))
    s = step_count_summary(r).set_index("dataset")
    assert s.loc["a", "single_step"] == 2 and s.loc["a", "no_step"] == 1
    assert s.loc["a", "single_step_share"] == pytest.approx(0.5)
    assert s.loc["a", "mean_steps"] == pytest.approx(9 / 4) and s.loc["a", "median_steps"] == pytest.approx(2.0)
    assert s.loc["a", "rules"] == "lines: 2, markers: 2"
    assert s.loc["b", "single_step"] == 0
    msgs = single_step_warnings(step_count_summary(r), 0.2)
    assert len(msgs) == 1 and msgs[0].startswith("a: 2 of 4 rollouts (50%) have T <= 1")
    assert single_step_warnings(step_count_summary(r), 0.5) == []  # strictly above the threshold


def test_final_agreement_by_hand():
    # rollout 0: final p = [0.1, 0.7, 0.2], wrote 1 -> agrees, p(gen) 0.7, |E - 1| = |1.1 - 1| = 0.1
    # rollout 1: final p = [0.5, 0.4, 0.1], wrote 2 -> disagrees, p(gen) 0.1, |0.6 - 2| = 1.4
    # rollout 2: no parsed mark -> counted, left out
    b = pd.concat([
        _beliefs([[[1, 0, 0], [0.1, 0.7, 0.2]]], [1], mark=[1]),
        _beliefs([[[0.5, 0.4, 0.1]]], [1], mark=[2]).assign(response_id="r1"),
        _beliefs([[[0.2, 0.2, 0.6]]], [1], mark=[None], status="no_mark").assign(response_id="r2"),
    ])
    a = final_agreement(b).iloc[0]
    assert (a.rollouts, a.unparsed) == (2, 1)
    assert a.argmax_agrees == pytest.approx(0.5)
    assert a.mean_p_of_generated == pytest.approx(0.4)
    assert a.mean_abs_expected_minus_generated == pytest.approx(0.75)


def test_trajectory_by_position_bins_by_hand():
    # T = 4: u = 0, .25, .5, .75, 1 -> with 2 bins: [0, .25] in bin 0; [.5, .75, 1] in bin 1 (u = 1 -> last bin)
    probs = [[[1, 0, 0, 0, 0]] * 5]  # expected 0 everywhere, gold 2: eps 2, rel_eps 2/4
    b = _beliefs(probs, [2])
    b.loc[b.k == 4, "eps"] = 0.0  # the final boundary is exact
    t = trajectory_by_position(b, n_bins=2)
    assert t["u_bin"].tolist() == [0, 1] and t["n"].tolist() == [2, 3]
    np.testing.assert_allclose(t["mean_rel_eps"], [0.5, (0.5 + 0.5 + 0.0) / 3])
    np.testing.assert_allclose(t["u_mid"], [0.25, 0.75])


def test_delta_eps_summary_and_histogram_by_hand():
    # expected marks 1, 0, 2 with gold 2: eps 1, 2, 0 -> delta eps -1, +2
    b = _beliefs([[[0, 1, 0], [1, 0, 0], [0, 0, 1]]], [2], correct=[False])
    s = delta_eps_summary(b, tie_margin=0.05).iloc[0]
    assert (s.steps, s.mean_delta_eps, s.share_harmful, s.min_delta_eps) == (2, 0.5, 0.5, -1.0)
    h = delta_eps_histogram(b, width=0.5)
    assert h["bin"].tolist() == [-1.0, 2.0] and h["count"].tolist() == [1, 1]
    np.testing.assert_allclose(h["share"], [0.5, 0.5])


def test_compare_reads_by_hand():
    # rollout r0 (T = 2): next-token read p_k vs sequence read p_k over marks 0..1, gold 1
    nxt = _beliefs([[[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]]], [1])
    seq = _beliefs([[[0.5, 0.5], [0.4, 0.6], [0.1, 0.9]]], [1], read="sequence")
    per = read_boundaries(nxt, seq)
    np.testing.assert_allclose(per["tv"], [0.0, 0.5, 0.1])
    np.testing.assert_allclose(per["d_expected"], [0.0, -0.5, -0.1])
    # next: eps .5, .9, .2 -> delta -.4, +.7 (worst step 1); sequence: eps .5, .4, .1 -> +.1, +.3 (worst step 1)
    c = compare_reads(nxt, seq).iloc[0]
    assert c.read_used == "next_token" and (c.rollouts, c.boundaries) == (1, 3)
    assert c.mean_tv == pytest.approx(0.2) and c.max_tv == pytest.approx(0.5)
    assert c.mean_abs_d_expected == pytest.approx(0.2) and c.max_abs_d_expected == pytest.approx(0.5)
    assert (c.rollouts_T_ge_2, c.worst_step_changed, c.worst_step_changed_share) == (1, 0, 0.0)
    # change the sequence read so that step 2 is its worst: eps .5, .4, .6 -> +.1, -.2
    seq2 = _beliefs([[[0.5, 0.5], [0.4, 0.6], [0.6, 0.4]]], [1], read="sequence")
    c2 = compare_reads(nxt, seq2).iloc[0]
    assert (c2.worst_step_changed, c2.worst_step_changed_share) == (1, 1.0)


def test_compare_reads_groups_by_read_used_and_checks_boundaries():
    same = [[[0.3, 0.7], [0.6, 0.4]]]
    nxt = pd.concat([_beliefs(same, [1], read="sequence"),  # a multi-token question: both reads agree
                     _beliefs([[[0.5, 0.5], [1.0, 0.0]]], [1]).assign(response_id="r9")])
    seq = pd.concat([_beliefs(same, [1], read="sequence"),
                     _beliefs([[[0.5, 0.5], [0.0, 1.0]]], [1], read="sequence").assign(response_id="r9")])
    c = compare_reads(nxt, seq).set_index("read_used")
    assert c.loc["sequence", "max_tv"] == 0.0 and c.loc["next_token", "max_tv"] == pytest.approx(1.0)
    assert np.isnan(c.loc["next_token", "worst_step_changed_share"])  # T = 1: no choice of worst step
    with pytest.raises(ValueError, match="different boundaries"):
        read_boundaries(nxt, seq[seq.k == 0])


def test_example_rollouts_picks_worst_and_correct():
    b = pd.concat([
        _beliefs([[[1, 0, 0], [0, 1, 0]]], [1], correct=[True]),                      # r0: delta +1
        _beliefs([[[0, 1, 0], [0, 0, 1]]], [1], correct=[False]).assign(response_id="r1"),  # r1: delta -1
        _beliefs([[[0, 1, 0], [0.5, 0.5, 0]]], [1], correct=[False]).assign(response_id="r2"),  # r2: -0.5
    ])
    ex = example_rollouts(b, n_worst=1, n_correct=1)
    assert ex["response_id"].tolist() == ["r0", "r0", "r1", "r1"] and ex["k"].tolist() == [0, 1, 0, 1]
    assert example_rollouts(b, n_worst=2, n_correct=0)["response_id"].unique().tolist() == ["r1", "r2"]
