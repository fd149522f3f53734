"""``edit-suite bench bound``: how far the embedded grader's decoding runs from what the machine allows; and
``edit-suite bench decoding``, the lean decoding loop against transformers generate (below).

One thread, as a generation worker runs. Measured on this machine: matrix-product GFLOP/s at the grader's own
shapes (a batch of rows times each weight matrix of a layer and the head) and memory bandwidth (a copy of a
buffer larger than the caches). Counted from the model: the floating-point operations of one decoded token (2 per
weight of every linear layer and the head, plus attention's two products over the mean context) and the bytes it
reads from the key/value cache (every layer's keys and values over that context, float32). The bound is the
smaller of FLOP/s over FLOP per token and bandwidth over cache bytes per token (the weights, 4.5 MB, stay in the
caches across a batch's rows). The measured throughput is greedy decoding of the demo's SAS-like grading prompts
by the lean loop (``model.lean_decoding``), its prefill timed apart and subtracted.
"""
from __future__ import annotations

import contextlib
import functools
import time
from unittest import mock

import pandas as pd
import torch

from edit_lib.config import load_profile
from edit_lib.data.registry import build_dataset
from edit_lib.model import lean_decode
from edit_lib.model.generate import SamplingConfig, eval_sampling, generate, rollout_sampling
from edit_lib.model.policy import Policy, load_policy
from edit_lib.runner.keys import register_all
from edit_lib.tools.bench import Comparison, rows_differing


def _best(fn, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def matmul_gflops(rows: int, shapes: list[tuple[int, int]], inner: int = 50) -> float:
    """GFLOP/s of ``rows`` x k by k x n products over ``shapes`` [(k, n)], ``inner`` rounds per timing."""
    xs = {k: torch.randn(rows, k) for k, _ in shapes}
    ws = [(k, torch.randn(k, n)) for k, n in shapes]
    flops = inner * sum(2 * rows * k * n for k, n in shapes)
    return flops / _best(lambda: [xs[k] @ w for _ in range(inner) for k, w in ws]) / 1e9


def bandwidth_gbs(mb: int = 256) -> float:
    """GB/s of a copy of ``mb`` MB (read and write counted)."""
    src = torch.empty(mb * 2 ** 18)
    dst = torch.empty_like(src)
    return 2 * src.numel() * 4 / _best(lambda: dst.copy_(src), 3) / 1e9


def per_token(model, context: float) -> tuple[float, float]:
    """(FLOP, KV-cache bytes) of one decoded token at a mean ``context`` of cached positions."""
    c = model.config
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    heads, kv, dim = c.num_attention_heads, c.num_key_value_heads, c.head_dim
    attention = c.num_hidden_layers * 2 * 2 * heads * dim * context
    return 2 * linear + attention, c.num_hidden_layers * 2 * kv * dim * context * 4


def bench_bound(n_prompts: int = 64) -> dict:
    """The module docstring's figures, one thread; ``share_of_bound``: measured tokens/s over the bound."""
    from edit_lib.model.prefix_cache import left_pad

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        prof, model, tok, prompts = demo_grading_prompts()
        prompts = prompts[:n_prompts]
        cfg = eval_sampling(prof.eval, prof.run.seed)
        cfg.batch_size = n_prompts
        generate(model, tok, prompts[:4], cfg, progress=False, lean=True)  # warm the kernels
        t0 = time.perf_counter()
        rows = generate(model, tok, prompts, cfg, progress=False, lean=True)
        total = time.perf_counter() - t0
        ids, mask = left_pad([tok(p)["input_ids"] for p in prompts], tok.pad_token_id, "cpu")
        with torch.inference_mode():
            prefill = _best(lambda: model(input_ids=ids, attention_mask=mask, logits_to_keep=1), 2)
        tokens = int(rows.n_tokens.sum())
        context = float((rows.n_prompt_tokens + rows.n_tokens / 2).mean())
        c = model.config
        shapes = [(c.hidden_size, c.num_attention_heads * c.head_dim), (c.hidden_size, c.intermediate_size),
                  (c.intermediate_size, c.hidden_size), (c.hidden_size, c.vocab_size)]
        gflops, gbs = matmul_gflops(n_prompts, shapes), bandwidth_gbs()
        flop, kv_bytes = per_token(model, context)
        by_flop, by_memory = gflops * 1e9 / flop, gbs * 1e9 / kv_bytes
        measured = tokens / max(total - prefill, 1e-9)
        bound = min(by_flop, by_memory)
        return dict(model=prof.model.name_or_path, measured_threads=1, prompts=n_prompts, new_tokens=tokens,
                    mean_context=round(context, 1), decode_s=round(total - prefill, 3), prefill_s=round(prefill, 3),
                    matmul_gflops=round(gflops, 2), bandwidth_gbs=round(gbs, 2),
                    mflop_per_token=round(flop / 1e6, 3), kv_kb_per_token=round(kv_bytes / 1e3, 1),
                    bound_by_flops_tok_s=round(by_flop), bound_by_memory_tok_s=round(by_memory),
                    bound_tok_s=round(bound), bound_kind="FLOP" if by_flop <= by_memory else "memory",
                    measured_tok_s=round(measured), share_of_bound=round(measured / bound, 3))
    finally:
        torch.set_num_threads(threads)


# ------------------------------------------------------------------ ``edit-suite bench decoding``
# Lean decoding (``model.lean_decoding``, ``model/lean_decode.py``) against transformers generate on the embedded
# grader, at the demo's batch size and budget (greedy grading as 07 runs it, row-seeded rollouts as 01 samples
# them). Further arms give the shares of the lean loop on transformers' forward (``lean_decode.LeanStep``, the
# one-token step, off), of compaction (``lean_decode.COMPACT_EVERY`` 0: every row kept) and of the shared prompt
# (``lean_decode.SHARE_PROMPTS`` off). The first two arms' rows are asserted equal to generate's before any ratio;
# the last two may round differently, so their rows are counted (the share equal), not asserted.

# transformers generate; the lean loop on transformers' forward; with its step, every row kept; with compaction;
# with compaction and shared prompts (today's lean decoding)
ARMS = ("generate", "loop", "whole", "compact", "lean")
# each lever's share: (the arm without it, the arm with it)
SHARES = {"step_share": ("loop", "whole"), "compaction_share": ("whole", "compact"),
          "shared_prompt_share": ("compact", "lean")}


def _decode(model, tok, prompts, cfg: SamplingConfig, arm: str) -> pd.DataFrame:
    step_off = mock.patch.object(lean_decode, "why_not", lambda hf: "bench: the step is off")
    whole = mock.patch.object(lean_decode, "COMPACT_EVERY", 0)
    unshared = mock.patch.object(lean_decode, "SHARE_PROMPTS", False)
    with step_off if arm == "loop" else contextlib.nullcontext(), \
            whole if arm in ("loop", "whole") else contextlib.nullcontext(), \
            unshared if arm != "lean" else contextlib.nullcontext():
        return generate(model, tok, prompts, cfg, progress=False, lean=arm != "generate")


def demo_grading_prompts() -> tuple:
    """(the demo profile, its grader's model and tokenizer, the grading prompts of its SAS-like world's training
    answers): what the decoding benchmarks decode."""
    register_all()
    prof = load_profile("demo")
    model, tok, kind = load_policy(prof.model.name_or_path)
    policy = Policy(model=model, tokenizer=tok, kind=kind, name=prof.model.name_or_path)
    ds = build_dataset(next(d for d in prof.data.datasets if d.name == "synth_sas"), seed=prof.run.seed)
    return prof, model, tok, [policy.grading_input(ds.question(r), r.answer) for r in ds.responses
                              if r.split == "train"]


def bench_decoding(n_greedy: int = 128, n_sampled: int = 16, repeats: int = 2) -> dict:
    """Greedy grading of ``n_greedy`` prompts (the demo's ``eval`` section: App. B, one greedy completion per
    marking) and row-seeded sampling of ``n_sampled`` prompts x ``rollouts.n_per_response`` (the demo's
    ``rollouts`` section, Table 9's T=1.0) of the demo's SAS-like world, each ``repeats`` times with every arm of
    ``ARMS`` in turn; the fastest of each counts. Raises AssertionError when a row of the loop or the whole-batch
    arm differs from generate's. ``ratio_<arm>``: generate's seconds over the arm's; ``<arm>_same_rows``: the
    share of its rows equal to generate's; ``SHARES``: each lever's own ratio (the arm without it over the arm
    with it); ``*_total``: both modes together."""
    prof, model, tok, prompts = demo_grading_prompts()
    out: dict = dict(model=prof.model.name_or_path)
    modes = {"greedy": (eval_sampling(prof.eval, prof.run.seed), prompts[:n_greedy]),
             "sampled": (rollout_sampling(prof.rollouts, prof.run.seed), prompts[:n_sampled])}
    for mode, (cfg, chosen) in modes.items():
        comparison = Comparison({arm: functools.partial(_decode, model, tok, chosen, cfg, arm) for arm in ARMS},
                                rows_differing(), repeats=repeats, shapes=dict(
                                    prompts=len(chosen), batch_size=cfg.batch_size, max_new_tokens=cfg.max_new_tokens))
        res = comparison.run()
        rows = comparison.outputs
        for arm in ("loop", "whole"):
            pd.testing.assert_frame_equal(rows["generate"], rows[arm])  # the same rows, or no ratio at all
        out[mode] = dict(res, rows=len(rows["lean"]), mean_new_tokens=round(float(rows["lean"].n_tokens.mean()), 1),
                         max_tokens=int(rows["lean"].n_tokens.max()),
                         **{k: round(res[f"{a}_s"] / res[f"{b}_s"], 3) for k, (a, b) in SHARES.items()})
    total = {k: sum(out[m][f"{k}_s"] for m in modes) for k in ARMS}
    out["ratio_total"] = round(total["generate"] / total["lean"], 3)
    out.update({f"{k}_total": round(total[a] / total[b], 3) for k, (a, b) in SHARES.items()})
    return out


# ------------------------------------------------------------------ ``edit-suite bench profiler``
# What ``torch.profiler`` costs the grader's decoding: why ``edit-suite run --time-split`` (``runner.time_split``)
# times the outermost forward with a wrapper instead of tracing every operator. The profiler records one event per
# ATen operator; the embedded grader's decoding is a stream of tiny ones.

def _profiled(model, tok, prompts, cfg: SamplingConfig) -> tuple[int, float]:
    """Decode under ``torch.profiler`` (CPU activity, its defaults), then collect its events as a time split would:
    (how many, the seconds collecting them took)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as trace:
        generate(model, tok, prompts, cfg, progress=False, lean=True)
    t0 = time.perf_counter()
    n = len(trace.events())
    return n, time.perf_counter() - t0


def bench_profiler(n_prompts: int = 32, repeats: int = 2) -> dict:
    """Greedy grading of ``n_prompts`` demo prompts by lean decoding, one thread, with and without the profiler
    tracing it. ``ratio_profiled``: plain seconds over the traced call's, its events' collection included (a
    split needs them); ``ratio_trace_only``: without the collection; ``events``: how many it recorded."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        prof, model, tok, prompts = demo_grading_prompts()
        cfg, prompts = eval_sampling(prof.eval, prof.run.seed), prompts[:n_prompts]
        comparison = Comparison({"plain": lambda: generate(model, tok, prompts, cfg, progress=False, lean=True),
                                 "profiled": lambda: _profiled(model, tok, prompts, cfg)}, repeats=repeats,
                                warmup=True, shapes=dict(model=prof.model.name_or_path, prompts=n_prompts,
                                                         measured_threads=1))
        out = comparison.run()
        events, collect = comparison.outputs["profiled"]
        return dict(out, events=events, collect_s=round(collect, 3),
                    ratio_trace_only=round(out["plain_s"] / (out["profiled_s"] - collect), 3),
                    new_tokens=int(comparison.outputs["plain"].n_tokens.sum()))
    finally:
        torch.set_num_threads(threads)
