"""The summaries notebook 03 records: step labels, mu_p per dataset (Eq. 4), the audit distributions by label
(Figure 5) and Table 11 (App. E: the one-sided tests against external step labels) under both NLL reductions of
Eq. 3, all from one audit table.

Each returns a tidy DataFrame that the notebook records as is; the figures in ``edit_lib.plots`` draw these
tables, never the raw steps.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd
from scipy.stats import mannwhitneyu

from edit_lib.config import AuditConfig
from edit_lib.signals.grounding import PrefixResidualiser
from edit_lib.signals.tables import KEYS, add_residual, with_supports


SIGNALS = ("G_a", "G_rho", "G_p", "G_p_tilde")
LABELS = ("grounding", "synthesis")  # the two step labels of App. E


def annotate(audit: pd.DataFrame, annotator: Callable[[str], str | None] | None) -> pd.DataFrame:
    """Copy of the audit with ``label`` (the annotator's label of each step text; None = unlabelled, every step
    when ``annotator`` is None, ``analysis.step_annotator: none``) and ``rollout_key`` (one id per rollout, for the
    per-rollout means of Table 11)."""
    out = audit.copy()
    out["label"] = out["step"].map(annotator) if annotator is not None else None
    out["rollout_key"] = out[KEYS].astype(str).agg("/".join, axis=1)
    return out


def label_counts(audit: pd.DataFrame, label_col: str = "label") -> pd.DataFrame:
    """Steps per dataset and label (missing label: ``unlabelled``) and their share within the dataset."""
    d = audit.assign(_label=audit[label_col].fillna("unlabelled"))
    out = d.groupby(["dataset", "_label"], sort=True).size().rename("steps").reset_index()
    out = out.rename(columns={"_label": "label"})
    out["share"] = out["steps"] / out.groupby("dataset")["steps"].transform("sum")
    return out


def mu_p_table(fits: dict[str, PrefixResidualiser]) -> pd.DataFrame:
    """mu_p (Eq. 4) of each dataset at every observed u = k/T: ``n`` steps there, their ``mean_G_p``, the
    ``mu_p`` used and its ``source`` ('mean' = the conditional mean, 'kernel' = the smoother, where fewer than
    ``min_count`` steps share u or the method is 'kernel'; 'bins' for the bin method)."""
    rows = []
    for name, fit in fits.items():
        mu = fit.mu(fit.u_values)
        if fit.method == "exact":
            source = np.where(fit.uses_mean(fit.u_values), "mean", "kernel")
        else:
            source = np.full(len(mu), fit.method)
        rows.append(pd.DataFrame(dict(dataset=name, u=fit.u_values, n=fit.counts, mean_G_p=fit.means, mu_p=mu,
                                      source=source)))
    cols = ["dataset", "u", "n", "mean_G_p", "mu_p", "source"]
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=cols)


def _labelled(audit: pd.DataFrame, label_col: str) -> pd.DataFrame:
    return audit[audit[label_col].isin(LABELS)]


def distribution_summary(audit: pd.DataFrame, signals=SIGNALS, label_col: str = "label") -> pd.DataFrame:
    """Figure 5 in numbers: per label and signal, n (finite steps), mean, sd and the quartiles."""
    rows = []
    d = _labelled(audit, label_col)
    for sig in signals:
        for lab in LABELS:
            x = d.loc[d[label_col] == lab, sig].to_numpy(np.float64)
            x = x[np.isfinite(x)]
            q = np.quantile(x, [0, 0.25, 0.5, 0.75, 1]) if len(x) else [np.nan] * 5
            rows.append(dict(signal=sig, label=lab, n=len(x), mean=float(x.mean()) if len(x) else np.nan,
                             sd=float(x.std(ddof=1)) if len(x) > 1 else np.nan,
                             min=q[0], q25=q[1], median=q[2], q75=q[3], max=q[4]))
    return pd.DataFrame(rows)


def distribution_histogram(audit: pd.DataFrame, signals=SIGNALS, bins: int = 40,
                           label_col: str = "label") -> pd.DataFrame:
    """Figure 5's data: per signal, ``bins`` equal-width bins over the finite values of both labels, and per
    label the step ``count`` and ``density`` (count / (n_label * width), so each label integrates to 1)."""
    rows = []
    d = _labelled(audit, label_col)
    for sig in signals:
        vals = d[sig].to_numpy(np.float64)
        fin = vals[np.isfinite(vals)]
        if not len(fin):
            continue
        edges = np.histogram_bin_edges(fin, bins=bins)
        for lab in LABELS:
            x = d.loc[d[label_col] == lab, sig].to_numpy(np.float64)
            x = x[np.isfinite(x)]
            counts, _ = np.histogram(x, bins=edges)
            dens = counts / (len(x) * np.diff(edges)) if len(x) else np.zeros(len(counts))
            rows.append(pd.DataFrame(dict(signal=sig, label=lab, bin_left=edges[:-1], bin_right=edges[1:],
                                          count=counts, density=dens)))
    cols = ["signal", "label", "bin_left", "bin_right", "count", "density"]
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=cols)


def table11(audit: pd.DataFrame, cfg: AuditConfig, reductions=("sum", "mean"), signals=SIGNALS,
            label_col: str = "label") -> pd.DataFrame:
    """Table 11 (App. E) under each NLL reduction of Eq. 3, from ONE audit pass: G recomputed from the summed
    step NLLs (``with_supports``), mu_p refitted per dataset (Eq. 4), then ``dissociation_table``; a
    ``reduction`` column labels the rows."""
    out = []
    for red in reductions:
        steps, _ = add_residual(with_supports(audit, red), cfg)
        t = dissociation_table(steps, signals=signals, label_col=label_col)
        t.insert(0, "reduction", red)
        out.append(t)
    return pd.concat(out, ignore_index=True)


# ------------------------------------------------------------------ validation against step labels (App. E, Table 11)
# Hypothesised directions: grounding > synthesis for G^a and G^rho, synthesis > grounding for G^p. Each is a
# one-sided Mann-Whitney U test with the rank-biserial r = 2 U / (n1 n2) - 1 (U counts the pairs, x from the
# hypothesised-larger group, with x > y, ties one half: r is the mean of sign(x - y), positive in the hypothesised
# direction). p is scipy's ``mannwhitneyu(alternative="greater")`` with its default method (exact for small samples
# without ties, else normal with tie correction), per step and again on per-rollout means (no within-rollout
# dependence).

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
