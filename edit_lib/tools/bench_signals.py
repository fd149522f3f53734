"""Benchmarks: packed (one pass, block mask; App. B "Compute budget") vs naive probe and grounding audit.

Runs on a small RANDOM Qwen3 the size of the embedded grader (``model.toy``: no weights needed), so the numbers
measure the packing, not a model.
"""
from __future__ import annotations

import statistics
import time

import numpy as np
import torch

from edit_lib.model.toy import toy_model, toy_tokenizer
from edit_lib.signals.grounding import LAYOUTS, audit_rollouts, audit_rollouts_naive
from edit_lib.signals.probe import build_probe_tree, mark_continuations, probe_rollouts, probe_rollouts_naive


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
    from edit_lib.runner.register import register_all
    register_all()  # the packaged GGUF model is a named Base
    from edit_lib.signals.inputs import probe_readout, rollout_tokens
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
