"""Minimum detectable effects (MDE): the smallest true effect a comparison detects with probability ``power``
(default 80%) at two-sided level ``alpha`` (default 5%). A suite choice, not the paper's: it says how large an
effect an inconclusive interval could have shown (Tables 3, 4 and 12; App. G).

* Seed-level paired tests (Table 4: the mean of seed-wise differences, t-test with n - 1 df):
  :func:`seed_mde_multiple` solves the exact noncentral-t power equation.
* Bootstrap comparisons (Table 3's cluster bootstrap over questions, App. G; Table 12's paired comparison):
  :func:`normal_mde`, ``(z_{1-alpha/2} + z_{power}) * SE`` with SE the bootstrap standard error of the paired
  difference. This is a normal approximation (it ignores the bootstrap's skew and the error of SE itself).
  :func:`paired_summary` is every paired bootstrap's interval, SE and MDE, at the caller's level.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

ALPHA, POWER = 0.05, 0.8


def _check(alpha: float, power: float) -> None:
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"alpha and power must lie in (0, 1), got alpha={alpha}, power={power}")


def t_test_power(effect_over_sd: float, n: int, alpha: float = ALPHA) -> float:
    """Power of the two-sided one-sample t test (n - 1 df) when the mean difference is ``effect_over_sd`` SDs:
    ``P(|T| > t_{1-alpha/2})`` with ``T`` noncentral t, noncentrality ``effect_over_sd * sqrt(n)`` (Table 4)."""
    if n < 2:
        raise ValueError(f"a t test needs at least 2 paired seeds, got n={n}")
    df, nc = n - 1, effect_over_sd * math.sqrt(n)
    tc = stats.t.ppf(1 - alpha / 2, df)
    upper, lower = stats.nct.sf(tc, df, nc), stats.nct.cdf(-tc, df, nc)  # scipy may give NaN for a tail ~ 0
    return float(np.nan_to_num(upper) + np.nan_to_num(lower))


def seed_mde_multiple(n: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """Table 4's MDE in units of SD(seed-wise differences): the smallest ``d`` with
    ``t_test_power(d, n, alpha) = power`` (exact noncentral t, brentq). About 3.27 at n = 3, 1.68 at n = 5."""
    _check(alpha, power)
    if t_test_power(0.0, n, alpha) >= power:
        return 0.0
    hi = 1.0
    while t_test_power(hi, n, alpha) < power:  # n = 2 needs d near 7
        hi *= 2
    return float(optimize.brentq(lambda d: t_test_power(d, n, alpha) - power, 0.0, hi, xtol=1e-10))


def seed_mde(sd: float, n: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """Table 4's MDE in the metric's units: ``seed_mde_multiple(n) * sd`` (``sd``: SD, ddof 1, of the seed-wise
    paired differences); NaN with fewer than 2 seeds or an undefined SD."""
    if n < 2 or sd is None or not np.isfinite(sd):
        return float("nan")
    if sd < 0:
        raise ValueError(f"sd must be >= 0, got {sd}")
    return seed_mde_multiple(n, alpha, power) * float(sd)


def normal_mde(se: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """MDE of a bootstrap comparison (App. G, Tables 3 and 12): ``(z_{1-alpha/2} + z_{power}) * se``, the
    normal approximation (2.80 SE at the defaults); NaN where ``se`` is undefined."""
    _check(alpha, power)
    if se is None or not np.isfinite(se):
        return float("nan")
    if se < 0:
        raise ValueError(f"se must be >= 0, got {se}")
    return float((stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)) * se)


def bootstrap_se(boot: np.ndarray) -> float:
    """Bootstrap standard error: SD (ddof 1) of the non-NaN resampled statistics; NaN with fewer than 2."""
    b = np.asarray(boot, dtype=float)
    b = b[~np.isnan(b)]
    return float(b.std(ddof=1)) if b.size > 1 else float("nan")


def percentile_interval(boot: np.ndarray, ci: float = 0.95) -> tuple[float, float]:
    """Percentile interval at level ``ci`` of the non-NaN resampled statistics (App. G): their
    ``50 (1 - ci)`` and ``50 (1 + ci)`` percentiles; (NaN, NaN) with none."""
    b = np.asarray(boot, dtype=float)
    b = b[~np.isnan(b)]
    if not b.size:
        return float("nan"), float("nan")
    lo, hi = np.percentile(b, [50 * (1 - ci), 50 * (1 + ci)])
    return float(lo), float(hi)


@dataclass(frozen=True)
class PairedSummary:
    """A paired bootstrap comparison summarised: the point difference, its percentile interval at ``ci``, the
    bootstrap SE and the MDE at 80% power and two-sided level 1 - ``ci``."""

    delta: float
    ci_low: float
    ci_high: float
    se: float
    mde: float


def paired_summary(delta: float, boot: np.ndarray, ci: float = 0.95, power: float = POWER) -> PairedSummary:
    """The one summary of a paired bootstrap (App. G; Tables 3 and 12): ``boot`` holds the resampled differences
    (NaN: a resample where the difference is undefined, left out), whatever the caller resampled (questions,
    responses within questions, rollouts). Interval: :func:`percentile_interval`; SE: :func:`bootstrap_se`; MDE:
    :func:`normal_mde` at ``alpha = 1 - ci``, NaN where the SE is undefined or 0 (every resample the same: no
    spread to approximate)."""
    if not 0 < ci < 1:
        raise ValueError(f"ci must lie in (0, 1), got {ci}")
    lo, hi = percentile_interval(boot, ci)
    se = bootstrap_se(boot)
    mde = normal_mde(se, alpha=1 - ci, power=power) if se > 0 else float("nan")
    return PairedSummary(float(delta), lo, hi, se, mde)


def se_from_interval(lo: float, hi: float, ci: float = 0.95) -> float:
    """The SE a symmetric normal interval ``[lo, hi]`` at level ``ci`` implies: ``(hi - lo) / (2 z_{(1+ci)/2})``
    (used where a results table keeps only an interval, e.g. Table 12's); NaN where either end is missing."""
    if lo is None or hi is None or not (np.isfinite(lo) and np.isfinite(hi)):
        return float("nan")
    return float((hi - lo) / (2 * stats.norm.ppf(0.5 + ci / 2)))
