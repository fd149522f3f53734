"""Generation over worker processes (edit_lib/model/parallel.py) equals the one-process call row for row, for
row-seeded sampling and greedy decoding; batch-seeded sampling, whose tokens depend on the batching, is refused."""
import pytest

from edit_lib.embedded.store import ASSETS_DIR
from edit_lib.model.generate import SamplingConfig
from edit_lib.model.parallel import generate_in_worker, generate_parallel

PROMPTS = [f"question: name {w} ; answer: the {w} is shown\nreasoning:\n" for w in
           ("osmosis", "diffusion", "a cell wall", "energy", "mass")]
KEY = ["prompt_index", "response_id", "rollout_id", "text", "n_tokens"]


@pytest.mark.slow  # two spawned processes, each loading the grader
@pytest.mark.parametrize("cfg", [SamplingConfig(n=2, max_new_tokens=12, batch_size=4, seed=3, seeding="row"),
                                 SamplingConfig(greedy=True, n=1, max_new_tokens=12, batch_size=4)],
                         ids=["row-seeded", "greedy"])
def test_two_workers_equal_one_process(cfg):
    one = generate_in_worker(str(ASSETS_DIR), PROMPTS, cfg)
    timings: list = []
    two = generate_parallel(str(ASSETS_DIR), PROMPTS, cfg, workers=2, timings=timings)
    assert one[KEY].equals(two[KEY]) and len(timings) == 2


def test_batch_seeded_sampling_is_refused():
    with pytest.raises(ValueError, match="seeding='row'"):
        generate_parallel(str(ASSETS_DIR), PROMPTS, SamplingConfig(n=2, seeding="batch"))
