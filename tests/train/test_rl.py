"""GRPO and EDIT-RL trainers (edit_lib/train/rl.py; Sec. 2.3, Eq. 5-7, App. B, Table 9) on the micro grader:
two-step runs finish with finite losses, save a loadable final-step adapter, EDIT-RL logs the shaping reward
(GRPO does not), and the frozen probe model is untouched by training."""
import dataclasses
import json
import math
import time

import pytest
import torch

from edit_lib.config import Decoding, LoraConfig, ModelConfig, ProbeConfig, RLConfig
from edit_lib.data.synthetic import WorldConfig, generate_world
from edit_lib.model.policy import Policy, load_policy
from edit_lib.train.rl import rl_dataset, rl_reward_functions, train_rl_arm

torch.set_num_threads(1)
MICRO = ModelConfig(name_or_path="micro", torch_threads=1, local_files_only=True)
DS = "tiny_sas"
# Table 9 recipe with demo-sized generation (the suite's smoke sizes, not the paper's)
RL = dataclasses.replace(RLConfig(), rollouts_per_prompt=2, prompts_per_step=2, decoding=Decoding(max_new_tokens=128), warmup_ratio=0.0,
                         steps=200)
LORA = LoraConfig(r=8, alpha=16)
TIMINGS = {}


def _micro(name="micro") -> Policy:
    model, tok, kind = load_policy("micro", MICRO)
    return Policy(model=model, tokenizer=tok, kind=kind, name=name)


@pytest.fixture(scope="module")
def world():
    w = generate_world(WorldConfig(shape="sas_like", n_questions=3, answers_per_question=2, ood_questions=0,
                                   seed=3))
    w.name = DS
    return w


def test_rl_dataset_columns(world):
    pol = _micro()
    rows = rl_dataset(pol, world)
    train = world.split("train")
    assert len(rows) == len(train) and set(rows.column_names) == {"prompt", "gold", "max_mark", "dataset",
                                                                   "response_id"}
    r0 = train[0]
    assert rows[0]["prompt"] == pol.grading_input(world.question(r0), r0.answer)
    assert (rows[0]["gold"], rows[0]["max_mark"], rows[0]["dataset"], rows[0]["response_id"]) == \
        (r0.gold, world.question(r0).max_mark, DS, r0.id)
    with pytest.raises(ValueError, match="no responses in split"):
        rl_dataset(pol, world, split="nope")


def test_reward_functions_per_arm_and_bad_input():
    assert [f.__name__ for f in rl_reward_functions("grpo", DS, RL)] == ["outcome_reward"]
    with pytest.raises(ValueError, match="frozen_probe_policy"):
        rl_reward_functions("edit_rl", DS, RL)
    with pytest.raises(ValueError, match="arm must be"):
        rl_reward_functions("dpo", DS, RL)
    pol = _micro()
    with pytest.raises(ValueError, match="model being trained"):
        rl_reward_functions("edit_rl", DS, RL, pol, trained_model=pol.model)
    frozen = _micro()
    names = [f.__name__ for f in rl_reward_functions("edit_rl", DS, RL, frozen, ProbeConfig())]
    assert names == ["outcome_reward", "belief_shaping"]


def test_bad_rows_name_row_and_field(tmp_path, world):
    rows = rl_dataset(_micro(), world).to_list()
    rows[1]["dataset"] = "other"
    with pytest.raises(ValueError, match="row 1, field 'dataset'"):
        train_rl_arm(_micro(), rows, RL, LORA, tmp_path, DS, 0, "grpo", max_steps=1)


def _weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("arm", ["grpo", "edit_rl"])
def test_two_step_run(tmp_path, world, arm):
    policy = _micro()
    frozen = _micro("micro-frozen") if arm == "edit_rl" else None
    before = _weights(frozen.model) if frozen else None
    rows = rl_dataset(policy, world)
    t0 = time.perf_counter()
    res = train_rl_arm(policy, rows, RL, LORA, tmp_path / arm, DS, 0, arm, frozen_probe_policy=frozen,
                       probe_cfg=ProbeConfig(batch_size=4), shaping={DS: (0.5, 0.1)}, max_steps=2)
    TIMINGS[arm] = (time.perf_counter() - t0, res.seconds_per_step)
    print(f"\n{arm}: {res.seconds_per_step:.2f} s per optimiser step ({res.steps} steps)")
    assert res.steps == 2 and res.paper_steps == 200
    steps = [e for e in res.log_history if "loss" in e]
    assert len(steps) == 2 and all(math.isfinite(e["loss"]) for e in steps)
    keys = set().union(*(e.keys() for e in steps))
    assert "rewards/outcome_reward/mean" in keys and "parse_failure_rate" in keys
    has_shaping = {"rewards/belief_shaping/mean", "shaping_fire_rate", "r_shape_mean"} <= keys
    assert has_shaping == (arm == "edit_rl"), sorted(keys)
    for e in steps:  # Eq. 7: TRL's total reward is r_out + gamma * r_shape (unit weights), per step
        want = e["rewards/outcome_reward/mean"] + e.get("rewards/belief_shaping/mean", 0.0)
        assert e["reward"] == pytest.approx(want, abs=1e-6)
        if arm == "edit_rl":  # the logged shaping reward is gamma (0.1) times the logged mean r_shape (Eq. 6)
            assert e["rewards/belief_shaping/mean"] == pytest.approx(0.1 * e["r_shape_mean"], abs=1e-6)
    print({k: steps[-1].get(k) for k in ("reward", "shaping_fire_rate", "r_shape_mean", "parse_failure_rate")})
    summary = json.loads((tmp_path / arm / "rl_summary.json").read_text())
    assert summary["arm"] == arm and summary["steps"] == 2 and summary["max_steps_override"] == 2
    assert len(summary["log_history"]) == len(res.log_history)
    # the final-step adapter loads on Base and carries the trained LoRA weights
    model, _, _ = load_policy("micro", MICRO, adapter=tmp_path / arm)
    trained = {k: v for k, v in res.policy.model.state_dict().items() if "lora_B" in k}
    loaded = {k: v for k, v in model.state_dict().items() if "lora_B" in k}
    assert trained and trained.keys() == loaded.keys()
    assert all(torch.equal(trained[k], loaded[k]) for k in trained)
    assert any(v.abs().sum() > 0 for v in loaded.values())  # lora_B starts at 0: training moved it
    if frozen is not None:  # the shaping probe's model is never trained (Sec. 2.3)
        after = _weights(frozen.model)
        assert after.keys() == before.keys() and all(torch.equal(before[k], after[k]) for k in before)
        assert not any(p.requires_grad for p in frozen.model.parameters())


@pytest.mark.parametrize("arm", ["grpo", "edit_rl"])
def test_lean_rollouts_train_the_same_run(tmp_path, world, arm):
    """``model.lean_decoding`` in 06: TRL's rollouts decoded by the lean loop and its one-token step
    (model/lean_decode.lean_rollouts) give the run of transformers' generate, log for log and weight for weight,
    with the shared prompt and compaction off (they move the logits' last digits: ``compare --conclusions`` judges
    them). Either way the rollouts are sampled in eval mode (``rollouts_in_eval_mode``: no LoRA dropout, as App. B's
    vLLM engine samples) and the trainer's model is back in training mode for its loss."""
    from unittest import mock

    from transformers import GenerationMixin

    from edit_lib.model import lean_decode
    lora = dataclasses.replace(LORA, dropout=0.1)
    runs, steps, modes = {}, [], {False: [], True: []}
    real, real_generate, real_lean = lean_decode.LeanStep.__call__, GenerationMixin.generate, lean_decode.lean_generate

    def generate(self, *a, **kw):
        modes[False].append(self.training)
        return real_generate(self, *a, **kw)

    for lean in (False, True):
        policy = _micro()
        policy.lean_decoding = lean
        frozen = _micro("micro-frozen") if arm == "edit_rl" else None
        with mock.patch.object(lean_decode.LeanStep, "__call__", lambda s, *a: steps.append(lean) or real(s, *a)), \
                mock.patch.object(lean_decode, "SHARE_PROMPTS", False), \
                mock.patch.object(lean_decode, "COMPACT_EVERY", 0), \
                mock.patch.object(GenerationMixin, "generate", generate), \
                mock.patch.object(lean_decode, "lean_generate",
                                  lambda m, *a, **kw: modes[True].append(m.training) or real_lean(m, *a, **kw)):
            res = train_rl_arm(policy, rl_dataset(policy, world), RL, lora, tmp_path / str(lean), DS, 0, arm,
                               frozen_probe_policy=frozen, probe_cfg=ProbeConfig(batch_size=4),
                               shaping={DS: (0.5, 0.1)}, max_steps=2)
            assert res.policy.model.training is False  # train_rl_arm hands the policy back in eval mode
        runs[lean] = res
    assert steps and set(steps) == {True}  # the lean run's rollouts went through the one-token step
    assert modes == {False: [False, False], True: [False, False]}  # one call a step, each in eval mode
    logs = [[{k: v for k, v in e.items() if "runtime" not in k and "per_second" not in k and k != "step_time"}
             for e in runs[lean].log_history] for lean in (False, True)]
    assert logs[0] == logs[1]
    weights = [{k: v for k, v in runs[lean].policy.model.state_dict().items() if "lora_" in k} for lean in (False, True)]
    assert weights[0].keys() == weights[1].keys() and all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_rollouts_are_sampled_in_eval_mode():
    """`rollouts_in_eval_mode`: generate runs with every module in eval mode (no dropout mask drawn), and the mode
    the trainer had comes back after the call, also when it raises."""
    from edit_lib.train.rl import rollouts_in_eval_mode
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5))
    seen = []

    def generate(**kw):
        seen.append((model.training, model[1].training))
        if kw.get("fail"):
            raise RuntimeError("generation failed")
        return "tokens"

    model.generate = generate
    rollouts_in_eval_mode(model.train())
    assert model.generate(input_ids=None) == "tokens" and seen == [(False, False)] and model[1].training
    with pytest.raises(RuntimeError, match="generation failed"):
        model.generate(fail=True)
    assert model.training and model[1].training
    model.eval().generate()
    assert seen[-1] == (False, False) and not model.training
