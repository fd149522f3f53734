"""Generation spread over the engine's generation units, which keep the policy loaded (``model.generation_workers``;
App. B's decoding unchanged). A `GenerationPool` starts one kept worker per core the engine has (a small grader's
generation is per-step Python overhead, so one process with two threads leaves a core idle), or per GPU under
``model.device`` 'cuda' / 'auto' on a cluster with GPUs (``engine.UNITS['generate']``: one torch thread each;
``generation_workers`` > 1 caps the count); each loads a policy the first time it is asked for it
(`PolicySource`: the model section and adapter folders, loaded by ``policy.policy_from_weights``) and keeps it
for the stage's next calls. A call splits the prompts into interleaved shards (a few per worker, each at least one
batch, so the workers finish together and a bar moves); each runs ``generate.generate`` with global indices.
Under row seeding (``SamplingConfig.seeding = 'row'``) and for greedy decoding a row's tokens do not depend on the
shard it lands in, so the result equals the one-process call row for row, whatever the number of workers
(tests/model/test_parallel.py; ``edit-suite bench generation``); with ``model.pool_merges_adapters`` the workers
fold a policy's adapters into their weights, the same function up to rounding (``edit-suite bench merge``).
`PoolEngine` is the ``Policy.engine`` that sends a profile policy's generation, and its forward reads cut at
whole batches (02's probe, 03's audit: `forward_reads`), to the process's shared pool; a policy whose weights
changed in memory (training wraps its model in place) or on disk since it was loaded exists only here.
"""
from __future__ import annotations

import atexit
import dataclasses
import math
import os
import time
from collections import OrderedDict
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pandas as pd

from edit_lib import engine, providers
from edit_lib.model.generate import Parse, SamplingConfig, _rows_frame, generate, policy_generate

KEEP = 2  # policies a worker keeps loaded (07 grades one system after another)
SHARDS_PER_WORKER = 4  # at most; more shards balance the workers' ends, fewer keep batches full
_LOADED: OrderedDict = OrderedDict()  # in a worker: PolicySource key -> Policy, least recently used first
_LOADS = [0]  # in a worker: policies loaded so far (reported with each shard)


@dataclasses.dataclass(frozen=True)
class PolicySource:
    """How a worker loads a policy: ``load(model, adapter, merge, init_adapter)`` (``policy.policy_from_weights``)
    with the model section ``model`` (its ``name_or_path`` the Base weights) and the adapter folders on disk."""
    load: Callable[..., Any]
    model: Any
    adapter: str | Path | None = None
    merge: bool = False
    init_adapter: str | Path | None = None
    base: tuple = ()  # a named Base (``providers``): (name, folder, plain_text, module)

    def __post_init__(self):  # from this process's registry, which a spawned worker does not fill
        named = providers.find("base", self.model.name_or_path)
        if named is not None and not self.base:
            base = (named.name, str(named.obj.path()), named.obj.plain_text, named.module)
            object.__setattr__(self, "base", base)

    def register_base(self) -> None:
        """In a worker: the named Base as this process registered it, so ``load_policy`` loads it the same way."""
        if self.base and providers.find("base", self.base[0]) is None:
            name, folder, plain_text, module = self.base
            where = partial(Path, folder)
            providers.register("base", name, providers.NamedBase(path=where, weights_id=partial(str, folder),
                                                                 built=where, plain_text=plain_text), module)

    def worker_model(self):
        """The model section a worker loads with: one torch thread, no pool of its own."""
        return dataclasses.replace(self.model, torch_threads=1, generation_workers=1)

    def files(self) -> tuple:
        """(folder, file, size, mtime) of the top-level files of the weights and adapter folders: the source is
        the same only while they are."""
        folders = [providers.resolve_base_path(self.model.name_or_path), self.init_adapter, self.adapter]
        return tuple((str(d), f.name, f.stat().st_size, f.stat().st_mtime_ns)
                     for d in folders if d is not None and Path(d).is_dir()
                     for f in sorted(Path(d).iterdir()) if f.is_file())

    def key(self) -> str:
        return repr((self.worker_model(), str(self.adapter), self.merge, str(self.init_adapter), self.files()))


def _kept(source: PolicySource):
    """In a worker: the policy of ``source``, loaded the first time it is asked for, then kept (``KEEP``)."""
    source.register_base()
    key = source.key()
    policy = _LOADED.pop(key, None)
    if policy is None:
        policy = source.load(source.worker_model(), source.adapter, source.merge, source.init_adapter)
        _LOADS[0] += 1
    _LOADED[key] = policy
    while len(_LOADED) > KEEP:
        _LOADED.popitem(last=False)
    return policy


def _shard(source: PolicySource, prompts: list[str], ids: list, indices: list[int], cfg: SamplingConfig):
    """A worker's part of a call: its policy (`_kept`), ``generate`` on the shard with the prompts' global
    indices. Returns the rows, the worker's pid, its loads so far and the generation seconds."""
    policy = _kept(source)
    t0 = time.perf_counter()
    df = generate(policy.model, policy.tokenizer, prompts, cfg, ids=ids, progress=False, prompt_indices=indices,
                  share_prefix=policy.prefix_cache, lean=policy.lean_decoding)
    return df, os.getpid(), _LOADS[0], time.perf_counter() - t0


def _read(source: PolicySource, fn: Callable, *args):
    """A worker's part of `GenerationPool.reads`: ``fn(model, *args)`` on its kept policy's model."""
    return fn(_kept(source).model, *args)


class GenerationPool:
    """``workers`` kept generation units of the engine (``engine.UNITS['generate']``: one torch thread each, a GPU
    each with ``gpus`` where the cluster has GPUs), started once (a context manager; `close` ends them).
    ``loads`` maps each worker's pid to the policies it has loaded; ``timings`` collects each shard's generation
    seconds (start-up and loading excluded)."""

    def __init__(self, workers: int = 2, gpus: bool = False):
        if workers < 1:
            raise ValueError(f"a generation pool needs at least 1 worker, got {workers}")
        self.workers = workers
        self.loads: dict[int, int] = {}
        self.timings: list[float] = []
        self._actors = engine.actors("generate", workers, gpus=gpus)
        self.workers = len(self._actors)  # fewer where a node died after the count was taken (engine.actors)

    def __enter__(self) -> "GenerationPool":
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def close(self) -> None:
        if self._actors and engine.connected():
            engine.release(self._actors)
        self._actors = []

    def generate(self, source: PolicySource, prompts: Sequence[str], cfg: SamplingConfig | None = None,
                 ids: Sequence | None = None, parse: Parse | None = None) -> pd.DataFrame:
        """``generate.generate``'s rows (App. B decoding) for ``prompts`` from the policy ``source``, computed by
        the workers on interleaved shards; ``parse`` runs here on the merged rows. Sampled decoding must be
        row-seeded: batch-seeded tokens depend on how rows are batched, so a split would change them."""
        cfg = cfg or SamplingConfig()
        if not cfg.greedy and cfg.seeding != "row":
            raise ValueError(f"a generation pool needs greedy decoding or SamplingConfig(seeding='row'), got "
                             f"seeding={cfg.seeding!r}: batch-seeded tokens depend on how rows are batched, so "
                             f"splitting them over processes changes them")
        prompts = list(prompts)
        ids = list(range(len(prompts))) if ids is None else list(ids)
        if len(ids) != len(prompts):
            raise ValueError(f"{len(ids)} ids for {len(prompts)} prompts")
        n = shard_count(len(prompts), cfg.n, cfg.batch_size, self.workers)
        shards = [s for s in (list(range(k, len(prompts), n)) for k in range(n)) if s]
        calls = [(_shard, source, [prompts[i] for i in s], [ids[i] for i in s], s, cfg) for s in shards]
        records: list[dict] = []
        for _, (df, pid, loads, seconds) in engine.over_actors(self._actors, "generate", calls):  # the stage's bar
            self.loads[pid] = loads
            self.timings.append(seconds)
            records += df.to_dict("records")
        return _rows_frame(records, parse)  # generate's own frame: parsed, sorted by (prompt, rollout)

    def reads(self, source: PolicySource, fn: Callable, calls: Sequence[tuple]) -> Iterator[tuple[int, Any]]:
        """(index, ``fn(model, *args)``) for each ``args`` of ``calls``, on the workers' model of ``source``, as
        each finishes: forward reads (the probe, the audit) cut by the caller into whole batches, so that a
        value does not depend on the worker it lands on."""
        yield from engine.over_actors(self._actors, "generate", [(_read, source, fn, *args) for args in calls])


def shard_count(n_prompts: int, n_per_prompt: int, batch_size: int, workers: int) -> int:
    """Shards of one call: ``workers`` at least, up to ``SHARDS_PER_WORKER`` each while every shard keeps a full
    batch of rows (a row's tokens do not depend on its shard, so the count only sets the pace)."""
    full_batches = math.ceil(n_prompts * n_per_prompt / max(1, batch_size))
    return max(1, min(n_prompts, max(workers, min(workers * SHARDS_PER_WORKER, full_batches))))


_POOLS: dict[tuple, GenerationPool] = {}  # this process's shared pools, by (worker count, GPUs)


def shared_pool(ceiling: int = 0, gpus: bool = False) -> GenerationPool:
    """This process's pool of as many workers as the engine runs at once (at most ``ceiling`` when > 0;
    ``model.generation_workers``; on GPUs with ``gpus``: the profile's device is not 'cpu'), started on first use
    and kept until `close_shared_pools` (a stage's ``save``) or interpreter exit, so a stage (one notebook kernel)
    starts its workers once."""
    engine.connect()
    key = (engine.capacity("generate", ceiling, gpus=gpus), gpus)
    if key not in _POOLS:
        _POOLS[key] = GenerationPool(*key)
        atexit.register(_POOLS[key].close)
    return _POOLS[key]


def close_shared_pools() -> None:
    """End this process's shared pools (their workers exit, so a timed stage gets their totals); a later call of
    `shared_pool` starts a fresh one."""
    while _POOLS:
        _POOLS.popitem()[1].close()


engine.idle_holders.append(close_shared_pools)  # idle between calls: ended before other units are asked for


def weights_state(model) -> tuple:
    """Each parameter's name, storage and in-place version counter: changed by an optimiser step or by wrapping
    the model (LoRA), unchanged by generation."""
    return tuple((n, p.data_ptr(), p._version) for n, p in model.named_parameters())


class PoolEngine:
    """``Policy.engine`` for ``model.generation_workers`` other than 1: ``policy``'s generation by the shared pool's
    workers (at most ``workers`` when > 0), which load the same weights from ``source``, and its forward reads
    (`forward_reads`) by the same workers from ``exact``: the policy's adapters as it holds them (``merge``, never
    ``model.pool_merges_adapters``'s choice, which moves a read's floats); in this process once the weights
    changed since load."""

    def __init__(self, policy, source: PolicySource, workers: int, merge: bool = False):
        self.policy, self.source, self.workers = policy, source, workers
        self.exact = dataclasses.replace(source, merge=merge)
        self.state = (weights_state(policy.model), source.files())

    def _here(self) -> bool:
        """The weights changed since load: only this process has them."""
        return (weights_state(self.policy.model), self.source.files()) != self.state

    def generate(self, prompts: Sequence[str], cfg: SamplingConfig, ids: Sequence | None = None,
                 progress: bool = True, parse: Parse | None = None) -> pd.DataFrame:
        if self._here():
            return policy_generate(dataclasses.replace(self.policy, engine=None), prompts, cfg, ids=ids,
                                   progress=progress, parse=parse)
        return shared_pool(self.workers, self.source.model.device != "cpu").generate(
            self.source, prompts, cfg, ids=ids, parse=parse)


def forward_reads(policy, fn: Callable, calls: Sequence[tuple]) -> Iterator[tuple[int, Any]]:
    """(index, ``fn(policy.model, *args)``) for each ``args`` of ``calls``, as each finishes: on the engine's
    generation workers where the policy's generation goes there (`PoolEngine`), else here in order. Each call
    must be whole batches (the probe's and audit's own), so a value does not depend on where it ran; a worker's
    one thread gives the floats of the stage's threads on the embedded graders (``edit-suite compare`` of the
    demo)."""
    if reads_on_engine(policy):
        eng = policy.engine
        yield from shared_pool(eng.workers, eng.source.model.device != "cpu").reads(eng.exact, fn, calls)
    else:
        yield from ((i, fn(policy.model, *args)) for i, args in enumerate(calls))


def reads_on_engine(policy) -> bool:
    """Whether `forward_reads` sends this policy's reads to the engine (whose bar then shows them): where its
    generation goes there, its weights are those on disk, and the engine is wider than the stage's own process
    (`_wider`)."""
    eng = getattr(policy, "engine", None)
    return isinstance(eng, PoolEngine) and not eng._here() and _wider(eng)


def _wider(eng: PoolEngine) -> bool:
    """The engine runs more generation units at once than the stage's process has threads (or GPUs: one): reads
    are whole packed batches, whose forward passes gain nothing from one-thread units on as many cores as the
    stage's own threads (the demo's 02 and 03 on two cores: 28.5 and 33.7 s on two units, 24.2 and 31.8 s in the
    process, book/records/performance.md), while more cores or several GPUs split them."""
    engine.connect()
    gpus = eng.source.model.device != "cpu"
    width = engine.capacity("generate", eng.workers, gpus=gpus)
    own = 1 if gpus and engine.cluster_resources().get("GPU", 0) >= 1 else max(1, eng.source.model.torch_threads)
    return width > own
