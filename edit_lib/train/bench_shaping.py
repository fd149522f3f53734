"""``edit-suite bench shaping``: what belief shaping costs per optimiser step (Sec. 2.3; App. B "Compute
budget": about 2 s on a 12 s step in the paper, 1.17x).

EDIT-RL and GRPO run the same number of optimiser steps from the same initialisation, prompts, seed and Table 9
recipe (the profile's ``rl`` section) and differ only in the shaping reward, whose frozen probe reads every
completion of the step in packed batches (``train.rewards.shaping_terms``). Step times come from a callback
(wall clock from step begin to step end); the first step (warm-up) is left out and the medians compared:
``step_time_ratio`` = median EDIT-RL step / median GRPO step. Because sampling diverges after the first update,
completion lengths differ a little between the arms; their mean lengths are reported beside the ratio.
"""
from __future__ import annotations

import statistics
import tempfile
import time

from ..config import load_profile
from ..data.registry import build_dataset
from ..policy import load_policy_from_profile
from .rl import rl_dataset, train_rl_arm


def _timer():
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.times, self._t0 = [], None

        def on_step_begin(self, args, state, control, **kw):
            self._t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            self.times.append(time.perf_counter() - self._t0)

    return StepTimer()


def bench_shaping(profile: str = "demo", steps: int = 6, dataset: str | None = None) -> dict:
    """Time ``steps`` optimiser steps of GRPO and of EDIT-RL (same init, prompts, seed) on ``dataset`` (default:
    the first of ``rl.datasets`` or of the profile) with the profile's RL recipe; the module docstring says how."""
    P = load_profile(profile)
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
        timer = _timer()
        with tempfile.TemporaryDirectory() as tmp:
            res = train_rl_arm(policy, rl_dataset(policy, ds), P.rl, P.sft.lora, tmp, name, P.run.seed, arm,
                               frozen_probe_policy=frozen, probe_cfg=P.probe, shaping=shaping,
                               step_rule=P.steps.rule, max_steps=steps, callbacks=[timer],
                               per_device_batch_size=P.rl.per_device_batch_size or None)
        lengths = [e["completions/mean_length"] for e in res.log_history if "completions/mean_length" in e]
        out[arm] = dict(step_seconds=timer.times, median_step_seconds=statistics.median(timer.times[1:] or timer.times),
                        mean_completion_length=statistics.mean(lengths) if lengths else None)
    return dict(profile=P.name, dataset=name, steps=steps,
                completions_per_step=P.rl.rollouts_per_prompt * P.rl.prompts_per_step,
                grpo=out["grpo"], edit_rl=out["edit_rl"],
                step_time_ratio=out["edit_rl"]["median_step_seconds"] / out["grpo"]["median_step_seconds"])
