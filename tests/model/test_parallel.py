"""Generation by the engine's generation workers (edit_lib/model/parallel.py, edit_lib/engine.py) equals the
one-process call row for row, for row-seeded sampling and greedy decoding, however many workers share the call;
the workers keep their policy loaded across calls; batch-seeded sampling, whose tokens depend on the batching, is
refused; a profile asks for the engine with ``model.generation_workers`` other than 1 and gets the in-process path
with 1 or once the weights changed in memory."""
import dataclasses

import pandas as pd
import pytest
import torch

from edit_lib.config import ModelConfig, load_profile
from edit_lib.data.registry import build_dataset
from edit_lib.model import parallel
from edit_lib.model.generate import SamplingConfig, generate, policy_generate
from edit_lib.model.parallel import GenerationPool, PolicySource, PoolEngine
from edit_lib.model.policy import load_policy_from_profile, policy_from_weights
from edit_lib.model.rollouts import grade_responses

PROMPTS = [f"question: name {w} ; answer: the {w} is shown\nreasoning:\n" for w in
           ("osmosis", "diffusion", "a cell wall", "energy", "mass")]
SAMPLED = SamplingConfig(n=2, max_new_tokens=12, batch_size=4, seed=3, seeding="row")
GREEDY = SamplingConfig(greedy=True, n=2, max_new_tokens=12, batch_size=4)
SOURCE = PolicySource(policy_from_weights, ModelConfig(name_or_path="embedded", torch_threads=2))


def parse(text: str, i: int) -> dict:  # runs in the parent on the merged rows
    return {"length": len(text), "index_seen": i}


@pytest.fixture(scope="module")
def pool():
    from edit_lib import engine
    engine.connect()  # this process's Ray, also when this file runs alone
    with GenerationPool(2) as p:
        yield p


@pytest.mark.parametrize("cfg", [SAMPLED, GREEDY], ids=["row-seeded", "greedy"])
def test_two_workers_equal_one_process_and_keep_their_policy(pool, cfg):
    ids = [f"r{i}" for i in range(len(PROMPTS))]
    here = SOURCE.load(SOURCE.model)  # the parent's two torch threads against the workers' one
    one = generate(here.model, here.tokenizer, PROMPTS, cfg, ids=ids, progress=False, parse=parse)
    for _ in range(3):  # a stage's consecutive calls
        pd.testing.assert_frame_equal(pool.generate(SOURCE, PROMPTS, cfg, ids=ids, parse=parse), one)
    # every worker that got a shard loaded the policy once, whatever the calls (the module's calls included)
    assert pool.loads and set(pool.loads.values()) == {1}


def test_batch_seeded_sampling_is_refused(pool):
    with pytest.raises(ValueError, match="seeding='row'"):
        pool.generate(SOURCE, PROMPTS, SamplingConfig(n=2, seeding="batch"))


def test_a_pool_has_one_worker_at_least():
    with pytest.raises(ValueError, match="at least 1 worker"):
        GenerationPool(0)


@pytest.mark.parametrize("workers", [1, 4], ids=["1-worker", "4-workers"])
def test_the_rows_do_not_depend_on_how_many_workers_share_a_call(pool, monkeypatch, workers):
    """A machine with other cores cuts a call into other shards (``shard_count``): the same rows."""
    prompts = [p.replace("shown", f"shown {k}") for k in range(3) for p in PROMPTS]
    ids, cfg = [f"r{i}" for i in range(len(prompts))], SamplingConfig(n=2, max_new_tokens=12, batch_size=2, seed=3,
                                                                       seeding="row")
    two = pool.generate(SOURCE, prompts, cfg, ids=ids, parse=parse)
    monkeypatch.setattr(pool, "workers", workers)  # the shards of a pool that size, on the same two actors
    assert parallel.shard_count(len(prompts), cfg.n, cfg.batch_size, workers) != \
        parallel.shard_count(len(prompts), cfg.n, cfg.batch_size, 2)
    pd.testing.assert_frame_equal(pool.generate(SOURCE, prompts, cfg, ids=ids, parse=parse), two)


def test_the_pools_size_is_the_engines_cores_under_a_ceiling(pool, monkeypatch):
    """``generation_workers`` 0: one worker per core of the engine; N > 1: at most N."""
    from edit_lib import engine
    monkeypatch.setattr(engine._ray(), "cluster_resources", lambda: {"CPU": 16.0})
    assert engine.capacity("generate") == 16 and engine.capacity("generate", 3) == 3
    assert engine.capacity("rl_run", 0, gpus=True) == 16  # no GPU in the cluster: CPUs bound it
    monkeypatch.setattr(engine._ray(), "cluster_resources", lambda: {"CPU": 16.0, "GPU": 2.0})
    assert engine.capacity("rl_run") == 2 and engine.capacity("rl_run", gpus=False) == 16
    assert engine.options("rl_run")["num_gpus"] == 1 and engine.options("generate", gpus=False)["num_gpus"] == 0
    # a profile whose device is not 'cpu': one generation unit per GPU; an SFT unit takes the profile's threads
    assert engine.options("generate")["num_gpus"] == 1 and engine.capacity("generate") == 2
    assert engine.capacity("generate", gpus=False) == 16
    assert engine.capacity("sft_run", gpus=False, threads=2) == 8 and engine.capacity("sft_run", threads=2) == 2
    assert engine.options("sft_run", threads=2)["num_cpus"] == 2


def test_a_profile_policy_generates_through_the_pool_with_the_rows_of_one_process(pool, monkeypatch):
    """grade_responses (01's rollouts and greedy evaluation) through a profile's pooled policy: the same table as
    in-process; with ``generation_workers: 1`` the policy has no engine (in-process)."""
    monkeypatch.setitem(parallel._POOLS, (2, False), pool)
    prof = load_profile("demo", ["model.generation_workers=2"])
    pooled = load_policy_from_profile(prof)
    plain = load_policy_from_profile(load_profile("demo", ["model.generation_workers=1"]))
    assert isinstance(pooled.engine, PoolEngine) and plain.engine is None
    ds = build_dataset(prof.data.datasets[0], seed=prof.run.seed)
    rs = ds.split("train")[:4]
    calls = len(pool.timings)
    for cfg in (SAMPLED, GREEDY):
        pd.testing.assert_frame_equal(grade_responses(pooled, ds, rs, cfg, progress=False),
                                      grade_responses(plain, ds, rs, cfg, progress=False))
    assert len(pool.timings) == calls + 4  # two shards per call went to the workers


class _NoPool:
    def generate(self, *a, **k):
        raise AssertionError("a policy changed in memory went to the workers")


def test_weights_changed_in_memory_are_generated_in_process(monkeypatch):
    """After an in-place update (an optimiser step; training wraps the model in place too) the workers' copy from
    disk is stale: the engine generates in this process, with the changed weights."""
    monkeypatch.setattr(parallel, "shared_pool", lambda ceiling, gpus: _NoPool())
    policy = load_policy_from_profile(load_profile("demo", ["model.generation_workers=2"]))
    with pytest.raises(AssertionError, match="went to the workers"):
        policy_generate(policy, PROMPTS, GREEDY, progress=False)
    with torch.no_grad():
        next(policy.model.parameters()).mul_(1.5)
    got = policy_generate(policy, PROMPTS, GREEDY, progress=False)
    pd.testing.assert_frame_equal(got, generate(policy.model, policy.tokenizer, PROMPTS, GREEDY, progress=False))


@pytest.mark.parametrize("prompts, n, batch, workers, shards", [
    (5, 2, 4, 2, 3),       # ten rows: three full batches of four
    (4, 1, 64, 2, 2),      # less than a batch: one shard per worker still
    (1000, 8, 64, 2, 8),   # many batches: SHARDS_PER_WORKER each
    (1, 8, 2, 4, 1),       # never more shards than prompts
])
def test_a_call_is_split_into_full_batch_shards_a_few_per_worker(prompts, n, batch, workers, shards):
    assert parallel.shard_count(prompts, n, batch, workers) == shards


class _Bar:
    made: list = []

    def __init__(self, total, initial):
        self.total, self.n, self.closed = total, initial, False
        _Bar.made.append(self)

    def refresh(self):
        pass

    def update(self, n):
        self.n += n

    def close(self):
        self.closed = True


def test_the_stages_bar_counts_every_unit_of_its_calls_and_changes_no_row(pool, monkeypatch):
    """engine._progress: the stage's consecutive calls (two generations and a read of batches) each draw the bar
    while they run, counting on from the call before; a stage's save starts the count again."""
    from edit_lib import engine

    ids = [f"r{i}" for i in range(len(PROMPTS))]
    quiet = pool.generate(SOURCE, PROMPTS, SAMPLED, ids=ids, parse=parse)
    engine.end_progress()
    _Bar.made = []
    monkeypatch.setattr(engine, "_new_bar", _Bar)
    pd.testing.assert_frame_equal(pool.generate(SOURCE, PROMPTS, SAMPLED, ids=ids, parse=parse), quiet)
    pool.generate(SOURCE, PROMPTS, GREEDY, ids=ids)
    list(pool.reads(SOURCE, parallel.weights_state, [()] * 2))  # two reads of the workers' model
    assert [(b.total, b.n, b.closed) for b in _Bar.made] == [(3, 3, True), (6, 6, True), (8, 8, True)]
    engine.end_progress()
    pool.generate(SOURCE, PROMPTS, GREEDY, ids=ids)
    assert (_Bar.made[-1].total, _Bar.made[-1].n) == (3, 3)  # three shards a generation call


class _CountedPool:
    closed = 0

    def __init__(self, workers, gpus=False):
        self.workers = workers

    def close(self):
        type(self).closed += 1


def test_a_stage_ends_its_shared_pool_when_it_saves_and_a_later_call_starts_a_fresh_one(tmp_path, monkeypatch):
    """The workers exit with the stage's ``save`` (not at the kernel's exit), so a timed stage gets their totals."""
    import edit_lib.runner.stage as pl

    monkeypatch.setattr(parallel, "GenerationPool", _CountedPool)
    monkeypatch.setattr(parallel, "_POOLS", {})
    monkeypatch.setattr(parallel.engine, "connect", lambda: None)
    monkeypatch.setattr(parallel.engine, "capacity", lambda kind, ceiling, gpus: 2)
    first = parallel.shared_pool(2)
    assert parallel.shared_pool(2) is first  # kept within the stage
    pl.stage("00_data", "smoke", [], str(tmp_path)).save()
    assert _CountedPool.closed == 1 and not parallel._POOLS
    assert parallel.shared_pool(2) is not first


def test_workers_fold_adapters_when_the_profile_asks_and_give_the_rows_of_the_unmerged_policy(pool, tmp_path,
                                                                                                monkeypatch):
    """``model.pool_merges_adapters``: the workers load the adapter merged, the stage's process keeps it unmerged;
    on these prompts the pooled rows equal the in-process ones (``edit-suite bench merge`` counts differing rows)."""
    from edit_lib.tools.bench_generation import _adapter

    prof = load_profile("demo")
    _adapter(prof, str(tmp_path), seed=1)
    monkeypatch.setitem(parallel._POOLS, (2, False), pool)
    merged = load_policy_from_profile(prof, adapter=tmp_path)
    plain = load_policy_from_profile(load_profile("demo", ["model.pool_merges_adapters=false"]), adapter=tmp_path)
    assert merged.engine.source.merge and not plain.engine.source.merge
    assert hasattr(merged.model, "peft_config")  # the stage's own copy stays a peft model
    for cfg in (SAMPLED, GREEDY):
        here = generate(merged.model, merged.tokenizer, PROMPTS, cfg, progress=False, lean=True)
        pd.testing.assert_frame_equal(policy_generate(merged, PROMPTS, cfg, progress=False), here)



def test_02s_probe_and_03s_audit_through_the_pool_equal_the_stages_own_reads(pool, tmp_path, monkeypatch):
    """``parallel.forward_reads``: a pooled profile policy's probe (Eq. 1-2, both reads) and audit (Eq. 3) tables,
    cut at their batches and read by the one-thread workers, equal the two-thread in-process tables to the bit; with
    an adapter and ``pool_merges_adapters`` the workers read it unmerged, as the stage's own policy holds it."""
    from edit_lib.signals.tables import audit_table, probe_table
    from edit_lib.tools.bench_generation import _adapter

    monkeypatch.setitem(parallel._POOLS, (2, False), pool)
    monkeypatch.setattr(parallel, "_wider", lambda eng: True)  # as on a machine of more cores than 02's threads
    prof = load_profile("demo", ["model.generation_workers=2", "probe.batch_size=2", "audit.batch_size=2"])
    _adapter(prof, str(tmp_path), seed=1)
    ds = build_dataset(prof.data.datasets[0], seed=prof.run.seed)
    plain = load_policy_from_profile(load_profile("demo", ["model.generation_workers=1"]))
    cfg = dataclasses.replace(SAMPLED, max_new_tokens=200)  # whole rollouts with their steps
    rollouts = grade_responses(plain, ds, ds.split("train")[:3], cfg, progress=False)  # six: three batches of two
    sent = []  # the calls the pool's workers read
    monkeypatch.setattr(pool, "reads", lambda source, fn, calls, read=pool.reads: sent.append(len(calls)) or
                        read(source, fn, calls))
    for adapter in (None, tmp_path):
        pooled = load_policy_from_profile(prof, adapter=adapter)
        here = load_policy_from_profile(load_profile("demo", ["model.generation_workers=1"]), adapter=adapter)
        assert pooled.engine.source.merge and not pooled.engine.exact.merge
        generated = len(pool.timings)
        for read in ("next_token", "sequence"):
            cfg = dataclasses.replace(prof.probe, read=read)
            pd.testing.assert_frame_equal(probe_table(pooled, {ds.name: ds}, rollouts, cfg, progress=False),
                                          probe_table(here, {ds.name: ds}, rollouts, cfg, progress=False))
        pd.testing.assert_frame_equal(audit_table(pooled, {ds.name: ds}, rollouts, prof.audit, progress=False),
                                      audit_table(here, {ds.name: ds}, rollouts, prof.audit, progress=False))
        assert len(pool.timings) == generated  # reads, no generation
    assert sent == [3] * 6  # three batches a table, six tables, every one on the workers


@pytest.mark.parametrize("cpus, gpus, device, threads, wider", [
    (2, 0, "cpu", 2, False),   # the demo on two cores: two one-thread units are no wider than 02's two threads
    (16, 0, "cpu", 2, True),   # sixteen cores
    (16, 0, "cpu", 16, False),
    (16, 1, "auto", 2, False),  # one GPU: the stage's own
    (16, 4, "auto", 2, True),  # four GPUs: one unit each
])
def test_reads_go_to_the_engine_where_it_is_wider_than_the_stages_process(monkeypatch, cpus, gpus, device, threads,
                                                                          wider):
    from edit_lib import engine
    monkeypatch.setattr(engine, "connect", lambda: None)
    monkeypatch.setattr(engine, "_ray", lambda address=None: type("R", (), {"cluster_resources": staticmethod(
        lambda: {"CPU": cpus, "GPU": gpus})}))
    eng = PoolEngine.__new__(PoolEngine)
    eng.source, eng.workers = PolicySource(policy_from_weights, ModelConfig(name_or_path="embedded", device=device,
                                                                            torch_threads=threads)), 0
    assert parallel._wider(eng) is wider
