"""Audit validation against external step labels (App. E, Table 9, Fig. 5).

Hypothesised directions: grounding > synthesis for G^a and G^rho; synthesis > grounding for G^p. Each is a
one-sided Mann-Whitney U test with the rank-biserial effect size r = 2 U / (n1 n2) - 1, where U counts the
pairs (x from the hypothesised-larger group, y from the other) with x > y, ties counting one half; so r is the
mean over pairs of sign(x - y), in [-1, 1], positive in the hypothesised direction. The test is run per step
and again on per-rollout means (one mean per rollout and label), which removes within-rollout dependence.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import mannwhitneyu

# signal column -> label expected to be larger (App. E, Table 9)
HYPOTHESES = {"G_a": "grounding", "G_rho": "grounding", "G_p": "synthesis", "G_p_tilde": "synthesis"}


def rank_biserial(larger: np.ndarray, smaller: np.ndarray) -> tuple[float, float]:
    """(U, r): U of the hypothesised-larger sample and the rank-biserial correlation (App. E)."""
    x = np.asarray(larger, dtype=float)
    y = np.asarray(smaller, dtype=float)
    u = mannwhitneyu(x, y, alternative="greater").statistic
    return float(u), float(2.0 * u / (len(x) * len(y)) - 1.0)


def dissociation_table(steps: pd.DataFrame, signals=("G_a", "G_rho", "G_p"), label_col: str = "label",
                       rollout_col: str = "rollout_key") -> pd.DataFrame:
    """Table 9 layout: per signal, medians by label, r and one-sided p, per step and per-rollout means."""
    rows = []
    data = steps[steps[label_col].isin(["grounding", "synthesis"])]
    for sig in signals:
        d = data[np.isfinite(data[sig])]
        hi = HYPOTHESES[sig]
        lo = "synthesis" if hi == "grounding" else "grounding"
        for level, frame in (("step", d), ("rollout mean", d.groupby([rollout_col, label_col], as_index=False)[sig].mean())):
            x = frame.loc[frame[label_col] == hi, sig].to_numpy()
            y = frame.loc[frame[label_col] == lo, sig].to_numpy()
            if len(x) == 0 or len(y) == 0:
                rows.append(dict(signal=sig, level=level, hypothesis=f"{hi} > {lo}", n_grounding=None,
                                 n_synthesis=None, median_grounding=None, median_synthesis=None, U=None,
                                 r=None, p=None))
                continue
            u, r = rank_biserial(x, y)
            p = float(mannwhitneyu(x, y, alternative="greater").pvalue)
            med = {hi: float(np.median(x)), lo: float(np.median(y))}
            rows.append(dict(signal=sig, level=level, hypothesis=f"{hi} > {lo}",
                             n_grounding=int(len(x) if hi == "grounding" else len(y)),
                             n_synthesis=int(len(y) if hi == "grounding" else len(x)),
                             median_grounding=med["grounding"], median_synthesis=med["synthesis"],
                             U=u, r=r, p=p))
    return pd.DataFrame(rows)
