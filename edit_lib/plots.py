"""Figures of the notebooks, 00-09 (matplotlib/seaborn; every figure's data also goes to the results JSON).

A figure draws the table the notebook records, as it is: binning and counting happen in the function that
makes the table (e.g. `data.stats.gold_histogram`, `rollouts.mark_error_counts`), never in here.
"""
from __future__ import annotations

import matplotlib.pyplot as plt  # inline backend in notebooks (figures shown at cell end), Agg when headless
import numpy as np
import pandas as pd
import seaborn as sns

from edit_lib.systems import BASE, label

sns.set_theme(style="whitegrid", context="notebook")


def gold_distributions(hist: pd.DataFrame):
    """Share of responses per gold / M_q bin, per dataset and split (00_data); ``hist`` is
    `data.stats.gold_histogram` output (columns dataset, split, lo, hi, share)."""
    return _stairs_per_dataset(hist, "split", "gold mark / M_q", "share of split", sort=False)


def _per_dataset(df: pd.DataFrame, width: float, height: float, draw, empty_ok: bool = True):
    """One panel per dataset of ``df`` (first-seen order), ``width`` x ``height`` each: ``draw(ax, its rows)``,
    titled with its name. No dataset: one empty panel, or matplotlib's error when not ``empty_ok``."""
    names = list(dict.fromkeys(df["dataset"]))
    n = max(1, len(names)) if empty_ok else len(names)
    fig, axes = plt.subplots(1, n, figsize=(width * n, height), squeeze=False)
    for ax, name in zip(axes[0], names):
        draw(ax, df[df["dataset"] == name])
        ax.set_title(name)
    fig.tight_layout()
    return fig


def _stairs_per_dataset(hist: pd.DataFrame, by: str, xlabel: str, ylabel: str, sort: bool):
    """One panel per dataset, one stairs line per value of ``by``, drawn from a recorded histogram table
    (columns dataset, ``by``, lo, hi, share)."""
    def draw(ax, sub):
        for key, g in sub.groupby(by, sort=sort):
            g = g.sort_values("lo")
            ax.stairs(g["share"].to_numpy(), np.r_[g["lo"].to_numpy(), g["hi"].iloc[-1]], label=key)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
    return _per_dataset(hist, 4.3, 3.2, draw)


def credit_by_status(by_status: pd.DataFrame):
    """Credit rate per coverage status, greedy vs sampled (01_base_policy)."""
    def draw(ax, sub):
        sns.barplot(sub, x="status", y="credit_rate", hue="decoding", ax=ax)
        ax.set_ylim(0, 1)
        ax.set_xlabel("")
        ax.tick_params(axis="x", rotation=30)
    return _per_dataset(by_status, 4.6, 3.4, draw, empty_ok=False)


def mark_error_hist(errors: pd.DataFrame):
    """Share of sampled marks at each distance mark - gold, per dataset (01_base_policy); ``errors`` is
    `rollouts.mark_error_counts` output (columns dataset, error, share; parse failures are counted elsewhere)."""
    fig, ax = plt.subplots(figsize=(6, 3.2))
    if len(errors):
        lo, hi = int(errors["error"].min()), int(errors["error"].max())
        for name, g in errors.groupby("dataset", sort=False):
            share = g.set_index("error")["share"].reindex(range(lo, hi + 1), fill_value=0.0)
            ax.stairs(share.to_numpy(), np.arange(lo - 0.5, hi + 1.0), label=name)
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no parseable marks", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("sampled mark - gold")
    ax.set_ylabel("share of parsed rollouts")
    fig.tight_layout()
    return fig


def belief_trajectories(trajectory: pd.DataFrame, examples: pd.DataFrame | None = None):
    """Fig. 1 style: the probe's expected mark along the chain (Eq. 1-2). Left: a few example rollouts
    (m-hat_k - m* per boundary k); right: the recorded ``probe_summary.trajectory_by_position`` table, mean
    |m-hat_k - m*| / M_q per position bin, one line per dataset (solid: correct rollouts, dashed: incorrect)."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.6))
    ex = examples if examples is not None else pd.DataFrame(columns=["dataset", "response_id", "rollout_id"])
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
    colours = {name: f"C{i}" for i, name in enumerate(dict.fromkeys(trajectory["dataset"]))}
    for (name, correct), g in trajectory.groupby(["dataset", "correct"], sort=False):
        g = g.sort_values("u_mid")
        b.plot(g["u_mid"], g["mean_rel_eps"], "-" if correct else "--", marker="o", color=colours[name],
               label=f"{name} {'correct' if correct else 'incorrect'}")
    if len(trajectory):
        b.legend(fontsize=7)
    b.set_xlabel("relative position k/T (bin centre)")
    b.set_ylabel("|expected - gold| / M_q")
    b.set_title("mean belief error along the chain")
    fig.tight_layout()
    return fig


def delta_eps_hist(hist: pd.DataFrame, width: float = 0.1):
    """Distribution of per-step belief shifts delta-eps_k (Eq. 2) for correct vs incorrect rollouts: draws the
    recorded ``probe_summary.delta_eps_histogram`` table (bins of ``width``, share within each group)."""
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for correct, g in hist.groupby("correct", sort=True):
        lo, hi = (int(round(x / width)) for x in (g["bin"].min(), g["bin"].max()))
        share = g.assign(i=np.round(g["bin"] / width).astype(int)).set_index("i")["share"]
        share = share.reindex(range(lo, hi + 1), fill_value=0.0)
        ax.stairs(share.to_numpy(), (np.arange(lo, hi + 2) - 0.5) * width,
                  label="correct" if correct else "incorrect")
    if len(hist):
        ax.legend(fontsize=8)
    ax.set_xlabel("delta eps_k (positive: step moved belief towards gold)")
    ax.set_ylabel("share of steps")
    fig.tight_layout()
    return fig


def audit_distributions(hist: pd.DataFrame):
    """Figure 5: distributions of the grounding-audit signals by external step label, drawn from the recorded
    histogram table of ``edit_lib.signals.audit_summary.distribution_histogram`` (one panel per signal)."""
    signals = list(dict.fromkeys(hist["signal"]))
    fig, axes = plt.subplots(1, max(len(signals), 1), figsize=(3.6 * max(len(signals), 1), 3.2), squeeze=False)
    for ax, sig in zip(axes[0], signals):
        for i, (lab, g) in enumerate(hist[hist["signal"] == sig].groupby("label", sort=True)):
            ax.stairs(g["density"].to_numpy(), [*g["bin_left"], g["bin_right"].iloc[-1]], color=f"C{i}", label=lab)
        ax.set_title(sig)
        ax.set_ylabel("density")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def prefix_trend(mu_table: pd.DataFrame):
    """mu_p(u) of Eq. 4 per dataset, drawn from the recorded ``audit_summary.mu_p_table``: the mean G^p at each
    observed u = k/T (dots, size ~ steps there) and the mu_p used (line; hollow markers where the kernel
    fallback replaced a sparse mean)."""
    fig, ax = plt.subplots(figsize=(6, 3.4))
    for i, (name, g) in enumerate(mu_table.groupby("dataset", sort=False)):
        g = g.sort_values("u")
        c = f"C{i}"
        ax.scatter(g["u"], g["mean_G_p"], s=6 + 40 * g["n"] / max(mu_table["n"].max(), 1), color=c, alpha=0.35)
        ax.plot(g["u"], g["mu_p"], color=c, lw=1.5, label=name)
        fb = g[g["source"] == "kernel"]
        ax.scatter(fb["u"], fb["mu_p"], s=18, facecolors="none", edgecolors=c)
    ax.set_xlabel("u = k/T")
    ax.set_ylabel("G^p")
    ax.set_title("mu_p(u) per dataset (hollow: kernel fallback)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def repair_rates(table: pd.DataFrame):
    """Success@N and Retention per selection rule and dataset (04, App. F Table 12 layout); ``table`` has
    columns dataset, rule, success_at_n, retention."""
    def draw(ax, sub):
        sns.barplot(sub, x="measure", y="value", hue="rule", ax=ax)
        ax.set_ylim(0, 1)
        ax.set_xlabel("")
        ax.legend(fontsize=8)
    long = table.melt(id_vars=["dataset", "rule"], value_vars=["success_at_n", "retention"], var_name="measure")
    return _per_dataset(long, 4.4, 3.4, draw, empty_ok=False)


def selected_positions(hist: pd.DataFrame):
    """Share of each rule's selected steps per relative-position bin u = k/T (04, Figure 4 analogue); ``hist``
    is `revision.pool.position_histogram` output."""
    return _stairs_per_dataset(hist, "rule", "relative position u = k/T", "share of selected steps", sort=True)


def warmup_heldout_curve(curve: pd.DataFrame):
    """Held-out QWK and parse share of the cpu-real warm-up against its optimiser steps (01)."""
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    ax.plot(curve["step"], curve["qwk"], marker="o", label="QWK (held-out training answers)")
    ax.plot(curve["step"], 1 - curve["n_invalid"] / curve["n"].clip(lower=1), marker="s", ls="--",
            label="share parsed")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("warm-up optimiser step")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def sft_loss_curves(curves: pd.DataFrame):
    """Training loss per optimiser step of every SFT adapter (05); ``curves`` has columns system, dataset,
    step, loss. One panel per dataset, one line per system."""
    def draw(ax, sub):
        sns.lineplot(sub, x="step", y="loss", hue="system", marker="o", ax=ax)
        ax.set_xlabel("optimiser step")
        ax.legend(fontsize=8)
    return _per_dataset(curves, 4.4, 3.2, draw)


# ------------------------------------------------------------------ 07-09: evaluation, rule-faithfulness, significance

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
        ax.set_xticks(x, [label(s) for s in names], rotation=60, ha="right", fontsize=8)
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
        axes[0].bar(x, g["ib_rsr"], w, label=label(s))
        axes[1].bar(x, 100 * g["floor_rate"], w, label=label(s))
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
        ax.set_yticks(range(len(systems)), [label(s) for s in systems], fontsize=8)
        ax.set_title(" / ".join(str(v) for v in sc), fontsize=10)
        ax.set_xlabel("QWK difference vs Base")
    fig.tight_layout()
    return fig
