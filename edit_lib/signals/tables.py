"""Run the probe (Eq. 1-2) and the audit (Eq. 3-4) over a rollout table; tidy per-boundary / per-step tables.

Both read rollouts from 01_base_policy (ids ``dataset, response_id, rollout_id``) and return long tables keyed
by those ids plus the boundary ``k`` (probe, k = 0..T) or the step ``k`` (audit, k = 1..T); ``n_steps`` is T
(not a column named "T", which pandas would shadow with the transpose).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ..config import AuditConfig, ProbeConfig
from ..data.schema import Dataset
from ..policy import Policy
from .grounding import audit_rollouts, fit_prefix_residualiser
from .inputs import masked_contexts, probe_scaffold, rollout_tokens

KEYS = ["dataset", "response_id", "rollout_id"]


def select_rollouts(rollouts: pd.DataFrame, max_rollouts: int, seed: int = 0) -> pd.DataFrame:
    """Rollouts with at least one step; at most ``max_rollouts`` (0 = all), half incorrect and half correct
    where both classes have enough (the shortfall of one is filled from the other), seeded and sorted by id."""
    r = rollouts[rollouts["n_steps"] > 0]
    if max_rollouts and len(r) > max_rollouts:
        shuffled = r.sample(frac=1.0, random_state=seed)
        wrong, right = shuffled[~shuffled["correct"]], shuffled[shuffled["correct"]]
        n_wrong = min(len(wrong), max(max_rollouts // 2, max_rollouts - len(right)))
        r = pd.concat([wrong.head(n_wrong), right.head(max_rollouts - n_wrong)])
    return r.sort_values(KEYS).reset_index(drop=True)


def probe_table(policy: Policy, datasets: dict[str, Dataset], rollouts: pd.DataFrame, cfg: ProbeConfig,
                progress: bool = True) -> pd.DataFrame:
    """Posterior belief at every step boundary (Eq. 1-2): one row per (rollout, k) with ``expected`` (m-hat_k),
    ``eps``, ``delta_eps`` (NaN at k = 0), ``argmax`` and ``probs`` (p_k over 0..M_q)."""
    from .probe import probe_rollouts

    rows = []
    recs = rollouts.to_dict("records")
    index = _index(datasets)
    scaffolds: dict[int, tuple] = {}
    bar = tqdm(total=len(recs), disable=not progress, desc="probe")
    for i in range(0, len(recs), cfg.batch_size):
        chunk = recs[i:i + cfg.batch_size]
        prompts, steps, scs, mks, golds = [], [], [], [], []
        for rec in chunk:
            ds = datasets[rec["dataset"]]
            r = index[rec["dataset"]][rec["response_id"]]
            q = ds.question(r)
            toks = rollout_tokens(policy, policy.grading_input(q, r.answer), rec["text"])
            if q.max_mark not in scaffolds:
                scaffolds[q.max_mark] = probe_scaffold(policy, cfg.scaffold, cfg.terminator, q.max_mark)
            sc, mk = scaffolds[q.max_mark]
            prompts.append(toks.prompt_ids)
            steps.append(toks.steps_ids)
            scs.append(sc)
            mks.append(mk)
            golds.append(r.gold)
        results = probe_rollouts(policy.model, prompts, steps, scs, mks, gold=golds, temperature=cfg.temperature,
                                 batch_size=cfg.batch_size)
        for rec, res in zip(chunk, results):
            T = res.n_steps
            for k in range(T + 1):
                rows.append(dict(dataset=rec["dataset"], response_id=rec["response_id"],
                                 rollout_id=int(rec["rollout_id"]), k=k, n_steps=T, u=k / max(T, 1),
                                 expected=float(res.expected[k]), eps=float(res.eps[k]),
                                 delta_eps=float(res.delta_eps[k - 1]) if k else np.nan,
                                 argmax=int(np.argmax(res.probs[k])), p_max=float(res.probs[k].max()),
                                 gold=int(res.gold), probs=res.probs[k].tolist()))
        bar.update(len(chunk))
    bar.close()
    return pd.DataFrame(rows)


def _index(datasets: dict[str, Dataset]) -> dict[str, dict]:
    return {name: {r.id: r for r in ds.responses} for name, ds in datasets.items()}


def audit_table(policy: Policy, datasets: dict[str, Dataset], rollouts: pd.DataFrame, cfg: AuditConfig,
                progress: bool = True) -> pd.DataFrame:
    """Mask-based grounding audit (Eq. 3): one row per (rollout, step k) with G_rho, G_a, G_p, the step NLLs
    and the relative position u = k/T; ``add_residual`` adds G~^p (Eq. 4)."""
    rows = []
    recs = rollouts.to_dict("records")
    index = _index(datasets)
    bar = tqdm(total=len(recs), disable=not progress, desc="audit")
    for i in range(0, len(recs), cfg.batch_size):
        chunk = recs[i:i + cfg.batch_size]
        cf, cr, ca, st, texts = [], [], [], [], []
        for rec in chunk:
            ds = datasets[rec["dataset"]]
            r = index[rec["dataset"]][rec["response_id"]]
            q = ds.question(r)
            toks = rollout_tokens(policy, policy.grading_input(q, r.answer), rec["text"])
            rho, ans = masked_contexts(policy, q, r.answer)  # the full context is toks.prompt_ids
            for acc, item in ((cf, toks.prompt_ids), (cr, rho), (ca, ans), (st, toks.steps_ids),
                              (texts, list(rec["steps"]))):
                acc.append(item)
        results = audit_rollouts(policy.model, cf, cr, ca, st, reduction=cfg.nll_reduction,
                                 batch_size=cfg.batch_size)
        for rec, res, step_texts in zip(chunk, results, texts):
            T = len(res.n_tokens)
            for k in range(T):
                rows.append(dict(dataset=rec["dataset"], response_id=rec["response_id"],
                                 rollout_id=int(rec["rollout_id"]), k=k + 1, n_steps=T, u=(k + 1) / T,
                                 step=step_texts[k] if k < len(step_texts) else "",
                                 n_tokens=int(res.n_tokens[k]),
                                 nll_full=float(res.step_loss("full")[k]),
                                 G_rho=float(res.G_rho[k]), G_a=float(res.G_a[k]), G_p=float(res.G_p[k]),
                                 correct=bool(rec["correct"])))
        bar.update(len(chunk))
    bar.close()
    return pd.DataFrame(rows)


def add_residual(audit: pd.DataFrame, cfg: AuditConfig):
    """Adds ``G_p_tilde`` = G^p - mu_p(u) (Eq. 4), mu_p fitted on this table; returns (table, fit)."""
    fit = fit_prefix_residualiser(audit["G_p"].to_numpy(), audit["u"].to_numpy(), method=cfg.residual_method,
                                  n_bins=cfg.residual_bins, bandwidth=cfg.residual_bandwidth)
    out = audit.copy()
    out["G_p_tilde"] = fit.transform(out["G_p"].to_numpy(), out["u"].to_numpy())
    return out, fit
