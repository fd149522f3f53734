"""``edit-suite bench generation``: a generation pool (``model.generation_workers``, edit_lib/model/parallel.py)
against one process with ``model.torch_threads`` threads, over the consecutive calls a stage makes (the demo's
01: the Phase-1 rollouts of each dataset, then the greedy grading of each evaluation split), every call's table
compared row for row. The ratio is reported with the pool's start-up (spawning the workers, each loading the
policy) included and excluded; a call whose tables differ fails the benchmark."""
from __future__ import annotations

import sys
import time

import torch

from edit_lib.config import load_profile
from edit_lib.data.registry import build_dataset
from edit_lib.model.generate import SamplingConfig, eval_sampling, rollout_sampling
from edit_lib.model.parallel import shared_pool
from edit_lib.model.policy import load_policy_from_profile
from edit_lib.model.rollouts import grade_responses, phase1_responses
from edit_lib.runner.register import register_all

SPLITS = ("id_test", "ood_test")  # the evaluation splits 01 grades one call each (as 07 does)


def _calls(prof, datasets: dict) -> list[tuple[str, object, list, SamplingConfig]]:
    """01's generation calls: (label, dataset, responses, sampling) in the order the stage makes them."""
    out = [(f"rollouts/{name}", ds, phase1_responses(ds, prof.rollouts.responses_for(name), prof.run.seed),
            rollout_sampling(prof.rollouts, prof.run.seed)) for name, ds in datasets.items()]
    return out + [(f"greedy/{name}/{s}", ds, ds.split(s), eval_sampling(prof.eval, prof.run.seed))
                  for name, ds in datasets.items() for s in SPLITS if ds.split(s)]


def bench_generation(profile: str = "demo", workers: int = 2) -> dict:
    """01's generation calls of ``profile`` (``grade_responses``, App. B decoding) by one process and by a pool of
    ``workers`` one-thread processes, interleaved call by call (so a change in the machine's load hits both).
    ``ratio``: one-process seconds over the pool's, its start-up excluded; ``ratio_with_startup``: included.
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
    rows, differing = [], []
    for label, ds, responses, cfg in calls:
        torch.set_num_threads(prof.model.torch_threads)
        t0 = time.perf_counter()
        a = grade_responses(one, ds, responses, cfg, progress=False)
        t_one = time.perf_counter() - t0
        t0 = time.perf_counter()
        b = grade_responses(pooled, ds, responses, cfg, progress=False)
        t_pool = time.perf_counter() - t0
        same = a.equals(b) and list(a.dtypes) == list(b.dtypes)
        print(f"{label}: one process {t_one:.1f} s, pool {t_pool:.1f} s, identical {same}", file=sys.stderr,
              flush=True)
        differing += [] if same else [label]
        rows.append(dict(call=label, prompts=len(responses), rows=len(a), one_process_s=round(t_one, 2),
                         pool_s=round(t_pool, 2), identical=same))
    one_s, pool_s = sum(r["one_process_s"] for r in rows), sum(r["pool_s"] for r in rows)
    out = dict(profile=profile, workers=workers, torch_threads_one_process=prof.model.torch_threads,
               calls=rows, one_process_s=round(one_s, 2), pool_s=round(pool_s, 2), startup_s=round(startup, 2),
               worker_loads=sorted(pool.loads.values()), worker_generation_s=round(sum(pool.timings), 2),
               ratio=round(one_s / pool_s, 3),
               ratio_with_startup=round(one_s / (pool_s + startup), 3), identical=not differing)
    if differing:
        raise AssertionError(f"bench generation: the pool's tables differ from one process's on {differing}: {out}")
    return out
