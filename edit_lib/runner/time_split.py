"""Where a stage's time goes (``edit-suite run --time-split``): seconds in model forward passes, in generation
outside them, in training (backward and optimiser steps) and in everything else, per stage.

The runner adds ``KERNEL_ARGUMENT`` to the stage's kernel (IPython's ``exec_lines``, before any cell, as
``stage_log``) with ``TIMING_ENV`` naming the stage's timing file, and ``install`` sets timers: a wrapper of
``torch.nn.Module.__call__`` and of lean decoding's one-token step timing only the outermost forward (a submodule
inside it passes straight through; global forward hooks would cost every submodule call torch's slow path),
wrappers of ``edit_lib.model.generate``'s entry points, of the lean loop and of transformers' ``generate``, global
optimiser step hooks and a wrapper of ``torch.autograd.backward``. Time is exclusive, the innermost open region
gets it (a forward inside ``generate`` is forward time), so the three parts and "other" sum to the wall time. The
kernel writes its totals after each cell; ``finish`` (the runner, after the notebook) adds the wall time with the
kernel's start. The engine's units the kernel sends work to (``rl.workers``, ``model.generation_workers``) get
the same timers through ``engine.run_hooks``: the workers' seconds are added beside the stage's own as
process-seconds summed over workers (the stage's wait for them is in its "other"). Timers only: nothing here changes a computed value. On CUDA
a part holds the time the host spent in it (no synchronisation is added).
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

__all__ = ["KERNEL_ARGUMENT", "PARTS", "TIMING_ENV", "Clock", "breakdown", "finish", "install", "start",
           "timing_file"]

TIMING_ENV = "EDIT_SUITE_TIME_SPLIT"  # the timing file of the stage a kernel runs; set by the runner
KERNEL_ARGUMENT = ("--IPKernelApp.exec_lines="
                   "__import__('edit_lib.runner.time_split', fromlist=['install']).install()")
PARTS = ("forward", "generation", "training")
CALLS = ("forward", "generate", "backward", "optimizer_step")  # outermost calls counted
GENERATE_FUNCTIONS = ("generate", "policy_generate", "generate_vllm")  # of edit_lib.model.generate
_WRAPPED = "_time_split_wrapped"


class Clock:
    """Exclusive seconds per part of one thread (the one that made it): the innermost open region's part gets
    the time. A region entered inside an open one of the same part (a submodule's forward, ``generate`` inside
    ``policy_generate``) only deepens it: neither timed again nor counted."""

    def __init__(self):
        self.start = self.mark = time.perf_counter()
        self.seconds = dict.fromkeys(PARTS, 0.0)
        self.calls = dict.fromkeys(CALLS, 0)
        self.open: list[list] = []  # [part, depth], innermost last
        self.thread = threading.get_ident()
        self.in_forward = False  # a module call of this thread is running (``_timed_forward``)

    def _tick(self) -> None:
        now = time.perf_counter()
        if self.open:
            self.seconds[self.open[-1][0]] += now - self.mark
        self.mark = now

    def enter(self, part: str, call: str) -> None:
        if threading.get_ident() != self.thread:
            return
        if self.open and self.open[-1][0] == part:
            self.open[-1][1] += 1
            return
        self._tick()
        if all(p != part for p, _ in self.open):
            self.calls[call] += 1
        self.open.append([part, 1])

    def leave(self, part: str) -> None:
        if threading.get_ident() != self.thread or all(p != part for p, _ in self.open):
            return
        while self.open[-1][0] != part:  # a region whose end was skipped (an optimiser step that raised)
            self._tick()
            self.open.pop()
        self.open[-1][1] -= 1
        if not self.open[-1][1]:
            self._tick()
            self.open.pop()

    def totals(self) -> dict:
        """Seconds per part and since the clock started (``process_seconds``), and the outermost call counts."""
        self._tick()
        return dict(process_seconds=round(time.perf_counter() - self.start, 3), calls=dict(self.calls),
                    **{f"{p}_seconds": round(s, 3) for p, s in self.seconds.items()})


_CLOCK: Clock | None = None


def _timed_forward(call):
    """``call`` (``torch.nn.Module.__call__``, ``LeanStep.__call__``: a method) timing the outermost forward of the
    clock's thread; other calls, the modules a forward calls among them, pass through."""
    @functools.wraps(call)
    def timed_call(self, *args, **kwargs):
        clock = _CLOCK
        if clock.in_forward or threading.get_ident() != clock.thread:
            return call(self, *args, **kwargs)
        clock.in_forward = True
        clock.enter("forward", "forward")
        try:
            return call(self, *args, **kwargs)
        finally:
            clock.leave("forward")
            clock.in_forward = False
    setattr(timed_call, _WRAPPED, True)
    return timed_call


def _step_pre(optimizer, args, kwargs) -> None:
    _CLOCK.enter("training", "optimizer_step")


def _step_post(optimizer, args, kwargs) -> None:
    _CLOCK.leave("training")


def _timed(fn, part: str, call: str):
    """``fn`` with its calls timed as ``part`` (once: an already wrapped function is returned as it is)."""
    if getattr(fn, _WRAPPED, False):
        return fn

    @functools.wraps(fn)
    def timed(*args, **kwargs):
        _CLOCK.enter(part, call)
        try:
            return fn(*args, **kwargs)
        finally:
            _CLOCK.leave(part)
    setattr(timed, _WRAPPED, True)
    return timed


def _wrap_generate(module, names=GENERATE_FUNCTIONS) -> None:
    """Time ``module``'s generation entry points ``names``, also where a module imported one by name already."""
    for name in names:
        old = getattr(module, name, None)
        if old is None or getattr(old, _WRAPPED, False):
            continue
        new = _timed(old, "generation", "generate")
        for m in list(sys.modules.values()):
            if getattr(m, "__name__", "").startswith("edit_lib.") and getattr(m, name, None) is old:
                setattr(m, name, new)


def _wrap_lean(module) -> None:
    """Lean decoding: its loop is generation (GRPO's rollouts call it directly), and its one-token step is a
    forward: the modules it calls one by one, and the attention and rotary functions between them, count as one
    (else the functions' time lands outside any forward). One hook for the module: ``stage_log.when_imported``
    keeps the first hook a module name gets."""
    _wrap_generate(module, ("lean_generate",))
    if not getattr(module.LeanStep.__call__, _WRAPPED, False):
        module.LeanStep.__call__ = _timed_forward(module.LeanStep.__call__)


def _wrap_hf_generate(module) -> None:
    module.GenerationMixin.generate = _timed(module.GenerationMixin.generate, "generation", "generate")


def _set_timers() -> None:
    """A fresh clock for this process and thread; the hooks and wrappers once per process."""
    global _CLOCK
    first = _CLOCK is None
    _CLOCK = Clock()
    if not first:  # a forked worker inherits them
        return
    import torch
    from torch.optim import optimizer

    torch.nn.Module.__call__ = _timed_forward(torch.nn.Module.__call__)
    optimizer.register_optimizer_step_pre_hook(_step_pre)
    optimizer.register_optimizer_step_post_hook(_step_post)
    torch.autograd.backward = _timed(torch.autograd.backward, "training", "backward")  # Tensor.backward calls it
    from edit_lib.runner.stage_log import when_imported
    for name, wrap in [("edit_lib.model.generate", _wrap_generate), ("edit_lib.model.lean_decode", _wrap_lean),
                       ("transformers.generation.utils", _wrap_hf_generate)]:
        when_imported(name, wrap, "is not timed by edit_lib.runner.time_split")


def _write(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=True))
    tmp.replace(path)


def _workers_dir(path: Path) -> Path:
    return path.with_name(path.stem + ".workers")


_UNIT_TIMERS: list[bool] = []  # this engine worker has its timers


def unit_hook(phase: str, timing: str) -> None:
    """Around each call of an engine unit (``engine.run_hooks``): the timers once per worker process, and its
    totals written after every call (a worker is ended, not exited, when its stage is done)."""
    if phase == "before" and not _UNIT_TIMERS:
        _set_timers()
        _UNIT_TIMERS.append(True)
    elif phase == "after":
        _write(_workers_dir(Path(timing)) / f"{os.getpid()}.json", _CLOCK.totals())


def install() -> None:
    """In a kernel the runner started with ``TIMING_ENV`` set (else nothing): the timers, and the totals written
    to that file after every cell (the module docstring)."""
    target = os.environ.get(TIMING_ENV)
    if not target:
        return
    _set_timers()
    from edit_lib import engine
    engine.run_hooks.append((f"{__name__}:unit_hook", target))  # the engine's units time themselves too

    def save(*_):  # after each cell, not at exit: the runner rewrites the file once the kernel is gone
        _write(Path(target), _CLOCK.totals())
    try:
        from IPython import get_ipython
        shell = get_ipython()
    except ImportError:
        shell = None
    if shell is not None:
        shell.events.register("post_run_cell", save)


# ------------------------------------------------------------------ the runner's side

def timing_file(run_dir: Path, stage: str) -> Path:
    """``<run>/timing/<stage>.json``: the stage's time split from the last run that timed it."""
    return Path(run_dir) / "timing" / f"{stage}.json"


def start(run_dir: Path, stage: str, on: bool) -> dict[str, str]:
    """Before a stage runs: drop its last timing (it described another run), and return the environment its
    kernel needs to be timed (empty when ``on`` is false)."""
    f = timing_file(run_dir, stage)
    f.unlink(missing_ok=True)
    shutil.rmtree(_workers_dir(f), ignore_errors=True)
    return {TIMING_ENV: str(f.resolve())} if on else {}


def finish(run_dir: Path, stage: str, key: str, wall: float) -> dict | None:
    """After a timed stage: its kernel's totals with ``wall`` (the runner's seconds, the kernel's start
    included), ``other_seconds`` = wall minus the three parts, and its pool workers' totals summed (``workers``,
    ``worker_process_seconds``, ``worker_<part>_seconds``), written back to ``timing_file``; None if the kernel
    wrote nothing (it never got to a cell)."""
    f = timing_file(run_dir, stage)
    if not f.exists():
        return None
    out = json.loads(f.read_text())
    workers = [json.loads(w.read_text()) for w in sorted(_workers_dir(f).glob("*.json"))]
    out.update(stage=stage, key=key, wall_seconds=round(wall, 3), workers=len(workers),
               other_seconds=round(wall - sum(out[f"{p}_seconds"] for p in PARTS), 3),
               worker_calls={c: sum(w["calls"][c] for w in workers) for c in CALLS},
               **{f"worker_{k}_seconds": round(sum(w[f"{k}_seconds"] for w in workers), 3)
                  for k in ("process", *PARTS)})
    _write(f, out)
    shutil.rmtree(_workers_dir(f), ignore_errors=True)
    return out


def breakdown(run_dir: Path, results: dict[str, dict]) -> dict[str, dict]:
    """{stage: its timing} for each stage in ``results`` ({stage: results JSON}) whose timing file was written
    by the run that computed its results (its key and wall seconds; a stage reused stale keeps its first key)."""
    out = {}
    for stage, res in results.items():
        f = timing_file(run_dir, stage)
        if f.exists():
            t = json.loads(f.read_text())
            keys = (res.get("key"), res.get("artifact_key"))
            if t.get("key") in keys and t.get("wall_seconds") == res.get("runner_seconds"):
                out[stage] = t
    return out
