"""Run the probe (Eq. 1-2) and the audit (Eq. 3-4) over a rollout table; tidy per-boundary / per-step tables, and
the summaries of the probe tables notebook 02 records.

Both read rollouts from 01_base_policy (ids ``dataset, response_id, rollout_id``) and return long tables keyed
by those ids plus the boundary ``k`` (probe, k = 0..T) or the step ``k`` (audit, k = 1..T); ``n_steps`` is T
(not a column named "T", which pandas would shadow with the transpose). The summaries, each a tested function
of the tables: ``step_count_summary`` (rollouts with T <= 1 steps, Sec. 2.1), ``final_agreement`` (the probe at
k = T against the mark the policy wrote), ``trajectory_by_position`` (mean |m-hat_k - m*| / M_q by relative
position u = k/T), ``delta_eps_summary`` / ``delta_eps_histogram`` (belief shifts, Eq. 2), ``example_rollouts``
(the trajectories 02 draws) and ``compare_reads`` (the next-token read of Eq. 1 against the sequence read).
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
from edit_lib.signals.probe import masked_contexts, probe_readout, rollout_tokens


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
    index = _index(datasets)
    readouts: dict[int, object] = {}
    chunks, calls = _chunks(recs, cfg.batch_size), []
    for chunk in chunks:
        prompts, steps, scs, mks, golds = [], [], [], [], []
        for rec in chunk:
            ds = datasets[rec["dataset"]]
            r = index[rec["dataset"]][rec["response_id"]]
            q = ds.question(r)
            toks = rollout_tokens(policy, policy.grading_input(q, r.answer), rec["text"], rule)
            _check_steps(rec, len(toks.steps_ids), rule)
            if q.max_mark not in readouts:
                readouts[q.max_mark] = probe_readout(policy, cfg.scaffold, cfg.terminator, q.max_mark, cfg.read)
            ro = readouts[q.max_mark]
            for acc, item in ((prompts, toks.prompt_ids), (steps, toks.steps_ids), (scs, ro.scaffold),
                              (mks, ro.marks), (golds, r.gold)):
                acc.append(item)
        calls.append((prompts, steps, scs, mks, golds))
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


def _chunks(recs: list, batch_size: int) -> list[list]:
    return [recs[i:i + batch_size] for i in range(0, len(recs), batch_size)]


def _reads(policy, fn, calls: list, n_rollouts: int, desc: str, progress: bool):
    """(chunk index, ``fn(model, *call)``) for every call (``parallel.forward_reads``), a bar counting rollouts
    (the engine's own where the reads go there)."""
    with tqdm(total=n_rollouts, disable=not progress or reads_on_engine(policy), desc=desc) as bar:
        for i, results in forward_reads(policy, fn, calls):
            bar.update(len(results))
            yield i, results


def _index(datasets: dict[str, Dataset]) -> dict[str, dict]:
    return {name: {r.id: r for r in ds.responses} for name, ds in datasets.items()}


def audit_table(policy: Policy, datasets: dict[str, Dataset], rollouts: pd.DataFrame, cfg: AuditConfig,
                progress: bool = True, rule: str = "auto") -> pd.DataFrame:
    """Mask-based grounding audit (Eq. 3): one row per (rollout, step k) with the relative position u = k/T,
    the step's token count ``n_tokens``, its summed NLL under each context variant (``nll_full``,
    ``nll_rubric_masked``, ``nll_answer_masked``, ``nll_no_prefix``) and G_rho, G_a, G_p under
    ``cfg.nll_reduction`` (``with_supports`` recomputes them under the other reduction from the same pass);
    ``add_residual`` adds G~^p (Eq. 4). Each batch of ``cfg.batch_size`` rollouts is one packed forward call,
    here or on the engine's workers (``parallel.forward_reads``)."""
    recs = rollouts.to_dict("records")
    index = _index(datasets)
    chunks, calls = _chunks(recs, cfg.batch_size), []
    for chunk in chunks:
        cf, cr, ca, st = [], [], [], []
        for rec in chunk:
            ds = datasets[rec["dataset"]]
            r = index[rec["dataset"]][rec["response_id"]]
            q = ds.question(r)
            toks = rollout_tokens(policy, policy.grading_input(q, r.answer), rec["text"], rule)  # steps.rule
            _check_steps(rec, len(toks.steps_ids), rule)
            rho, ans = masked_contexts(policy, q, r.answer)  # the full context is toks.prompt_ids
            for acc, item in ((cf, toks.prompt_ids), (cr, rho), (ca, ans), (st, toks.steps_ids)):
                acc.append(item)
        calls.append((cf, cr, ca, st))
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




def _need(df: pd.DataFrame, cols, what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{what} needs column(s) {missing}; got {list(df.columns)}")


# ---------------------------------------------------------------- 02's summaries of the probe tables

def step_count_summary(rollouts: pd.DataFrame) -> pd.DataFrame:
    """Per dataset: rollouts, how many have T <= 1 steps (Sec. 2.1: G^p is then 0 and there is one delta-eps)
    and T = 0, their shares, the mean and median T, and the segmentation rules applied (``step_rule``)."""
    _need(rollouts, ["dataset", "n_steps"], "step_count_summary")
    rows = []
    for name, g in rollouts.groupby("dataset", sort=False):
        t = g["n_steps"].to_numpy()
        rules = g["step_rule"].value_counts().to_dict() if "step_rule" in g else {}
        rows.append(dict(dataset=name, rollouts=len(g), single_step=int((t <= 1).sum()),
                         single_step_share=float((t <= 1).mean()), no_step=int((t == 0).sum()),
                         mean_steps=float(t.mean()), median_steps=float(np.median(t)),
                         rules=", ".join(f"{k}: {v}" for k, v in sorted(rules.items()))))
    return pd.DataFrame(rows, columns=["dataset", "rollouts", "single_step", "single_step_share", "no_step",
                                       "mean_steps", "median_steps", "rules"])


def single_step_warnings(counts: pd.DataFrame, threshold: float) -> list[str]:
    """One message per dataset whose share of T <= 1 rollouts exceeds ``threshold`` (steps.warn_single_step_share)."""
    return [f"{r.dataset}: {r.single_step} of {r.rollouts} rollouts ({r.single_step_share:.0%}) have T <= 1 "
            f"reasoning steps (above steps.warn_single_step_share = {threshold:g}); the probe then has a single "
            f"delta-eps per rollout: check the segmentation rule (steps.rule) and the grader's output format"
            for r in counts.itertuples() if r.single_step_share > threshold]


def final_agreement(beliefs: pd.DataFrame) -> pd.DataFrame:
    """At k = T the scaffold is the policy's own final line: per dataset, how often the probe's argmax is the
    mark it wrote, the mean probability of that mark and the mean |m-hat_T - mark|. Rollouts without a parsed
    mark are counted in ``unparsed`` and left out of the means."""
    _need(beliefs, ["dataset", "k", "n_steps", "argmax", "expected", "probs", "mark", "parse_status"],
          "final_agreement")
    final = beliefs[beliefs["k"] == beliefs["n_steps"]]
    rows = []
    for name, g in final.groupby("dataset", sort=False):
        ok = g[g["parse_status"] == "ok"]
        mark = ok["mark"].astype(int).to_numpy()
        p_gen = np.array([p[m] for p, m in zip(ok["probs"], mark)], dtype=float)
        rows.append(dict(dataset=name, rollouts=len(ok), unparsed=len(g) - len(ok),
                         argmax_agrees=float(np.mean(ok["argmax"].to_numpy() == mark)) if len(ok) else np.nan,
                         mean_p_of_generated=float(p_gen.mean()) if len(ok) else np.nan,
                         mean_abs_expected_minus_generated=float(np.abs(ok["expected"].to_numpy() - mark).mean())
                         if len(ok) else np.nan))
    return pd.DataFrame(rows, columns=["dataset", "rollouts", "unparsed", "argmax_agrees", "mean_p_of_generated",
                                       "mean_abs_expected_minus_generated"])


def trajectory_by_position(beliefs: pd.DataFrame, n_bins: int = 5) -> pd.DataFrame:
    """Mean relative belief error |m-hat_k - m*| / M_q (Eq. 2) by relative position u = k/T in ``n_bins``
    equal-width bins over [0, 1] (u = 1 falls in the last bin), per dataset and correct/incorrect rollout."""
    _need(beliefs, ["dataset", "correct", "u", "eps", "max_mark"], "trajectory_by_position")
    b = np.minimum((beliefs["u"].to_numpy() * n_bins).astype(int), n_bins - 1)
    d = beliefs.assign(u_bin=b, rel_eps=beliefs["eps"] / beliefs["max_mark"])
    out = (d.groupby(["dataset", "correct", "u_bin"]).agg(n=("rel_eps", "size"), mean_rel_eps=("rel_eps", "mean"))
           .reset_index())
    out["u_mid"] = (out["u_bin"] + 0.5) / n_bins
    return out[["dataset", "correct", "u_bin", "u_mid", "n", "mean_rel_eps"]]


def delta_eps_summary(beliefs: pd.DataFrame, tie_margin: float) -> pd.DataFrame:
    """Per dataset and correct/incorrect: number of steps, mean and min delta-eps_k (Eq. 2) and the share of
    harmful steps (delta-eps_k < -tie_margin: the step moved the belief away from gold)."""
    _need(beliefs, ["dataset", "correct", "delta_eps"], "delta_eps_summary")
    d = beliefs.dropna(subset=["delta_eps"])
    return (d.groupby(["dataset", "correct"])
            .agg(steps=("delta_eps", "size"), mean_delta_eps=("delta_eps", "mean"),
                 share_harmful=("delta_eps", lambda x: float((x < -tie_margin).mean())),
                 min_delta_eps=("delta_eps", "min")).reset_index())


def delta_eps_histogram(beliefs: pd.DataFrame, width: float = 0.1) -> pd.DataFrame:
    """Histogram of delta-eps_k (Eq. 2) for correct vs incorrect rollouts: bins of ``width`` centred on
    multiples of it, with counts and the share within each group (what ``plots.delta_eps_hist`` draws)."""
    _need(beliefs, ["correct", "delta_eps"], "delta_eps_histogram")
    d = beliefs.dropna(subset=["delta_eps"])
    centre = np.round(d["delta_eps"].to_numpy() / width) * width
    out = d.assign(bin=np.round(centre, 10)).groupby(["correct", "bin"]).size().rename("count").reset_index()
    out["share"] = out["count"] / out.groupby("correct")["count"].transform("sum")
    return out


def _worst_steps(beliefs: pd.DataFrame) -> pd.Series:
    """Per rollout: the step k with the most negative delta-eps_k (the first on ties)."""
    d = beliefs.dropna(subset=["delta_eps"]).sort_values(KEYS + ["k"])
    return d.loc[d.groupby(KEYS, sort=False)["delta_eps"].idxmin()].set_index(KEYS)["k"]


def read_boundaries(next_token: pd.DataFrame, sequence: pd.DataFrame) -> pd.DataFrame:
    """The two probe reads of Eq. 1 on the same boundaries: per (rollout, k) the total-variation distance
    0.5 * sum_m |p_next(m) - p_seq(m)| and the expected-mark difference m-hat_next - m-hat_seq (Eq. 2)."""
    cols = KEYS + ["k", "n_steps", "probs", "expected", "delta_eps", "read"]
    _need(next_token, cols, "read_boundaries (next_token table)")
    _need(sequence, cols, "read_boundaries (sequence table)")
    m = next_token[cols].merge(sequence[cols], on=KEYS + ["k"], suffixes=("_next", "_seq"), how="outer",
                               indicator=True)
    if (m["_merge"] != "both").any():
        bad = m.loc[m["_merge"] != "both", KEYS + ["k"]].head(3).to_dict("records")
        raise ValueError(f"the two probe tables cover different boundaries, e.g. {bad}")
    m["tv"] = [0.5 * float(np.abs(np.asarray(a) - np.asarray(b)).sum()) for a, b in zip(m["probs_next"],
                                                                                          m["probs_seq"])]
    m["d_expected"] = m["expected_next"] - m["expected_seq"]
    return m.rename(columns={"n_steps_next": "n_steps", "read_next": "read"})[
        KEYS + ["k", "n_steps", "read", "tv", "expected_next", "expected_seq", "d_expected",
                "delta_eps_next", "delta_eps_seq"]]


def compare_reads(next_token: pd.DataFrame, sequence: pd.DataFrame) -> pd.DataFrame:
    """Next-token read (Eq. 1) vs sequence read, per dataset and the read the next-token table actually used
    ('sequence' where marks span several tokens, so both tables agree there): boundaries, mean / max TV, mean
    and max |expected-mark difference|, and among rollouts with T >= 2 how often the step with the most
    negative delta-eps (Eq. 2; Alg. 1 shortlists from these) differs between the reads."""
    per = read_boundaries(next_token, sequence)
    w_next = _worst_steps(next_token)
    w_seq = _worst_steps(sequence)
    worst = pd.DataFrame({"worst_next": w_next, "worst_seq": w_seq}).reset_index()
    per_rollout = (per.groupby(KEYS, sort=False).agg(n_steps=("n_steps", "first"), read=("read", "first"))
                   .reset_index().merge(worst, on=KEYS, how="left"))
    per_rollout["multi"] = per_rollout["n_steps"] >= 2
    per_rollout["changed"] = per_rollout["multi"] & (per_rollout["worst_next"] != per_rollout["worst_seq"])
    rows = []
    for (name, read), g in per.groupby(["dataset", "read"], sort=False):
        r = per_rollout[(per_rollout["dataset"] == name) & (per_rollout["read"] == read)]
        n_multi = int(r["multi"].sum())
        rows.append(dict(dataset=name, read_used=read, rollouts=len(r), boundaries=len(g),
                         mean_tv=float(g["tv"].mean()), max_tv=float(g["tv"].max()),
                         mean_abs_d_expected=float(g["d_expected"].abs().mean()),
                         max_abs_d_expected=float(g["d_expected"].abs().max()),
                         mean_d_expected=float(g["d_expected"].mean()),
                         rollouts_T_ge_2=n_multi, worst_step_changed=int(r["changed"].sum()),
                         worst_step_changed_share=float(r["changed"].sum() / n_multi) if n_multi else np.nan))
    return pd.DataFrame(rows)


def example_rollouts(beliefs: pd.DataFrame, n_worst: int = 3, n_correct: int = 2) -> pd.DataFrame:
    """Belief trajectories to show (Fig. 1 style): the ``n_worst`` rollouts holding the most negative single
    delta-eps_k (Eq. 2) and the first ``n_correct`` correct rollouts for contrast; every boundary of each, with
    ``k``, ``expected``, ``gold`` and ``correct``."""
    _need(beliefs, KEYS + ["k", "expected", "gold", "correct", "delta_eps"], "example_rollouts")
    worst = (beliefs.dropna(subset=["delta_eps"]).sort_values(["delta_eps"] + KEYS, kind="stable")
             .drop_duplicates(KEYS).head(n_worst)[KEYS])
    good = beliefs[beliefs["correct"].astype(bool)].drop_duplicates(KEYS).head(n_correct)[KEYS]
    chosen = pd.concat([worst, good]).drop_duplicates()
    return (beliefs.merge(chosen, on=KEYS)[KEYS + ["k", "expected", "gold", "correct"]]
            .sort_values(KEYS + ["k"]).reset_index(drop=True))
