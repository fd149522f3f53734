"""Sampling seeded per row (edit_lib.model.generate): row (i, r)'s tokens depend on (seed, i, r) and prompt i only, not on
the batch, the batch size or the order rows are batched in; they equal a naive per-row Gumbel-max reference; the
Gumbel-max sampler draws from softmax(logits / T) (truncated by top-k / top-p); greedy decoding is unchanged."""
import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from edit_lib.model.generate import RowGumbelSampler, SamplingConfig, generate
from test_generate import PROMPTS, model, tok  # noqa: F401  (the tiny model, its tokenizer and prompts)

torch.set_num_threads(1)  # other processes share the 2 cores


def stream(seed, i, r):
    """Row (i, r)'s uniforms, built from the documented rule (not from edit_lib's helper)."""
    s = int(np.random.SeedSequence([seed, i, r]).generate_state(1, dtype=np.uint64)[0])
    return torch.Generator().manual_seed(s)


def naive_truncate(scores, temperature, top_k, top_p):
    scores = scores.double() / temperature
    if top_k:
        scores = torch.where(scores >= torch.topk(scores, top_k).values[-1], scores, -torch.inf)
    if top_p < 1.0:
        probs = torch.softmax(scores, -1)
        order = torch.argsort(probs, descending=True)
        above = torch.cumsum(probs[order], 0) - probs[order]  # mass strictly above each token
        drop = torch.zeros_like(probs, dtype=torch.bool)
        drop[order] = above >= top_p
        scores = scores.masked_fill(drop, -torch.inf)
    return scores


def naive_rollout(model, tok, prompt, seed, i, r, cfg):
    """Plain forward passes over the growing sequence (no cache, no batch), argmax(truncated logits + Gumbel)."""
    ids, out, g = tok(prompt)["input_ids"], [], stream(seed, i, r)
    with torch.no_grad():
        for _ in range(cfg.max_new_tokens):
            logits = model(torch.tensor([ids + out])).logits[0, -1].float()
            u = torch.rand(logits.shape, generator=g, dtype=torch.float32)
            gumbel = -torch.log(-torch.log(u.clamp_min(torch.finfo(torch.float32).tiny)))
            nxt = int(torch.argmax(naive_truncate(logits, cfg.temperature, cfg.top_k, cfg.top_p) + gumbel))
            out.append(nxt)
            if nxt == tok.eos_token_id:
                break
    return out


def test_rows_do_not_depend_on_batch_size_or_row_order(model, tok):
    base = dict(n=4, max_new_tokens=10, seed=11, temperature=1.0, seeding="row")
    runs = [generate(model, tok, PROMPTS, SamplingConfig(batch_size=bs, sort_by_length=srt, **base), progress=False)
            for bs, srt in [(1, True), (3, True), (64, True), (3, False), (64, False)]]
    for other in runs[1:]:
        pd.testing.assert_frame_equal(runs[0], other)
    assert runs[0].groupby("prompt_index").text.nunique().gt(1).any()  # really sampled
    # a subset of the prompts (another process's share) samples the same rows for the same prompt indices
    part = generate(model, tok, PROMPTS[:2], SamplingConfig(batch_size=5, **base), progress=False)
    pd.testing.assert_frame_equal(part, runs[0][runs[0].prompt_index < 2].reset_index(drop=True))


def test_sampler_rows_are_their_own_streams():
    scores = torch.randn(3, 50, generator=torch.Generator().manual_seed(0))
    together = RowGumbelSampler(5, [(0, 0), (2, 1), (7, 3)])
    alone = RowGumbelSampler(5, [(2, 1)])
    permuted = RowGumbelSampler(5, [(7, 3), (0, 0)])
    for _ in range(3):  # three decoding steps: row (2, 1) takes its t-th draw whatever its neighbours
        a = together(None, scores)
        assert torch.equal(a[1], alone(None, scores[1:2])[0])
        b = permuted(None, scores[[2, 0]])
        assert torch.equal(a[2], b[0]) and torch.equal(a[0], b[1])


def test_chunked_draws_equal_one_draw_per_step():
    """The sampler draws up to 32 steps of noise per call; any chunk size gives the same stream (crossing chunk
    boundaries over 70 steps), against a step-by-step reference built from the documented rule."""
    scores = torch.randn(2, 40, generator=torch.Generator().manual_seed(1))
    rows = [(3, 0), (3, 1)]
    chunked, single = RowGumbelSampler(7, rows), RowGumbelSampler(7, rows, max_floats=1)  # 32 steps / 1 step
    refs = [stream(7, i, r) for i, r in rows]
    for _ in range(70):
        a, b = chunked(None, scores), single(None, scores)
        u = torch.stack([torch.rand(40, generator=g) for g in refs])
        ref = scores + -torch.log(-torch.log(u.clamp_min(torch.finfo(torch.float32).tiny)))
        assert torch.equal(a, b) and torch.equal(a, ref)


@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, 0, 1.0), (0.7, 6, 0.85)])
def test_generate_equals_naive_per_row_reference(model, tok, temperature, top_k, top_p):
    cfg = SamplingConfig(n=3, max_new_tokens=8, batch_size=4, seed=5, seeding="row", temperature=temperature, top_k=top_k,
                         top_p=top_p)
    df = generate(model, tok, PROMPTS[:3], cfg, progress=False)
    for row in df.itertuples():
        ref = naive_rollout(model, tok, PROMPTS[row.prompt_index], cfg.seed, row.prompt_index, row.rollout_id, cfg)
        assert row.text == tok.decode(ref, skip_special_tokens=True)
        assert row.n_tokens == len(ref) and row.finished == (ref[-1] == tok.eos_token_id)


@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, 0, 1.0), (0.6, 0, 1.0), (1.3, 5, 1.0), (1.0, 0, 0.8)])
def test_gumbel_max_draws_follow_the_truncated_softmax(temperature, top_k, top_p):
    logits = torch.tensor([2.0, 1.5, 1.0, 0.6, 0.2, 0.0, -0.5, -1.0])
    want = torch.softmax(naive_truncate(logits, temperature, top_k, top_p), -1).numpy()
    draws = 4000
    cfg = SamplingConfig(temperature=temperature, top_k=top_k, top_p=top_p, seed=3, seeding="row")
    procs = cfg.sampling_processors([(0, r) for r in range(draws)])  # 4,000 rows, one draw each
    picks = torch.argmax(procs(None, logits.repeat(draws, 1)), -1)
    one_row = cfg.sampling_processors([(0, 0)])  # and one row's stream over 1,000 steps
    steps = torch.cat([torch.argmax(one_row(None, logits[None]), -1) for _ in range(1000)])
    for got in (picks, steps):
        counts = np.bincount(got.numpy(), minlength=len(logits))
        assert counts[want == 0].sum() == 0  # filtered tokens are never drawn
        keep = want > 0
        if keep.sum() > 1:
            p = stats.chisquare(counts[keep], len(got) * want[keep]).pvalue
            assert p > 1e-3, (counts, want)


def test_greedy_unchanged(model, tok):
    cfg = SamplingConfig(greedy=True, n=2, max_new_tokens=10, batch_size=3, seed=9)
    assert len(cfg.sampling_processors([(0, 0)])) == 0
    df = generate(model, tok, PROMPTS, cfg, progress=False)
    for i, p in enumerate(PROMPTS):  # plain argmax, one completion replicated n times, seed ignored
        ids, out = tok(p)["input_ids"], []
        with torch.no_grad():
            for _ in range(10):
                out.append(int(model(torch.tensor([ids + out])).logits[0, -1].argmax()))
                if out[-1] == tok.eos_token_id:
                    break
        assert set(df[df.prompt_index == i].text) == {tok.decode(out, skip_special_tokens=True)}
    pd.testing.assert_frame_equal(df, generate(model, tok, PROMPTS, SamplingConfig(
        greedy=True, n=2, max_new_tokens=10, batch_size=1, seed=1), progress=False))


def test_sampling_needs_positive_temperature():
    with pytest.raises(ValueError, match="temperature"):
        SamplingConfig(temperature=0.0, seeding="row").sampling_processors([(0, 0)])


def test_row_seeding_is_the_default_and_batch_seeding_samples_through_hf(model, tok):
    """'row' is the default (and what every profile's sampling gets); 'batch' samples through HF's sampler."""
    assert SamplingConfig().seeding == "row" and not SamplingConfig().hf_config(0, [1]).do_sample
    assert SamplingConfig(seeding="batch").sampling_processors([(0, 0)]) == []
    assert SamplingConfig(seeding="batch").hf_config(0, [1]).do_sample
    assert not SamplingConfig(seeding="row").hf_config(0, [1]).do_sample
    with pytest.raises(ValueError, match="seeding"):
        SamplingConfig(seeding="prompt").hf_config(0, [1])
    cfg = dict(n=2, max_new_tokens=6, seed=4)
    a = generate(model, tok, PROMPTS, SamplingConfig(batch_size=64, seeding="batch", **cfg), progress=False)
    assert a.equals(generate(model, tok, PROMPTS, SamplingConfig(batch_size=64, seeding="batch", **cfg),
                             progress=False))


def test_a_split_call_with_global_indices_equals_the_whole_call(model, tok):  # noqa: F811
    """What `model.parallel` relies on: each shard of prompts, generated with its global `prompt_indices`, gives the
    whole call's rows for those prompts (row seeds and `prompt_index` follow the global index)."""
    cfg = SamplingConfig(n=3, max_new_tokens=6, batch_size=4, seed=9, seeding="row")
    whole = generate(model, tok, PROMPTS, cfg, progress=False)
    shards = [list(range(w, len(PROMPTS), 2)) for w in range(2)]
    parts = [generate(model, tok, [PROMPTS[i] for i in s], cfg, progress=False, prompt_indices=s, ids=s)
             for s in shards]
    split = pd.concat(parts).sort_values(["prompt_index", "rollout_id"]).reset_index(drop=True)
    cols = ["prompt_index", "response_id", "rollout_id", "text", "n_tokens"]
    pd.testing.assert_frame_equal(whole[cols], split[cols])
    with pytest.raises(ValueError, match="prompt indices"):
        generate(model, tok, PROMPTS, cfg, progress=False, prompt_indices=[0])
