"""Placement of parallel training runs (edit_lib/train/placement.py, rl_runs.train_in_workers) on a faked device
list: one RL run per GPU for rl.workers (round-robin when workers outnumber GPUs), model.device 'cpu' kept on the
CPU of a GPU machine, 'cuda:N' pinned, each worker's device known before it loads anything, and runs started
longest first by expected cost (App. B: EDIT-RL's probe read makes its step dearer than GRPO's)."""
import os
import queue

import pytest

from edit_lib.config import ModelConfig, Profile, RLConfig
from edit_lib.train import placement, rl_runs


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


def test_one_run_per_gpu_and_round_robin_beyond(gpus):
    gpus(3)
    n = placement.visible_gpus()
    assert placement.devices_for(3, "cuda", n) == ["cuda:0", "cuda:1", "cuda:2"]
    assert placement.devices_for(5, "auto", n) == ["cuda:0", "cuda:1", "cuda:2", "cuda:0", "cuda:1"]
    assert placement.devices_for(2, "cuda", 8) == ["cuda:0", "cuda:1"]


def test_cpu_stays_on_cpu_and_pins_pin(gpus):
    gpus(4)
    assert placement.devices_for(3, "cpu", placement.visible_gpus()) == ["cpu"] * 3  # a GPU machine, model.device cpu
    assert placement.devices_for(2, "auto", 0) == ["cpu", "cpu"]
    assert placement.devices_for(3, "cuda:2", 4) == ["cuda:2"] * 3
    with pytest.raises(ValueError, match=r"model.device='cuda:4': only 4 GPU\(s\)"):
        placement.devices_for(2, "cuda:4", 4)
    with pytest.raises(ValueError, match="model.device='cuda' asks for a GPU, but none is visible"):
        placement.devices_for(2, "cuda", 0)
    with pytest.raises(ValueError, match="rl.workers must be >= 1"):
        placement.devices_for(0, "cpu", 0)


def test_a_gpu_worker_sees_only_its_gpu():
    assert placement.worker_visibility("cuda:2") == ({"CUDA_VISIBLE_DEVICES": "2"}, "cuda:0")
    # the parent already restricted to some GPUs: index into its list
    assert placement.worker_visibility("cuda:1", "4,6,7") == ({"CUDA_VISIBLE_DEVICES": "6"}, "cuda:0")
    assert placement.worker_visibility("cpu", "0,1") == ({}, "cpu")
    with pytest.raises(ValueError, match="lists 2 GPU"):
        placement.worker_visibility("cuda:3", "0,1")


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


def test_init_worker_places_before_anything_loads(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")  # restored by monkeypatch after init_worker changes it
    monkeypatch.setattr(placement, "_WORKER_DEVICE", None)
    slots = queue.Queue()
    slots.put("cuda:1")
    placement.init_worker(slots)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "5" and placement.worker_device() == "cuda:0"


class _InlinePool:
    """A ProcessPoolExecutor stand-in: each of the first n submissions starts a 'worker' (runs the initializer in
    the parent's environment, as a spawned process would), later ones reuse the last; the work runs at once, in
    submission order."""

    def __init__(self, n, mp_context=None, initializer=None, initargs=()):
        self.n, self.init, self.args, self.started = n, initializer, initargs, 0
        self.env = dict(os.environ)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def submit(self, fn, *args):
        from concurrent.futures import Future
        if self.started < self.n:
            os.environ.clear()
            os.environ.update(self.env)
            self.init(*self.args)
            self.started += 1
        f = Future()
        f.set_result(fn(*args))
        return f


def _workers_run(monkeypatch, tmp_path, device: str, n_gpus: int, workers: int):
    """train_in_workers with the inline pool and a recording run_one: [(system, dataset, device, threads, cuda
    visibility)] in the order the runs started."""
    import concurrent.futures

    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: n_gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: n_gpus)
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", _InlinePool)
    monkeypatch.setattr(placement, "_WORKER_DEVICE", None)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    seen = []

    def record(prof, row, datasets, shaping, progress=True, log_root=None):
        seen.append((row["system"], row["dataset"], prof.model.device, prof.model.torch_threads,
                     os.environ.get("CUDA_VISIBLE_DEVICES")))
        return rl_runs.RunOutcome("trained", {})
    monkeypatch.setattr(rl_runs, "run_one", record)
    prof = Profile(rl=RLConfig(workers=workers, steps=10, steps_by_dataset={"big": 30}),
                   model=ModelConfig(name_or_path=str(tmp_path), device=device, torch_threads=8))
    todo = [(dict(system=s, dataset=d, seed=0, arm=a), None) for s, d, a in [
        ("base_grpo", "small", "grpo"), ("base_edit_rl", "small", "edit_rl"), ("base_grpo", "big", "grpo")]]
    out = rl_runs.train_in_workers(prof, todo, {})
    assert set(out) == {("base_grpo", "small", 0), ("base_edit_rl", "small", 0), ("base_grpo", "big", 0)}
    return seen


def test_workers_train_one_run_per_gpu_longest_first(monkeypatch, tmp_path):
    seen = _workers_run(monkeypatch, tmp_path, "auto", n_gpus=2, workers=2)
    assert [(s, d) for s, d, *_ in seen] == [("base_grpo", "big"), ("base_edit_rl", "small"), ("base_grpo", "small")]
    # worker 0 on GPU 0, worker 1 on GPU 1, each seeing only its GPU (cuda:0 inside); threads split 8 / 2
    assert [(dev, th, vis) for *_, dev, th, vis in seen[:2]] == [("cuda:0", 4, "0"), ("cuda:0", 4, "1")]


def test_workers_on_a_gpu_machine_with_model_device_cpu_change_nothing(monkeypatch, tmp_path):
    seen = _workers_run(monkeypatch, tmp_path, "cpu", n_gpus=4, workers=2)
    assert {(dev, th, vis) for *_, dev, th, vis in seen} == {("cpu", 4, "")}  # today's thread split, no GPU
