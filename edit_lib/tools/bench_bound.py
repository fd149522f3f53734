"""``edit-suite bench bound``: how far the embedded grader's decoding runs from what the machine allows.

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

import time

import torch


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
    from edit_lib.model.generate import eval_sampling, generate
    from edit_lib.model.prefix_cache import left_pad
    from edit_lib.tools.bench_decoding import demo_grading_prompts

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
