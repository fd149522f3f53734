"""05's SFT runs on the engine (edit_lib/train/sft_runs.py, ``sft.workers``): each run whole as one unit at the
profile's threads gives the adapter, loss curve and summary the notebook's own process gives; a second call reuses
them; an empty pool is recorded, not sent; ``sft.workers`` changes no stage key."""
import json

import pytest

from edit_lib.config import load_profile
from edit_lib.runner.keys import STAGES, ProfileView, hashed_params
from edit_lib.train import sft_runs


def _pairs(n: int, tag: str) -> list[tuple[str, str]]:
    return [(f"question {tag}{i}: name part {i}\nreasoning:\n", f" part {i} is named\nFinal mark: {i % 3}")
            for i in range(n)]


@pytest.mark.slow
def test_sft_runs_on_the_engine_equal_the_notebooks_process(tmp_path, micro_grader):
    import torch
    from safetensors.torch import load_file

    pairs = {("edit_sft", "d"): _pairs(8, "e"), ("int_sft", "d"): _pairs(4, "i"), ("wo_atomic", "d"): []}
    profiles = load_profile("smoke", ["sft.workers=0"]), load_profile("smoke")
    # what the notebook passes (pickled to the units)
    on_engine, here = (ProfileView(p, "05_edit_sft", STAGES["05_edit_sft"].sections) for p in profiles)
    threads = torch.get_num_threads()
    try:
        a = sft_runs.train_all(pairs, on_engine, tmp_path / "engine", warn=lambda *_: None, progress=False)
        b = sft_runs.train_all(pairs, here, tmp_path / "here", warn=lambda *_: None, progress=False)
    finally:
        torch.set_num_threads(threads)
    assert a.summary.status.tolist() == b.summary.status.tolist() == ["trained", "trained", "empty_pool"]
    assert a.curves.equals(b.curves) and a.summary.steps.equals(b.summary.steps)
    for system in ("edit_sft", "int_sft"):
        x = load_file(tmp_path / "engine" / system / "d" / "adapter_model.safetensors")
        y = load_file(tmp_path / "here" / system / "d" / "adapter_model.safetensors")
        assert x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x), system
        s = json.loads((tmp_path / "engine" / system / "d" / "sft_summary.json").read_text())
        assert s["n_pairs"] == len(pairs[(system, "d")])
    again = sft_runs.train_all(pairs, on_engine, tmp_path / "engine", warn=lambda *_: None, progress=False)
    assert again.summary.status.tolist() == ["reused", "reused", "empty_pool"]
    assert hashed_params(profiles[0], ["sft"]) == hashed_params(profiles[1], ["sft"])  # no key holds it
