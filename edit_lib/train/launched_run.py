"""One RL (06) or SFT (05) run spread over ``rl.processes`` / ``sft.processes`` processes (Suite's choice, speed
only): data parallel, one process per GPU (gloo on CPU), the global batch held equal (``sft.batch_split`` over
WORLD_SIZE). The caller pickles the job (its function as 'module:name', the arguments, the profile) into the run's
folder and ``launch`` starts

    python -m torch.distributed.run --standalone --nproc_per_node N -m edit_lib.train.launched_run <job file>

Every process calls that function, the one a one-process run calls (``rl_runs.run_in``, ``sft_runs.train_pool``),
so the code that trains stays in the caller's stage key (named by string here, so 05's key never covers RL code).
Rank 0 writes the adapter and the summary (with ``world_size``) in the run's folder; rank r > 0 writes into
``<out>/.rank<r>/``, removed when the run ends (so ``ops.resume_every`` is off in such a run).
"""
from __future__ import annotations

import dataclasses
import importlib
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

from edit_lib.train import placement

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
    **kwargs, out=<its folder>, progress=<rank 0>)`` with ``placement.process_profile``'s threads; the run's summary (rank 0's
    ``summary_file``). Output goes to ``<out>/launch.log`` and, line by line, to ``echo``; a failed launch raises,
    naming the run folder and the log's last lines."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    profile = placement.process_profile(profile, processes)
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
    env.update(placement.environ_threads(profile.model.torch_threads),
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
    device = placement.rank_device(job["profile"].model.device, rank, world, placement.visible_gpus())
    profile = placement.with_model(job["profile"], device=device)
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
