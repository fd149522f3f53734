"""The benchmarks of decoding and generation, each against today's path with its rows compared (each section
says its arms): ``generation`` (a generation pool against one process), ``merge``, ``prefix``, ``rollouts``,
``decoding`` (lean decoding against transformers generate), ``bound`` (the grader's decoding throughput beside
what the machine allows) and ``profiler`` (what a ``torch.profiler`` trace costs decoding).

Longer than 400 lines because every benchmark of one model's decoding is here, each a short declaration for
``tools.bench.Comparison`` beside the inputs it builds.
"""
from __future__ import annotations

import contextlib
import functools
import sys
import tempfile
import time
from unittest import mock

import pandas as pd
import torch

from edit_lib.config import load_profile
from edit_lib.data.registry import build_dataset
from edit_lib.data.schema import DataError, Dataset
from edit_lib.model import lean_decode
from edit_lib.model.generate import eval_sampling, generate, rollout_sampling, SamplingConfig
from edit_lib.model.hf import attach_lora
from edit_lib.model.parallel import shared_pool
from edit_lib.model.policy import load_policy, load_policy_from_profile, Policy, policy_from_weights
from edit_lib.model.rollouts import grade_responses, phase1_responses
from edit_lib.runner.keys import register_all
from edit_lib.tools.bench import clocked, Comparison, identical_frames, rows_differing
from edit_lib.train import rl_runs
from edit_lib.train.rl import rl_dataset, train_rl_arm


SPLITS = ("id_test", "ood_test")  # the evaluation splits 01 grades one call each (as 07 does)


def _calls(prof, datasets: dict) -> list[tuple[str, object, list, SamplingConfig]]:
    """01's generation calls: (label, dataset, responses, sampling) in the order the stage makes them."""
    out = [(f"rollouts/{name}", ds, phase1_responses(ds, prof.rollouts.responses_for(name), prof.run.seed),
            rollout_sampling(prof.rollouts, prof.run.seed)) for name, ds in datasets.items()]
    return out + [(f"greedy/{name}/{s}", ds, ds.split(s), eval_sampling(prof.eval, prof.run.seed))
                  for name, ds in datasets.items() for s in SPLITS if ds.split(s)]


def bench_generation(profile: str = "demo", workers: int = 2) -> dict:
    """01's generation calls of ``profile`` (``grade_responses``, App. B decoding) by one process at
    ``model.torch_threads`` and by a pool of ``workers`` one-thread processes (``model.generation_workers``),
    interleaved call by call (so a change in the machine's load hits both), every call's table compared row for
    row. ``ratio_pool``: one-process seconds over the pool's, its start-up excluded; ``ratio_pool_with_startup``:
    included.
    Both policies are loaded before timing (a stage loads its policy either way)."""
    register_all()
    prof = load_profile(profile, ["model.generation_workers=1"])
    pooled_prof = load_profile(profile, [f"model.generation_workers={workers}"])
    datasets = {d.name: build_dataset(d, seed=prof.run.seed) for d in prof.data.datasets}
    one = load_policy_from_profile(prof)
    pooled = load_policy_from_profile(pooled_prof)
    calls = _calls(prof, datasets)
    t0 = time.perf_counter()
    pool = shared_pool(workers)  # start-up: spawn the workers, each loading the policy once
    pool.generate(pooled.engine.source, ["warm-up"] * workers, SamplingConfig(greedy=True, max_new_tokens=1))
    startup = time.perf_counter() - t0

    def one_process(ds, responses, cfg):
        torch.set_num_threads(prof.model.torch_threads)
        return grade_responses(one, ds, responses, cfg, progress=False)
    rows = []
    for label, ds, responses, cfg in calls:
        row = Comparison({"one_process": functools.partial(one_process, ds, responses, cfg),
                          "pool": lambda: grade_responses(pooled, ds, responses, cfg, progress=False)},
                         identical_frames, repeats=1, shapes=dict(call=label, prompts=len(responses))).run()
        print(f"{label}: one process {row['one_process_s']:.1f} s, pool {row['pool_s']:.1f} s", file=sys.stderr,
              flush=True)
        rows.append(row)
    one_s, pool_s = sum(r["one_process_s"] for r in rows), sum(r["pool_s"] for r in rows)
    return dict(profile=profile, workers=workers, torch_threads_one_process=prof.model.torch_threads,
                calls=rows, one_process_s=round(one_s, 2), pool_s=round(pool_s, 2), startup_s=round(startup, 2),
                worker_loads=sorted(pool.loads.values()), worker_generation_s=round(sum(pool.timings), 2),
                ratio_pool=round(one_s / pool_s, 3), ratio_pool_with_startup=round(one_s / (pool_s + startup), 3),
                identical=True)


# ------------------------------------------------------------------ ``edit-suite bench merge``

def _adapter(prof, folder: str, seed: int, model=None) -> None:
    """The demo's SFT LoRA on the embedded grader (``model``, else loaded) with random A and B (scale 0.02, so the
    adapter moves the logits), saved to ``folder``; tests/model/test_parallel.py builds its adapters with it."""
    model = model if model is not None else load_policy(prof.model.name_or_path)[0]
    peft_model = attach_lora(model, prof.sft.lora)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
    peft_model.save_pretrained(folder)


def bench_merge(n_prompts: int = 128, repeats: int = 2, seed: int = 0) -> dict:
    """Greedy grading (the demo's ``eval`` section: App. B, one greedy completion per marking) of ``n_prompts``
    training answers of the demo's SAS-like world by a policy with a LoRA adapter (the demo's SFT recipe, App. B)
    loaded as the stages load it, against the adapter folded into the weights (``model.pool_merges_adapters``),
    ``repeats`` times each way, alternating; the fastest of each counts. ``ratio_merged``: unmerged seconds over
    merged; ``rows_differing``: completions whose text differs (equal up to rounding)."""
    prof, model, _, prompts = demo_grading_prompts()
    prompts, cfg = prompts[:n_prompts], eval_sampling(prof.eval, prof.run.seed)
    with tempfile.TemporaryDirectory() as folder:
        _adapter(prof, folder, seed, model)
        policies = {merge: policy_from_weights(prof.model, folder, merge=merge) for merge in (False, True)}

        def grade(merge: bool):
            p = policies[merge]
            return lambda: generate(p.model, p.tokenizer, prompts, cfg, progress=False, lean=prof.model.lean_decoding)
        return Comparison({"unmerged": grade(False), "merged": grade(True)}, rows_differing(), repeats=repeats,
                          shapes=dict(model=prof.model.name_or_path, prompts=len(prompts), batch_size=cfg.batch_size,
                                      max_new_tokens=cfg.max_new_tokens, lora_r=prof.sft.lora.r)).run()


# ------------------------------------------------------------------ ``edit-suite bench prefix``

KEY = ["prompt_index", "rollout_id", "text", "n_tokens"]


def _grading_prompts(policy: Policy, ds: Dataset, split: str, n_per_question: int, n_questions: int) -> list[str]:
    """Grading prompts of ``ds``: ``n_per_question`` answers of ``split`` for each of its first ``n_questions``
    questions (one question's prompts share everything but the answer)."""
    out = []
    for qid in list(ds.questions)[:n_questions]:
        rs = [r for r in ds.responses if r.split == split and r.question_id == qid][:n_per_question]
        out += [policy.grading_input(ds.question(r), r.answer) for r in rs]
    return out


def _first_dataset(profile: str) -> Dataset:
    prof = load_profile(profile)
    return build_dataset(prof.data.datasets[0], seed=prof.run.seed)


def _one(model, tok, kind: str, name: str, cfg: SamplingConfig, data: tuple[str, Dataset, str],
         n_per_question: int, n_questions: int) -> dict:
    policy = Policy(model=model, tokenizer=tok, kind=kind, name=name)
    label, ds, split = data
    prompts = _grading_prompts(policy, ds, split, n_per_question, n_questions)
    lengths = [len(tok(p)["input_ids"]) for p in prompts]
    comparison = Comparison(
        {"plain": lambda: generate(model, tok, prompts, cfg, progress=False),
         "shared": lambda: generate(model, tok, prompts, cfg, progress=False, share_prefix=True)},
        rows_differing(tuple(KEY)), repeats=1, shapes=dict(
            model=name, data=f"{label}:{split}", prompts=len(prompts), questions=n_questions,
            mean_prompt_tokens=sum(lengths) / len(lengths)))
    out = comparison.run()
    return dict(out, mean_new_tokens=float(comparison.outputs["plain"].n_tokens.mean()))


def bench_prefix(n_per_question: int = 16, n_questions: int = 2, max_new_tokens: int = 64,
                 batch_size: int = 8) -> dict:
    """Greedy grading (App. B: one greedy completion per marking) of ``n_questions`` x ``n_per_question`` prompts,
    batches of ``batch_size``, plain against each batch's common prefix encoded once (``model.prefix_cache``): the
    embedded grader on the demo's SAS-like world, and, where ``make real-model`` installed it, SmolLM2-135M-Instruct
    (zero-shot, a long chat-template prefix) on cpu-real's ASAP answers (the demo world where ASAP is absent).
    ``ratio_shared``: plain seconds over shared seconds; ``rows_differing``: rows whose text or token count differ
    (0 expected; floating-point differences may flip a near-tie)."""
    from edit_lib.model.gguf_model import NAME, available
    register_all()
    cfg = SamplingConfig.evaluation(max_new_tokens=max_new_tokens, batch_size=batch_size)
    name = load_profile("demo").model.name_or_path
    demo = ("demo", _first_dataset("demo"), "train")
    out = dict(max_new_tokens=max_new_tokens, batch_size=batch_size,
               embedded=_one(*load_policy(name), name, cfg, demo, n_per_question, n_questions))
    ok, why = available()
    if not ok:
        out[NAME] = dict(skipped=why)
        return out
    try:  # the cpu-real data where it is on this machine
        data = ("cpu-real", _first_dataset("cpu-real"), "id_test")
    except (DataError, FileNotFoundError):
        data = demo
    out[NAME] = _one(*load_policy(NAME), NAME, cfg, data, n_per_question, n_questions)
    return out


# ------------------------------------------------------------------ ``edit-suite bench rollouts``
# 06's GRPO runs with their rollouts decoded by lean decoding (``model.lean_decoding``: ``lean_decode.lean_rollouts``)
# against TRL's transformers generate: one run of the Table 9 recipe, ``steps`` steps on one dataset from Base, at an
# ``rl.workers`` worker's threads, each way ``repeats`` times; logs (but timings) and LoRA weights must be equal
# before a ratio is reported. TRL's own generate time is reported beside, so the rollouts' ratio and share are apart.
# A third arm folds the training adapter into the weights for each call's steps (``lean_decode.MERGE_LORA``, the
# default): its last digits move, so it reports how far its logs and weights moved instead of asserting them equal.

TIMING_KEYS = ("runtime", "per_second", "step_time")


def _run(P, ds, name: str, steps: int, lean: bool, fold: bool = False) -> tuple[float, list, dict, bool]:
    """(seconds inside generate, logs without timings, LoRA weights, ``fold``) of one GRPO run."""
    from transformers import GenerationMixin

    from edit_lib.model import lean_decode
    policy = load_policy_from_profile(P)
    policy.lean_decoding = lean
    spent = []
    with tempfile.TemporaryDirectory() as tmp, mock.patch.object(lean_decode, "MERGE_LORA", fold), \
            mock.patch.object(GenerationMixin, "generate", clocked(GenerationMixin.generate, spent)), \
            mock.patch.object(lean_decode, "lean_generate", clocked(lean_decode.lean_generate, spent)):
        res = train_rl_arm(policy, rl_dataset(policy, ds), P.rl, P.sft.lora, tmp, name, P.run.seed, "grpo",
                           step_rule=P.steps.rule, max_steps=steps,
                           per_device_batch_size=P.rl.per_device_batch_size or None)
    logs = [{k: v for k, v in e.items() if not any(t in k for t in TIMING_KEYS)} for e in res.log_history]
    weights = {k: v.detach().clone() for k, v in res.policy.model.state_dict().items() if "lora_" in k}
    return sum(spent), logs, weights, fold


def bench_rollouts(profile: str = "demo", steps: int = 6, repeats: int = 2, dataset: str | None = None) -> dict:
    """Time a GRPO run of ``steps`` steps with and without lean rollouts, and lean with the adapter folded (the
    section's comment); the fastest of ``repeats`` each way counts. Raises AssertionError when a log entry or a LoRA
    weight of the unfolded lean run differs. ``ratio_<arm>``: run seconds of generate over the arm's;
    ``generation_ratio_<arm>``: the same for the seconds inside generate."""
    register_all()
    P = rl_runs.worker_profile(load_profile(profile))
    torch.set_num_threads(P.model.torch_threads)
    spec = {d.name: d for d in P.data.datasets}
    name = dataset or (list(P.rl.grid_datasets) or list(P.rl.datasets) or list(spec))[0]
    ds = build_dataset(spec[name], seed=P.run.seed)

    def same_run(a, b) -> dict:
        assert a[2].keys() == b[2].keys(), "the runs trained different LoRA weights"
        moved = max(float((a[2][k] - b[2][k]).abs().max()) for k in a[2])
        if b[3]:  # folded: how far the last digits took the run
            return dict(identical=a[1] == b[1] and moved == 0.0, lora_max_abs_diff=moved,
                        reward_max_abs_diff=max((abs(x.get("reward", 0.0) - y.get("reward", 0.0))
                                                 for x, y in zip(a[1], b[1])), default=0.0))
        assert a[1] == b[1], "lean rollouts changed the run's logs"
        assert moved == 0.0, "LoRA weights differ"
        return dict(identical=True)
    comparison = Comparison({"generate": lambda: _run(P, ds, name, steps, False),
                             "lean": lambda: _run(P, ds, name, steps, True),
                             "lean_folded": lambda: _run(P, ds, name, steps, True, fold=True)}, same_run,
                            repeats=repeats,
                            shapes=dict(profile=P.name, dataset=name, steps=steps, torch_threads=P.model.torch_threads))
    out = comparison.run()
    gen = {arm: o[0] for arm, o in comparison.outputs.items()}
    return dict(out, generation_s={a: round(g, 2) for a, g in gen.items()},
                generation_share=round(gen["generate"] / out["generate_s"], 3),
                **{f"generation_ratio_{a}": round(gen["generate"] / gen[a], 3) for a in ("lean", "lean_folded")})


# ------------------------------------------------------------------ ``edit-suite bench bound``
# One thread, as a generation worker runs. Measured on this machine: matrix-product GFLOP/s at the grader's own
# shapes (a batch of rows times each weight matrix of a layer and the head) and memory bandwidth (a copy of a buffer
# larger than the caches). Counted from the model: the floating-point operations of one decoded token (2 per weight
# of every linear layer and the head, plus attention's two products over the mean context) and the bytes it reads
# from the key/value cache (every layer's keys and values over that context, float32). The bound is the smaller of
# FLOP/s over FLOP per token and bandwidth over cache bytes per token (the weights, 4.5 MB, stay in the caches
# across a batch's rows). The measured throughput is greedy decoding of the demo's SAS-like grading prompts by the
# lean loop (``model.lean_decoding``), its prefill timed apart and subtracted.

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
    """The section's figures, one thread; ``share_of_bound``: measured tokens/s over the bound."""
    from edit_lib.model.lean_decode import left_pad

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
