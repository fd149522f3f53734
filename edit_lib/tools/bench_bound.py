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
# them), rows asserted identical before any ratio. Further arms give the shares of the lean loop on transformers'
# forward (``lean_decode.LeanStep``, the one-token step, off), of compaction (``lean_decode.COMPACT_EVERY`` 0: every
# row kept) and of the shared prompt (``lean_decode.SHARE_PROMPTS`` off, ``model/lean_decode.py``); those may
# round differently, so their rows are compared (the share equal), not asserted.

# transformers generate; the lean loop on transformers' forward; with its step, every row kept; with compaction;
# with compaction and shared prompts (today's lean decoding)
ARMS = ("generate", "loop", "whole", "compact", "lean")


def _timed(model, tok, prompts, cfg: SamplingConfig, arm: str) -> tuple[float, pd.DataFrame]:
    step_off = mock.patch.object(lean_decode, "why_not", lambda hf: "bench: the step is off")
    whole = mock.patch.object(lean_decode, "COMPACT_EVERY", 0)
    unshared = mock.patch.object(lean_decode, "SHARE_PROMPTS", False)
    t0 = time.perf_counter()
    with step_off if arm == "loop" else contextlib.nullcontext(), \
            whole if arm in ("loop", "whole") else contextlib.nullcontext(), \
            unshared if arm != "lean" else contextlib.nullcontext():
        rows = generate(model, tok, prompts, cfg, progress=False, lean=arm != "generate")
    return time.perf_counter() - t0, rows


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
    ``rollouts`` section, Table 9's T=1.0) of the demo's SAS-like world, each ``repeats`` times with generate and
    with the lean loop on transformers' forward and with the lean loop and its one-token step, in turn; the fastest
    of each counts. Raises AssertionError when a row of the loop or the whole-batch arm differs from generate's.
    ``ratio``: generate seconds over lean seconds; ``ratio_step``: the loop on transformers' forward over the
    whole-batch arm; ``ratio_compact``: the whole-batch arm over the compacted one, ``same_rows_compact`` the share of
    its rows equal to generate's; ``ratio_shared``: the compacted arm over lean (shared prompts too),
    ``same_rows_shared`` the share of lean's rows equal to generate's; ``ratio_total`` and the other ``*_total``: both
    modes together."""
    prof, model, tok, prompts = demo_grading_prompts()
    out: dict = dict(model=prof.model.name_or_path, repeats=repeats)
    modes = {"greedy": (eval_sampling(prof.eval, prof.run.seed), prompts[:n_greedy]),
             "sampled": (rollout_sampling(prof.rollouts, prof.run.seed), prompts[:n_sampled])}
    for mode, (cfg, chosen) in modes.items():
        best = dict.fromkeys(ARMS, float("inf"))
        rows = {}
        for _ in range(repeats):
            for arm in ARMS:
                seconds, rows[arm] = _timed(model, tok, chosen, cfg, arm)
                best[arm] = min(best[arm], seconds)
        for arm in ("loop", "whole"):
            pd.testing.assert_frame_equal(rows["generate"], rows[arm])  # the same rows, or no ratio at all
        same = {arm: round(float((rows[arm].text == rows["generate"].text).mean()), 4) for arm in ("compact", "lean")}
        out[mode] = dict(prompts=len(chosen), rows=len(rows["lean"]), batch_size=cfg.batch_size,
                         max_new_tokens=cfg.max_new_tokens, mean_new_tokens=round(float(rows["lean"].n_tokens.mean()), 1),
                         max_tokens=int(rows["lean"].n_tokens.max()), **{f"{a}_s": round(best[a], 2) for a in ARMS},
                         ratio=round(best["generate"] / best["lean"], 3),
                         ratio_step=round(best["loop"] / best["whole"], 3),
                         ratio_compact=round(best["whole"] / best["compact"], 3),
                         ratio_shared=round(best["compact"] / best["lean"], 3), identical=True,
                         same_rows_compact=same["compact"], same_rows_shared=same["lean"])
    total = {k: sum(out[m][f"{k}_s"] for m in modes) for k in ARMS}
    out["ratio_total"] = round(total["generate"] / total["lean"], 3)
    out["ratio_step_total"] = round(total["loop"] / total["whole"], 3)
    out["ratio_compact_total"] = round(total["whole"] / total["compact"], 3)
    out["ratio_shared_total"] = round(total["compact"] / total["lean"], 3)
    return out
