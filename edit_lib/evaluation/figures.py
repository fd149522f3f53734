"""Figures of 07-09 (evaluation, rule-faithfulness, significance). Each draws a table the notebook records,
as it is (the convention of ``plots``)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from edit_lib.systems import BASE, BY_NAME


def _label(name: str) -> str:
    return BY_NAME[name].label if name in BY_NAME else name


def metric_by_system(m: pd.DataFrame, metric: str = "qwk"):
    """One panel per (dataset, split): ``metric`` of every system (07's first-seed metrics table, subject
    'all'); seeded systems show each seed as a dot over the first seed's bar."""
    d = m[m["subject"] == "all"]
    panels = list(dict.fromkeys(zip(d["dataset"], d["split"])))
    systems = list(dict.fromkeys(d["system"]))
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(max(4.0, 0.42 * len(systems) + 1.2) * max(1, len(panels)) / 1.6, 3.6),
                             squeeze=False, sharey=True)
    for ax, (ds, split) in zip(axes[0], panels):
        g = d[(d["dataset"] == ds) & (d["split"] == split)]
        names = [s for s in systems if s in set(g["system"])]
        first = [g[g["system"] == s].sort_values("seed", na_position="first")[metric].iloc[0] for s in names]
        x = np.arange(len(names))
        ax.bar(x, first, color="#8da0cb")
        for i, s in enumerate(names):
            seeds = g[(g["system"] == s) & g["seed"].notna()]
            if len(seeds) > 1:
                ax.plot([i] * len(seeds), seeds[metric], "k.", ms=4)
        ax.set_xticks(x, [_label(s) for s in names], rotation=60, ha="right", fontsize=8)
        ax.set_title(f"{ds} / {split}", fontsize=10)
        ax.set_ylabel(metric)
    fig.tight_layout()
    return fig


def rsr_conditions(cond: pd.DataFrame):
    """Table 14 drawn: in-rubric RSR (1 = faithful) and floor rate per edit condition and system."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    edits = list(dict.fromkeys(cond["edit"]))
    systems = list(dict.fromkeys(cond["system"]))
    w = 0.8 / max(1, len(systems))
    for j, s in enumerate(systems):
        g = cond[cond["system"] == s].set_index("edit").reindex(edits)
        x = np.arange(len(edits)) + (j - (len(systems) - 1) / 2) * w
        axes[0].bar(x, g["ib_rsr"], w, label=_label(s))
        axes[1].bar(x, 100 * g["floor_rate"], w, label=_label(s))
    axes[0].axhline(1.0, color="k", lw=0.8, ls="--")
    for ax, title in zip(axes, ("in-rubric RSR (1 = follows the edit)", "floor rate (% predicted 0)")):
        ax.set_xticks(np.arange(len(edits)), edits, rotation=30, fontsize=8)
        ax.set_title(title, fontsize=10)
    axes[1].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def forest(sig: pd.DataFrame, scope_cols=("dataset", "scope")):
    """Table 3 drawn: each system's paired QWK difference vs Base with its bootstrap CI, one panel per scope;
    a filled marker where the Holm-corrected p is below 0.05."""
    d = sig[sig["system"] != BASE]
    scopes = list(dict.fromkeys(zip(*[d[c] for c in scope_cols])))
    fig, axes = plt.subplots(1, max(1, len(scopes)), figsize=(3.6 * max(1, len(scopes)), 0.35 * d["system"].nunique() + 1.6),
                             squeeze=False, sharey=True)
    systems = list(dict.fromkeys(d["system"]))
    for ax, sc in zip(axes[0], scopes):
        g = d[np.logical_and.reduce([d[c] == v for c, v in zip(scope_cols, sc)])].set_index("system")
        for i, s in enumerate(systems):
            if s not in g.index or pd.isna(g.loc[s, "delta"]):
                continue
            r = g.loc[s]
            ax.plot([r["delta_ci_low"], r["delta_ci_high"]], [i, i], color="#4c72b0")
            filled = r["p_holm"] < 0.05
            ax.plot(r["delta"], i, "o", color="#4c72b0", mfc="#4c72b0" if filled else "white")
        ax.axvline(0, color="k", lw=0.8)
        ax.set_yticks(range(len(systems)), [_label(s) for s in systems], fontsize=8)
        ax.set_title(" / ".join(str(v) for v in sc), fontsize=10)
        ax.set_xlabel("QWK difference vs Base")
    fig.tight_layout()
    return fig
