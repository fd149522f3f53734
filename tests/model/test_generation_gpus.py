"""Generation units on GPUs (edit_lib/engine.py, edit_lib/model/parallel.py): on a cluster with GPUs a profile
whose ``model.device`` is not 'cpu' gets one generation unit per GPU, each holding one (Ray gives it the GPU
alone), and the rows of one process; a 'cpu' profile's units take no GPU. The GPUs are Ray's logical ones on this
CPU machine (a Ray of its own, in a child process, declared with ``num_gpus``), so what is checked is the
placement and the rows; a unit's model then loads where ``model.device`` says (cpu here: 'auto' without CUDA)."""
import json
import os
import subprocess
import sys

import pytest

CHILD = r"""
import json, os, sys
from edit_lib import engine
from edit_lib.runner.keys import register_all
register_all()  # the named Base 'embedded', as a run registers it
ray = engine._ray()
ray.init(address="local", num_cpus=3, num_gpus=int(sys.argv[1]), include_dashboard=False,
         object_store_memory=200_000_000, log_to_driver=False, configure_logging=False)
from edit_lib.config import ModelConfig
from edit_lib.model import parallel
from edit_lib.model.generate import SamplingConfig, generate
from edit_lib.model.policy import policy_from_weights

def unit_gpu():
    return [str(g) for g in ray.get_gpu_ids()], os.environ.get("CUDA_VISIBLE_DEVICES")

out = {}
prompts = [f"question: name {w} ; answer: the {w} is shown\nreasoning:\n" for w in ("osmosis", "energy", "mass")]
cfg = SamplingConfig(n=2, max_new_tokens=10, batch_size=2, seed=3, seeding="row")
for device in ("auto", "cpu"):
    source = parallel.PolicySource(policy_from_weights, ModelConfig(name_or_path="embedded", device=device))
    pool = parallel.shared_pool(0, gpus=device != "cpu")
    seen = [r for _, r in engine.over_actors(pool._actors, "generate", [(unit_gpu,)] * len(pool._actors))]
    here = source.load(source.model)
    same = pool.generate(source, prompts, cfg).equals(generate(here.model, here.tokenizer, prompts, cfg,
                                                                 progress=False))
    out[device] = dict(workers=len(pool._actors), seen=sorted(seen), same=same)
    parallel.close_shared_pools()
print(json.dumps(out))
"""


@pytest.mark.slow
@pytest.mark.parametrize("gpus", [2])
def test_generation_units_take_one_gpu_each_and_give_the_rows_of_one_process(gpus):
    proc = subprocess.run([sys.executable, "-c", CHILD, str(gpus)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0",
                               "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    on_gpus = out["auto"]
    assert on_gpus["workers"] == gpus  # as many units as GPUs, not as CPUs (3)
    assert on_gpus["seen"] == sorted([[str(g)], str(g)] for g in range(gpus))  # each its own GPU, alone
    assert out["cpu"]["workers"] == 3 and all(ids == [] for ids, _ in out["cpu"]["seen"])
    assert on_gpus["same"] and out["cpu"]["same"]
