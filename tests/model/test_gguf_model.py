"""The real-model path (cpu-real profile): SmolLM2-135M-Instruct from the packaged GGUF file, converted once into
the suite's cache (edit_lib/model/gguf_model.py) and loaded through the same model layer as any HF model. Skipped with
a message when the optional package is absent (`make real-model` installs it)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from edit_lib.model import gguf_model
from edit_lib.data.asap import load_asap
from edit_lib.model.policy import Policy, load_policy
from edit_lib.prompts.grading import read_final_mark
from edit_lib.segment import segment
from edit_lib.signals import probe_rollouts, probe_rollouts_naive
from edit_lib.signals.probe import probe_readout, rollout_tokens

OK, WHY = gguf_model.available()
pytestmark = pytest.mark.skipif(not OK, reason=f"real model absent: {WHY}")
FIX = Path(__file__).parents[1] / "fixtures" / "asap_mini"


@pytest.fixture(scope="module")
def smol():
    torch.set_num_threads(2)
    model, tok, kind = load_policy(gguf_model.NAME)
    return Policy(model=model, tokenizer=tok, kind=kind, name=gguf_model.NAME)


@pytest.fixture(scope="module")
def asap():
    return load_asap(FIX, ood_sets=())


def test_conversion_is_a_plain_float32_checkpoint(smol):
    folder = gguf_model.ensure_checkpoint()
    assert folder == gguf_model.checkpoint_dir()  # keyed by the GGUF file's digest, reused
    cfg = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in cfg and cfg["model_type"] == "llama"
    src = json.loads((folder / "edit_suite_source.json").read_text())
    n = sum(p.numel() for p in smol.model.parameters())
    assert src["parameters"] == n and 130e6 < n < 140e6  # SmolLM2-135M
    assert all(p.dtype == torch.float32 for p in smol.model.parameters())
    assert getattr(smol.model, "hf_quantizer", None) is None
    assert smol.kind == "chat" and smol.tokenizer.chat_template


def test_a_lora_step_trains_the_converted_model(smol):
    from edit_lib.config import LoraConfig
    from edit_lib.model.hf import attach_lora
    model, tok, _ = load_policy(gguf_model.NAME)
    peft = attach_lora(model, LoraConfig(r=4, alpha=8, dropout=0.0))
    ids = tok("Final mark: 2/3", return_tensors="pt")["input_ids"]
    loss = peft(input_ids=ids, labels=ids).loss
    loss.backward()
    grads = [p.grad for n, p in peft.named_parameters() if p.requires_grad and "lora_B" in n]
    assert torch.isfinite(loss) and grads and all(g is not None and torch.isfinite(g).all() for g in grads)


def test_the_chat_template_carries_the_grading_prompt(smol, asap):
    r = asap.responses[0]
    q = asap.question(r)
    text = smol.grading_input(q, r.answer)
    assert r.answer.strip()[:40] in text and "Final mark:" in text
    assert text.rstrip().endswith("assistant")  # generation prompt: the model answers as the assistant
    full = smol.input_text("x", "step 1\nFinal mark: 2/3")
    assert full.startswith(smol.input_text("x"))  # prompt + completion is the prompt's continuation
    assert read_final_mark("The answer names two points.\nFinal mark: 2/3", q.max_mark).mark == 2


def test_packed_probe_equals_naive_on_this_tokenizer(smol, asap):
    r = asap.responses[0]
    q = asap.question(r)
    completion = ("The answer states the key idea.\nIt gives one example from the data.\n"
                  "It misses the second conclusion.\nFinal mark: 2/3")
    rt = rollout_tokens(smol, smol.grading_input(q, r.answer), completion, rule="auto")
    assert len(rt.steps_ids) == 3
    for read in ("next_token", "sequence"):
        ro = probe_readout(smol, "Final mark: ", "/", q.max_mark, read=read)
        packed = probe_rollouts(smol.model, [rt.prompt_ids], [rt.steps_ids], ro.scaffold, ro.marks, gold=[2],
                                temperature=0.7)[0]
        naive = probe_rollouts_naive(smol.model, [rt.prompt_ids], [rt.steps_ids], ro.scaffold, ro.marks, gold=[2],
                                     temperature=0.7)[0]
        assert packed.probs.shape == (4, q.max_mark + 1)
        np.testing.assert_allclose(packed.probs, naive.probs, atol=1e-4, rtol=0)
        assert np.abs(packed.probs[0] - packed.probs[-1]).max() > 1e-4  # the prefixes were seen


def test_real_output_is_cut_into_steps(smol, asap):
    """The step rule on this model's own greedy output: every step is non-empty and made of the completion's words.
    (Zero-shot, SmolLM2 answers in one line on these prompts: one step per completion, measured and printed.)"""
    from edit_lib.model.generate import SamplingConfig, policy_generate
    rs = asap.split("train")[:3]
    prompts = [smol.grading_input(asap.question(r), r.answer) for r in rs]
    out = policy_generate(smol, prompts, SamplingConfig(greedy=True, max_new_tokens=64, batch_size=3),
                          progress=False)
    segs = [segment(t, "auto") for t in out["text"]]
    print(f"SmolLM2 zero-shot greedy completions: steps per completion {[s.n_steps for s in segs]}")
    for text, seg in zip(out["text"], segs):
        assert text.strip() and seg.n_steps >= 1
        for step in seg.steps:  # a step body is the completion's own words (lines joined by one space)
            assert step.strip() and all(w in text for w in step.split())
