"""``edit-suite bench generation``: generation over two worker processes (``model.parallel``) against one process
with two torch threads, on the same rows of the embedded grader, with the outputs compared row for row."""
from __future__ import annotations

import time

import torch

from edit_lib.config import load_profile
from edit_lib.data.registry import build_dataset
from edit_lib.model.bases import resolve_base_path
from edit_lib.model.generate import SamplingConfig, generate
from edit_lib.model.parallel import generate_parallel
from edit_lib.model.policy import Policy, load_policy
from edit_lib.runner.register import register_all

KEY = ["prompt_index", "rollout_id", "text", "n_tokens"]


def bench_generation(n_prompts: int = 96, n: int = 8, max_new_tokens: int = 256, batch_size: int = 64,
                     workers: int = 2) -> dict:
    """Sampled (row-seeded, ``n`` rollouts per prompt) and greedy decoding of ``n_prompts`` grading prompts of the
    demo's SAS-like world: one process (``model.torch_threads`` = 2) against ``workers`` processes of one thread.
    ``ratio``: one-process generation seconds over the slowest worker's (start-up and loading excluded);
    ``ratio_wall``: the same with the workers' start-up and model loading included."""
    register_all()
    prof = load_profile("demo")
    folder = resolve_base_path(prof.model.name_or_path)
    ds = build_dataset(next(d for d in prof.data.datasets if d.name == "synth_sas"), seed=prof.run.seed)
    model, tok, kind = load_policy(folder)
    policy = Policy(model=model, tokenizer=tok, kind=kind, name=prof.model.name_or_path)
    rs = [r for r in ds.responses if r.split == "train"][:n_prompts]
    prompts = [policy.grading_input(ds.question(r), r.answer) for r in rs]
    out = dict(prompts=len(prompts), workers=workers, torch_threads_one_process=2, max_new_tokens=max_new_tokens)
    for mode, cfg in (("sampled", SamplingConfig(n=n, max_new_tokens=max_new_tokens, batch_size=batch_size,
                                                 seed=0, seeding="row")),
                      ("greedy", SamplingConfig(greedy=True, n=1, max_new_tokens=max_new_tokens,
                                                batch_size=batch_size))):
        torch.set_num_threads(2)
        t0 = time.perf_counter()
        one = generate(model, tok, prompts, cfg, progress=False)
        t_one = time.perf_counter() - t0
        timings: list = []
        t0 = time.perf_counter()
        many = generate_parallel(folder, prompts, cfg, workers=workers, timings=timings)
        t_wall = time.perf_counter() - t0
        same = one[KEY].reset_index(drop=True).equals(many[KEY].reset_index(drop=True))
        out[mode] = dict(rows=len(one), one_process_s=round(t_one, 2), workers_generation_s=[round(t, 2) for t in timings],
                         parallel_wall_s=round(t_wall, 2), ratio=round(t_one / max(timings), 3),
                         ratio_wall=round(t_one / t_wall, 3), identical=bool(same),
                         rows_differing=int((one[KEY].reset_index(drop=True) != many[KEY].reset_index(drop=True))
                                            .any(axis=1).sum()) if len(one) == len(many) else None)
    return out
