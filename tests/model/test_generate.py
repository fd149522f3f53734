"""Tests for edit_lib.model.generate: greedy == manual argmax, seeded sampling, N rollouts per prompt, parse hook."""
import pandas as pd
import pytest
import torch

from edit_lib.config import Decoding, EvalConfig, RolloutConfig, load_profile
from edit_lib.model.generate import COLUMNS, SamplingConfig, eval_sampling, generate, rollout_sampling
from edit_lib.model.hf import init_tiny_model
from edit_lib.embedded.tokenizer import train_word_tokenizer

torch.set_num_threads(1)  # other processes share the 2 cores: oversubscribed torch threads are 10-50x slower
WORDS = "point accept reject mark band level credit answer step final total".split()
PROMPTS = ["final mark", "step 1 : accept point 2 , reject point 3", "answer",
           "total 1 2 / 2 6 level band credit answer step final", "reject"]


@pytest.fixture(scope="module")
def tok():
    return train_word_tokenizer([" ".join(WORDS) + " 0 : / ,"])


@pytest.fixture(scope="module")
def model(tok):  # small vocab (~25): EOS is drawn often enough that both stop paths are exercised
    return init_tiny_model(tok, seed=3, hidden=32, layers=2, heads=2, intermediate=64, max_position=128)


def manual_greedy(model, tok, prompt, max_new):
    ids = tok(prompt)["input_ids"]
    out = []
    with torch.no_grad():
        for _ in range(max_new):
            nxt = int(model(torch.tensor([ids + out])).logits[0, -1].argmax())
            out.append(nxt)
            if nxt == tok.eos_token_id:
                break
    return out


def test_greedy_equals_manual_argmax_and_is_deterministic(model, tok):
    cfg = SamplingConfig.evaluation(max_new_tokens=12, batch_size=8)
    df = generate(model, tok, PROMPTS, cfg, progress=False)
    assert list(df.columns) == COLUMNS and len(df) == len(PROMPTS)
    for i, p in enumerate(PROMPTS):
        ref = manual_greedy(model, tok, p, 12)
        row = df.iloc[i]
        assert row.prompt_index == i and row.rollout_id == 0
        assert row.text == tok.decode(ref, skip_special_tokens=True)
        assert row.n_tokens == len(ref)
        assert row.finished == (ref[-1] == tok.eos_token_id)
    pd.testing.assert_frame_equal(df, generate(model, tok, PROMPTS, cfg, progress=False))


def test_stop_paths_both_exercised(model, tok):
    df = generate(model, tok, PROMPTS * 4, SamplingConfig(n=4, max_new_tokens=10, seed=1), progress=False)
    assert df.finished.any() and not df.finished.all()
    assert (df.n_tokens <= 10).all() and (df.loc[~df.finished, "n_tokens"] == 10).all()
    assert "<eos>" not in "".join(df.text) and "<pad>" not in "".join(df.text)


def test_batch_size_does_not_change_greedy(model, tok):
    runs = [generate(model, tok, PROMPTS, SamplingConfig.evaluation(max_new_tokens=10, batch_size=bs), progress=False)
            for bs in (1, 2, 5)]
    runs.append(generate(model, tok, PROMPTS, SamplingConfig(greedy=True, max_new_tokens=10, batch_size=3,
                                                             sort_by_length=False), progress=False))
    for other in runs[1:]:
        pd.testing.assert_frame_equal(runs[0], other)


def test_seeded_sampling_reproducible_and_seed_sensitive(model, tok):
    cfg = SamplingConfig(n=3, max_new_tokens=10, batch_size=4, seed=7, temperature=1.0)
    a = generate(model, tok, PROMPTS, cfg, progress=False)
    b = generate(model, tok, PROMPTS, cfg, progress=False)
    pd.testing.assert_frame_equal(a, b)
    c = generate(model, tok, PROMPTS, SamplingConfig(n=3, max_new_tokens=10, batch_size=4, seed=8), progress=False)
    assert (a.text != c.text).any()
    torch.manual_seed(0)
    x = torch.rand(3)
    torch.manual_seed(0)
    generate(model, tok, PROMPTS[:1], cfg, progress=False)
    assert torch.equal(torch.rand(3), x)


def test_checkpoint_generation_config_does_not_leak(model, tok):
    cfg = SamplingConfig(n=2, max_new_tokens=8, seed=2)
    ref = generate(model, tok, PROMPTS, cfg, progress=False)
    gc = model.generation_config
    saved = (gc.temperature, gc.top_k, gc.top_p, gc.do_sample)
    try:  # a Qwen3-style generation_config.json must not change our rollouts
        gc.temperature, gc.top_k, gc.top_p, gc.do_sample = 0.05, 1, 0.5, True
        pd.testing.assert_frame_equal(ref, generate(model, tok, PROMPTS, cfg, progress=False))
        greedy = SamplingConfig.evaluation(max_new_tokens=8)
        out = generate(model, tok, PROMPTS, greedy, progress=False)
        for i, p in enumerate(PROMPTS):
            assert out.text[i] == tok.decode(manual_greedy(model, tok, p, 8), skip_special_tokens=True)
    finally:
        gc.temperature, gc.top_k, gc.top_p, gc.do_sample = saved


def test_n_rollouts_ids_and_parse_hook(model, tok):
    ids = ["r-a", "r-b", "r-c"]
    df = generate(model, tok, PROMPTS[:3], SamplingConfig(n=4, max_new_tokens=6, batch_size=5), ids=ids,
                  progress=False, parse=lambda text, i: {"mark": len(text) % 3, "parse_status": f"ok{i}"})
    assert len(df) == 12
    for i, g in df.groupby("prompt_index"):
        assert list(g.rollout_id) == [0, 1, 2, 3] and set(g.response_id) == {ids[i]}
        assert set(g.parse_status) == {f"ok{i}"}
    assert (df.mark == df.text.str.len() % 3).all()
    greedy = generate(model, tok, PROMPTS[:2], SamplingConfig(greedy=True, n=3, max_new_tokens=6), progress=False)
    assert list(greedy.rollout_id) == [0, 1, 2, 0, 1, 2] and greedy.groupby("prompt_index").text.nunique().eq(1).all()


def test_edge_cases(model, tok):
    empty = generate(model, tok, [], SamplingConfig(), progress=False)
    assert list(empty.columns) == COLUMNS and len(empty) == 0
    with pytest.raises(ValueError):
        generate(model, tok, PROMPTS, ids=[1], progress=False)
    model.train()
    generate(model, tok, PROMPTS[:1], SamplingConfig(max_new_tokens=2), progress=False)
    assert model.training  # mode restored
    model.eval()


def test_peft_wrapped_model_generates_like_base(tok):
    from edit_lib.model.hf import LoraConfig, attach_lora
    base = init_tiny_model(tok, seed=4, hidden=32, layers=2, heads=2, intermediate=64)
    cfg = SamplingConfig.evaluation(max_new_tokens=6)
    ref = generate(base, tok, PROMPTS, cfg, progress=False)
    pd.testing.assert_frame_equal(ref, generate(attach_lora(base, LoraConfig(r=4, alpha=8)), tok, PROMPTS, cfg,
                                                progress=False))  # fresh adapter: B = 0


def test_sampling_from_profile_sections():
    """One settings type for generation: the profile's rollouts section (App. B pool: 20 sampled rollouts at
    T=1.0) and eval section (App. B: one greedy completion) each become a SamplingConfig, field by field."""
    p = load_profile("paper", ["rollouts.decoding.top_p=0.9", "rollouts.decoding.temperature=0.8"])
    ro = rollout_sampling(p.rollouts, seed=p.run.seed)
    assert (ro.greedy, ro.n, ro.temperature, ro.top_p, ro.top_k) == (False, 20, 0.8, 0.9, 0)
    assert (ro.max_new_tokens, ro.batch_size, ro.seed) == (1024, p.rollouts.batch_size, 42)
    ev = eval_sampling(p.eval, seed=7)
    assert (ev.greedy, ev.n, ev.max_new_tokens, ev.batch_size, ev.seed) == (True, 1, 1024, p.eval.batch_size, 7)
    sampled_eval = eval_sampling(EvalConfig(decoding=Decoding(max_new_tokens=5), batch_size=2), seed=0)
    assert (sampled_eval.greedy, sampled_eval.n, sampled_eval.max_new_tokens) == (False, 1, 5)
    assert rollout_sampling(RolloutConfig(n_per_response=3), seed=0).n == 3


def test_rollout_sampling_matches_hand_built_config(model, tok):
    """The notebook's rollouts come from `rollout_sampling`; same draws as the explicitly built config."""
    sec = RolloutConfig(n_per_response=3, decoding=Decoding(temperature=1.0, top_p=1.0, max_new_tokens=8), batch_size=4)
    a = generate(model, tok, PROMPTS, rollout_sampling(sec, seed=5), progress=False)
    b = generate(model, tok, PROMPTS, SamplingConfig(n=3, max_new_tokens=8, batch_size=4, seed=5), progress=False)
    pd.testing.assert_frame_equal(a, b)
