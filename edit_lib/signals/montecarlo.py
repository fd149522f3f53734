"""Monte-Carlo check of the posterior belief probe: is the probe's belief a real belief? (beyond the paper).

At every boundary k = 0..T of a rollout it samples M continuations of ``grading input + s_1..s_k`` (the outcome
filter's sampler and seeds, App. F: ``belief_check.decoding``), reads the final mark each one reaches and takes
their empirical distribution as a Monte-Carlo estimate of the probe's belief (Eq. 1); a step's shift is Eq. 2 applied
to the empirical expected mark.

* ``mc_beliefs``: one row per (rollout, k) with the empirical distribution, its expected mark, eps and delta-eps;
* ``probe_vs_mc`` / ``compare_with_probe``: agreement with the probe's p_k per boundary and per dataset
  (Jensen-Shannon divergence in nats, expected-mark error, Spearman correlation of the two delta-eps);
* the "Monte-Carlo oracle" rule is ``edit_lib.selection.mc_selection``.

Departures from the paper and from public code:
book/departures.md, section "Monte-Carlo belief check (edit_lib/signals/montecarlo.py)".
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from edit_lib.config import BeliefCheckConfig
from edit_lib.data.schema import Dataset
from edit_lib.model.generate import SamplingConfig, policy_generate
from edit_lib.model.policy import Policy
from edit_lib.prompts.grading import read_final_mark
from edit_lib.segment import segment
from edit_lib.signals.probe_summary import need_columns

KEYS = ["dataset", "response_id", "rollout_id"]
MC_COLUMNS = [*KEYS, "k", "n_steps", "u", "gold", "max_mark", "samples", "n_parsed", "n_unparsed",
              "n_unfinished", "mc_marks", "mc_probs", "mc_expected", "mc_eps", "mc_delta_eps"]


def empirical_belief(marks, max_mark: int) -> tuple[np.ndarray, int, int]:
    """Monte-Carlo counterpart of p_k (Eq. 1): the share of the parsed marks equal to each m in 0..M_q.

    ``marks`` holds one parsed mark per continuation (None where no valid mark was read). Returns (probs,
    n_parsed, n_unparsed); probs is all-NaN when nothing parsed (no distribution to compare)."""
    ok = [int(m) for m in marks if m is not None]
    probs = np.full(int(max_mark) + 1, np.nan)
    if ok:
        probs = np.bincount(ok, minlength=int(max_mark) + 1).astype(np.float64) / len(ok)
    return probs, len(ok), len(marks) - len(ok)


def _eps_and_shift(expected: np.ndarray, gold: float) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 2 on an expected-mark trajectory: eps_k = |E_k - m*|, delta-eps_k = eps_{k-1} - eps_k (NaN at k = 0
    and wherever either side is NaN)."""
    eps = np.abs(np.asarray(expected, dtype=np.float64) - float(gold))
    delta = np.full(len(eps), np.nan)
    delta[1:] = eps[:-1] - eps[1:]
    return eps, delta


def mc_beliefs(policy: Policy, datasets: dict[str, Dataset], rollouts: pd.DataFrame, cfg: BeliefCheckConfig,
               rule: str = "auto", max_new_tokens: int = 256, batch_size: int = 32, seed: int = 0,
               progress: bool = True) -> pd.DataFrame:
    """Empirical belief over the final mark at every boundary k = 0..T (the Monte-Carlo check of Eq. 1-2).

    For each rollout (``dataset, response_id, rollout_id, text``; ``n_steps`` checked when present) and each k,
    ``M = cfg.samples`` continuations of ``policy.grading_input(q, answer) + text[:bounds[k]]`` (steps cut by
    ``rule``, the probe's ``steps.rule``) are sampled as ``cfg.decoding`` says (the outcome filter's sampler, App.
    F; its budget, or ``max_new_tokens`` where it is 0) under ``seed`` through ``generate``, all prompts in one
    call (``batch_size`` sequences per generate batch). Each continuation's last "Final mark: m" is read with
    ``read_final_mark`` (the prefix never holds the final-mark line: segmentation stops before it).

    One row per (rollout, k): ``samples`` (M), ``n_parsed``, ``n_unparsed``, ``n_unfinished`` (hit
    ``max_new_tokens``), ``mc_marks`` (parsed marks, None if unparsed), ``mc_probs`` (empirical p_k over
    0..M_q from parsed marks only; NaN if none parsed), ``mc_expected``, ``mc_eps`` = |E - m*| and
    ``mc_delta_eps`` (Eq. 2 on the empirical expected mark; NaN at k = 0 or next to an unparsed boundary).
    """
    if cfg.samples < 1:
        raise ValueError(f"belief_check.samples (M) must be >= 1, got {cfg.samples}")
    need_columns(rollouts, [*KEYS, "text"], "mc_beliefs (rollout table)")
    index = {name: {r.id: r for r in ds.responses} for name, ds in datasets.items()}
    prompts, meta = [], []
    for i, rec in enumerate(rollouts.to_dict("records")):
        where = f"rollout row {i} ({rec['dataset']}/{rec['response_id']}/{rec['rollout_id']})"
        if rec["dataset"] not in index or rec["response_id"] not in index[rec["dataset"]]:
            raise KeyError(f"{where}: no such dataset/response in `datasets` (have {sorted(index)})")
        r = index[rec["dataset"]][rec["response_id"]]
        q = datasets[rec["dataset"]].question(r)
        bounds = segment(rec["text"], rule).bounds
        T = len(bounds) - 1
        if "n_steps" in rec and int(rec["n_steps"]) != T:
            raise ValueError(f"{where}: field n_steps = {rec['n_steps']} but steps.rule={rule!r} cuts {T} steps; "
                             "use the rule the rollouts were segmented with")
        head = policy.grading_input(q, r.answer)
        for k in range(T + 1):
            prompts.append(head + rec["text"][:bounds[k]])
            meta.append(dict(dataset=rec["dataset"], response_id=rec["response_id"],
                             rollout_id=int(rec["rollout_id"]), k=k, n_steps=T, u=k / max(T, 1),
                             gold=int(r.gold), max_mark=int(q.max_mark)))
    if not prompts:
        return pd.DataFrame(columns=MC_COLUMNS)
    M = int(cfg.samples)
    sampler = SamplingConfig.of(cfg.decoding, n=M, max_new_tokens=cfg.decoding.max_new_tokens or max_new_tokens,
                                seed=seed, batch_size=batch_size)
    gen = policy_generate(policy, prompts, sampler, progress=progress)
    rows = []
    for i, g in gen.groupby("prompt_index", sort=True):
        if len(g) != M:  # generate returns n rows per prompt; anything else is a bug upstream
            raise RuntimeError(f"boundary prompt {i}: {len(g)} continuations, expected M = {M}")
        m = meta[int(i)]
        marks = [read_final_mark(t, m["max_mark"]).mark for t in g["text"]]
        probs, n_ok, n_bad = empirical_belief(marks, m["max_mark"])
        rows.append(dict(**m, samples=M, n_parsed=n_ok, n_unparsed=n_bad,
                         n_unfinished=int((~g["finished"].astype(bool)).sum()), mc_marks=marks,
                         mc_probs=probs.tolist(), mc_expected=float(probs @ np.arange(len(probs)))))
    if len(rows) != len(meta):
        raise RuntimeError(f"generate returned {len(rows)} of {len(meta)} boundary prompts")
    out = pd.DataFrame(rows)
    out["mc_eps"], out["mc_delta_eps"] = np.nan, np.nan
    for _, idx in out.groupby(KEYS, sort=False).groups.items():
        part = out.loc[idx].sort_values("k")
        eps, delta = _eps_and_shift(part["mc_expected"].to_numpy(), part["gold"].iloc[0])
        out.loc[part.index, "mc_eps"], out.loc[part.index, "mc_delta_eps"] = eps, delta
    return out[MC_COLUMNS]


def jensen_shannon(p, q) -> float:
    """Jensen-Shannon divergence in nats (natural log; at most ln 2):
    JSD(p, q) = KL(p || a) / 2 + KL(q || a) / 2 with a = (p + q) / 2 and 0 log 0 = 0.
    (scipy's ``jensenshannon`` returns the square root of this, the JS distance.)"""
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    if p.shape != q.shape or p.ndim != 1:
        raise ValueError(f"distributions over different supports: shapes {p.shape} and {q.shape}")
    if (p < 0).any() or (q < 0).any() or not (np.isclose(p.sum(), 1) and np.isclose(q.sum(), 1)):
        raise ValueError(f"not probability vectors: {p.tolist()} / {q.tolist()}")
    a = (p + q) / 2

    def kl(x):
        nz = x > 0
        return float(np.sum(x[nz] * np.log(x[nz] / a[nz])))
    return 0.5 * kl(p) + 0.5 * kl(q)


def probe_vs_mc(beliefs: pd.DataFrame, mc: pd.DataFrame) -> pd.DataFrame:
    """Per boundary (the figure's table): the probe's p_k (Eq. 1, ``tables.probe_table``) against the empirical
    belief of ``mc_beliefs``: ``probe_expected``, ``mc_expected``, ``abs_expected_diff``, ``jsd`` (nats; NaN
    where no continuation parsed), ``probe_delta_eps`` and ``mc_delta_eps`` (Eq. 2). Every boundary of ``mc``
    must have been probed; probed boundaries without Monte-Carlo samples are not in the table."""
    need_columns(beliefs, [*KEYS, "k", "n_steps", "probs", "expected", "delta_eps"], "probe_vs_mc (probe table)")
    need_columns(mc, [*KEYS, "k", "n_steps", "mc_probs", "mc_expected", "mc_delta_eps", "n_parsed"],
                 "probe_vs_mc (mc)")
    probe = beliefs[[*KEYS, "k", "n_steps", "probs", "expected", "delta_eps"]].rename(
        columns={"n_steps": "probe_n_steps", "expected": "probe_expected", "delta_eps": "probe_delta_eps"})
    t = mc.merge(probe, on=[*KEYS, "k"], how="left", validate="one_to_one", indicator=True)
    lost = t[t["_merge"] != "both"]
    if len(lost):
        r = lost.iloc[0]
        raise ValueError(f"{len(lost)} Monte-Carlo boundaries have no probe row, e.g. "
                         f"{r['dataset']}/{r['response_id']}/{r['rollout_id']} k={r['k']}: probe those rollouts")
    bad = t[t["probe_n_steps"] != t["n_steps"]]
    if len(bad):
        r = bad.iloc[0]
        raise ValueError(f"rollout {r['dataset']}/{r['response_id']}/{r['rollout_id']}: the probe cut "
                         f"{r['probe_n_steps']} steps, the Monte-Carlo check {r['n_steps']}: same steps.rule needed")
    t["jsd"] = [jensen_shannon(p, q) if n >= 1 else np.nan
                for p, q, n in zip(t["probs"], t["mc_probs"], t["n_parsed"])]
    t["abs_expected_diff"] = (t["probe_expected"] - t["mc_expected"]).abs()
    cols = [*KEYS, "k", "n_steps", "u", "gold", "n_parsed", "probe_expected", "mc_expected", "abs_expected_diff",
            "jsd", "probe_delta_eps", "mc_delta_eps"]
    return t[[c for c in cols if c in t.columns]].reset_index(drop=True)


def rank_correlation(x, y) -> tuple[float, float, int, str]:
    """Spearman's rho of two paired samples (``scipy.stats.spearmanr``, ties at average rank) over the pairs where
    both are finite: (rho, p-value, n used, note). NaN with the reason in ``note`` when fewer than 3 pairs or when
    one side is constant (rank correlation undefined)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y, n = x[ok], y[ok], int(ok.sum())
    if n < 3:
        return np.nan, np.nan, n, f"fewer than 3 steps ({n})"
    for v, name in ((x, "probe"), (y, "Monte-Carlo")):
        if np.all(v == v[0]):
            return np.nan, np.nan, n, f"constant {name} delta-eps"
    res = spearmanr(x, y)
    return float(res.statistic), float(res.pvalue), n, ""


def compare_with_probe(beliefs: pd.DataFrame, mc: pd.DataFrame) -> pd.DataFrame:
    """Agreement of the probe (Eq. 1-2) with the Monte-Carlo belief, per dataset: ``rollouts``, ``boundaries``,
    ``boundaries_used`` (at least one parsed continuation), ``unparsed_share`` of all continuations,
    ``jsd_mean`` / ``jsd_median`` (Jensen-Shannon divergence, natural log, in [0, ln 2]),
    ``abs_expected_diff_mean`` (marks), and over steps k >= 1 with both shifts defined ``steps_used``,
    ``spearman_rho`` / ``spearman_p`` of the probe's delta-eps against the Monte-Carlo delta-eps and
    ``spearman_note`` (why rho is NaN, else empty)."""
    t = probe_vs_mc(beliefs, mc)
    samples = mc.groupby("dataset")[["n_parsed", "n_unparsed"]].sum()
    rows = []
    for name, g in t.groupby("dataset", sort=True):
        used = g[g["n_parsed"] >= 1]
        steps = g[g["k"] >= 1]
        rho, p, n, note = rank_correlation(steps["probe_delta_eps"], steps["mc_delta_eps"])
        s = samples.loc[name]
        rows.append(dict(dataset=name, rollouts=int(g[KEYS].drop_duplicates().shape[0]), boundaries=len(g),
                         boundaries_used=len(used),
                         unparsed_share=float(s["n_unparsed"] / max(s["n_parsed"] + s["n_unparsed"], 1)),
                         jsd_mean=float(used["jsd"].mean()), jsd_median=float(used["jsd"].median()),
                         abs_expected_diff_mean=float(used["abs_expected_diff"].mean()), steps_used=n,
                         spearman_rho=rho, spearman_p=p, spearman_note=note))
    return pd.DataFrame(rows, columns=["dataset", "rollouts", "boundaries", "boundaries_used", "unparsed_share",
                                       "jsd_mean", "jsd_median", "abs_expected_diff_mean", "steps_used",
                                       "spearman_rho", "spearman_p", "spearman_note"])
