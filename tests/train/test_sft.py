"""LoRA SFT (edit_lib/train/sft.py; App. B recipe): every App. B value reaches TRL's config and the trainer,
the loss covers the completion only, and a trained adapter saves, reloads through the Base loader and grades.

The paper values are checked on the config and trainer objects (the paper LoRA r=64 on the micro grader is
cheap to build); the training run uses a tiny rank and a few steps so it stays well under a minute."""
import math

import numpy as np
import pytest
import torch

from edit_lib.config import LoraConfig, SFTConfig, load_profile
from edit_lib.data.synthetic import WorldConfig, generate_world
from edit_lib.embedded.teacher import teacher_grade
from edit_lib.model.generate import SamplingConfig, generate
from edit_lib.model.policy import load_policy
from edit_lib.prompts.grading import render_grading_prompt
from edit_lib.train.sft import batch_split, build_sft_config, make_trainer, sft_dataset, train_sft
from micro import MICRO, micro_policy  # the shared micro grader (tests/micro.py)

torch.set_num_threads(1)
TARGETS = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}


@pytest.fixture(scope="module")
def pairs():
    """Grading pairs in the micro grader's input form, error-free teacher completions as targets."""
    pol = micro_policy()
    world = generate_world(WorldConfig(shape="sas_like", n_questions=4, answers_per_question=2, ood_questions=0,
                                       seed=3))
    rng = np.random.default_rng(0)
    return [(pol.input_text(render_grading_prompt(world.question(r), r.answer)),
             teacher_grade(world.question(r), r, rng, None).completion) for r in world.responses[:8]]


def test_batch_split_makes_the_effective_batch_exactly():
    assert batch_split(8, 8) == (8, 1)      # SAS (App. B: 8)
    assert batch_split(32, 8) == (8, 4)     # Private-Science (App. B: 32)
    assert batch_split(32, 8, 2) == (8, 2)  # two devices, as the paper's SFT
    assert batch_split(4, 8) == (4, 1)      # per-device batch never exceeds the effective batch
    with pytest.raises(ValueError, match="per_device_batch_size"):
        batch_split(12, 8)


def test_paper_values_reach_the_trl_config():
    sft = load_profile("paper").sft
    for dataset, effective in (("sas_history", 8), ("private_biology", 32)):
        a = build_sft_config(sft, "/tmp/unused", dataset=dataset, seed=42, use_cpu=True, progress=False)
        assert (a.num_train_epochs, a.learning_rate, str(a.lr_scheduler_type.value)) == (2, 2e-4, "cosine")
        assert a.warmup_steps == 0.1 and a.get_warmup_steps(40) == 4 and a.get_warmup_steps(45) == 5
        assert a.per_device_train_batch_size * a.gradient_accumulation_steps == effective
        assert a.completion_only_loss is True and a.max_length is None and a.max_steps == -1
        assert a.use_cpu and not a.bf16 and not a.gradient_checkpointing
        assert a.seed == 42 and a.report_to in ([], "none", ["none"]) and str(a.save_strategy.value) == "no"
    # nothing is left to TRL's defaults: other values reach the config just the same
    other = SFTConfig(epochs=3, learning_rate=1e-3, lr_scheduler="linear", warmup_ratio=0.25, effective_batch_size=16,
                      per_device_batch_size=4)
    a = build_sft_config(other, "/tmp/unused", use_cpu=True, seed=7)
    assert (a.num_train_epochs, a.learning_rate, str(a.lr_scheduler_type.value), a.warmup_steps) == (3, 1e-3,
                                                                                                     "linear", 0.25)
    assert (a.per_device_train_batch_size, a.gradient_accumulation_steps, a.seed) == (4, 4, 7)
    with pytest.raises(ValueError, match="warmup_ratio"):
        build_sft_config(SFTConfig(warmup_ratio=1.0), "/tmp/unused", use_cpu=True)


def test_paper_values_reach_the_trainer(pairs, tmp_path):
    sft = load_profile("paper").sft
    pol = micro_policy()
    base_linears = {n: m for n, m in pol.model.named_modules()
                    if isinstance(m, torch.nn.Linear) and n.split(".")[-1] in TARGETS}
    expected_trainable = sum(64 * (m.in_features + m.out_features) for m in base_linears.values())
    tr = make_trainer(pol, pairs * 20, sft, tmp_path, dataset="sas_history", seed=42, use_cpu=True,
                      progress=False)
    # LoRA r=64, alpha=128 on all seven projections of every layer (App. B)
    pc = tr.model.peft_config["default"]
    assert (pc.r, pc.lora_alpha, set(pc.target_modules)) == (64, 128, TARGETS)
    wrapped = {n.split("base_model.model.")[-1] for n, m in tr.model.named_modules() if hasattr(m, "lora_A")}
    assert wrapped == set(base_linears) and len(wrapped) == 7 * pol.model.config.num_hidden_layers
    assert sum(p.numel() for p in tr.model.parameters() if p.requires_grad) == expected_trainable
    # 160 pairs, effective batch 8 -> 20 optimiser steps per epoch, 2 epochs; 10% warm-up = 4 steps
    steps_per_epoch = math.ceil(len(tr.get_train_dataloader()) / tr.args.gradient_accumulation_steps)
    total = steps_per_epoch * tr.args.num_train_epochs
    assert (steps_per_epoch, total) == (20, 40)
    tr.create_optimizer_and_scheduler(num_training_steps=total)
    assert all(g["lr"] == 2e-4 for g in tr.optimizer.param_groups) or all(
        g["initial_lr"] == 2e-4 for g in tr.optimizer.param_groups)
    lam = tr.lr_scheduler.lr_lambdas[0]
    w = 4
    hand = [s / w if s < w else 0.5 * (1 + math.cos(math.pi * (s - w) / (total - w))) for s in range(total + 1)]
    assert np.allclose([lam(s) for s in range(total + 1)], hand)


def test_pairs_are_checked_row_by_row(pairs):
    tok = micro_policy().tokenizer
    with pytest.raises(ValueError, match=r"row 1, field 'completion'"):
        sft_dataset([pairs[0], (pairs[0][0], "  ")], tok)
    with pytest.raises(ValueError, match=r"row 0: expected \(prompt, completion\)"):
        sft_dataset(["just a string"], tok)
    with pytest.raises(ValueError, match=r"row 0.*exceed the limit of 10"):
        sft_dataset(pairs[:1], tok, max_tokens=10)
    with pytest.raises(ValueError, match="no training pairs"):
        sft_dataset([], tok)


def test_loss_is_on_the_completion_only(pairs, tmp_path):
    pol = micro_policy()
    cfg = SFTConfig(lora=LoraConfig(r=2, alpha=4), effective_batch_size=4, per_device_batch_size=4)
    tr = make_trainer(pol, pairs, cfg, tmp_path, use_cpu=True, progress=False)
    tok = pol.tokenizer
    for i, (prompt, completion) in enumerate(pairs):
        row = tr.train_dataset[i]
        n_prompt = len(tok(prompt)["input_ids"])
        target = tok(completion, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        assert row["labels"][:n_prompt] == [-100] * n_prompt
        assert row["labels"][n_prompt:] == target == row["input_ids"][n_prompt:]


def completion_nll(model, tok, pairs) -> float:
    """Mean NLL per completion token (+ EOS), computed by hand from the logits."""
    total, count = 0.0, 0
    with torch.no_grad():
        for prompt, completion in pairs:
            p = tok(prompt)["input_ids"]
            c = tok(completion, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
            logp = torch.log_softmax(model(torch.tensor([p + c])).logits[0].float(), -1)
            total -= sum(logp[len(p) + j - 1, t].item() for j, t in enumerate(c))
            count += len(c)
    return total / count


def test_train_save_reload_and_grade(pairs, tmp_path):
    pol = micro_policy()
    pol.model.eval()
    before = completion_nll(pol.model, pol.tokenizer, pairs)
    # tiny rank, high lr, few steps: the mechanics, not the recipe (paper values are tested above)
    cfg = SFTConfig(lora=LoraConfig(r=4, alpha=8, dropout=0.0), epochs=4, learning_rate=1e-2, warmup_ratio=0.1,
                    effective_batch_size=4, per_device_batch_size=4, max_steps=8)
    res = train_sft(pol, pairs, cfg, tmp_path / "adapter", seed=0, use_cpu=True, progress=False)
    assert res.steps == 8 and [e["step"] for e in res.loss_curve] == list(range(1, 9))
    assert (tmp_path / "adapter" / "adapter_model.safetensors").is_file()
    assert (tmp_path / "adapter" / "sft_summary.json").is_file()
    assert 0 < res.trainable_parameters < res.total_parameters
    trained = res.policy.model
    after = completion_nll(trained, pol.tokenizer, pairs)
    assert after < before - 0.05, (before, after)
    # (b) the adapter reloads through the Base loader with the same logits; it really changes the model
    model2, tok2, kind2 = load_policy("micro", MICRO, adapter=tmp_path / "adapter")
    base, _, _ = load_policy("micro", MICRO)
    x = torch.tensor([tok2(pairs[0][0] + pairs[0][1])["input_ids"]])
    with torch.no_grad():
        l_mem, l_re, l_base = trained(x).logits, model2(x).logits, base(x).logits
    assert kind2 == pol.kind and torch.allclose(l_mem, l_re, atol=1e-5)
    assert not torch.allclose(l_re, l_base, atol=1e-3)
    merged, _, _ = load_policy("micro", MICRO, adapter=tmp_path / "adapter", merge=True)
    with torch.no_grad():
        assert torch.allclose(merged(x).logits, l_re, atol=1e-4)
    # (c) greedy grading through edit_lib.model.generate works and matches the in-memory trained model
    cfg_eval = SamplingConfig.evaluation(max_new_tokens=40, batch_size=2)
    prompts = [p for p, _ in pairs[:2]]
    out_re = generate(model2, tok2, prompts, cfg_eval, progress=False)
    out_mem = generate(trained, pol.tokenizer, prompts, cfg_eval, progress=False)
    assert len(out_re) == 2 and all(t.strip() for t in out_re["text"])
    assert list(out_re["text"]) == list(out_mem["text"])
    with pytest.raises(FileNotFoundError, match="adapter_config.json"):
        load_policy("micro", MICRO, adapter=tmp_path)


def test_max_steps_caps_but_never_adds_epochs(tmp_path):
    """A small pool trains sft.epochs epochs even when sft.max_steps is larger (transformers alone would let
    max_steps override the epochs); a large pool stops at max_steps."""
    cfg = SFTConfig(epochs=2, effective_batch_size=8, per_device_batch_size=8, max_steps=20)
    assert build_sft_config(cfg, tmp_path, n_pairs=14, use_cpu=True).max_steps == 4  # ceil(14 / 8) x 2
    assert build_sft_config(cfg, tmp_path, n_pairs=1000, use_cpu=True).max_steps == 20
    assert build_sft_config(SFTConfig(max_steps=0), tmp_path, n_pairs=14, use_cpu=True).max_steps == -1
