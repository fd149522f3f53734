"""The one engine for the suite's independent units of work: Ray, as verl and OpenRLHF place their GRPO workers.
Longer than 400 lines because the units' kinds, the cluster's start and join, the placing of kept and one-off
units and the contract each unit checks share one Ray handle and one set of options.

``UNITS`` says, once per kind of unit, what Ray reserves for it and its torch threads (fixed per kind, never read
off the machine, so a unit's numbers are the same on 1, 2 or 16 cores). Where the cluster comes from: ``local``
(default), one Ray on this machine, on loopback, started by ``edit-suite run`` (``start``; a notebook opened by
hand starts its own, ``connect``), bound to the process that started it (Ray's fate sharing), so a stopped run
leaves none behind; ``auto`` or an address, the kernels join a running cluster.

The contract of a cluster (README, "On a cluster"): every node runs the same environment and sees the run root at
the same path. ``mark_run_root`` leaves a fresh token there; each unit checks it first (``sees_run_root``, put in
``run_hooks`` by ``check_hooks``), and a unit whose node cannot see it or import a module it needs stops the stage
with one line naming the node and the path (``UnitCannotRun``) before the stage writes its result.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
import logging
import os
import re
import signal
import socket
import sys
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator


MARK_ENV = "EDIT_SUITE_RUN_MARK"  # "<token>\t<path>": the run root's mark every unit of the run must see
MARK_FILE = "logs/engine_mark"  # under the run root
_SEES = f"{__name__}:sees_run_root"


class UnitCannotRun(RuntimeError):
    """A unit's node breaks the contract of a cluster (it cannot see the run root or import the suite)."""


def mark_run_root(root) -> None:
    """For ``edit-suite run``: a fresh token in ``root``'s ``MARK_FILE``, named in ``MARK_ENV`` for the kernels,
    whose units check it before they run (``sees_run_root``)."""
    mark = Path(root).resolve() / MARK_FILE
    mark.parent.mkdir(parents=True, exist_ok=True)
    token = uuid.uuid4().hex
    mark.write_text(token)
    os.environ[MARK_ENV] = f"{token}\t{mark}"


def check_hooks(run_hooks: list) -> None:
    """Each unit of this process checks the run's mark first (``MARK_ENV``, where a run set it)."""
    if os.environ.get(MARK_ENV) and not any(name == _SEES for name, _ in run_hooks):
        run_hooks.insert(0, (_SEES, tuple(os.environ[MARK_ENV].split("\t", 1))))


def sees_run_root(when: str, mark: tuple[str, str]) -> None:
    """A ``run_hooks`` hook: before a unit runs, its node must see the run's mark ``(token, path)``."""
    if when != "before":
        return
    token, path = mark
    f = Path(path)
    if not (f.is_file() and f.read_text().strip() == token):
        state = "holds another run's token" if f.is_file() else "does not exist there"
        raise UnitCannotRun(f"engine: node {_node()} cannot see the run root {f.parent.parent} ({f} {state}): "
                            f"every node of a cluster must see the run root on shared storage (README, On a cluster)")


def auth_token_at_hand() -> bool:
    """A Ray authentication token is at hand ($RAY_AUTH_TOKEN, $RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token): a
    cluster started with `ray start` asks its clients for it (README, On a cluster)."""
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    return bool(os.environ.get("RAY_AUTH_TOKEN")) or Path(path or Path.home() / ".ray" / "auth_token").is_file()


def _node() -> str:
    try:
        ip = sys.modules["ray"].util.get_node_ip_address()
    except Exception:  # outside a Ray worker
        ip = "?"
    return f"{socket.gethostname()} ({ip})"


def explain(error: Exception, system_error: type) -> UnitCannotRun | None:
    """The broken contract behind a unit's ``RayTaskError``, as one line: the unit's own ``UnitCannotRun``, or a
    module its worker cannot import (ImportError in the unit; ``system_error``, Ray's RaySystemError, where Ray
    unpickles the unit's inputs); None for any other error."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, UnitCannotRun):
        return UnitCannotRun(str(cause.args[0]))
    missing = re.search(r"No module named '([^']+)'", str(cause)) if isinstance(
        cause, (ImportError, system_error)) else None
    if not missing:
        return None
    where = re.search(r"\(pid=(\d+), ip=([^)\s]+)\)", str(error))  # Ray's error keeps no ip attribute
    pid, ip = where.groups() if where else ("?", "?")
    return UnitCannotRun(f"engine: node {ip} (pid {pid}) cannot import {missing.group(1)}: every node of a cluster "
                         f"must run the same environment, with the suite installed (README, On a cluster)")




# ---------------------------------------------------------------- the engine

ADDRESS_ENV = "EDIT_SUITE_RAY_ADDRESS"  # the run's cluster, set by `edit-suite run` for its kernels
# Ray on loopback only (a single-node Ray otherwise binds the machine's address), no usage reports; read by Ray
# when it is first imported, so set before that
LOCAL_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
OBJECT_STORE_BYTES = 1 << 30  # rows and summaries only pass through it; Ray spills beyond it to disk


@dataclasses.dataclass(frozen=True)
class Unit:
    """What one kind of unit asks Ray for: CPUs, one GPU each where the cluster has GPUs and the profile's
    device allows (``gpu``), host memory in MB (a reservation Ray schedules by, sized from the demo's workers:
    about 1.0-1.1 GB resident for a generation actor with two policies), and the torch threads it computes with
    (0: the profile's ``model.torch_threads``, set by the unit's model load, with as many CPUs asked for)."""
    num_cpus: float
    gpu: bool
    memory_mb: int
    threads: int
    help: str


UNITS = {
    "generate": Unit(1, True, 1200, 1, "an actor that keeps a policy loaded and generates shards of prompts "
                                      "(01, 04, 05, 07, 08; 06's calibration and Figure 3's curves) or reads "
                                      "batches of the probe and audit (02, 03); a GPU "
                                      "each under model.device 'cuda' / 'auto' where the cluster has GPUs"),
    "rl_run": Unit(1, True, 1500, 1, "one RL run of 06 from start to end (GRPO, DGPO, EDIT-RL, InT-RL)"),
    "sft_run": Unit(0, True, 1500, 0, "one SFT run of 05 (a pool's LoRA adapter) from start to end, at the "
                                      "profile's model.torch_threads, as in the stage's process"),
}

START_TIMEOUT_S = 300  # kept units not placed by then never will be (Ray would wait for ever): say so instead
PLACE_WAIT_S = 10  # kept units not all placed by then: go on with those placed (other work holds the rest)
run_hooks: list[tuple[str, Any]] = []  # ("module:function", arg): fn("before", arg) / fn("after", arg) in a unit
_STARTED: list[bool] = []  # ``start`` named this process's cluster (and started it, for 'local')
# functions that end units this process keeps while idle and restarts on demand (a stage's shared generation
# pool, ``parallel.close_shared_pools``): called before new units are asked for, so that kept workers holding every
# CPU cannot leave the new ones waiting for ever (06's RL runs after its calibration's generation, say)
idle_holders: list[Callable[[], None]] = []


_UNITS = [0, 0]  # this stage's units asked for and done (a stage is one process), shown by ``_progress``


def _new_bar(total: int, initial: int):
    from tqdm.auto import tqdm
    return tqdm(total=total, initial=initial, desc="engine units", unit="unit", dynamic_ncols=True)


@contextlib.contextmanager
def _progress(asked: int):
    """The stage's count of the units it sent to the engine, on every node, as a bar while a call of ``asked``
    units runs (its total grows with each call: generation shards, probe and audit batches, RL and SFT runs);
    drawn only during the call, so that no other bar of the stage's process runs beside it. Display only."""
    _UNITS[0] += asked
    bar = _new_bar(*_UNITS)

    def done() -> None:
        _UNITS[1] += 1
        bar.update(1)
    try:
        yield done
    finally:
        bar.close()


def end_progress() -> None:
    """A stage's save: its count of units starts again from zero in the next stage."""
    _UNITS[:] = [0, 0]


def _make_room() -> None:
    for release_idle in list(idle_holders):
        release_idle()


def _check_fits(kind: str, opts: dict) -> int:
    """How many ``kind`` units the whole cluster holds at once (at least 1): a unit larger than the cluster would
    wait for ever in Ray's queue, so it is refused with what it asked."""
    total, asked = _ray().cluster_resources(), _asked(opts)
    short = [k for k, v in asked.items() if v > total.get(k, 0)]
    if short:
        raise RuntimeError(f"engine: a '{kind}' unit asks for {_resources(asked)}, more than the whole cluster "
                           f"holds ({_resources(total)}); short of {', '.join(short)}")
    return min(int(total.get(k, 0) // v) for k, v in asked.items() if v)


def _asked(opts: dict) -> dict:
    return {"CPU": opts["num_cpus"], "GPU": opts["num_gpus"], "memory": opts["memory"]}


def _resources(r: dict) -> str:
    return ", ".join(f"{r.get(k, 0) / 2**20:.0f} MB memory" if k == "memory" else f"{r.get(k, 0):g} {k}"
                     for k in ("CPU", "GPU", "memory"))


def _is_local(address: str | None) -> bool:
    return address in (None, "", "local") or address.startswith(("127.", "localhost"))


def _ray(address: str | None = None):
    if "ray" not in sys.modules:
        # in a notebook's kernel Ray logs at import that ipywidgets is missing (for its own widgets): noise
        logging.getLogger("ray.widgets.util").setLevel(logging.WARNING)
        # Ray's C++ failure handler would print a stack dump on SIGTERM, which ends a run in order (``cli``)
        os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
        if _is_local(address or os.environ.get(ADDRESS_ENV)):
            for k, v in LOCAL_ENV.items():
                os.environ.setdefault(k, v)
        joins = address or os.environ.get(ADDRESS_ENV)
        if joins not in (None, "", "local") and "RAY_AUTH_MODE" not in os.environ and auth_token_at_hand():
            # a head started by `ray start` turns Ray's token authentication on where it finds or writes a token
            # (~/.ray/auth_token), and a client that joins must send it: Ray's clients send none unless told to
            os.environ["RAY_AUTH_MODE"] = "token"
    import ray
    return ray


def live_nodes() -> int:
    """How many nodes of the connected Ray are alive."""
    return sum(bool(n["Alive"]) for n in _ray().nodes())


def start(cluster: str = "local", log_to_driver: bool = False) -> str:
    """For ``edit-suite run``: a local Ray with every core and GPU this machine has (``cluster`` 'local'), or
    the address of a running one ('auto', 'host:port'); ``ADDRESS_ENV`` names it for the kernels. Returns it."""
    if os.environ.get(ADDRESS_ENV):
        return os.environ[ADDRESS_ENV]
    _STARTED.append(True)
    if cluster != "local":
        os.environ[ADDRESS_ENV] = cluster
        return cluster
    ray = _ray()
    if not ray.is_initialized():
        try:
            # address 'local': a new Ray of this process's own, never one that `ray start` left on the machine
            # (ray.init() without an address joins the machine's last cluster); CPUs: Ray's count (cgroups too)
            ray.init(address="local", num_gpus=_visible_gpus(), include_dashboard=False,
                     object_store_memory=OBJECT_STORE_BYTES, log_to_driver=log_to_driver, configure_logging=False)
        except SystemExit as e:
            # ray.init holds SIGTERM with its own handler (exit status 15) until it returns: a run stopped
            # while its head starts exits with status 143 as one stopped later does (no ray.shutdown of the
            # half-started head, which crashed; its processes share the runner's fate)
            raise SystemExit(143 if e.code == signal.SIGTERM else e.code) from None
    os.environ[ADDRESS_ENV] = ray.get_runtime_context().gcs_address
    return os.environ[ADDRESS_ENV]


def stop() -> None:
    """End what ``start`` or ``connect`` began in this process (a Ray it started ends with it)."""
    if connected():
        sys.modules["ray"].shutdown()
    if _STARTED:
        _STARTED.clear()
        os.environ.pop(ADDRESS_ENV, None)


def connect(cluster: str = "local") -> None:
    """Join the run's Ray (``ADDRESS_ENV``), the named cluster, or, with neither, start a local one in this
    process (a notebook opened by hand: its units then die with its kernel). A run's units check its mark."""
    check_hooks(run_hooks)
    address = os.environ.get(ADDRESS_ENV) or (None if cluster == "local" else cluster)
    ray = _ray(address)
    if ray.is_initialized():
        return
    if address is None:
        print("engine: no run's Ray to join; starting a local one in this process", flush=True)
        start("local", log_to_driver=True)
        os.environ.pop(ADDRESS_ENV, None)  # this process's own, not a run's: its children must not join it
        return
    ray.init(address=address, log_to_driver=True, configure_logging=False)


def _get(ref) -> Any:
    """``ray.get(ref)``, with a unit's broken contract of a cluster as one line (``explain``)."""
    ray = _ray()
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as e:
        broken = explain(e, ray.exceptions.RaySystemError)
        if broken:
            raise broken from None
        raise


def connected() -> bool:
    """This process is connected to a Ray (``start`` or ``connect`` ran, and no ``stop`` since)."""
    return "ray" in sys.modules and sys.modules["ray"].is_initialized()


def cluster_resources() -> dict:
    """What the connected Ray holds in all (``CPU``, ``GPU``, ``memory`` ...)."""
    return _ray().cluster_resources()


def _visible_gpus() -> int:
    import torch
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def capacity(kind: str, ceiling: int = 0, gpus: bool = True, threads: int = 1) -> int:
    """How many ``kind`` units the cluster runs at once (at least 1), at most ``ceiling`` when it is > 0;
    ``gpus``: the profile's device lets GPU units take a GPU each; ``threads``: a unit's CPUs where its kind takes
    the profile's (``Unit.num_cpus`` 0)."""
    ray, unit = _ray(), UNITS[kind]
    total = ray.cluster_resources()
    n = int(total.get("CPU", 1) // (unit.num_cpus or threads))
    if unit.gpu and gpus and total.get("GPU", 0) >= 1:
        n = min(n, int(total["GPU"]))
    return max(1, min(n, ceiling) if ceiling > 0 else n)


def options(kind: str, gpus: bool = True, threads: int = 1, **extra) -> dict:
    """Ray's options for a ``kind`` unit (``UNITS``): its CPUs (``threads`` where the kind takes the profile's),
    memory, a GPU where the cluster has one."""
    ray, unit = _ray(), UNITS[kind]
    gpu = 1 if unit.gpu and gpus and ray.cluster_resources().get("GPU", 0) >= 1 else 0
    return dict(num_cpus=unit.num_cpus or threads, num_gpus=gpu, memory=unit.memory_mb << 20, **extra)


def in_unit(kind: str, hooks: tuple, fn: Callable, *args) -> Any:
    """In a unit's worker: its thread count (``UNITS``; 0: left to the unit's model load), transformers' loading
    bars off, ``hooks`` around ``fn(*args)``."""
    import torch
    from transformers.utils import logging as hf_logging
    if UNITS[kind].threads:
        torch.set_num_threads(UNITS[kind].threads)
    hf_logging.disable_progress_bar()  # a worker's loading bars would interleave with the stage's own output
    calls = [(getattr(importlib.import_module(name.split(":")[0]), name.split(":")[1]), arg) for name, arg in hooks]
    for h, arg in calls:
        h("before", arg)
    try:
        return fn(*args)
    finally:
        for h, arg in calls:
            h("after", arg)


def remote(kind: str, gpus: bool = True, threads: int = 1, **extra):
    """``fn(*args)`` as a ``kind`` unit: a Ray task with ``options``, called as ``.remote(kind, hooks, fn, *args)``
    (``hooks``: ``tuple(run_hooks)`` of the calling process)."""
    opts = options(kind, gpus, threads, **extra)
    _check_fits(kind, opts)
    return _ray().remote(in_unit).options(**opts)


class _Actor:
    """A worker process kept across calls (state such as loaded policies lives in its modules' globals)."""

    def call(self, kind: str, hooks: tuple, fn: Callable, *args) -> Any:
        return in_unit(kind, hooks, fn, *args)

    def ready(self) -> bool:
        return True


def actors(kind: str, n: int, gpus: bool = False) -> list:
    """Up to ``n`` kept ``kind`` workers (``UNITS``), placed before this returns (idle kept workers of this process
    are ended first, ``idle_holders``): as many as the whole cluster holds now (a count taken before a node died),
    of them those Ray placed within ``PLACE_WAIT_S`` where it placed one at least (other work holds the rest),
    else a clear error after ``START_TIMEOUT_S``; a worker that dies is restarted and its call retried once."""
    ray, opts = _ray(), options(kind, gpus)
    fit = _check_fits(kind, opts)
    if fit < n:  # asked without waiting: those Ray could never place would only cost PLACE_WAIT_S
        print(f"engine: {fit} of {n} '{kind}' units fit the cluster, going on with them", flush=True)
        n = fit
    _make_room()
    cls = ray.remote(_Actor).options(**opts, max_restarts=1, max_task_retries=1)
    workers = [cls.remote() for _ in range(n)]
    ready = [w.ready.remote() for w in workers]
    placed, waiting = ray.wait(ready, num_returns=n, timeout=min(PLACE_WAIT_S, START_TIMEOUT_S))
    if waiting and not placed:
        placed, _ = ray.wait(waiting, num_returns=1, timeout=max(0, START_TIMEOUT_S - PLACE_WAIT_S))
    if placed and waiting:
        keep = [w for w, r in zip(workers, ready) if r in placed]
        release([w for w in workers if w not in keep])
        print(f"engine: {len(keep)} of {n} '{kind}' units placed, going on with them", flush=True)
        return keep
    if not placed:
        release(workers)
        raise RuntimeError(f"engine: {len(waiting)} of {n} '{kind}' units ({_resources(_asked(opts))} each) "
                           f"were not placed within {START_TIMEOUT_S} s; the cluster has "
                           f"{_resources(ray.available_resources())} free of {_resources(ray.cluster_resources())}: "
                           f"other work holds the rest (another run on the same cluster, or this process's own "
                           f"units; edit_lib/engine.py)")
    return workers


def bounded(submit: Callable, items: Iterable, width: int) -> Iterator[tuple[Any, Any]]:
    """(item, result) for each of ``items``, ``submit(item)`` (an ObjectRef) called in their order with at most
    ``width`` unfinished at once, as each finishes."""
    ray, queue, pending = _ray(), list(items), {}
    _make_room()
    with _progress(len(queue)) as finished:
        while queue or pending:
            while queue and len(pending) < width:
                item = queue.pop(0)
                pending[submit(item)] = item
            (done,), _ = ray.wait(list(pending), num_returns=1)
            item, result = pending.pop(done), _get(done)
            finished()
            yield item, result


def over_actors(workers: list, kind: str, calls: Iterable[tuple]) -> Iterator[tuple[int, Any]]:
    """(index, result) of ``fn(*args)`` for each ``(fn, *args)`` of ``calls``, each sent to the next idle worker
    of ``workers`` (``actors``; so they finish together), as each finishes."""
    ray, queue, idle, pending, hooks = _ray(), list(enumerate(calls)), list(workers), {}, tuple(run_hooks)
    with _progress(len(queue)) as finished:
        while queue or pending:
            while queue and idle:
                i, call = queue.pop(0)
                worker = idle.pop(0)
                pending[worker.call.remote(kind, hooks, *call)] = (i, worker)
            (done,), _ = ray.wait(list(pending), num_returns=1)
            i, worker = pending.pop(done)
            idle.append(worker)
            result = _get(done)
            finished()
            yield i, result


def release(workers: list) -> None:
    """End ``workers`` (``actors``) now rather than when their handles are collected."""
    ray = _ray()
    for w in workers:
        ray.kill(w)


__all__ = ["actors", "ADDRESS_ENV", "auth_token_at_hand", "bounded", "capacity", "check_hooks", "cluster_resources",
           "connect", "connected", "end_progress", "explain", "idle_holders", "in_unit", "live_nodes", "MARK_ENV",
           "MARK_FILE", "mark_run_root", "options", "over_actors", "release", "remote", "run_hooks", "sees_run_root",
           "start", "stop", "Unit", "UnitCannotRun", "UNITS"]
