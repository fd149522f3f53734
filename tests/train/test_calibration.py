"""Calibration of beta_drift and gamma_Phi (edit_lib/train/calibration.py; App. B, Eq. 5-7, Table 9 lower block),
checked against hand-computed cases and naive loops over randomised groups."""
import math
import random

import pytest

from edit_lib.config import ShapingValues
from edit_lib.train.calibration import (CalibRollout, calibrate, calibration_subset, edge_flags, flip_safe_gamma,
                                        rollout_penalty, sweep_beta_drift, worst_case_gamma_bound)


def R(group="g", r_out=1.0, correct=True, M=4, gold=2, m_hat=(2.0,)):
    return CalibRollout(group=group, r_out=r_out, correct=correct, max_mark=M, gold=gold, m_hat=tuple(m_hat))


def test_shaping_penalty_by_hand():
    # |m_hat - m*| = 0.5, 2, 2; excess over 0.75 = 0, 1.25, 1.25; / (M_q T) = 2.5 / 12
    assert rollout_penalty(R(m_hat=(2.5, 4.0, 0.0)), 0.75) == pytest.approx(2.5 / 12)
    assert rollout_penalty(R(m_hat=(2.5, 2.0)), 0.75) == 0.0


def _sweep_data():
    return [R(correct=False, r_out=0.75, m_hat=(3.0,)), R(correct=False, r_out=0.5, m_hat=(4.0,)),
            R(m_hat=(2.6,)), R(m_hat=(2.0,))]  # drifts 1, 2 (incorrect); 0.6, 0 (correct)


def test_sweep_keeps_the_largest_separation():
    rows, beta = sweep_beta_drift(_sweep_data(), [1.5, 0.5, 0.75])
    got = [(r.beta_drift, r.fire_rate_incorrect, r.fire_rate_correct, r.separation) for r in rows]
    assert got == [(0.5, 1.0, 0.5, 0.5), (0.75, 1.0, 0.0, 1.0), (1.5, 0.5, 0.0, 0.5)]
    assert beta == 0.75


def test_sweep_ties_go_to_the_smaller_beta():
    assert sweep_beta_drift(_sweep_data(), [0.9, 0.75])[1] == 0.75
    with pytest.raises(ValueError, match="correct and incorrect"):
        sweep_beta_drift([R(), R()], [0.5])


def test_flip_safe_gamma_by_hand_and_cap():
    c = R(M=10, gold=5, m_hat=(9.0,))                               # pen 4 / 10 at beta 0
    i = R(correct=False, r_out=0.9, M=10, gold=5, m_hat=(5.0,))     # off by one mark, pen 0
    g = flip_safe_gamma([c, i], 0.0, cap=1.0, safety=0.99)
    assert g.bound == pytest.approx(0.1 / 0.4) and g.gamma == pytest.approx(0.99 * 0.25)
    assert (g.n_pairs, g.n_binding) == (1, 1)
    assert flip_safe_gamma([c, i], 0.0, cap=0.1).gamma == 0.1
    # pairs in different groups never bind; a correct rollout with the smaller penalty never binds
    assert math.isinf(flip_safe_gamma([c, R(group="h", correct=False, r_out=0.9, M=10, gold=5)], 0.0).bound)
    assert flip_safe_gamma([R(M=10, gold=5, m_hat=(5,)), R(correct=False, r_out=0.5, M=10, gold=5, m_hat=(9,))],
                           0.0, cap=0.7).gamma == 0.7


def test_literal_and_pairwise_rules_by_hand():
    # one group, M = 10, m* = 5, beta 0: pen = |m_hat - 5| / 10
    c = R(M=10, gold=5, m_hat=(9.0,))                                # correct, r_out 1, pen 0.4
    i1 = R(correct=False, r_out=0.9, M=10, gold=5, m_hat=(8.0,))     # off by one, pen 0.3
    i2 = R(correct=False, r_out=0.5, M=10, gold=5, m_hat=(10.0,))    # off by five, pen 0.5
    # literal (App. B): gamma x pen(c) < r_out(c) - r_out(i): min(0.1 / 0.4, 0.5 / 0.4) = 0.25; both pairs bind
    lit = flip_safe_gamma([c, i1, i2], 0.0, cap=2.0, safety=0.99)
    assert lit.rule == "literal" and lit.bound == pytest.approx(0.25) and lit.gamma == pytest.approx(0.2475)
    assert (lit.n_pairs, lit.n_binding) == (2, 2)
    # pairwise: gamma x (pen(c) - pen(i)) < gap: 0.1 / (0.4 - 0.3) = 1.0; (c, i2) has pen(c) < pen(i2), never binds
    pw = flip_safe_gamma([c, i1, i2], 0.0, cap=2.0, safety=0.99, rule="pairwise")
    assert pw.bound == pytest.approx(1.0) and pw.gamma == pytest.approx(0.99) and (pw.n_pairs, pw.n_binding) == (2, 1)
    with pytest.raises(ValueError, match="flip_safe_rule"):
        flip_safe_gamma([c, i1], 0.0, rule="strict")
    # calibrate passes the rule through
    t = calibrate({"d": [c, i1, i2]}, fraction=1.0, seed=0, grid=(0.0,), cap=2.0)["d"]
    assert t.gamma.gamma == pytest.approx(0.2475)
    t = calibrate({"d": [c, i1, i2]}, fraction=1.0, seed=0, grid=(0.0,), cap=2.0, rule="pairwise")["d"]
    assert t.gamma.gamma == pytest.approx(0.99)


def test_the_sweep_goes_on_above_the_grid_while_its_best_is_the_top():
    """Drifts 1 and 2 (incorrect), 0.6 and 0 (correct), M_q = 4: on a grid ending at 0.625 the best is its top,
    so the sweep goes on by 0.375 (the grid's last step) up to M_q; nothing above separates better: 0.625 kept."""
    rows, beta = sweep_beta_drift(_sweep_data(), (0.25, 0.625))
    assert beta == 0.625 and [r.beta_drift for r in rows] == [0.25, 0.625, 1.0, 1.375, 1.75, 2.125, 2.5, 2.875,
                                                                3.25, 3.625, 4.0]
    rows, beta = sweep_beta_drift(_sweep_data(), (0.0, 0.25))  # a tie keeps 0.0, below the top: no step beyond
    assert beta == 0.0 and [r.beta_drift for r in rows] == [0.0, 0.25]
    # an incorrect rollout that never drifts, correct ones drifting 2 and 3 marks: every tolerance below M_q = 4
    # penalises correct rollouts more often; the sweep goes up to M_q, where nothing fires, keeps it and says so
    flat = [R(correct=False, r_out=0.75, m_hat=(2.0,)), R(m_hat=(4.0,)), R(gold=0, m_hat=(3.0,))]
    rows, beta = sweep_beta_drift(flat, (0.0, 2.0))  # a plateau (2.0 and 2.5 alike) does not stop the sweep
    assert beta == 4.0 and [r.beta_drift for r in rows] == [0.0, 2.0, 4.0] and rows[-1].separation == 0.0
    rows, beta = sweep_beta_drift(flat, (0.0, 1.5, 2.0))  # 3.0: the smallest tolerance that spares every correct
    assert beta == 3.0 and [r.beta_drift for r in rows] == [0.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0]
    assert sweep_beta_drift(flat, (1.0,))[0][-1].beta_drift == 1.0  # a one-value grid: a fixed tolerance
    assert "beta_drift_at_cap" in calibrate({"d": flat}, fraction=1.0, seed=0, grid=(0.0, 2.0), cap=1.0)["d"].flags
    assert sweep_beta_drift(flat, (0.0, 2.0), cap=3.0)[1] == 3.0  # an explicit cap


def test_edge_and_cap_flags():
    rows = _sweep_data()  # the sweep keeps 0.75
    t = calibrate({"d": rows}, fraction=1.0, seed=0, grid=(0.25, 0.5, 0.75), cap=1.0)["d"]
    assert t.beta_drift == 0.75 and not any(f.startswith("beta_drift") for f in t.flags)  # 1.0 below it: a maximum
    assert [r.beta_drift for r in t.sweep][:4] == [0.25, 0.5, 0.75, 1.0] and t.sweep[-1].beta_drift == 4.0
    assert t.gamma.at_cap == ("gamma_at_cap" in t.flags)
    t = calibrate({"d": rows}, fraction=1.0, seed=0, grid=(0.75, 1.0, 1.5), cap=1e-3)["d"]
    assert t.flags == ["beta_drift_at_grid_bottom", "gamma_at_cap"] and t.gamma.gamma == 1e-3
    # a correct rollout drifting 2 marks: the sweep still keeps 0.75, and now a pair binds gamma
    # (pen = (2 - 0.75) / 4; bound min(0.25, 0.5) / 0.3125 = 0.8)
    t = calibrate({"d": rows + [R(m_hat=(4.0,))]}, fraction=1.0, seed=0, grid=(0.5, 0.75, 1.5), cap=100.0)["d"]
    assert t.beta_drift == 0.75 and t.gamma.bound == pytest.approx(0.8)
    assert t.flags == [] and t.to_dict()["flags"] == []
    g = flip_safe_gamma(rows + [R(m_hat=(4.0,))], 0.75, cap=100.0)
    assert edge_flags(0.75, (0.75,), g, 4.0) == ["beta_drift_at_grid_bottom"]
    assert edge_flags(0.0, (0.0, 0.5), g, 4.0) == []  # 0 is the bottom of every tolerance, not the grid's choice
    assert edge_flags(4.0, (0.0, 0.5), g, 4.0) == ["beta_drift_at_cap"]


def _literal_violations(rollouts, beta, gamma):
    """Naive count of within-group (correct, incorrect) pairs whose correct rollout's weighted penalty reaches
    the outcome gap (App. B's flip-safety, literally)."""
    return sum(c.group == i.group and c.correct and not i.correct and c.r_out > i.r_out
               and not gamma * rollout_penalty(c, beta) < c.r_out - i.r_out for c in rollouts for i in rollouts)


def _random_groups(rng, n_groups=30, size=8, M=10):
    out = []
    for g in range(n_groups):
        gold = rng.randint(0, M)
        for _ in range(size):
            pred = gold if rng.random() < 0.4 else rng.randint(0, M)
            m_hat = [min(M, max(0.0, gold + rng.gauss(0, 2))) for _ in range(rng.randint(1, 6))]
            out.append(CalibRollout(str(g), max(0.0, 1 - abs(pred - gold) / M), pred == gold, M, gold,
                                    tuple(m_hat)))
    return out


def _flips(rollouts, beta, gamma):
    """Naive count of within-group outcome rankings that r = r_out + gamma r_shape inverts (Eq. 7)."""
    n = 0
    for c in rollouts:
        for i in rollouts:
            if c.group == i.group and c.correct and not i.correct and c.r_out > i.r_out:
                rc = c.r_out - gamma * rollout_penalty(c, beta)
                ri = i.r_out - gamma * rollout_penalty(i, beta)
                n += not rc > ri
    return n


@pytest.mark.parametrize("seed", range(5))
def test_flip_safe_gamma_never_inverts_a_ranking_and_is_the_largest(seed):
    rollouts = _random_groups(random.Random(seed))
    for beta in (0.0, 0.75):
        g = flip_safe_gamma(rollouts, beta, cap=100.0, rule="pairwise")
        assert g.n_binding > 0 and g.gamma < g.bound
        assert _flips(rollouts, beta, g.gamma) == 0
        assert _flips(rollouts, beta, g.bound * 1.001) > 0  # just above the bound, shaping flips a pair
        lit = flip_safe_gamma(rollouts, beta, cap=100.0)  # literal: stricter, so also never flips
        assert lit.n_binding > 0 and lit.gamma < lit.bound <= g.bound
        assert _literal_violations(rollouts, beta, lit.gamma) == 0 == _flips(rollouts, beta, lit.gamma)
        assert _literal_violations(rollouts, beta, lit.bound * 1.001) > 0


def test_worst_case_bound_is_attained_by_the_worst_pair():
    assert worst_case_gamma_bound(26, 0.75) == pytest.approx(1 / 25.25)
    assert 0.05 > worst_case_gamma_bound(26, 0.75)  # the paper's SAS-History gamma exceeds it
    worst = [R(M=26, gold=0, m_hat=(26.0,)), R(correct=False, r_out=1 - 1 / 26, M=26, gold=0, m_hat=(0.75,))]
    assert flip_safe_gamma(worst, 0.75).bound == pytest.approx(worst_case_gamma_bound(26, 0.75))
    with pytest.raises(ValueError, match="M_q"):
        worst_case_gamma_bound(0.5, 0.75)


def test_calibration_subset_keeps_whole_seeded_groups():
    rollouts = _random_groups(random.Random(0), n_groups=40)
    sub = calibration_subset(rollouts, 0.1, seed=3)
    assert len({r.group for r in sub}) == 4 and len(sub) == 32
    assert sub == calibration_subset(rollouts, 0.1, seed=3) != calibration_subset(rollouts, 0.1, seed=4)
    assert calibration_subset(rollouts, 1.0, 0) == rollouts


def test_calibrate_reports_the_paper_value_against_the_bounds():
    rng = random.Random(1)
    data = {"sas_history": _random_groups(rng, n_groups=20, M=26), "other": _random_groups(rng, n_groups=20)}
    tables = calibrate(data, fraction=0.5, seed=0, grid=(0.25, 0.75, 1.5), cap=1.0,
                       paper={"sas_history": ShapingValues(beta_drift=0.75, gamma=0.05)})
    t = tables["sas_history"]
    swept = [r.beta_drift for r in t.sweep]
    assert t.n_groups == 10 and swept[:3] == [0.25, 0.75, 1.5] and t.beta_drift in swept
    assert t.beta_drift != swept[-1] or t.beta_drift == t.max_mark  # a maximum of the separation, or the cap
    assert t.max_mark == 26 and t.worst_case_bound == pytest.approx(1 / (26 - t.beta_drift))
    assert t.paper_worst_case_bound == pytest.approx(1 / 25.25)
    assert any("exceeds the worst-case" in n for n in t.notes)
    assert tables["other"].paper_gamma is None and tables["other"].notes == []
    d = t.to_dict()
    assert d["gamma"]["gamma"] == t.gamma.gamma and d["paper_gamma"] == 0.05


def test_bad_rows_are_named():
    with pytest.raises(ValueError, match=r"row 1, field 'm_hat'.*T = 0"):
        flip_safe_gamma([R(), R(correct=False, r_out=0.5, m_hat=())], 0.5)
    with pytest.raises(ValueError, match=r"row 0, field 'r_out'"):
        sweep_beta_drift([R(r_out=1.5)], [0.5])
