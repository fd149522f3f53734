"""Run the probe (Eq. 1-2) and the audit (Eq. 3-4) over a rollout table; tidy per-boundary / per-step tables.

Both read rollouts from 01_base_policy (ids ``dataset, response_id, rollout_id``) and return long tables keyed
by those ids plus the boundary ``k`` (probe, k = 0..T) or the step ``k`` (audit, k = 1..T); ``n_steps`` is T
(not a column named "T", which pandas would shadow with the transpose).
"""
from __future__ import annotations

import dataclasses
from functools import partial

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from edit_lib.config import AuditConfig, ProbeConfig
from edit_lib.data.schema import Dataset
from edit_lib.model.parallel import forward_reads, reads_on_engine
from edit_lib.model.policy import Policy
from edit_lib.signals.grounding import VARIANTS, audit_rollouts, fit_prefix_residualiser
from edit_lib.signals.probe import masked_contexts, probe_input, rollout_tokens


KEYS = ["dataset", "response_id", "rollout_id"]


def select_rollouts(rollouts: pd.DataFrame, max_rollouts: int, seed: int = 0) -> pd.DataFrame:
    """Rollouts with at least one step: every incorrect one (Phase 1 repairs each, Sec. 2.2) and, when
    ``max_rollouts`` > 0, a seeded sample of correct ones filling the rest of the cap (none when the incorrect
    ones already reach it); 0 = all. Sorted by id."""
    r = rollouts[rollouts["n_steps"] > 0]
    if max_rollouts and len(r) > max_rollouts:
        wrong, right = r[~r["correct"].astype(bool)], r[r["correct"].astype(bool)]
        n_right = max(0, max_rollouts - len(wrong))
        r = pd.concat([wrong, right.sample(min(n_right, len(right)), random_state=seed)])
    return r.sort_values(KEYS).reset_index(drop=True)


def _check_steps(rec: dict, n_steps: int, rule: str) -> None:
    """The probe/audit must cut a rollout into the steps 01 recorded (Sec. 2.1): same rule, same T."""
    if "n_steps" in rec and int(rec["n_steps"]) != n_steps:
        raise ValueError(f"rollout {rec['dataset']}/{rec['response_id']}/{rec['rollout_id']}: 01_base_policy "
                         f"recorded n_steps={rec['n_steps']} but steps.rule={rule!r} gives {n_steps} steps; "
                         "re-run 01_base_policy with this profile's steps.rule")


def probe_table(policy: Policy, datasets: dict[str, Dataset], rollouts: pd.DataFrame, cfg: ProbeConfig,
                rule: str = "auto", progress: bool = True) -> pd.DataFrame:
    """Posterior belief at every step boundary (Eq. 1-2), steps cut by ``rule`` (``steps.rule``, Sec. 2.1) and
    p_k read by ``cfg.read``: one row per (rollout, k) with ``expected`` (m-hat_k), ``eps``, ``delta_eps``
    (NaN at k = 0), ``argmax``, ``p_max``, ``probs`` (p_k over 0..M_q), ``mark_mass`` (probability on any valid
    mark before normalising) and ``read`` (the read used for that question: 'next_token' or 'sequence').
    Each batch of ``cfg.batch_size`` rollouts is one packed forward call (App. B), here or on the engine's
    workers (``parallel.forward_reads``)."""
    recs = rollouts.to_dict("records")
    readouts: dict[int, object] = {}

    def inputs(rec, r, q):
        toks, ro = probe_input(policy, cfg, readouts, policy.grading_input(q, r.answer), rec["text"], q.max_mark, rule)
        _check_steps(rec, len(toks.steps_ids), rule)
        return toks.prompt_ids, toks.steps_ids, ro.scaffold, ro.marks, r.gold
    chunks, calls = _calls(datasets, recs, cfg.batch_size, inputs)
    read = partial(_probe_batch, temperature=cfg.temperature, batch_size=cfg.batch_size, dtype=cfg.dtype)
    rows = {}
    for i, results in _reads(policy, read, calls, len(recs), f"probe ({cfg.read})", progress):
        rows[i] = [row for rec, res in zip(chunks[i], results) for row in _boundary_rows(rec, res)]
    return pd.DataFrame([row for i in sorted(rows) for row in rows[i]])


def _boundary_rows(rec: dict, res) -> list[dict]:
    """probe_table's rows of one rollout: one per boundary k = 0..T."""
    T, mass = res.n_steps, res.mark_mass
    return [dict(dataset=rec["dataset"], response_id=rec["response_id"], rollout_id=int(rec["rollout_id"]), k=k,
                 n_steps=T, u=k / max(T, 1), expected=float(res.expected[k]), eps=float(res.eps[k]),
                 delta_eps=float(res.delta_eps[k - 1]) if k else np.nan, argmax=int(np.argmax(res.probs[k])),
                 p_max=float(res.probs[k].max()), gold=int(res.gold), probs=res.probs[k].tolist(),
                 mark_mass=float(mass[k]), read=res.read)
            for k in range(T + 1)]


def _probe_batch(model, prompts, steps, scaffolds, marks, golds, **kw):
    """One batch of the probe (Eq. 1-2), as a worker runs it (``probe.probe_rollouts``, packed)."""
    from edit_lib.signals.probe import probe_rollouts
    return probe_rollouts(model, prompts, steps, scaffolds, marks, gold=golds, **kw)


def _calls(datasets: dict[str, Dataset], recs: list[dict], batch_size: int, inputs) -> tuple[list, list]:
    """``recs`` in chunks of ``batch_size`` (one packed forward call each) and each chunk's call: the argument
    lists of its rollouts' ``inputs(rec, response, question)``, in order."""
    index = {name: {r.id: r for r in ds.responses} for name, ds in datasets.items()}
    chunks, calls = [recs[i:i + batch_size] for i in range(0, len(recs), batch_size)], []
    for chunk in chunks:
        items = [inputs(rec, r := index[rec["dataset"]][rec["response_id"]], datasets[rec["dataset"]].question(r))
                 for rec in chunk]
        calls.append(tuple(map(list, zip(*items))))
    return chunks, calls


def _reads(policy, fn, calls: list, n_rollouts: int, desc: str, progress: bool):
    """(chunk index, ``fn(model, *call)``) for every call (``parallel.forward_reads``), a bar counting rollouts
    (the engine's own where the reads go there)."""
    with tqdm(total=n_rollouts, disable=not progress or reads_on_engine(policy), desc=desc) as bar:
        for i, results in forward_reads(policy, fn, calls):
            bar.update(len(results))
            yield i, results


def audit_table(policy: Policy, datasets: dict[str, Dataset], rollouts: pd.DataFrame, cfg: AuditConfig,
                progress: bool = True, rule: str = "auto") -> pd.DataFrame:
    """Mask-based grounding audit (Eq. 3): one row per (rollout, step k) with the relative position u = k/T,
    the step's token count ``n_tokens``, its summed NLL under each context variant (``nll_full``,
    ``nll_rubric_masked``, ``nll_answer_masked``, ``nll_no_prefix``) and G_rho, G_a, G_p under
    ``cfg.nll_reduction`` (``with_supports`` recomputes them under the other reduction from the same pass);
    ``add_residual`` adds G~^p (Eq. 4). Each batch of ``cfg.batch_size`` rollouts is one packed forward call,
    here or on the engine's workers (``parallel.forward_reads``)."""
    recs = rollouts.to_dict("records")

    def inputs(rec, r, q):
        toks = rollout_tokens(policy, policy.grading_input(q, r.answer), rec["text"], rule)  # steps.rule
        _check_steps(rec, len(toks.steps_ids), rule)
        rho, ans = masked_contexts(policy, q, r.answer)  # the full context is toks.prompt_ids
        return toks.prompt_ids, rho, ans, toks.steps_ids
    chunks, calls = _calls(datasets, recs, cfg.batch_size, inputs)
    rows = {}
    for i, results in _reads(policy, partial(audit_rollouts, batch_size=cfg.batch_size), calls, len(recs), "audit",
                             progress):
        rows[i] = [dict(dataset=rec["dataset"], response_id=rec["response_id"], rollout_id=int(rec["rollout_id"]),
                        k=k + 1, n_steps=len(res.n_tokens), u=(k + 1) / len(res.n_tokens),
                        step=rec["steps"][k] if k < len(rec["steps"]) else "", n_tokens=int(res.n_tokens[k]),
                        correct=bool(rec["correct"]), **{f"nll_{v}": float(res.nll[v][k]) for v in VARIANTS})
                   for rec, res in zip(chunks[i], results) for k in range(len(res.n_tokens))]
    cols = [*KEYS, "k", "n_steps", "u", "step", "n_tokens", "correct", *(f"nll_{v}" for v in VARIANTS)]
    rows = [row for i in sorted(rows) for row in rows[i]]
    return with_supports(pd.DataFrame(rows) if rows else pd.DataFrame(columns=cols), cfg.nll_reduction)


# signal column -> the masked context variant of Eq. 3
SUPPORTS = {"G_rho": "rubric_masked", "G_a": "answer_masked", "G_p": "no_prefix"}


def with_supports(audit: pd.DataFrame, reduction: str) -> pd.DataFrame:
    """G_rho, G_a, G_p (Eq. 3) from the summed step NLLs of ``audit_table`` under ``reduction``: 'sum' (l_k is
    the step's NLL, the paper's written definition) or 'mean' (l_k per token: both terms divided by n_tokens;
    an empty step gives NaN). Returns a copy with column ``reduction``; drops a stale ``G_p_tilde``."""
    if reduction not in ("sum", "mean"):
        raise ValueError(f"unknown NLL reduction {reduction!r} (use 'sum' or 'mean')")
    missing = [c for c in ("n_tokens", "nll_full", *(f"nll_{v}" for v in SUPPORTS.values())) if c not in audit]
    if missing:
        raise ValueError(f"audit table lacks {missing}: it was made by an older audit_table; re-run the audit")
    out = audit.drop(columns=["G_p_tilde"], errors="ignore")
    n = out["n_tokens"].to_numpy(dtype=np.float64) if reduction == "mean" else 1.0
    with np.errstate(invalid="ignore", divide="ignore"):
        for col, variant in SUPPORTS.items():
            out[col] = (out[f"nll_{variant}"].to_numpy(np.float64) - out["nll_full"].to_numpy(np.float64)) / n
    out["reduction"] = reduction
    return out


def add_residual(audit: pd.DataFrame, cfg: AuditConfig):
    """Adds ``G_p_tilde`` = G^p - mu_p(u) (Eq. 4), mu_p fitted PER DATASET on this table ("dataset-level", by
    ``cfg.residual_method``: 'exact' is the mean G^p at each u = k/T, with the kernel smoother where fewer than
    ``cfg.residual_min_count`` steps share a u); returns (table, {dataset: PrefixResidualiser})."""
    out = audit.copy()
    out["G_p_tilde"] = np.nan
    fits = {}
    for name, idx in out.groupby("dataset", sort=False).groups.items():
        g, u = out.loc[idx, "G_p"].to_numpy(np.float64), out.loc[idx, "u"].to_numpy(np.float64)
        try:
            fits[name] = fit_prefix_residualiser(g, u, method=cfg.residual_method, min_count=cfg.residual_min_count,
                                                 n_bins=cfg.residual_bins, bandwidth=cfg.residual_bandwidth)
        except ValueError as e:
            raise ValueError(f"dataset {name}: mu_p (Eq. 4): {e}") from e
        out.loc[idx, "G_p_tilde"] = fits[name].transform(g, u)
    return out, fits


def probe_both_reads(policy, datasets, sel: pd.DataFrame, probe_cfg, rule: str, cached=None) -> dict:
    """02's probe table under both reads of Eq. 1 (``next_token`` and ``sequence``) on the same boundaries, the
    profile's read first (every later stage uses it), each with the rollout's correctness, mark and parse status;
    ``cached(name, make)`` keeps each as ``beliefs_<read>``."""
    cached = cached or (lambda name, make: make())
    info = sel[KEYS + ["correct", "mark", "max_mark", "parse_status"]]
    other = "sequence" if probe_cfg.read == "next_token" else "next_token"
    out = {}
    for read in (probe_cfg.read, other):
        cfg = dataclasses.replace(probe_cfg, read=read)
        table = cached(f"beliefs_{read}", lambda: probe_table(policy, datasets, sel, cfg, rule=rule))
        out[read] = table.merge(info, on=KEYS, how="left")
    return out


