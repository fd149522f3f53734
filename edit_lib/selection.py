"""Candidate step selection (Alg. 1, App. C) and its rival rules (App. F, Table 12).

EDIT-SFT repairs the steps of an incorrect rollout (m != m*) that its internal signals point at:

1. shortlist: steps with delta-eps_j < -tau (Eq. 2), the top-k by most negative delta-eps;
2. re-rank within the shortlist with the grounding audit (Eq. 3-4): steps whose G^rho, G^a and G~^p ALL fall
   below the dataset-wide 25th percentiles are promoted ahead of the others, stably;
3. return the first min(n, |C|) steps.

Rivals (App. F): ``belief_shift_only`` and ``random_matched``; beyond the paper, ``mc_selection``. Input: one
table of steps (``dataset, response_id, rollout_id, k, n_steps, delta_eps, G_rho, G_a, G_p_tilde``).

Departures from the paper and from public code: book/departures.md, section "Step selection (edit_lib/selection.py)".
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from edit_lib.config import SelectionConfig

ROLLOUT = ["dataset", "response_id", "rollout_id"]
SIGNALS = ("G_rho", "G_a", "G_p_tilde")


def dataset_percentiles(steps: pd.DataFrame, q: float = 25.0) -> pd.DataFrame:
    """Dataset-wide q-th percentiles p_25(G^rho), p_25(G^a), p_25(G~^p) (Alg. 1 inputs), one row per dataset,
    over every audited step of the dataset (linear interpolation, numpy's default)."""
    _require(steps, ["dataset", *SIGNALS])
    rows = [dict(dataset=name, **{s: float(np.percentile(g[s].to_numpy(dtype=float), q)) for s in SIGNALS})
            for name, g in steps.groupby("dataset", sort=True)]
    return pd.DataFrame(rows, columns=["dataset", *SIGNALS])


def shortlist(delta_eps: np.ndarray, k: int, tau: float) -> list[int]:
    """Alg. 1 lines 1-2: 0-based indices j with delta_eps_j < -tau, the k most negative first (ties: lower j)."""
    d = np.asarray(delta_eps, dtype=float)
    cand = [j for j in range(len(d)) if np.isfinite(d[j]) and d[j] < -tau]
    cand.sort(key=lambda j: (d[j], j))
    return cand[:k]


def weakly_grounded(g_rho: float, g_a: float, g_p_tilde: float, p25: dict) -> bool:
    """Alg. 1 line 4: w_j = [G^rho_j < p25(G^rho)] and [G^a_j < p25(G^a)] and [G~^p_j < p25(G~^p)]."""
    return bool(g_rho < p25["G_rho"] and g_a < p25["G_a"] and g_p_tilde < p25["G_p_tilde"])


def select_steps(delta_eps, g_rho, g_a, g_p_tilde, p25: dict, params: SelectionConfig,
                 rerank: bool = True) -> list[tuple[int, bool]]:
    """Candidate step selection (Alg. 1) for one rollout: [(0-based step index, w_j)], best first.

    ``rerank=False`` is the belief-shift-only rival (App. F): the shortlist in delta-eps order.
    """
    short = shortlist(delta_eps, params.shortlist_k, params.tie_margin)
    flags = [weakly_grounded(g_rho[j], g_a[j], g_p_tilde[j], p25) for j in short]
    order = list(range(len(short)))
    if rerank:  # stable: promoted steps first, ties keep the delta-eps order (Alg. 1 line 6)
        order.sort(key=lambda i: not flags[i])
    return [(short[i], flags[i]) for i in order][: params.budget_n]


def select_candidates(steps: pd.DataFrame, params: SelectionConfig, rule: str = "edit",
                      percentiles: pd.DataFrame | None = None) -> pd.DataFrame:
    """Alg. 1 (``rule='edit'``) or the belief-shift-only rival over a step table of incorrect rollouts.

    Returns one row per selected step: the rollout ids, ``k`` (1-based), ``n_steps``, ``u = k/T``, ``rank``
    (0 = first candidate), ``delta_eps``, ``weak`` (w_j) and ``rule``. ``percentiles`` defaults to
    ``dataset_percentiles(steps)``; pass the dataset-wide table when ``steps`` holds only a subset.
    """
    if rule not in ("edit", "belief_shift_only"):
        raise ValueError(f"rule must be 'edit' or 'belief_shift_only', got {rule!r} (random: select_random_matched)")
    _require(steps, [*ROLLOUT, "k", "n_steps", "delta_eps", *SIGNALS])
    pct = dataset_percentiles(steps, params.percentile) if percentiles is None else percentiles
    p25 = {r["dataset"]: r for r in pct.to_dict("records")}
    rows = []
    for key, g in steps.sort_values([*ROLLOUT, "k"]).groupby(ROLLOUT, sort=False):
        if key[0] not in p25:
            raise KeyError(f"no percentiles for dataset {key[0]!r}; have {sorted(p25)}")
        picked = select_steps(g["delta_eps"].to_numpy(), g["G_rho"].to_numpy(), g["G_a"].to_numpy(),
                              g["G_p_tilde"].to_numpy(), p25[key[0]], params, rerank=rule == "edit")
        ks, T = g["k"].to_numpy(), int(g["n_steps"].iloc[0])
        for rank, (j, weak) in enumerate(picked):
            rows.append(dict(zip(ROLLOUT, key), k=int(ks[j]), n_steps=T, u=int(ks[j]) / T, rank=rank,
                             delta_eps=float(g["delta_eps"].iloc[j]), weak=weak, rule=rule))
    return pd.DataFrame(rows, columns=[*ROLLOUT, "k", "n_steps", "u", "rank", "delta_eps", "weak", "rule"])


def select_random_matched(steps: pd.DataFrame, reference: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Random rival (App. F): for each rollout EDIT selected steps in, draw as many distinct steps at random with
    relative positions u = k/T matched to EDIT's selected-position distribution of the same dataset.

    Each draw takes a u from that dataset's empirical distribution of EDIT's selected u and maps it to step
    ``k = clip(ceil(u * T), 1, T)``; a step already drawn for the rollout is redrawn (a rollout with fewer
    free steps than needed takes them all). Seeded, so the rival is reproducible.
    """
    _require(reference, [*ROLLOUT, "u", "rank"])
    _require(steps, [*ROLLOUT, "k", "n_steps"])
    rng = np.random.default_rng(seed)
    pool = {name: g["u"].to_numpy(dtype=float) for name, g in reference.groupby("dataset")}
    T_of = steps.groupby(ROLLOUT)["n_steps"].first()
    rows = []
    for key, g in reference.sort_values([*ROLLOUT, "rank"]).groupby(ROLLOUT, sort=False):
        T = int(T_of.loc[key])
        want = min(len(g), T)
        chosen: list[int] = []
        for _ in range(100 * want):
            if len(chosen) == want:
                break
            u = float(rng.choice(pool[key[0]]))
            k = int(min(max(np.ceil(u * T), 1), T))
            if k not in chosen:
                chosen.append(k)
        for k in sorted(set(range(1, T + 1)) - set(chosen))[: want - len(chosen)]:
            chosen.append(k)  # fall back deterministically if the matched draw keeps hitting taken steps
        for rank, k in enumerate(chosen):
            rows.append(dict(zip(ROLLOUT, key), k=k, n_steps=T, u=k / T, rank=rank, rule="random"))
    return pd.DataFrame(rows, columns=[*ROLLOUT, "k", "n_steps", "u", "rank", "rule"])


def mc_selection(steps: pd.DataFrame, mc: pd.DataFrame, params) -> pd.DataFrame:
    """The "Monte-Carlo oracle" selection rule: Alg. 1's shortlist (delta-eps < -tau, top ``shortlist_k`` most
    negative) and budget (first ``budget_n``) with the probe's delta-eps replaced by the Monte-Carlo delta-eps
    of ``signals.montecarlo.mc_beliefs`` (Eq. 2 on the empirical expected mark). There is no grounding re-rank: the rule asks how
    well a step is chosen by the belief shift alone when the belief is measured by sampling, so it is the
    Monte-Carlo twin of App. F's belief-shift-only rival. A step whose shift is NaN (a boundary with no parsed
    continuation) is never selected.

    ``steps``: the step table of the incorrect rollouts 04 repairs (``dataset, response_id, rollout_id, k,
    n_steps``); ``params``: the profile's ``selection`` section (``config.SelectionConfig``).
    Selects in the rollouts present in both tables; ``attrs`` records how many were in one only (compare
    Success@N of the rules on the same rollouts). Output columns follow ``select_candidates``
    (without ``weak``): ``delta_eps`` is the Monte-Carlo shift, ``rule`` = 'mc_oracle'.
    """
    _require(steps, [*ROLLOUT, "k", "n_steps"])
    _require(mc, [*ROLLOUT, "k", "n_steps", "mc_delta_eps"])
    s_keys = set(map(tuple, steps[ROLLOUT].drop_duplicates().to_numpy()))
    m_keys = set(map(tuple, mc[ROLLOUT].drop_duplicates().to_numpy()))
    T_steps = steps.groupby(ROLLOUT)["n_steps"].first()
    rows = []
    for key, g in mc[mc["k"] >= 1].sort_values([*ROLLOUT, "k"]).groupby(ROLLOUT, sort=False):
        if key not in s_keys:
            continue
        T = int(g["n_steps"].iloc[0])
        if int(T_steps.loc[key]) != T or len(g) != T:
            raise ValueError(f"rollout {'/'.join(map(str, key))}: step table has n_steps={T_steps.loc[key]}, "
                             f"Monte-Carlo table n_steps={T} with {len(g)} steps: same rollouts and steps.rule needed")
        d, ks = g["mc_delta_eps"].to_numpy(dtype=float), g["k"].to_numpy()
        for rank, j in enumerate(shortlist(d, params.shortlist_k, params.tie_margin)[: params.budget_n]):
            rows.append(dict(zip(ROLLOUT, key), k=int(ks[j]), n_steps=T, u=int(ks[j]) / T, rank=rank,
                             delta_eps=float(d[j]), rule="mc_oracle"))
    out = pd.DataFrame(rows, columns=[*ROLLOUT, "k", "n_steps", "u", "rank", "delta_eps", "rule"])
    out.attrs.update(rollouts=len(s_keys & m_keys), steps_without_mc=len(s_keys - m_keys),
                     mc_without_steps=len(m_keys - s_keys))
    return out


def _require(df: pd.DataFrame, cols: list[str]) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise KeyError(f"step table lacks column(s) {missing}; it has {list(df.columns)}")


def selection_counts(selected: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and rule (App. F's rivals): the picks, the rollouts with a pick, and those whose picks are
    exactly EDIT's (where the audit's re-rank changed nothing, a comparison with belief-shift-only has no power)."""
    picks = selected.groupby([*ROLLOUT, "rule"])["k"].apply(lambda k: tuple(sorted(k))).unstack("rule")
    counts = selected.groupby(["dataset", "rule"]).agg(picks=("k", "size")).reset_index()
    with_picks, same = [], []
    for r in counts.itertuples():
        p = picks.loc[r.dataset]
        with_picks.append(int(p[r.rule].notna().sum()))
        same.append(int((p[r.rule] == p["edit"]).sum()))
    return counts.assign(rollouts_with_picks=with_picks, same_steps_as_edit=same)
