"""Figures shared by the notebooks (matplotlib/seaborn; every figure's data also goes to the results JSON)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # headless under papermill; notebooks still display the returned figure
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

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
    sns.histplot(d, x="error", hue="dataset", discrete=True, stat="probability", common_norm=False,
                 element="step", ax=ax)
    ax.set_xlabel("sampled mark - gold")
    fig.tight_layout()
    return fig
