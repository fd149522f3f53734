"""App. E statistics against brute-force computations."""
import itertools

import numpy as np
import pandas as pd
import pytest
from scipy.stats import mannwhitneyu

from edit_lib.signals.validation import dissociation_table, rank_biserial


def _pairs_r(x, y):
    return float(np.mean([np.sign(a - b) for a in x for b in y]))


@pytest.mark.parametrize("seed", range(4))
def test_rank_biserial_is_mean_pair_sign(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 6, 15).astype(float)  # ties on purpose
    y = rng.integers(0, 5, 11).astype(float)
    u, r = rank_biserial(x, y)
    assert u == pytest.approx(sum((a > b) + 0.5 * (a == b) for a in x for b in y))
    assert r == pytest.approx(_pairs_r(x, y))


def test_one_sided_p_matches_permutation_distribution():
    x = np.array([3.1, 4.2, 5.0, 6.3, 2.2])
    y = np.array([1.0, 2.0, 0.5, 3.0])
    pooled = np.concatenate([x, y])
    u_obs = sum(a > b for a in x for b in y)
    us = []
    for idx in itertools.combinations(range(len(pooled)), len(x)):
        xs = pooled[list(idx)]
        ys = np.delete(pooled, list(idx))
        us.append(sum(a > b for a in xs for b in ys))
    p_perm = np.mean(np.array(us) >= u_obs)
    assert mannwhitneyu(x, y, alternative="greater", method="exact").pvalue == pytest.approx(p_perm)


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
