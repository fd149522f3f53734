"""``edit-suite bench rollouts``: 06's GRPO runs with their rollouts decoded by lean decoding
(``model.lean_decoding``: ``lean_decode.lean_rollouts``, the lean loop and ``lean_forward``'s one-token step)
against TRL's transformers generate. One run of the profile's Table 9 recipe, ``steps`` optimiser steps on one
dataset from Base, at the thread count an ``rl.workers`` worker has, each way in turn ``repeats`` times; the logs
(but their timings) and the LoRA weights must be equal before a ratio is reported. The time TRL's generation
takes inside each run (the generate call, timed) is reported beside the run's, so the rollouts' own ratio and
their share of a step are read apart."""
from __future__ import annotations

import tempfile
import time
from unittest import mock

import torch

from edit_lib.config import load_profile
from edit_lib.data.registry import build_dataset
from edit_lib.model.policy import load_policy_from_profile
from edit_lib.runner.register import register_all
from edit_lib.train import rl_runs
from edit_lib.train.rl import rl_dataset, train_rl_arm

TIMING_KEYS = ("runtime", "per_second", "step_time")


def _clocked(fn, spent: list):
    """``fn``, adding each call's wall time to ``spent``; a call inside another clocked one is not counted again
    (the lean loop's fallback runs generate)."""
    def clocked(*a, **kw):
        if spent and spent[-1] is None:  # an outer clocked call is running
            return fn(*a, **kw)
        spent.append(None)
        t0 = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            spent[-1] = time.perf_counter() - t0
    return clocked


def _run(P, ds, name: str, steps: int, lean: bool) -> tuple[float, float, list, dict]:
    """(run seconds, seconds inside generate, logs without timings, LoRA weights) of one GRPO run."""
    from transformers import GenerationMixin

    from edit_lib.model import lean_decode
    policy = load_policy_from_profile(P)
    policy.lean_decoding = lean
    spent = []
    with tempfile.TemporaryDirectory() as tmp, \
            mock.patch.object(GenerationMixin, "generate", _clocked(GenerationMixin.generate, spent)), \
            mock.patch.object(lean_decode, "lean_generate", _clocked(lean_decode.lean_generate, spent)):
        t0 = time.perf_counter()
        res = train_rl_arm(policy, rl_dataset(policy, ds), P.rl, P.sft.lora, tmp, name, P.run.seed, "grpo",
                           step_rule=P.steps.rule, max_steps=steps,
                           per_device_batch_size=P.rl.per_device_batch_size or None)
        seconds = time.perf_counter() - t0
    logs = [{k: v for k, v in e.items() if not any(t in k for t in TIMING_KEYS)} for e in res.log_history]
    weights = {k: v.detach().clone() for k, v in res.policy.model.state_dict().items() if "lora_" in k}
    return seconds, sum(spent), logs, weights


def bench_rollouts(profile: str = "demo", steps: int = 6, repeats: int = 2, dataset: str | None = None) -> dict:
    """Time a GRPO run of ``steps`` steps with and without lean rollouts (module docstring); the fastest of
    ``repeats`` each way counts. Raises AssertionError when a log entry or a LoRA weight differs. ``ratio``: run
    seconds without over with; ``generation_ratio``: the same for the seconds inside generate."""
    register_all()
    P = rl_runs.worker_profile(load_profile(profile))
    torch.set_num_threads(P.model.torch_threads)
    spec = {d.name: d for d in P.data.datasets}
    name = dataset or (list(P.rl.grid_datasets) or list(P.rl.datasets) or list(spec))[0]
    ds = build_dataset(spec[name], seed=P.run.seed)
    best, seen = {}, {}
    for _ in range(repeats):
        for lean in (False, True):
            seconds, gen, logs, weights = _run(P, ds, name, steps, lean)
            if seconds < best.get(lean, (float("inf"),))[0]:
                best[lean] = (seconds, gen)
            seen[lean] = (logs, weights)
    (logs_a, w_a), (logs_b, w_b) = seen[False], seen[True]
    assert logs_a == logs_b, "lean rollouts changed the run's logs"
    assert w_a.keys() == w_b.keys() and all(torch.equal(w_a[k], w_b[k]) for k in w_a), "LoRA weights differ"
    (run_g, gen_g), (run_l, gen_l) = best[False], best[True]
    return dict(profile=P.name, dataset=name, steps=steps, torch_threads=P.model.torch_threads, repeats=repeats,
                run_s=dict(generate=round(run_g, 2), lean=round(run_l, 2)),
                generation_s=dict(generate=round(gen_g, 2), lean=round(gen_l, 2)),
                generation_share=round(gen_g / run_g, 3), ratio=round(run_g / run_l, 3),
                generation_ratio=round(gen_g / gen_l, 3), identical=True)
