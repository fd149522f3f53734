"""Audit validation against external step labels (App. E, Table 11, Figure 5).

Hypothesised directions: grounding > synthesis for G^a and G^rho; synthesis > grounding for G^p. Each is a
one-sided Mann-Whitney U test with the rank-biserial effect size r = 2 U / (n1 n2) - 1, where U counts the
pairs (x from the hypothesised-larger group, y from the other) with x > y, ties counting one half; so r is the
mean over pairs of sign(x - y), in [-1, 1], positive in the hypothesised direction. The p-value is scipy's
``mannwhitneyu(alternative="greater")`` with its default method: exact for small samples without ties, else
the normal approximation with tie correction. The test is run per step and again on per-rollout means (one
mean per rollout and label), which removes within-rollout dependence.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import mannwhitneyu

# signal column -> label expected to be larger (App. E, Table 11)
HYPOTHESES = {"G_a": "grounding", "G_rho": "grounding", "G_p": "synthesis", "G_p_tilde": "synthesis"}


def one_sided_mwu(larger, smaller) -> tuple[float, float, float]:
    """(U, r, p) of the one-sided Mann-Whitney test that ``larger`` tends to exceed ``smaller`` (App. E, Table 11):
    U of the hypothesised-larger sample, the rank-biserial r, and the one-sided p."""
    x = np.asarray(larger, dtype=float)
    y = np.asarray(smaller, dtype=float)
    if len(x) == 0 or len(y) == 0:
        raise ValueError("both samples must be non-empty")
    res = mannwhitneyu(x, y, alternative="greater")
    u = float(res.statistic)
    return u, 2.0 * u / (len(x) * len(y)) - 1.0, float(res.pvalue)


def dissociation_table(steps: pd.DataFrame, signals=("G_a", "G_rho", "G_p"), label_col: str = "label",
                       rollout_col: str = "rollout_key") -> pd.DataFrame:
    """Table 11 layout (App. E): per signal, medians by label, r and one-sided p, per step and per-rollout means."""
    rows = []
    data = steps[steps[label_col].isin(["grounding", "synthesis"])]
    for sig in signals:
        d = data[np.isfinite(data[sig])]
        hi = HYPOTHESES[sig]
        lo = "synthesis" if hi == "grounding" else "grounding"
        per_rollout = d.groupby([rollout_col, label_col], as_index=False)[sig].mean()
        for level, frame in (("step", d), ("rollout mean", per_rollout)):
            x = frame.loc[frame[label_col] == hi, sig].to_numpy()
            y = frame.loc[frame[label_col] == lo, sig].to_numpy()
            if len(x) == 0 or len(y) == 0:
                rows.append(dict(signal=sig, level=level, hypothesis=f"{hi} > {lo}", n_grounding=None,
                                 n_synthesis=None, median_grounding=None, median_synthesis=None, U=None,
                                 r=None, p=None))
                continue
            u, r, p = one_sided_mwu(x, y)
            med = {hi: float(np.median(x)), lo: float(np.median(y))}
            rows.append(dict(signal=sig, level=level, hypothesis=f"{hi} > {lo}",
                             n_grounding=int(len(x) if hi == "grounding" else len(y)),
                             n_synthesis=int(len(y) if hi == "grounding" else len(x)),
                             median_grounding=med["grounding"], median_synthesis=med["synthesis"],
                             U=u, r=r, p=p))
    return pd.DataFrame(rows)
