"""The shared-prefix path of edit_lib.model.generate (``model.prefix_cache``): a batch's common prompt prefix is
encoded once and its cache shared. Checked against independent references: plain per-prompt forward passes
(greedy), the per-row Gumbel-max reference (sampled), the full-sequence forward pass (first logits), and the plain
batched call, on prompts that share a long prefix and on prompts that do not."""
import os

import pandas as pd
import pytest
import torch

from edit_lib.config import load_profile
from edit_lib.model.generate import SamplingConfig, generate, policy_generate
from edit_lib.model.lean_decode import MIN_SHARED_PREFIX, common_prefix_length, left_pad, shared_prefix
from edit_lib.model.policy import Policy
from test_generate import PROMPTS, manual_greedy, model, tok  # noqa: F401  (tiny model, tokenizer, prompts)
from test_generate_rows import naive_rollout

torch.set_num_threads(1)  # other processes share the 2 cores

HEAD = "step 1 : accept point 2 , reject point 3 level band credit answer step final total 1 2 / 2 6 mark"
TAILS = ["answer", "reject point 2 , accept", "final mark 1", "credit band level 2 / 2", "step",
         "accept point 3 , reject point 1 , total 6"]
SHARED = [f"{HEAD} {t}" for t in TAILS]  # one "question": a 22-token prefix, own tails of 1-9 tokens


def test_common_prefix_length_against_commonprefix():
    cases = [[[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 9]], [[1, 2, 3], [1, 2, 3]], [[4, 5], [6, 5]], [[7]],
             [[1, 2, 3, 4, 5], [1, 2, 3]]]
    for seqs in cases:
        ref = len(os.path.commonprefix(seqs))  # works on lists element by element
        assert common_prefix_length(seqs) == min(ref, min(len(s) for s in seqs) - 1), seqs


def test_layout_keeps_each_rows_prompt(model, tok):
    seqs = [tok(p)["input_ids"] for p in SHARED]
    p = common_prefix_length(seqs)
    assert p >= MIN_SHARED_PREFIX
    ids, mask, cache = shared_prefix(model, seqs, tok.pad_token_id, torch.device("cpu"))
    assert cache.get_seq_length() == p and ids.shape[0] == len(seqs)
    for row, m, s in zip(ids, mask, seqs):
        assert row[m.bool()].tolist() == s  # the unmasked tokens are the prompt, in order
    unshared = [tok(x)["input_ids"] for x in PROMPTS]
    assert shared_prefix(model, unshared, tok.pad_token_id, torch.device("cpu")) is None


def test_first_logits_equal_full_forward(model, tok):
    """The logits after the shared cache and the left-padded own tokens, against each prompt's own forward pass."""
    seqs = [tok(p)["input_ids"] for p in SHARED]
    ids, mask, cache = shared_prefix(model, seqs, tok.pad_token_id, torch.device("cpu"))
    p = cache.get_seq_length()
    pos = (mask.cumsum(-1) - 1).clamp_min(0)
    with torch.no_grad():
        got = model(input_ids=ids[:, p:], attention_mask=mask, position_ids=pos[:, p:], cache=cache).logits[:, -1]
        for row, s in zip(got, seqs):
            ref = model(torch.tensor([s])).logits[0, -1]
            torch.testing.assert_close(row, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("batch_size", [2, 4, 64])
def test_greedy_equals_manual_argmax(model, tok, batch_size, monkeypatch):
    import edit_lib.model.generate as gen
    prompts = SHARED + PROMPTS  # shared rows and rows with no common prefix, one call
    cfg = SamplingConfig.evaluation(max_new_tokens=10, batch_size=batch_size)
    used = []
    monkeypatch.setattr(gen, "shared_prefix", lambda *a, **k: used.append(shared_prefix(*a, **k)) or used[-1])
    df = generate(model, tok, prompts, cfg, progress=False, share_prefix=True)
    # token order puts the shared rows together: small batches take the shared path, a batch of all does not
    assert any(u is not None for u in used) == (batch_size < len(prompts))
    for i, p in enumerate(prompts):
        ref = manual_greedy(model, tok, p, 10)
        assert df.iloc[i].prompt_index == i and df.iloc[i].text == tok.decode(ref, skip_special_tokens=True)
        assert df.iloc[i].n_tokens == len(ref)
    pd.testing.assert_frame_equal(df, generate(model, tok, prompts, cfg, progress=False))


def test_row_seeded_sampling_equals_reference(model, tok):
    cfg = SamplingConfig(n=3, max_new_tokens=8, batch_size=4, seed=5, temperature=1.0, seeding="row")
    df = generate(model, tok, SHARED, cfg, progress=False, share_prefix=True)
    assert df.groupby("prompt_index").text.nunique().gt(1).any()  # really sampled
    for row in df.itertuples():
        ref = naive_rollout(model, tok, SHARED[row.prompt_index], cfg.seed, row.prompt_index, row.rollout_id, cfg)
        assert row.text == tok.decode(ref, skip_special_tokens=True) and row.n_tokens == len(ref)
    pd.testing.assert_frame_equal(df, generate(model, tok, SHARED, cfg, progress=False))


def test_peft_adapter_and_policy_switch(tok):
    """A LoRA-wrapped policy (non-zero adapter) through ``policy_generate``: the switch on ``Policy`` reaches
    generate, and the shared path equals the plain one."""
    from edit_lib.model.hf import LoraConfig, attach_lora, init_tiny_model
    base = init_tiny_model(tok, seed=6, hidden=32, layers=2, heads=2, intermediate=64, max_position=128)
    wrapped = attach_lora(base, LoraConfig(r=4, alpha=8))
    with torch.no_grad():
        for n, w in wrapped.named_parameters():
            if "lora_B" in n:
                w.normal_(0, 0.5, generator=torch.Generator().manual_seed(len(n)))
    cfg = SamplingConfig.evaluation(max_new_tokens=8, batch_size=3)
    plain = policy_generate(Policy(wrapped, tok, "tiny"), SHARED, cfg, progress=False)
    shared = policy_generate(Policy(wrapped, tok, "tiny", prefix_cache=True), SHARED, cfg, progress=False)
    pd.testing.assert_frame_equal(plain, shared)
    unwrapped = init_tiny_model(tok, seed=6, hidden=32, layers=2, heads=2, intermediate=64, max_position=128)
    full, fmask = left_pad([tok(p)["input_ids"] for p in SHARED[:3]], tok.pad_token_id, torch.device("cpu"))
    with torch.no_grad():  # the adapter changed the policy: the comparison is not between two copies of Base
        assert not torch.allclose(wrapped(input_ids=full, attention_mask=fmask).logits,
                                  unwrapped(input_ids=full, attention_mask=fmask).logits)


def test_profile_key_reaches_the_policy():
    assert load_profile("cpu-real").model.prefix_cache is True
    assert load_profile("demo").model.prefix_cache is False
    assert load_profile("demo", ["model.prefix_cache=true", "model.generation_workers=1"]).model.prefix_cache is True
