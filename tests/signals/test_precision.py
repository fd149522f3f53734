"""The GPU issue's CPU part: the probe on a bfloat16 copy of the micro grader against float32 on the same boundaries
(signals/probe.py, ``probe.dtype``), ``edit-suite bench precision``'s comparison helpers, and training
placement that follows ``model.device`` (train/sft.py ``trains_on_cpu``)."""
import copy

import numpy as np
import pandas as pd
import pytest
import torch

from edit_lib.config import ConfigError, ProbeConfig, SFTConfig
from edit_lib.tools.bench_signals import belief_differences, firing_changes, pick_changes
from edit_lib.signals.probe import mark_readout, probe_rollouts, bfloat16_copy, read_precision
from edit_lib.train.sft import build_sft_config, trains_on_cpu
from micro import micro_policy

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def micro():
    return micro_policy()


def _boundaries(pol, n=6, seed=0):
    """Token rollouts cut into steps from the micro grader's own vocabulary (seeded), with the mark read."""
    rng = np.random.default_rng(seed)
    vocab = len(pol.tokenizer)
    prompts = [rng.integers(5, vocab, 20 + 3 * i).tolist() for i in range(n)]
    steps = [[rng.integers(5, vocab, 4 + j).tolist() for j in range(1 + i % 3)] for i in range(n)]
    ro = mark_readout(pol.tokenizer, ProbeConfig().scaffold, 4)
    return prompts, steps, ro


def _probe(model, b, dtype=None):
    prompts, steps, ro = b
    res = probe_rollouts(model, prompts, steps, ro.scaffold, ro.marks, temperature=0.7, batch_size=3, dtype=dtype)
    return np.concatenate([r.probs for r in res])


def test_read_precision_restores_every_tensor_exactly(micro):
    low = copy.deepcopy(micro.model).to(torch.bfloat16)
    before = {n: t.clone() for n, t in low.state_dict().items()}
    with read_precision(low, "float32") as m:
        assert all(p.dtype == torch.float32 for p in m.parameters())
    after = low.state_dict()
    assert all(after[n].dtype == t.dtype and torch.equal(after[n], t) for n, t in before.items())
    with read_precision(low, "model"):
        assert next(low.parameters()).dtype == torch.bfloat16
    with pytest.raises(ValueError, match="probe dtype"):
        with read_precision(low, "float16"):
            pass


def test_bfloat16_copy_against_float32_on_the_same_boundaries(micro):
    b = _boundaries(micro)
    ref = _probe(micro.model, b)
    low = bfloat16_copy(micro.model)
    bf16 = _probe(low, b)
    up = _probe(low, b, dtype="float32")
    # independent computation of the float32 read: a float32 model holding the bfloat16-rounded weights (and the
    # float32 buffers that bfloat16_copy, like from_pretrained, leaves alone)
    rounded = copy.deepcopy(micro.model)
    with torch.no_grad():
        for p in rounded.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
    np.testing.assert_allclose(up, _probe(rounded, b), atol=1e-6)
    assert np.abs(bf16 - ref).max() > 1e-4  # bfloat16 really moves the beliefs...
    assert np.abs(bf16 - ref).max() < 0.2  # ...by rounding error, not by a broken read
    assert next(low.parameters()).dtype == torch.bfloat16  # the read left the policy as it was


def test_probe_dtype_is_checked():
    assert ProbeConfig().dtype == "model"
    with pytest.raises(ConfigError, match="dtype"):
        ProbeConfig(dtype="bfloat16")


def test_bench_precision_helpers_count_changes():
    keys = dict(dataset=["d"] * 3, response_id=[0, 0, 1], rollout_id=[0, 0, 0], k=[1, 2, 1])
    ref = pd.DataFrame(dict(keys, probs=[[0.9, 0.1], [0.4, 0.6], [0.5, 0.5]], expected=[0.1, 0.6, 0.5],
                            argmax=[0, 1, 0]))
    other = ref.assign(probs=[[0.8, 0.2], [0.4, 0.6], [0.5, 0.5]], expected=[0.2, 0.6, 0.5], argmax=[0, 1, 0])
    d = belief_differences(ref, other)
    assert d["boundaries"] == 3 and d["max_abs_prob"] == pytest.approx(0.1) and d["argmax_changed"] == 0.0
    assert pick_changes({("d", 0, 0): [2, 1], ("d", 1, 0): [1]}, {("d", 0, 0): [1, 2], ("d", 1, 0): [1]}) == dict(
        rollouts=2, picks_changed=0.5, first_pick_changed=0.5)
    fire = pd.DataFrame(dict(keys, fires=[False, True, False]))
    got = firing_changes(fire, fire.assign(fires=[False, False, False]))
    assert got["boundary_firings_changed"] == pytest.approx(1 / 3) and got["rollout_penalty_changed"] == 0.5


def test_training_follows_the_policy_device_not_the_machine(micro, monkeypatch, tmp_path):
    """`model.device=cpu` on a GPU machine trains on the CPU: placement comes from the policy's weights."""
    assert trains_on_cpu(micro.model) and not trains_on_cpu(micro.model, use_cpu=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a GPU machine
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    use_cpu = trains_on_cpu(micro.model)
    args = build_sft_config(SFTConfig(), tmp_path, use_cpu=use_cpu, progress=False, n_pairs=8)
    assert args.use_cpu and not args.bf16
