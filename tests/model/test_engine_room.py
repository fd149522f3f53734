"""Kept units never leave new ones waiting for ever (edit_lib/engine.py): a stage's idle shared generation pool
is ended before other units are asked for (06's RL runs after its calibration's generation; a test after one that
generated through a profile's pool), units Ray cannot place fail with what they asked and what is free, a unit
larger than the whole cluster is refused before it is queued, units the cluster no longer holds are not asked for,
and kept units not all placed go on with those placed."""
import dataclasses

import pytest

from edit_lib import engine
from edit_lib.model import parallel


@pytest.fixture
def ray_here():
    engine.connect()
    yield engine._ray()
    parallel.close_shared_pools()


def test_an_idle_shared_pool_holding_every_cpu_is_ended_before_new_units_are_asked_for(ray_here, monkeypatch):
    monkeypatch.setattr(engine, "START_TIMEOUT_S", 120)
    held = parallel.shared_pool(0)  # one worker per CPU of the cluster: nothing left for another unit
    assert len(held._actors) == int(ray_here.cluster_resources()["CPU"])
    (worker,) = engine.actors("generate", 1)  # placed: the idle pool was ended first
    assert not parallel._POOLS and not held._actors
    assert ray_here.get(worker.ready.remote())
    engine.release([worker])
    again = parallel.shared_pool(0)  # the stage's next generation starts a fresh one
    assert again is not held and again._actors


def test_units_ray_cannot_place_fail_with_what_they_asked_and_what_is_free(ray_here, monkeypatch):
    monkeypatch.setattr(engine, "PLACE_WAIT_S", 120)  # the holding pool placed whole, however busy the machine
    with parallel.GenerationPool(engine.capacity("generate")) as pool:  # not a shared pool: kept while busy
        assert pool.workers == int(ray_here.cluster_resources()["CPU"])
        monkeypatch.setattr(engine, "START_TIMEOUT_S", 3)
        with pytest.raises(RuntimeError, match=r"1 of 1 'generate' units \(1 CPU, 0 GPU, 1200 MB memory each\) were "
                                               r"not placed within 3 s; the cluster has 0 CPU"):
            engine.actors("generate", 1)


def test_a_unit_larger_than_the_cluster_is_refused_before_it_is_queued(ray_here, monkeypatch):
    cpus = ray_here.cluster_resources()["CPU"]
    monkeypatch.setitem(engine.UNITS, "rl_run", dataclasses.replace(engine.UNITS["rl_run"], num_cpus=cpus + 1))
    with pytest.raises(RuntimeError, match="more than the whole cluster holds .*short of CPU"):
        engine.remote("rl_run", gpus=False)
    with pytest.raises(RuntimeError, match="more than the whole cluster holds .*short of CPU"):
        engine.actors("rl_run", 1)


def test_units_the_cluster_no_longer_holds_are_not_asked_for(ray_here, capsys):
    """A pool sized before a node died asks for more units than the cluster now holds: those it holds serve (a
    pool's rows do not depend on its size), without waiting on the others."""
    cpus = int(ray_here.cluster_resources()["CPU"])
    workers = engine.actors("generate", cpus + 1)
    assert len(workers) == cpus and all(ray_here.get([w.ready.remote() for w in workers]))
    said = capsys.readouterr().out
    assert f"engine: {cpus} of {cpus + 1} 'generate' units fit the cluster, going on with them" in said
    engine.release(workers)
    with parallel.GenerationPool(cpus + 1) as pool:
        assert pool.workers == len(pool._actors) == cpus


def test_kept_units_not_all_placed_go_on_with_those_placed(ray_here, monkeypatch, capsys):
    """Other work holds all but one CPU: of two units asked for, the one Ray placed within ``PLACE_WAIT_S`` serves
    and the other is ended."""
    cpus = int(ray_here.cluster_resources()["CPU"])
    if cpus < 2:
        pytest.skip("needs a cluster of 2 CPUs at least (one held, one free)")
    monkeypatch.setattr(engine, "PLACE_WAIT_S", 120)  # the holding pool placed whole, however busy the machine
    with parallel.GenerationPool(cpus - 1) as held:
        assert held.workers == cpus - 1
        monkeypatch.setattr(engine, "PLACE_WAIT_S", 3)
        workers = engine.actors("generate", 2)
        assert len(workers) == 1 and ray_here.get(workers[0].ready.remote())
        assert "engine: 1 of 2 'generate' units placed, going on with them" in capsys.readouterr().out
        engine.release(workers)
