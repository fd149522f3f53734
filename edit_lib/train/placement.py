"""Where and in what order parallel training runs go (Suite's choice, for speed; the order changes no number).
Ray places 06's runs on the engine (``engine.UNITS['rl_run']``: a GPU each where there are GPUs, visible to the
unit alone as cuda:0, so transformers' Trainer neither moves the model nor spreads it over several GPUs).

* ``unit_profile``: the device a run trains on inside its engine unit.
* ``rank_device``: the device of one process of a run spread over ``rl.processes`` / ``sft.processes``.
* ``longest_first``: runs ordered by expected cost (App. B: EDIT-RL's probe read adds about 2 s to a 12 s GRPO
  step), so the longest runs start first and no worker idles at the end.
* ``process_profile`` / ``with_model``: the profile a worker or launched process trains under.
"""
from __future__ import annotations

import dataclasses
import re

# App. B, "Phase 2 (RL)": the frozen-probe read adds about 2 s to a 12 s optimiser step; DGPO costs as GRPO.
ARM_COST = {"grpo": 1.0, "edit_rl": 14.0 / 12.0}


def visible_gpus() -> int:
    """GPUs this process can use (0 without CUDA)."""
    import torch
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _pinned(device: str) -> int | None:
    m = re.fullmatch(r"cuda:(\d+)", device)
    return int(m.group(1)) if m else None


def _check_gpu(device: str, gpus: int, what: str) -> None:
    if gpus < 1:
        raise ValueError(f"model.device={device!r} asks for a GPU, but none is visible ({what}); set model.device "
                         f"to 'cpu' or 'auto'")
    pin = _pinned(device)
    if pin is not None and pin >= gpus:
        raise ValueError(f"model.device={device!r}: only {gpus} GPU(s) are visible (cuda:0..cuda:{gpus - 1})")


def unit_profile(profile):
    """The profile inside an engine unit: ``model.device`` 'cuda' / 'auto' on the GPU Ray gave the unit (cuda:0,
    the only one it sees), unchanged without one (the CPU)."""
    if profile.model.device != "cpu" and visible_gpus() > 0:
        return with_model(profile, device="cuda:0")
    return profile


def rank_device(device_setting: str, local_rank: int, world_size: int, visible_gpus: int) -> str:
    """The device of process ``local_rank`` of a run spread over ``world_size`` processes: 'cpu' (gloo) for
    model.device 'cpu' and for 'auto' without a GPU, else cuda:<local_rank> (one process per GPU). A pinned
    'cuda:N' cannot hold several processes of one run."""
    if device_setting == "cpu" or (device_setting == "auto" and visible_gpus < 1):
        return "cpu"
    _check_gpu(device_setting, visible_gpus, f"{world_size} processes")
    if _pinned(device_setting) is not None:
        if world_size > 1:
            raise ValueError(f"model.device={device_setting!r} pins one GPU; a run over {world_size} processes "
                             f"needs one GPU each (model.device 'cuda' or 'auto')")
        return device_setting
    if world_size > visible_gpus:
        raise ValueError(f"a run over {world_size} processes needs {world_size} GPUs, {visible_gpus} are visible")
    return f"cuda:{local_rank}"


def run_cost(rl, dataset: str, arm: str) -> float:
    """Expected cost of one RL run (the profile's ``rl`` section) in GRPO-step units: steps x completions per step
    (Table 9) x the arm's factor (``ARM_COST``, from App. B's step times)."""
    if arm not in ARM_COST:
        raise ValueError(f"run_cost: arm must be one of {sorted(ARM_COST)}, got {arm!r}")
    return float(rl.steps_for(dataset)) * rl.rollouts_per_prompt * rl.prompts_per_step * ARM_COST[arm]


def longest_first(items: list, cost) -> list:
    """``items`` by decreasing ``cost(item)``; equal costs keep their order (a stable sort)."""
    return sorted(items, key=lambda x: -cost(x))


def with_model(profile, **values):
    """``profile`` with ``model`` values replaced (a stage's ``ProfileView`` or a plain ``Profile``)."""
    model = dataclasses.replace(profile.model, **values)
    return profile.replace(model=model) if hasattr(profile, "replace") else dataclasses.replace(profile, model=model)


def process_profile(profile, share: int = 1, threads: int | None = None):
    """The profile one of ``share`` processes (a run's ranks) or an engine unit (``threads``) trains under:
    ``model.torch_threads`` split between the processes (at least 1 each) or ``threads``, a named Base replaced by
    its weights folder (a spawned process has no provider registry) and generation in the process itself
    (``model.generation_workers`` 1: it starts no generation workers of its own)."""
    from edit_lib.model.bases import resolve_base_path
    threads = threads or max(1, (profile.model.torch_threads or 1) // max(1, share))
    return with_model(profile, torch_threads=threads, name_or_path=resolve_base_path(profile.model.name_or_path),
                      generation_workers=1)


def environ_threads(threads: int) -> dict:
    """Thread variables for a launched process (torchrun would otherwise set OMP_NUM_THREADS=1)."""
    return {k: str(threads) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")} | {"TOKENIZERS_PARALLELISM": "false"}


__all__ = ["ARM_COST", "environ_threads", "longest_first", "process_profile", "rank_device", "run_cost",
           "unit_profile", "visible_gpus"]
