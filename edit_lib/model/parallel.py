"""Generation spread over worker processes (both cores of a CPU machine; App. B's decoding unchanged).

A small grader spends its generation time in per-step Python overhead rather than in matrix products, so one
process with two torch threads leaves a core idle. ``generate_parallel`` splits the prompts into interleaved
shards, and each worker (one torch thread, its own copy of the model loaded from the weights folder) runs
``generate.generate`` on its shard with the prompts' global indices. Under row seeding (``SamplingConfig.seeding
= 'row'``) and for greedy decoding a row's tokens do not depend on the shard it lands in, so the result equals
the one-process call row for row (``edit-suite bench generation`` checks it and measures the ratio).
"""
from __future__ import annotations

import multiprocessing as mp
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Sequence

import pandas as pd

from edit_lib.model.generate import SamplingConfig, generate


def _shard(folder: str, adapter: str | None, prompts: list[str], ids: list, indices: list[int],
           cfg: SamplingConfig) -> tuple[pd.DataFrame, float]:
    import torch

    from edit_lib.model.policy import load_policy
    torch.set_num_threads(1)
    model, tok, _ = load_policy(folder, adapter=adapter)
    t0 = time.perf_counter()
    df = generate(model, tok, prompts, cfg, ids=ids, progress=False, prompt_indices=indices)
    return df, time.perf_counter() - t0


def generate_parallel(folder: str, prompts: Sequence[str], cfg: SamplingConfig, workers: int = 2,
                      ids: Sequence | None = None, adapter: str | None = None,
                      timings: list | None = None) -> pd.DataFrame:
    """``generate``'s rows for ``prompts`` from the model in the local weights ``folder`` (and LoRA ``adapter``),
    computed by ``workers`` processes. Sampled decoding must be row-seeded: batch-seeded tokens depend on how the
    rows are batched, so a split would change them. ``timings`` (a list) receives each worker's generation
    seconds, model loading and process start-up excluded."""
    if not cfg.greedy and cfg.seeding != "row":
        raise ValueError("generate_parallel needs greedy decoding or SamplingConfig(seeding='row'): batch-seeded "
                         "tokens depend on how rows are batched, so splitting them over processes changes them")
    ids = list(range(len(prompts))) if ids is None else list(ids)
    shards = [list(range(w, len(prompts), workers)) for w in range(workers)]
    shards = [s for s in shards if s]
    if len(shards) <= 1:
        return generate_in_worker(folder, prompts, cfg, ids, adapter)
    with ProcessPoolExecutor(len(shards), mp_context=mp.get_context("spawn")) as pool:
        futures = [pool.submit(_shard, folder, adapter, [prompts[i] for i in s], [ids[i] for i in s], s, cfg)
                   for s in shards]
        results = [f.result() for f in futures]
    if timings is not None:
        timings.extend(sec for _, sec in results)
    df = pd.concat([d for d, _ in results], ignore_index=True)
    return df.sort_values(["prompt_index", "rollout_id"], kind="stable").reset_index(drop=True)


def generate_in_worker(folder: str, prompts: Sequence[str], cfg: SamplingConfig, ids: Sequence | None = None,
                       adapter: str | None = None) -> pd.DataFrame:
    """The one-process reference of ``generate_parallel``: the same model loaded the same way, in this process."""
    from edit_lib.model.policy import load_policy
    model, tok, _ = load_policy(folder, adapter=adapter)
    return generate(model, tok, list(prompts), cfg, ids=None if ids is None else list(ids), progress=False)
