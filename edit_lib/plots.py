"""Figures shared by the notebooks (matplotlib/seaborn; every figure's data also goes to the results JSON)."""
from __future__ import annotations

import matplotlib.pyplot as plt  # inline backend in notebooks (figures shown at cell end), Agg when headless
import pandas as pd
import seaborn as sns

sns.set_theme(style="whitegrid", context="notebook")


def gold_distributions(gold: pd.DataFrame):
    """Histogram of gold / M_q per dataset and split (00_data)."""
    names = list(dict.fromkeys(gold["dataset"]))
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.2), squeeze=False)
    for ax, name in zip(axes[0], names):
        sub = gold[gold["dataset"] == name]
        sns.histplot(sub, x="gold_fraction", hue="split", bins=10, binrange=(0, 1), stat="probability",
                     common_norm=False, element="step", ax=ax)
        ax.set_title(name)
        ax.set_xlabel("gold mark / M_q")
    fig.tight_layout()
    return fig


def credit_by_status(by_status: pd.DataFrame):
    """Credit rate per coverage status, greedy vs sampled (01_base_policy)."""
    names = list(dict.fromkeys(by_status["dataset"]))
    fig, axes = plt.subplots(1, len(names), figsize=(4.6 * len(names), 3.4), squeeze=False)
    for ax, name in zip(axes[0], names):
        sub = by_status[by_status["dataset"] == name]
        sns.barplot(sub, x="status", y="credit_rate", hue="decoding", ax=ax)
        ax.set_title(name)
        ax.set_ylim(0, 1)
        ax.set_xlabel("")
        ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    return fig


def mark_error_hist(rollouts: pd.DataFrame):
    """Histogram of sampled mark - gold per dataset (parse failures left out and counted elsewhere)."""
    d = rollouts.dropna(subset=["mark"]).assign(error=lambda x: x["mark"].astype(float) - x["gold"])
    fig, ax = plt.subplots(figsize=(6, 3.2))
    if len(d):
        sns.histplot(d, x="error", hue="dataset", discrete=True, stat="probability", common_norm=False,
                     element="step", ax=ax)
    else:
        ax.text(0.5, 0.5, "no parseable marks", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("sampled mark - gold")
    fig.tight_layout()
    return fig


def belief_trajectories(beliefs: pd.DataFrame, examples: pd.DataFrame | None = None, n_bins: int = 5):
    """Fig. 1 style: the probe's expected mark along the chain. Left: a few example rollouts (m-hat_k - m*);
    right: mean |m-hat_k - m*| / M_q by relative position for correct vs incorrect rollouts."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.6))
    ex = examples if examples is not None else beliefs.head(0)
    for (ds, rid, ro), g in ex.groupby(["dataset", "response_id", "rollout_id"], sort=False):
        g = g.sort_values("k")
        style = "-" if bool(g["correct"].iloc[0]) else "--"
        a.plot(g["k"], g["expected"] - g["gold"], style, marker="o", ms=3,
               label=f"{'correct' if g['correct'].iloc[0] else 'incorrect'} {rid}/{ro}")
    a.axhline(0, color="k", lw=0.8)
    a.set_xlabel("step boundary k")
    a.set_ylabel("expected mark - gold")
    a.set_title("example belief trajectories")
    if len(ex):
        a.legend(fontsize=7)
    d = beliefs.assign(ubin=(beliefs["u"] * n_bins).clip(upper=n_bins - 1e-9).astype(int) / n_bins,
                       rel_eps=beliefs["eps"] / beliefs["max_mark"])
    sns.lineplot(d, x="ubin", y="rel_eps", hue="correct", marker="o", ax=b)
    b.set_xlabel("relative position k/T (binned)")
    b.set_ylabel("|expected - gold| / M_q")
    b.set_title("mean belief error along the chain")
    fig.tight_layout()
    return fig


def delta_eps_hist(beliefs: pd.DataFrame):
    """Distribution of per-step belief shifts delta-eps_k (Eq. 2) for correct vs incorrect rollouts."""
    d = beliefs.dropna(subset=["delta_eps"])
    fig, ax = plt.subplots(figsize=(6, 3.2))
    sns.histplot(d, x="delta_eps", hue="correct", bins=40, stat="probability", common_norm=False,
                 element="step", ax=ax)
    ax.set_xlabel("delta eps_k (positive: step moved belief towards gold)")
    fig.tight_layout()
    return fig


def audit_distributions(audit: pd.DataFrame, signals=("G_a", "G_rho", "G_p", "G_p_tilde")):
    """Fig. 5: distributions of the grounding-audit signals by external step label."""
    d = audit[audit["label"].isin(["grounding", "synthesis"])]
    fig, axes = plt.subplots(1, len(signals), figsize=(3.6 * len(signals), 3.2), squeeze=False)
    for ax, sig in zip(axes[0], signals):
        sns.histplot(d, x=sig, hue="label", bins=40, stat="density", common_norm=False, element="step", ax=ax)
        ax.set_title(sig)
    fig.tight_layout()
    return fig


def prefix_trend(audit: pd.DataFrame, fit):
    """G^p against relative position u with the fitted mu_p(u) of Eq. 4."""
    import numpy as np

    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    ax.scatter(audit["u"], audit["G_p"], s=4, alpha=0.3, label="G^p per step")
    u = np.linspace(0.01, 1, 200)
    ax.plot(u, fit.mu(u), color="C3", lw=2, label="mu_p(u)")
    ax.set_xlabel("u = k/T")
    ax.set_ylabel("G^p")
    ax.legend()
    fig.tight_layout()
    return fig
