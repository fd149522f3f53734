"""``edit-suite bench shaping``: what belief shaping costs per optimiser step (Sec. 2.3; App. B "Compute
budget": about 2 s on a 12 s step in the paper, 1.17x).

EDIT-RL and GRPO run the same number of optimiser steps from the same initialisation, prompts, seed and Table 9
recipe (the profile's ``rl`` section) and differ only in the shaping reward, whose frozen probe reads every
completion of the step in packed batches (``train.rewards.shaping_terms``). Step times come from a callback
(wall clock from step begin to step end), and inside EDIT-RL the shaping reward's own calls are timed.

``step_time_ratio`` is measured on the same batch: for each EDIT-RL step, step time / (step time - time spent
in the shaping reward), i.e. the step with the frozen probe over the same step without it; the median over
steps after the first (warm-up). ``arm_ratio`` (median EDIT-RL step / median GRPO step over the two runs) is
reported beside it, but sampling diverges after the first update, so the two arms generate different lengths
and that ratio carries the generation-length noise (their mean completion lengths are reported too).
"""
from __future__ import annotations

import statistics
import tempfile
import time
from contextlib import contextmanager

from edit_lib.config import load_profile
from edit_lib.data.registry import build_dataset
from edit_lib.model.policy import load_policy_from_profile
from edit_lib.runner.register import register_all
from edit_lib.train.rl import rl_dataset, train_rl_arm


def _timer():
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        """Wall time per optimiser step and the shaping reward's time within it (``spent`` is filled by
        ``_timed_shaping``)."""

        def __init__(self):
            self.times, self.shaping, self.spent, self._t0, self._n = [], [], [], None, 0

        def on_step_begin(self, args, state, control, **kw):
            self._t0, self._n = time.perf_counter(), len(self.spent)

        def on_step_end(self, args, state, control, **kw):
            self.times.append(time.perf_counter() - self._t0)
            self.shaping.append(sum(self.spent[self._n:]))

    return StepTimer()


@contextmanager
def _patched(make):
    """``train.rl`` builds the shaping reward with ``make`` while the block runs."""
    from edit_lib.train import rl
    old = rl.make_shaping_reward
    rl.make_shaping_reward = make
    try:
        yield
    finally:
        rl.make_shaping_reward = old


def _timed_shaping(spent: list):
    """``make_shaping_reward`` whose reward function adds its wall time per call to ``spent``."""
    from edit_lib.train import rewards

    def make(*a, **kw):
        fn = rewards.make_shaping_reward(*a, **kw)

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            out = fn(*args, **kwargs)
            spent.append(time.perf_counter() - t0)
            return out
        timed.__name__ = fn.__name__
        return timed
    return make


def bench_shaping(profile: str = "demo", steps: int = 8, dataset: str | None = None) -> dict:
    """Time ``steps`` optimiser steps of GRPO and of EDIT-RL (same init, prompts, seed) on ``dataset`` (default:
    the first of ``rl.datasets`` or of the profile) with the profile's RL recipe; the module docstring says how."""
    P = load_profile(profile)
    register_all()  # 'embedded' / 'micro' are named Bases
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
        timer, spent = _timer(), []
        timer.spent = spent
        with tempfile.TemporaryDirectory() as tmp, _patched(_timed_shaping(spent)):
            res = train_rl_arm(policy, rl_dataset(policy, ds), P.rl, P.sft.lora, tmp, name, P.run.seed, arm,
                               frozen_probe_policy=frozen, probe_cfg=P.probe, shaping=shaping,
                               step_rule=P.steps.rule, max_steps=steps, callbacks=[timer],
                               per_device_batch_size=P.rl.per_device_batch_size or None)
        lengths = [e["completions/mean_length"] for e in res.log_history if "completions/mean_length" in e]
        out[arm] = dict(step_seconds=timer.times, median_step_seconds=statistics.median(timer.times[1:] or timer.times),
                        shaping_seconds=timer.shaping,
                        mean_completion_length=statistics.mean(lengths) if lengths else None)
    e = out["edit_rl"]
    same = [t / (t - sh) for t, sh in zip(e["step_seconds"], e["shaping_seconds"]) if t > sh][1:]
    return dict(profile=P.name, dataset=name, steps=steps,
                completions_per_step=P.rl.rollouts_per_prompt * P.rl.prompts_per_step,
                grpo=out["grpo"], edit_rl=e, step_time_ratio=statistics.median(same) if same else None,
                shaping_share_of_step=statistics.median(sh / t for t, sh in zip(e["step_seconds"][1:],
                                                                                 e["shaping_seconds"][1:])),
                arm_ratio=e["median_step_seconds"] / out["grpo"]["median_step_seconds"])
