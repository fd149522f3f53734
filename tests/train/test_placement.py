"""Placement of parallel training runs (edit_lib/train/launched_run.py, rl_runs.train_on_engine) on a faked engine
and device list: a run inside its engine unit trains on the GPU Ray gave it (cuda:0, the only one it sees) and
stays on the CPU for model.device 'cpu'; at most as many runs at once as the engine has room for, under
rl.workers' ceiling, started longest first by expected cost (App. B: EDIT-RL's probe read makes its step dearer
than GRPO's), each at the unit's one thread; the ranks of a run spread over processes get a GPU each."""
from types import SimpleNamespace

import pytest

from edit_lib.config import ModelConfig, Profile, RLConfig
from edit_lib.train import launched_run as placement, rl_runs


@pytest.fixture
def gpus(monkeypatch):
    """gpus(n): torch reports n visible CUDA devices (0: none)."""
    import torch

    def fake(n: int) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)
    return fake


def test_visible_gpus_reads_torch(gpus):
    gpus(4)
    assert placement.visible_gpus() == 4
    gpus(0)
    assert placement.visible_gpus() == 0


def test_rank_devices_of_a_spread_run():
    assert [placement.rank_device("cuda", r, 4, 4) for r in range(4)] == [f"cuda:{r}" for r in range(4)]
    assert placement.rank_device("auto", 1, 2, 0) == placement.rank_device("cpu", 1, 2, 8) == "cpu"  # gloo
    assert placement.rank_device("cuda:3", 0, 1, 4) == "cuda:3"
    with pytest.raises(ValueError, match="needs 4 GPUs, 2 are visible"):
        placement.rank_device("cuda", 0, 4, 2)
    with pytest.raises(ValueError, match="pins one GPU"):
        placement.rank_device("cuda:0", 0, 2, 2)


def test_runs_start_longest_first_in_a_stable_order():
    rl = RLConfig(steps=200, steps_by_dataset={"big": 500}, rollouts_per_prompt=8, prompts_per_step=4)
    rows = [dict(system=s, arm=a, dataset=d) for s, a, d in [
        ("base_grpo", "grpo", "small"), ("base_dgpo", "grpo", "small"), ("base_edit_rl", "edit_rl", "small"),
        ("base_grpo", "grpo", "big"), ("edit_sft_edit_rl", "edit_rl", "big")]]
    cost = lambda r: placement.run_cost(rl, r["dataset"], r["arm"])  # noqa: E731
    assert cost(rows[0]) == 200 * 32 and cost(rows[3]) == 500 * 32
    assert cost(rows[2]) == pytest.approx(200 * 32 * 14 / 12)  # App. B: 2 s added to a 12 s step
    order = placement.longest_first(rows, cost)
    assert [(r["system"], r["dataset"]) for r in order] == [
        ("edit_sft_edit_rl", "big"), ("base_grpo", "big"), ("base_edit_rl", "small"),
        ("base_grpo", "small"), ("base_dgpo", "small")]  # the two equal GRPO costs keep the plan's order
    with pytest.raises(ValueError, match="arm must be one of"):
        placement.run_cost(rl, "big", "dgpo")


def test_a_unit_trains_on_the_gpu_ray_gave_it_or_on_the_cpu(gpus, tmp_path):
    prof = Profile(model=ModelConfig(name_or_path=str(tmp_path), device="auto"))
    gpus(1)  # Ray's CUDA_VISIBLE_DEVICES leaves the unit one GPU
    assert placement.unit_profile(prof).model.device == "cuda:0"
    gpus(0)
    assert placement.unit_profile(prof).model.device == "auto"  # no GPU: the CPU, as in the notebook's process
    cpu = Profile(model=ModelConfig(name_or_path=str(tmp_path), device="cpu"))
    gpus(4)
    assert placement.unit_profile(cpu).model.device == "cpu"


class _Engine:
    """The engine's calls train_on_engine makes, inline; ``in_flight`` records how many were submitted and not yet
    collected when each one was."""

    def __init__(self, width):
        self.width, self.in_flight = width, []

    def connect(self):
        pass

    def capacity(self, kind, ceiling=0, gpus=True):
        return min(self.width, ceiling) if ceiling > 0 else self.width

    def remote(self, kind, gpus=True):
        return SimpleNamespace(remote=lambda kind, hooks, fn, *args: (fn, args))

    def bounded(self, submit, items, width):
        """Submits in order with at most ``width`` pending; a unit runs when it is collected (the first pending)."""
        queue, pending = list(items), []
        while queue or pending:
            while queue and len(pending) < width:
                item = queue.pop(0)
                pending.append((item, submit(item)))
                self.in_flight.append(len(pending))
            item, (fn, args) = pending.pop(0)
            yield item, fn(*args)


def _engine_run(monkeypatch, tmp_path, device: str, n_gpus: int, workers: int, width: int):
    """train_on_engine on the inline engine and a recording run_one: [(system, dataset, device, threads)] in the
    order the runs started, and the engine."""
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: n_gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: n_gpus)
    eng = _Engine(width)
    for name in ("connect", "capacity", "remote", "bounded"):
        monkeypatch.setattr(rl_runs.engine, name, getattr(eng, name))
    seen = []

    def record(prof, row, datasets, shaping, progress=True, log_root=None):
        seen.append((row["system"], row["dataset"], prof.model.device, prof.model.torch_threads))
        return rl_runs.RunOutcome("trained", {})
    monkeypatch.setattr(rl_runs, "run_one", record)
    prof = Profile(rl=RLConfig(workers=workers, steps=10, steps_by_dataset={"big": 30}),
                   model=ModelConfig(name_or_path=str(tmp_path), device=device, torch_threads=8))
    todo = [(dict(system=s, dataset=d, seed=0, arm=a), None) for s, d, a in [
        ("base_grpo", "small", "grpo"), ("base_edit_rl", "small", "edit_rl"), ("base_grpo", "big", "grpo")]]
    out = rl_runs.train_on_engine(prof, todo, {})
    assert set(out) == {("base_grpo", "small", 0), ("base_edit_rl", "small", 0), ("base_grpo", "big", 0)}
    return seen, eng


def test_engine_units_train_longest_first_at_one_thread_on_their_gpu(monkeypatch, tmp_path):
    seen, eng = _engine_run(monkeypatch, tmp_path, "auto", n_gpus=1, workers=0, width=2)
    assert [(s, d) for s, d, *_ in seen] == [("base_grpo", "big"), ("base_edit_rl", "small"), ("base_grpo", "small")]
    assert {(dev, th) for *_, dev, th in seen} == {("cuda:0", 1)}  # the unit's thread, not model.torch_threads
    assert max(eng.in_flight) == 2  # the engine's room


def test_rl_workers_caps_the_runs_at_once_and_the_cpu_stays_the_cpu(monkeypatch, tmp_path):
    seen, eng = _engine_run(monkeypatch, tmp_path, "cpu", n_gpus=4, workers=1 + 1, width=16)
    assert max(eng.in_flight) == 2 and {(dev, th) for *_, dev, th in seen} == {("cpu", 1)}
