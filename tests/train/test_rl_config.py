"""The one RL recipe (edit_lib/train/rl.py; App. B, Table 9): every Table 9 value reaches TRL's
GRPOConfig and the GRPOTrainer, where TRL 1.16's defaults would have given something else."""
import dataclasses

import pytest
import torch

from edit_lib.config import Decoding, LoraConfig, ModelConfig, load_profile
from edit_lib.train.rl import build_grpo_config, build_rl_lora, completions_per_step, prompts_per_step

torch.set_num_threads(1)
TARGETS = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}


@pytest.fixture(scope="module")
def paper():
    return load_profile("paper")


def _args(prof, dataset="sas_history", **kw):
    return build_grpo_config(prof.rl, prof.sft.lora, "/tmp/rlcal/unused", dataset, 42, use_cpu=True,
                             progress=False, **kw)


def test_table9_values_reach_the_grpo_config_and_differ_from_trl_defaults(paper):
    from trl import GRPOConfig
    a = _args(paper)
    d = GRPOConfig(output_dir="/tmp/rlcal/default", use_cpu=True, bf16=False)  # TRL 1.16's own choices
    want = {"learning_rate": 5e-6, "warmup_steps": 0.03, "beta": 0.02, "max_completion_length": 1024,
            "loss_type": "grpo", "logging_steps": 1}
    for k, v in want.items():
        assert getattr(a, k) == v, k
        assert getattr(d, k) != v, f"TRL's default already gives {k}={v}: the test could not fail"
    assert str(a.lr_scheduler_type.value) == "cosine" and str(d.lr_scheduler_type.value) != "cosine"
    assert str(a.save_strategy.value) == "no" and str(d.save_strategy.value) != "no"
    assert not a.gradient_checkpointing and d.gradient_checkpointing  # off on CPU; TRL's default is on
    assert a.use_cpu and not a.bf16 and a.seed == 42 and a.report_to in ([], "none", ["none"])
    assert a.num_generations == 8 and a.temperature == 1.0 and a.num_iterations == 1
    assert a.get_warmup_steps(200) == 6 and a.get_warmup_steps(500) == 15  # ceil(3% of the horizon)


# GRPO's objective and sampling (Eq. 5-7 summed and standardised per group, clipped ratio 0.2, full-vocabulary sampling)
OBJECTIVE = {"scale_rewards": "group", "multi_objective_aggregation": "sum_then_normalize", "epsilon": 0.2,
             "epsilon_high": 0.2, "importance_sampling_level": "token", "top_entropy_quantile": 1.0, "top_p": 1.0,
             "top_k": 0, "min_p": None, "repetition_penalty": 1.0, "mask_truncated_completions": False,
             "disable_dropout": False}


def test_grpos_objective_is_set_by_the_suite_not_left_to_trl(paper, monkeypatch):
    """Each field that shapes Eq. 5-7's optimisation or sampling arrives with the suite's value, also where TRL's
    default would say otherwise (here: a GRPOConfig whose defaults all differ)."""
    from trl import GRPOConfig

    from edit_lib.train import rl as rl_config
    # top_p / top_k come from rl.decoding (the one decoding spec), whose paper values are these
    assert rl_config.GRPO_OBJECTIVE == {k: v for k, v in OBJECTIVE.items() if k not in ("top_p", "top_k")}
    assert (paper.rl.decoding.top_p, paper.rl.decoding.top_k) == (OBJECTIVE["top_p"], OBJECTIVE["top_k"])
    a = _args(paper, n_rewards=2)
    assert {k: getattr(a, k) for k in OBJECTIVE} == OBJECTIVE and a.reward_weights == [1.0, 1.0]
    assert _args(paper).reward_weights == [1.0]  # GRPO's one reward function, r_out (Eq. 5)
    moved = {"scale_rewards": "batch", "multi_objective_aggregation": "normalize_then_sum", "epsilon": 0.3,
             "epsilon_high": 0.28, "importance_sampling_level": "sequence", "top_entropy_quantile": 0.2,
             "top_p": 0.9, "top_k": 50, "min_p": 0.05, "repetition_penalty": 1.1, "mask_truncated_completions": True,
             "disable_dropout": True}
    assert set(moved) == set(OBJECTIVE)

    class Moved(GRPOConfig):  # a TRL release whose defaults moved
        def __init__(self, **kw):
            super().__init__(**{**moved, **kw})
    monkeypatch.setattr("trl.GRPOConfig", Moved)
    b = _args(paper, n_rewards=2)
    assert isinstance(b, Moved) and {k: getattr(b, k) for k in OBJECTIVE} == OBJECTIVE


def test_values_come_from_the_profile_not_from_constants(paper):
    rl = dataclasses.replace(paper.rl, rollouts_per_prompt=4, prompts_per_step=2, learning_rate=1e-5, beta_kl=0.1,
                             decoding=Decoding(temperature=0.7, top_p=0.9, top_k=5, max_new_tokens=64))
    a = build_grpo_config(rl, paper.sft.lora, "/tmp/rlcal/unused", "sas_history", 7, use_cpu=True)
    assert (a.temperature, a.num_generations, a.learning_rate, a.beta, a.max_completion_length, a.seed) == \
        (0.7, 4, 1e-5, 0.1, 64, 7)
    assert (a.top_p, a.top_k) == (0.9, 5)
    assert completions_per_step(a) == 8 and prompts_per_step(a) == 2


def test_four_prompts_of_eight_completions_per_optimiser_step(paper):
    for per_device in (None, 8, 16, 32):
        a = _args(paper, per_device_batch_size=per_device)
        n = a.per_device_train_batch_size * a.world_size * a.gradient_accumulation_steps
        assert n == 32 and a.generation_batch_size == 32 and a.steps_per_generation == a.gradient_accumulation_steps
        assert n // a.num_generations == 4 and prompts_per_step(a) == 4
    assert _args(paper).per_device_train_batch_size == 8  # one group per forward pass by default
    with pytest.raises(ValueError, match="per_device_batch_size"):
        _args(paper, per_device_batch_size=12)


def test_horizons_per_dataset_from_the_paper_profile(paper):
    for name in ("sas_history", "sas_geography", "sas_physics"):
        assert _args(paper, name).max_steps == 200
    for name in ("private_biology", "private_physics"):
        assert _args(paper, name).max_steps == 500


def test_bad_recipe_values_are_errors(paper):
    with pytest.raises(ValueError, match="warmup_ratio"):
        build_grpo_config(dataclasses.replace(paper.rl, warmup_ratio=3.0), paper.sft.lora, "/tmp/rlcal/u", "x", 0,
                          use_cpu=True)
    with pytest.raises(ValueError, match="rollouts_per_prompt"):
        build_grpo_config(dataclasses.replace(paper.rl, rollouts_per_prompt=1), paper.sft.lora, "/tmp/rlcal/u",
                          "x", 0, use_cpu=True)
    with pytest.raises(ValueError, match="target"):
        build_grpo_config(paper.rl, LoraConfig(target_modules=[]), "/tmp/rlcal/u", "x", 0, use_cpu=True)


def test_rl_lora_is_the_sft_recipe(paper):
    p = build_rl_lora(paper.sft.lora)
    assert (p.r, p.lora_alpha, set(p.target_modules)) == (64, 128, TARGETS)
    assert str(p.task_type.value if hasattr(p.task_type, "value") else p.task_type) == "CAUSAL_LM"


def test_values_reach_the_grpo_trainer(paper):
    """A GRPOTrainer on the micro grader carries the recipe: args, the fresh LoRA, a KL reference."""
    from datasets import Dataset
    from trl import GRPOTrainer

    from edit_lib.model.policy import load_policy
    model, tok, _ = load_policy("micro", ModelConfig(name_or_path="micro", torch_threads=1, local_files_only=True))
    args = _args(paper)
    data = Dataset.from_list([{"prompt": f"question {i} answer"} for i in range(4)])
    trainer = GRPOTrainer(model=model, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                          args=args, train_dataset=data, processing_class=tok,
                          peft_config=build_rl_lora(paper.sft.lora))
    a = trainer.args
    assert (a.learning_rate, a.beta, a.num_generations, a.max_completion_length, a.loss_type, a.max_steps) == \
        (5e-6, 0.02, 8, 1024, "grpo", 200)
    assert trainer.beta == 0.02 and trainer.loss_type == "grpo" and trainer.num_generations == 8
    assert trainer.max_completion_length == 1024 and trainer.temperature == 1.0
    assert (trainer.scale_rewards, trainer.epsilon_low, trainer.epsilon_high, trainer.top_p, trainer.top_k) == \
        ("group", 0.2, 0.2, 1.0, 0)
    assert trainer.reward_weights.tolist() == [1.0] and trainer.mask_truncated_completions is False
    cfg = trainer.model.peft_config["default"]
    assert (cfg.r, cfg.lora_alpha, set(cfg.target_modules)) == (64, 128, TARGETS)
