"""Minimum detectable effects (edit_lib.power): against closed forms, an independent noncentral-t integral and
simulations with the effect set to the MDE (the empirical power must be 0.8 within the simulation's error)."""
import math

import numpy as np
import pytest
from scipy import integrate, stats

from edit_lib import power


def test_normal_mde_is_the_closed_form():
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    assert power.normal_mde(0.02) == pytest.approx(z * 0.02) and z == pytest.approx(2.8016, abs=1e-4)
    assert power.normal_mde(1.0, alpha=0.01, power=0.9) == pytest.approx(stats.norm.ppf(0.995) + stats.norm.ppf(0.9))
    assert math.isnan(power.normal_mde(float("nan")))
    with pytest.raises(ValueError, match="alpha and power"):
        power.normal_mde(1.0, power=1.0)


def _power_by_integral(d: float, n: int, alpha: float = 0.05) -> float:
    """P(|T| > t_c), T = (Z + d sqrt(n)) / sqrt(V / df), integrated over V ~ chi2(df) (no scipy.nct)."""
    df, nc = n - 1, d * math.sqrt(n)
    tc = stats.t.ppf(1 - alpha / 2, df)
    f = lambda v: stats.chi2.pdf(v, df) * (stats.norm.sf(tc * math.sqrt(v / df) - nc)  # noqa: E731
                                           + stats.norm.cdf(-tc * math.sqrt(v / df) - nc))
    return integrate.quad(f, 0, np.inf, limit=200)[0]


@pytest.mark.parametrize("n,expected", [(3, 3.264), (5, 1.682), (8, 1.156)])
def test_seed_mde_multiple_solves_the_noncentral_t_power(n, expected):
    d = power.seed_mde_multiple(n)
    assert d == pytest.approx(expected, abs=2e-3)
    assert _power_by_integral(d, n) == pytest.approx(0.8, abs=1e-6)
    assert _power_by_integral(0.95 * d, n) < 0.8  # the smallest such effect
    assert power.seed_mde(0.01, n) == pytest.approx(0.01 * d)


def test_seed_mde_approaches_the_normal_formula_and_needs_two_seeds():
    assert power.seed_mde_multiple(2000) * math.sqrt(2000) == pytest.approx(power.normal_mde(1.0), rel=2e-3)
    assert math.isnan(power.seed_mde(0.01, 1)) and math.isnan(power.seed_mde(float("nan"), 3))
    with pytest.raises(ValueError, match="at least 2"):
        power.t_test_power(1.0, 1)


def test_simulated_t_test_at_the_mde_rejects_80_percent():
    """Paired seed differences with true mean = MDE: the t test of Table 4 rejects in 80% of simulations."""
    rng, n, sd, sims = np.random.default_rng(0), 3, 0.004, 40000
    d = rng.normal(power.seed_mde(sd, n), sd, size=(sims, n))
    t = d.mean(1) / (d.std(1, ddof=1) / math.sqrt(n))
    rate = np.mean(np.abs(t) > stats.t.ppf(0.975, n - 1))
    assert abs(rate - 0.8) < 4 * math.sqrt(0.8 * 0.2 / sims)


def test_simulated_bootstrap_comparison_at_the_mde_rejects_80_percent():
    """Per-question paired differences (40 questions) with true mean = normal_mde(bootstrap SE): the
    percentile interval excludes 0 in ~80% of simulations (normal approximation; tolerance from the binomial
    SE plus the approximation's small bias)."""
    rng, q, sd, sims, boots = np.random.default_rng(1), 40, 0.1, 400, 400
    x0 = rng.normal(0, sd, q)
    se = power.bootstrap_se(x0[rng.integers(0, q, size=(4000, q))].mean(1))
    assert se == pytest.approx(x0.std() / math.sqrt(q), rel=0.05)  # the bootstrap SE of a mean
    eff = power.normal_mde(sd / math.sqrt(q))
    x = rng.normal(eff, sd, size=(sims, q))
    idx = rng.integers(0, q, size=(boots, q))
    means = x[:, idx].mean(2)  # sims x boots
    rate = np.mean(np.percentile(means, 2.5, axis=1) > 0)
    assert abs(rate - 0.8) < 4 * math.sqrt(0.8 * 0.2 / sims) + 0.03


def test_se_from_interval_inverts_a_normal_interval():
    z = stats.norm.ppf(0.975)
    assert power.se_from_interval(0.1 - z * 0.02, 0.1 + z * 0.02) == pytest.approx(0.02)
    assert math.isnan(power.se_from_interval(None, 0.1))


def test_table4_records_the_seed_level_mde_beside_the_paired_difference():
    import pandas as pd
    from edit_lib.evaluation import tables as et
    a, b, rows = [0.50, 0.52, 0.49], [0.55, 0.53, 0.56], []
    for s, x, y in zip((42, 43, 44), a, b):
        rows += [dict(system="edit_sft_grpo", seed=s, dataset="bio", split="ood_test", subject="all", qwk=x),
                 dict(system="edit_sft_edit_rl", seed=s, dataset="bio", split="ood_test", subject="all", qwk=y)]
    t = et.seeds_table(pd.DataFrame(rows)).iloc[0]
    sd = np.std(np.subtract(b, a), ddof=1)
    assert t["delta_sd"] == pytest.approx(sd) and t["mde_sd_multiple"] == pytest.approx(3.264, abs=2e-3)
    assert t["mde"] == pytest.approx(power.seed_mde_multiple(3) * sd)
