"""Where and in what order parallel training runs go (Suite's choice, for speed; the order changes no number).

* ``devices_for``: the device of each of 06's ``rl.workers`` (one run per GPU, round-robin when there are more
  workers than GPUs; ``model.device`` 'cpu' stays on the CPU, 'cuda:N' pins every worker to GPU N).
* ``worker_visibility``: a GPU worker sees only its own GPU (``CUDA_VISIBLE_DEVICES``), where it is cuda:0, so
  transformers' Trainer neither moves the model to another GPU nor spreads it over all of them (DataParallel).
* ``rank_device``: the device of one process of a run spread over ``rl.processes`` / ``sft.processes``.
* ``longest_first``: runs ordered by expected cost (App. B: EDIT-RL's probe read adds about 2 s to a 12 s GRPO
  step), so the longest runs start first and no worker idles at the end.
* ``process_profile`` / ``with_model``: the profile a worker or launched process trains under.
"""
from __future__ import annotations

import dataclasses
import os
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


def devices_for(n_workers: int, device_setting: str, visible_gpus: int) -> list[str]:
    """The device of each of ``n_workers`` workers: 'cpu' for model.device 'cpu' (also on a GPU machine) and for
    'auto' without a GPU; cuda:(i mod visible_gpus) for worker i under 'cuda' / 'auto' (more workers than GPUs
    share them round-robin); 'cuda:N' for every worker under a pinned 'cuda:N'."""
    if n_workers < 1:
        raise ValueError(f"rl.workers must be >= 1, got {n_workers}")
    if device_setting == "cpu" or (device_setting == "auto" and visible_gpus < 1):
        return ["cpu"] * n_workers
    _check_gpu(device_setting, visible_gpus, f"rl.workers={n_workers}")
    if _pinned(device_setting) is not None:
        return [device_setting] * n_workers
    return [f"cuda:{i % visible_gpus}" for i in range(n_workers)]


def worker_visibility(device: str, parent_visible: str | None = None) -> tuple[dict, str]:
    """(environment to set in a worker before CUDA starts, the device the worker then loads on) for a worker
    placed on ``device`` by ``devices_for``: a GPU worker sees only that GPU (its id in the parent's
    ``CUDA_VISIBLE_DEVICES`` when that is set), where it is cuda:0; a CPU worker changes nothing."""
    pin = _pinned(device)
    if device == "cpu":
        return {}, "cpu"
    if pin is None:
        raise ValueError(f"worker_visibility: expected 'cpu' or 'cuda:N' from devices_for, got {device!r}")
    ids = [x.strip() for x in parent_visible.split(",") if x.strip()] if parent_visible else None
    if ids is not None and pin >= len(ids):
        raise ValueError(f"worker device {device!r}: CUDA_VISIBLE_DEVICES={parent_visible!r} lists {len(ids)} GPU(s)")
    return {"CUDA_VISIBLE_DEVICES": ids[pin] if ids is not None else str(pin)}, "cuda:0"


_WORKER_DEVICE: str | None = None  # set once per worker process by init_worker, before anything loads


def init_worker(slots) -> None:
    """Process-pool initializer: take this worker's device (``devices_for``) from the queue ``slots`` and set its
    GPU visibility (``worker_visibility``) before CUDA starts; ``worker_device`` then says where it loads."""
    global _WORKER_DEVICE
    env, _WORKER_DEVICE = worker_visibility(slots.get(), os.environ.get("CUDA_VISIBLE_DEVICES"))
    os.environ.update(env)


def worker_device() -> str | None:
    """The device ``init_worker`` gave this process (None outside a placed worker)."""
    return _WORKER_DEVICE


def placed(fn, profile, *args):
    """``fn(profile, *args)`` in a placed worker, on the device ``init_worker`` gave it before anything loaded (a
    GPU worker sees only its GPU, as cuda:0); a CPU worker keeps the profile's device."""
    if _WORKER_DEVICE not in (None, "cpu"):
        profile = with_model(profile, device=_WORKER_DEVICE)
    return fn(profile, *args)


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


def process_profile(profile, share: int):
    """The profile one of ``share`` processes (workers, or a run's ranks) trains under: ``model.torch_threads``
    split between them (at least 1 each), a named Base replaced by its weights folder (a spawned process has
    no provider registry) and generation in the process itself (``model.generation_workers`` 1: a worker starts no
    generation pool of its own)."""
    from edit_lib.model.bases import resolve_base_path
    return with_model(profile, torch_threads=max(1, (profile.model.torch_threads or 1) // max(1, share)),
                      name_or_path=resolve_base_path(profile.model.name_or_path), generation_workers=1)


def environ_threads(threads: int) -> dict:
    """Thread variables for a launched process (torchrun would otherwise set OMP_NUM_THREADS=1)."""
    return {k: str(threads) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")} | {"TOKENIZERS_PARALLELISM": "false"}


__all__ = ["ARM_COST", "devices_for", "environ_threads", "init_worker", "longest_first", "placed", "process_profile",
           "rank_device", "run_cost", "visible_gpus", "worker_device", "worker_visibility"]
