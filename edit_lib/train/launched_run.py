"""Where parallel training runs go, and one RL (06) or SFT (05) run spread over ``rl.processes`` / ``sft.processes``
processes (Suite's choice, speed only; the order changes no number).

* Placing: Ray places 06's runs on the engine (``engine.UNITS['rl_run']``: a GPU each where there are GPUs, visible
  to the unit alone as cuda:0); ``unit_profile`` / ``rank_device``: the device of a unit or of one process;
  ``longest_first``: runs ordered by expected cost (App. B: EDIT-RL's probe read adds about 2 s to a 12 s GRPO
  step), so no worker idles at the end; ``process_profile`` / ``with_model``: the profile a worker trains under.
* Launching: data parallel, one process per GPU (gloo on CPU), the global batch held equal (``sft.batch_split``
  over WORLD_SIZE). The caller pickles the job (its function as 'module:name', the arguments, the profile) and
  ``launch`` starts ``python -m torch.distributed.run --standalone --nproc_per_node N -m
  edit_lib.train.launched_run <job file>``. Every process calls the function a one-process run calls
  (``rl_runs.run_in``, ``sft_runs.train_pool``), so the code that trains stays in the caller's stage key (named
  by string, so 05's key never covers RL code). Rank 0 writes the adapter and the summary (with ``world_size``);
  rank r > 0 writes into ``<out>/.rank<r>/``, removed when the run ends (``ops.resume_every`` is off then).
"""
from __future__ import annotations

import dataclasses
import importlib
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path



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
    from edit_lib.providers import resolve_base_path
    threads = threads or max(1, (profile.model.torch_threads or 1) // max(1, share))
    return with_model(profile, torch_threads=threads, name_or_path=resolve_base_path(profile.model.name_or_path),
                      generation_workers=1)


def environ_threads(threads: int) -> dict:
    """Thread variables for a launched process (torchrun would otherwise set OMP_NUM_THREADS=1)."""
    return {k: str(threads) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")} | {"TOKENIZERS_PARALLELISM": "false"}




# ---------------------------------------------------------------- one run over several processes

JOB_FILE = "launch_job.pkl"
LOG_FILE = "launch.log"
_GROUP_VARS = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
               "TORCHELASTIC_RUN_ID")


def command(job_file: str | Path, processes: int) -> list[str]:
    """The torchrun command line of one job."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes),
            "-m", __name__, str(job_file)]


def launch(call: str, args: tuple, profile, processes: int, out_dir: str | Path, summary_file: str,
           kwargs: dict | None = None, echo=print) -> dict:
    """Run ``call`` ('module:function') over ``processes`` processes, each calling ``function(profile, *args,
    **kwargs, out=<its folder>, progress=<rank 0>)`` with ``process_profile``'s threads; the run's summary (rank 0's
    ``summary_file``). Output goes to ``<out>/launch.log`` and, line by line, to ``echo``; a failed launch raises,
    naming the run folder and the log's last lines."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    profile = process_profile(profile, processes)
    ops = getattr(profile, "ops", None)
    if getattr(ops, "resume_every", 0):  # rank r > 0 trains in its own folder: its state would not match rank 0's
        echo(f"{out}: ops.resume_every={ops.resume_every} is off for a run over {processes} processes (no "
             f"resumable state; the run restarts if killed)")
        ops = dataclasses.replace(ops, resume_every=0)
        profile = profile.replace(ops=ops) if hasattr(profile, "replace") else dataclasses.replace(profile, ops=ops)
    (out / JOB_FILE).write_bytes(pickle.dumps(dict(call=call, args=tuple(args), kwargs=dict(kwargs or {}),
                                                   profile=profile, out_dir=str(out), summary_file=summary_file)))
    root = str(Path(__file__).resolve().parents[2])
    env = {k: v for k, v in os.environ.items() if k not in _GROUP_VARS}  # never join the parent's group
    env.update(environ_threads(profile.model.torch_threads),
               PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p))
    lines = []
    with open(out / LOG_FILE, "w") as log, subprocess.Popen(command(out / JOB_FILE, processes), env=env, text=True,
                                                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as p:
        for line in p.stdout:
            log.write(line)
            lines = (lines + [line])[-40:]
            echo(line.rstrip("\n"))
    if p.returncode != 0:
        raise RuntimeError(f"the run in {out} failed over {processes} processes (exit {p.returncode}); its log is "
                           f"{out / LOG_FILE}; last lines:\n{''.join(lines)}")
    (out / JOB_FILE).unlink()
    return json.loads((out / summary_file).read_text())


def main(argv: list[str]) -> None:
    """Entry point of every launched process: join the group, train, rank 0 records ``world_size``."""
    from accelerate import PartialState
    job = pickle.loads(Path(argv[0]).read_bytes())
    out, summary_file = Path(job["out_dir"]), job["summary_file"]
    rank, world = int(os.environ.get("LOCAL_RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    device = rank_device(job["profile"].model.device, rank, world, visible_gpus())
    profile = with_model(job["profile"], device=device)
    state = PartialState(cpu=device == "cpu")  # joins torchrun's group (gloo on CPU) before anything loads
    mine = out if state.is_main_process else out / f".rank{state.process_index}"
    if not state.is_main_process:  # a summary left by an earlier launch would make this rank skip the run
        (mine / summary_file).unlink(missing_ok=True)
    module, name = job["call"].split(":")
    getattr(importlib.import_module(module), name)(profile, *job["args"], **job["kwargs"], out=mine,
                                                   progress=state.is_main_process)
    if state.is_main_process:
        import torch.distributed as dist
        s = json.loads((out / summary_file).read_text())
        s.update(world_size=state.num_processes, backend=dist.get_backend() if dist.is_initialized() else None,
                 device_per_process=device.split(":")[0])
        (out / summary_file).write_text(json.dumps(s, indent=2, default=float))
    state.wait_for_everyone()
    if not state.is_main_process:
        shutil.rmtree(mine, ignore_errors=True)
    state.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
