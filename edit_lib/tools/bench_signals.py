"""Benchmarks of the signals: packed (one pass, block mask; App. B "Compute budget") vs naive probe and grounding
audit, ``edit-suite bench shaping`` (what the shaping probe costs an RL step), and ``bench precision``.

The first three run on a small RANDOM Qwen3 the size of the embedded grader (``model.toy``: no weights needed), so
the numbers measure the packing, not a model. ``bench_precision``: on a finished run's rollouts, the probe read
three ways on the same boundaries (the float32 policy, the reference; a bfloat16 copy read in bfloat16, the paper
profile; the same copy read in float32, ``probe.dtype = 'float32'``), each against the reference: the largest
change of a mark probability and of the expected mark, the share of boundaries whose argmax mark changes, of
repaired rollouts whose Alg. 1 picks change (the audit held at 03's values), and of rollouts whose Eq. 6 penalty
fires differently at the profile's beta_drift. Runs on the profile's ``model.device``.
"""
from __future__ import annotations

import copy
import dataclasses
import statistics
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from edit_lib.artifacts import recorded_stage_dir
from edit_lib.config import load_profile, Profile
from edit_lib.data.registry import build_dataset
from edit_lib.model.policy import load_policy_from_profile
from edit_lib.model.toy import toy_model, toy_tokenizer
from edit_lib.runner.keys import register_all
from edit_lib.signals.grounding import LAYOUTS, audit_rollouts, audit_rollouts_naive
from edit_lib.signals.probe import build_probe_tree, mark_continuations, probe_rollouts, probe_rollouts_naive
from edit_lib.train.rl import rl_dataset, train_rl_arm


def _grader_model(attn: str, seed: int):
    # the embedded grader's size: hidden 128, 4 layers, 4 heads, intermediate 512, vocab ~1000
    return toy_model("qwen3", vocab_size=1000, hidden=128, layers=4, heads=4, kv_heads=4, intermediate=512,
                     attn=attn, seed=seed, init_range=0.05)


def _time_pair(naive, packed, repeats: int):
    """Median wall time of each, interleaved so that load from other processes hits both alike."""
    packed()  # warm-up at the benchmark's shapes (the first call pays one-off allocation/dispatch costs)
    t_n, t_p, out_n, out_p = [], [], None, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out_n = naive()
        t1 = time.perf_counter()
        out_p = packed()
        t_n.append(t1 - t0)
        t_p.append(time.perf_counter() - t1)
    return statistics.median(t_n), statistics.median(t_p), out_n, out_p


def _rollouts(rng, n, prompt_len, n_steps, step_len, vocab):
    prompts = [rng.integers(3, vocab, prompt_len).tolist() for _ in range(n)]
    steps = [[rng.integers(3, vocab, int(rng.integers(step_len // 2, step_len * 3 // 2))).tolist()
              for _ in range(n_steps)] for _ in range(n)]
    return prompts, steps


def bench_probe(n_rollouts: int = 2, n_steps: int = 5, max_mark: int = 26, prompt_len: int = 192,
                step_len: int = 40, repeats: int = 3, attn: str = "sdpa", threads: int = 2, seed: int = 0) -> dict:
    """Time the posterior belief probe (Eq. 1-2): naive (a pass per boundary and mark) vs packed (one call)."""
    torch.set_num_threads(threads)
    model = _grader_model(attn, seed)
    scaffold, marks = mark_continuations(toy_tokenizer(), "Final mark : ", max_mark)
    rng = np.random.default_rng(seed)
    prompts, steps = _rollouts(rng, n_rollouts, prompt_len, n_steps, step_len, 1000)
    gold = rng.integers(0, max_mark + 1, n_rollouts).tolist()
    kw = dict(gold=gold, temperature=0.7)
    t_naive, t_packed, naive, packed = _time_pair(
        lambda: probe_rollouts_naive(model, prompts, steps, scaffold, marks, **kw),
        lambda: probe_rollouts(model, prompts, steps, scaffold, marks, batch_size=n_rollouts, **kw), repeats)
    err = max(float(np.abs(a.probs - b.probs).max()) for a, b in zip(packed, naive))
    return {
        "bench": "probe", "attn": attn, "threads": threads, "n_rollouts": n_rollouts, "n_boundaries": n_steps + 1,
        "max_mark": max_mark, "mark_tokens_max": max(len(m) for m in marks), "prompt_len": prompt_len,
        "mean_step_len": float(np.mean([len(s) for st in steps for s in st])),
        "naive_forward_passes": n_rollouts * (n_steps + 1) * (max_mark + 1), "packed_forward_calls": 1,
        "packed_tokens": sum(len(build_probe_tree(p, st, scaffold, marks)[0]) for p, st in zip(prompts, steps)),
        "naive_s": t_naive, "packed_s": t_packed, "speedup": t_naive / t_packed, "max_abs_err": err,
        "max_abs_err_expected_mark": max(float(np.abs(a.expected - b.expected).max()) for a, b in zip(packed, naive)),
        "repeats": repeats,
    }


def _naive_audit_tokens(ctx, ctx_rho, ctx_a, steps) -> int:
    """Tokens the naive audit feeds the model: context (+ prefix) + step, per step and variant."""
    n = 0
    for c, cr, ca, st in zip(ctx, ctx_rho, ctx_a, steps):
        for k in range(len(st)):
            chained = sum(map(len, st[:k + 1]))
            n += len(c) + chained + len(cr) + chained + len(ca) + chained + len(c) + len(st[k])
    return n


def bench_audit(n_rollouts: int = 2, n_steps: int = 5, prompt_len: int = 192, step_len: int = 40,
                repeats: int = 5, attn: str = "sdpa", threads: int = 2, seed: int = 0, layout: str = "rows") -> dict:
    """Time the grounding audit (Eq. 3): naive (a pass per step and variant) vs packed (one call per rollout)."""
    torch.set_num_threads(threads)
    model = _grader_model(attn, seed)
    rng = np.random.default_rng(seed)
    ctx, steps = _rollouts(rng, n_rollouts, prompt_len, n_steps, step_len, 1000)
    mask_id = 2
    # [MASK] replaces a 40-token rubric span / a 30-token answer span of the context
    ctx_rho = [c[:40] + [mask_id] + c[80:] for c in ctx]
    ctx_a = [c[:120] + [mask_id] + c[150:] for c in ctx]
    args = (ctx, ctx_rho, ctx_a, steps)
    t_naive, t_packed, naive, packed = _time_pair(
        lambda: audit_rollouts_naive(model, *args),
        lambda: audit_rollouts(model, *args, batch_size=1, layout=layout), repeats)
    err = max(float(np.abs(a.nll[v] - b.nll[v]).max()) for a, b in zip(packed, naive) for v in a.nll)
    return {
        "bench": "audit", "layout": layout, "attn": attn, "threads": threads, "n_rollouts": n_rollouts,
        "n_steps": n_steps,
        "prompt_len": prompt_len, "mean_step_len": float(np.mean([len(s) for st in steps for s in st])),
        "naive_forward_passes": n_rollouts * n_steps * 4, "packed_forward_calls": n_rollouts,
        "naive_tokens": _naive_audit_tokens(*args),
        "packed_tokens": sum(len(t) for r in zip(*args) for t in LAYOUTS[layout](*r)[0]),
        "naive_s": t_naive, "packed_s": t_packed, "speedup": t_naive / t_packed, "max_abs_err": err,
        "max_abs_err_G": max(float(np.abs(getattr(a, g) - getattr(b, g)).max())
                             for a, b in zip(packed, naive) for g in ("G_rho", "G_a", "G_p")),
        "repeats": repeats,
    }


def bench_probe_real(repeats: int = 3, threads: int = 2, max_mark: int = 3) -> dict:
    """The posterior belief probe (Eq. 1-2) on a real pretrained model and tokenizer: SmolLM2-135M-Instruct
    (``gguf_model``, installed by ``make real-model``) grading an ASAP-style answer through its chat template,
    naive (one pass per boundary and mark) vs packed (one call, App. B). Raises ``RealModelMissing`` when the
    model package is absent."""
    from edit_lib.model.gguf_model import NAME, RealModelMissing, available
    from edit_lib.model.policy import Policy, load_policy
    from edit_lib.runner.keys import register_all
    register_all()  # the packaged GGUF model is a named Base
    from edit_lib.signals.probe import probe_readout, rollout_tokens
    ok, why = available()
    if not ok:
        raise RealModelMissing(why)
    torch.set_num_threads(threads)
    model, tok, kind = load_policy(NAME)
    policy = Policy(model=model, tokenizer=tok, kind=kind, name=NAME)
    prompt = ("Question: After reading the group's procedure, describe what additional information you would "
              "need in order to replicate the experiment.\nRubric: 3 points: three additional pieces of "
              "information; 2 points: two; 1 point: one; 0 points: none.\nAnswer: You would need to know how much "
              "vinegar was used, what type of container, and the size of the samples.\n"
              f"End with the line 'Final mark: m/{max_mark}'.")
    completion = ("The answer asks for the amount of vinegar.\nThat is one additional piece of information.\n"
                  "It also asks for the type of container.\nThat is a second piece.\n"
                  "It asks for the size of the samples, a third piece.\nFinal mark: 3/3")
    rt = rollout_tokens(policy, policy.input_text(prompt), completion, rule="auto")
    ro = probe_readout(policy, "Final mark: ", "/", max_mark, read="next_token")
    kw = dict(gold=[3], temperature=0.7)
    t_naive, t_packed, naive, packed = _time_pair(
        lambda: probe_rollouts_naive(model, [rt.prompt_ids], [rt.steps_ids], ro.scaffold, ro.marks, **kw),
        lambda: probe_rollouts(model, [rt.prompt_ids], [rt.steps_ids], ro.scaffold, ro.marks, **kw), repeats)
    n_b = len(rt.steps_ids) + 1
    return {
        "bench": "probe-real", "model": NAME, "threads": threads, "n_boundaries": n_b, "max_mark": max_mark,
        "prompt_tokens": len(rt.prompt_ids), "step_tokens": sum(len(s) for s in rt.steps_ids),
        "naive_forward_passes": n_b * (max_mark + 1), "packed_forward_calls": 1,
        "naive_s": t_naive, "packed_s": t_packed, "speedup": t_naive / t_packed,
        "max_abs_err": float(np.abs(packed[0].probs - naive[0].probs).max()), "repeats": repeats,
    }


# ------------------------------------------------------------------ ``edit-suite bench shaping``
# What belief shaping costs per optimiser step (Sec. 2.3; App. B "Compute budget": about 2 s on a 12 s step, 1.17x).
# EDIT-RL and GRPO run the same steps from the same initialisation, prompts, seed and Table 9 recipe and differ only
# in the shaping reward, whose frozen probe reads every completion of the step in packed batches
# (``train.rewards.shaping_terms``); step times come from a callback, the shaping reward's calls timed inside.
# ``step_time_ratio``: per EDIT-RL step, step time / (step time - shaping time), the median over steps after the
# first. ``arm_ratio`` (median EDIT-RL step / median GRPO step) is beside it, but sampling diverges after the first
# update, so it carries generation-length noise (the arms' mean completion lengths are reported too).

def _timer():
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        """Wall time per optimiser step and the shaping reward's time within it (``spent`` is filled by
        ``_timed_shaping``)."""

        def __init__(self):
            self.times, self.shaping, self.spent, self._t0, self._n = [], [], [], None, 0

        def on_step_begin(self, args, state, control, **kw):
            self._t0, self._n = time.perf_counter(), len(self.spent)

        def on_step_end(self, args, state, control, **kw):
            self.times.append(time.perf_counter() - self._t0)
            self.shaping.append(sum(self.spent[self._n:]))

    return StepTimer()


@contextmanager
def _patched(make):
    """``train.rl`` builds the shaping reward with ``make`` while the block runs."""
    from edit_lib.train import rl
    old = rl.make_shaping_reward
    rl.make_shaping_reward = make
    try:
        yield
    finally:
        rl.make_shaping_reward = old


def _timed_shaping(spent: list):
    """``make_shaping_reward`` whose reward function adds its wall time per call to ``spent``."""
    from edit_lib.train import rewards

    def make(*a, **kw):
        fn = rewards.make_shaping_reward(*a, **kw)

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            out = fn(*args, **kwargs)
            spent.append(time.perf_counter() - t0)
            return out
        timed.__name__ = fn.__name__
        return timed
    return make


def bench_shaping(profile: str = "demo", steps: int = 8, dataset: str | None = None) -> dict:
    """Time ``steps`` optimiser steps of GRPO and of EDIT-RL (same init, prompts, seed) on ``dataset`` (default:
    the first of ``rl.datasets`` or of the profile) with the profile's RL recipe; the module docstring says how."""
    P = load_profile(profile)
    register_all()  # 'embedded' / 'micro' are named Bases
    spec = {d.name: d for d in P.data.datasets}
    name = dataset or (list(P.rl.datasets) or list(spec))[0]
    ds = build_dataset(spec[name], seed=P.run.seed)
    shaping = {name: (P.rl.shaping_for(name).beta_drift, P.rl.shaping_for(name).gamma)}
    out = {}
    for arm in ("grpo", "edit_rl"):
        policy = load_policy_from_profile(P)
        frozen = None
        if arm == "edit_rl":
            frozen = load_policy_from_profile(P)
            frozen.model.requires_grad_(False)
        timer, spent = _timer(), []
        timer.spent = spent
        with tempfile.TemporaryDirectory() as tmp, _patched(_timed_shaping(spent)):
            res = train_rl_arm(policy, rl_dataset(policy, ds), P.rl, P.sft.lora, tmp, name, P.run.seed, arm,
                               frozen_probe_policy=frozen, probe_cfg=P.probe, shaping=shaping,
                               step_rule=P.steps.rule, max_steps=steps, callbacks=[timer],
                               per_device_batch_size=P.rl.per_device_batch_size or None)
        lengths = [e["completions/mean_length"] for e in res.log_history if "completions/mean_length" in e]
        out[arm] = dict(step_seconds=timer.times, median_step_seconds=statistics.median(timer.times[1:] or timer.times),
                        shaping_seconds=timer.shaping,
                        mean_completion_length=statistics.mean(lengths) if lengths else None)
    e = out["edit_rl"]
    same = [t / (t - sh) for t, sh in zip(e["step_seconds"], e["shaping_seconds"]) if t > sh][1:]
    return dict(profile=P.name, dataset=name, steps=steps,
                completions_per_step=P.rl.rollouts_per_prompt * P.rl.prompts_per_step,
                grpo=out["grpo"], edit_rl=e, step_time_ratio=statistics.median(same) if same else None,
                shaping_share_of_step=statistics.median(sh / t for t, sh in zip(e["step_seconds"][1:],
                                                                                 e["shaping_seconds"][1:])),
                arm_ratio=e["median_step_seconds"] / out["grpo"]["median_step_seconds"])


# ---------------------------------------------------------------- ``edit-suite bench precision``

READS = {"bfloat16": "model", "bfloat16_read_float32": "float32"}
RULES = ("edit", "belief_shift_only")


def belief_differences(ref: pd.DataFrame, other: pd.DataFrame) -> dict:
    """Largest |p| and |expected mark| changes, and the share of boundaries whose argmax changes."""
    keys = ["dataset", "response_id", "rollout_id", "k"]
    m = ref.merge(other, on=keys, suffixes=("", "_o"), validate="one_to_one")
    if len(m) != len(ref):
        raise ValueError(f"the reads cover different boundaries: {len(ref)} against {len(other)}")
    dp = [float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in zip(m["probs"], m["probs_o"])]
    return dict(boundaries=len(m), max_abs_prob=max(dp, default=0.0),
                max_abs_expected=float((m["expected"] - m["expected_o"]).abs().max()),
                argmax_changed=float((m["argmax"] != m["argmax_o"]).mean()))


def picks(rollouts, beliefs, audit, profile: Profile) -> dict:
    """Alg. 1's picks (k lists, best first) per repaired rollout under each rule ('edit', 'belief_shift_only'),
    the audit held fixed: {rule: {rollout: [k, ...]}}."""
    from edit_lib.revision.phase1 import repair_sample
    from edit_lib.selection import ROLLOUT, dataset_percentiles, select_candidates
    sample = repair_sample(rollouts, beliefs, audit, 0, profile.run.seed)
    pct = dataset_percentiles(audit, profile.selection.percentile)
    out = {}
    for rule in RULES:
        sel = select_candidates(sample.steps, profile.selection, rule, percentiles=pct)
        got = out[rule] = {tuple(k): [] for k in sample.keys[ROLLOUT].itertuples(index=False)}
        for r in sel.sort_values([*ROLLOUT, "rank"]).itertuples(index=False):
            got[(r.dataset, r.response_id, r.rollout_id)].append(int(r.k))
    return out


def pick_changes(a: dict, b: dict) -> dict:
    if set(a) != set(b):
        raise ValueError("the two reads repair different rollouts")
    changed = sum(a[k] != b[k] for k in a)
    first = sum(a[k][:1] != b[k][:1] for k in a)
    return dict(rollouts=len(a), picks_changed=changed / max(len(a), 1), first_pick_changed=first / max(len(a), 1))


def firings(beliefs: pd.DataFrame, profile: Profile) -> pd.DataFrame:
    """Per boundary k >= 1: does Eq. 6's hinge max(0, |m_hat_k - m*| - beta_drift) fire (the profile's
    beta_drift per dataset)?"""
    b = beliefs[beliefs.k >= 1].copy()
    beta = b["dataset"].map(lambda d: profile.rl.shaping_for(d).beta_drift)
    b["fires"] = (b["expected"] - b["gold"]).abs() > beta
    return b[["dataset", "response_id", "rollout_id", "k", "fires"]]


def firing_changes(ref: pd.DataFrame, other: pd.DataFrame) -> dict:
    keys = ["dataset", "response_id", "rollout_id"]
    m = ref.merge(other, on=[*keys, "k"], suffixes=("", "_o"), validate="one_to_one")
    per_rollout = m.groupby(keys).agg(a=("fires", "any"), b=("fires_o", "any"))
    return dict(boundary_firings_changed=float((m["fires"] != m["fires_o"]).mean()),
                rollout_penalty_changed=float((per_rollout.a != per_rollout.b).mean()),
                rollouts_penalised=int(per_rollout.a.sum()), rollouts=len(per_rollout))


def bench_precision(profile: str | Path = "smoke", run_root: str | Path | None = None, overrides=(),
                    max_rollouts: int = 0) -> dict:
    """The comparison above on the run ``<run_root>/<profile name>`` (``max_rollouts`` > 0: a seeded subset of
    02's sample)."""
    from edit_lib.data.registry import load_built
    from edit_lib.model.policy import load_policy_from_profile
    from edit_lib.revision.phase1 import read_signals
    from edit_lib.runner.keys import register_all
    from edit_lib.runner.variants import resolve
    from edit_lib.signals.probe import bfloat16_copy
    from edit_lib.signals.tables import probe_table, select_rollouts
    register_all()
    P, paths, _ = resolve(profile, list(overrides), run_root)  # the run of those values: a variant's folder
    d00, d01, d02, d03 = (recorded_stage_dir(paths, s) for s in ("00_data", "01_base_policy", "02_probing",
                                                           "03_audit_validation"))
    rollouts, _, audit = read_signals(d01, d02, d03, P.probe.read, P.audit)
    sel = select_rollouts(rollouts, max_rollouts or P.probe.max_rollouts, seed=P.run.seed)
    datasets = load_built(d00)
    P32 = dataclasses.replace(P, model=dataclasses.replace(P.model, dtype="float32"))
    policy = load_policy_from_profile(P32)
    t0 = time.perf_counter()
    reads = {"float32": probe_table(policy, datasets, sel, dataclasses.replace(P.probe, dtype="model"),
                                    P.steps.rule, progress=False)}
    seconds = {"float32": time.perf_counter() - t0}
    low = copy.copy(policy)
    low.model = bfloat16_copy(policy.model)
    for name, dtype in READS.items():
        t0 = time.perf_counter()
        reads[name] = probe_table(low, datasets, sel, dataclasses.replace(P.probe, dtype=dtype), P.steps.rule,
                                  progress=False)
        seconds[name] = time.perf_counter() - t0
    ref_picks = picks(rollouts, reads["float32"], audit, P)
    ref_fire = firings(reads["float32"], P)
    rows = []
    for name in READS:
        got = picks(rollouts, reads[name], audit, P)
        row = dict(read=name, **belief_differences(reads["float32"], reads[name]),
                   **{f"{k}_{rule}" if k != "rollouts" else "repaired_rollouts": v
                      for rule in RULES for k, v in pick_changes(ref_picks[rule], got[rule]).items()},
                   **firing_changes(ref_fire, firings(reads[name], P)), seconds=seconds[name])
        rows.append(row)
    return dict(profile=P.name, run=str(paths.root), device=str(next(policy.model.parameters()).device),
                probed_rollouts=len(sel), float32_seconds=seconds["float32"], step_rule=P.steps.rule,
                probe_read=P.probe.read, beta_drift={d: P.rl.shaping_for(d).beta_drift for d in datasets},
                comparisons=rows)


def format_precision(result: dict) -> str:
    """The comparison as a short table (one row per bfloat16 read)."""
    cols = ["read", "boundaries", "max_abs_prob", "max_abs_expected", "argmax_changed", "picks_changed_edit",
            "first_pick_changed_edit", "repaired_rollouts", "boundary_firings_changed", "rollout_penalty_changed"]
    df = pd.DataFrame(result["comparisons"])[cols]
    return (f"bfloat16 against float32 on {result['probed_rollouts']} rollouts of {result['run']} "
            f"({result['device']}):\n" + df.round(4).to_string(index=False))
