"""App. E statistics against brute-force computations."""
import itertools

import numpy as np
import pandas as pd
import pytest

from edit_lib.signals.audit_summary import dissociation_table, one_sided_mwu


def _pairs_r(x, y):
    return float(np.mean([np.sign(a - b) for a in x for b in y]))


@pytest.mark.parametrize("seed", range(4))
def test_rank_biserial_is_mean_pair_sign(seed):
    """one_sided_mwu's r (Table 11's effect size) is the mean over pairs of sign(x - y); U counts ties as one half."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 6, 15).astype(float)  # ties on purpose
    y = rng.integers(0, 5, 11).astype(float)
    u, r, _ = one_sided_mwu(x, y)
    assert u == pytest.approx(sum((a > b) + 0.5 * (a == b) for a in x for b in y))
    assert r == pytest.approx(_pairs_r(x, y))


def _perm_p(x, y):
    """Exact one-sided permutation p of U (x > y): the share of relabellings with U at least the observed."""
    pooled = np.concatenate([x, y])
    u_obs = sum(a > b for a in x for b in y)
    us = []
    for idx in itertools.combinations(range(len(pooled)), len(x)):
        xs, ys = pooled[list(idx)], np.delete(pooled, list(idx))
        us.append(sum(a > b for a in xs for b in ys))
    return float(np.mean(np.array(us) >= u_obs))


def test_one_sided_mwu_by_hand_and_exact_permutation():
    x = np.array([3.1, 4.2, 5.0, 6.3, 2.2])
    y = np.array([1.0, 2.0, 0.5, 3.0])
    u, r, p = one_sided_mwu(x, y)
    # pairs x > y: 4 + 4 + 4 + 4 + 3 (2.2 < 3.0) = 19 of 20, so r = 2 * 19/20 - 1 = 0.9; only two of the
    # C(9, 5) = 126 relabellings reach U >= 19 (the observed one and the top five), so p = 2/126
    assert u == 19 and r == pytest.approx(0.9)
    assert p == pytest.approx(2 / 126) and p == pytest.approx(_perm_p(x, y))
    # the hypothesis has a direction: the reverse test is not significant (a two-sided p would be 4/126)
    assert one_sided_mwu(y, x)[2] == pytest.approx(1 - 1 / 126)
    with pytest.raises(ValueError):
        one_sided_mwu(x, [])


def test_dissociation_table_p_is_one_sided_in_each_signals_direction():
    g = dict(G_a=[2.0, 1.4, 1.1, 0.9], G_p=[0.1, 0.5, 0.9, 1.3])  # grounding steps
    s = dict(G_a=[1.0, 0.2, -0.1], G_p=[1.0, 1.5, 2.0])  # synthesis steps
    df = pd.DataFrame([dict(rollout_key=10 * j + i, label=lab, G_a=a, G_p=b)
                       for j, (lab, d) in enumerate((("grounding", g), ("synthesis", s)))
                       for i, (a, b) in enumerate(zip(d["G_a"], d["G_p"]))])
    t = dissociation_table(df, signals=("G_a", "G_p")).set_index(["signal", "level"])
    ga, gp = t.loc[("G_a", "step")], t.loc[("G_p", "step")]
    assert ga["p"] == pytest.approx(_perm_p(np.array(g["G_a"]), np.array(s["G_a"])))  # grounding > synthesis
    assert gp["p"] == pytest.approx(_perm_p(np.array(s["G_p"]), np.array(g["G_p"])))  # synthesis > grounding
    # hand: G_p synthesis beats grounding in 3 + 4 + 4 = 11 of 12 pairs (1.0 vs 1.3 loses) -> r = 10/12
    assert gp["U"] == 11 and gp["r"] == pytest.approx(10 / 12)
    assert gp["median_grounding"] == pytest.approx(0.7) and gp["median_synthesis"] == pytest.approx(1.5)


def test_dissociation_table_directions_and_rollout_collapse():
    rng = np.random.default_rng(0)
    rows = []
    for ro in range(30):
        for k in range(6):
            lab = "grounding" if k < 4 else "synthesis"
            rows.append(dict(rollout_key=ro, label=lab,
                             G_a=rng.normal(1.0 if lab == "grounding" else 0.0, 0.3),
                             G_rho=rng.normal(0.5, 0.3),
                             G_p=rng.normal(1.5 if lab == "synthesis" else 0.2, 0.3)))
    df = pd.DataFrame(rows)
    t = dissociation_table(df).set_index(["signal", "level"])
    assert t.loc[("G_a", "step"), "r"] > 0.8 and t.loc[("G_a", "step"), "p"] < 1e-10
    assert t.loc[("G_p", "step"), "r"] > 0.8
    assert abs(t.loc[("G_rho", "step"), "r"]) < 0.3
    assert t.loc[("G_a", "rollout mean"), "n_grounding"] == 30
    assert t.loc[("G_a", "step"), "n_grounding"] == 120 and t.loc[("G_a", "step"), "n_synthesis"] == 60
    g = df[df.label == "grounding"].G_a
    assert t.loc[("G_a", "step"), "median_grounding"] == pytest.approx(np.median(g))
