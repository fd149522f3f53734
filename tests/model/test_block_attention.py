"""``attn_implementation: sdpa_blocks`` (edit_lib/model/block_attention.py) against transformers' plain SDPA:
the attention outputs and their gradients on App. B's packed trees (one tree, several padded trees, grouped-query
heads), a padded causal batch over a KV cache, whole models (logits, gradients, greedy generation), and the
query blocks themselves against the mask they come from."""
import numpy as np
import pytest
import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from edit_lib.model import block_attention as ba
from edit_lib.signals.packing import SegmentTree, collate
from test_generate import tok  # noqa: F401  (the word tokenizer of the generation tests)
from toy_models import toy_model

torch.set_num_threads(1)  # other processes share the 2 cores


class Heads(torch.nn.Module):
    """What the attention functions read off a layer: its grouped-query ratio and causality."""

    def __init__(self, groups: int):
        super().__init__()
        self.num_key_value_groups, self.is_causal = groups, True


def tree(rng, root: int, children: list[int], grand: int = 0) -> SegmentTree:
    """A root of ``root`` tokens, a child per entry of ``children`` and, under the first child, a grandchild of
    ``grand`` tokens (the probe's layout: a prompt, steps, boundaries)."""
    t = SegmentTree()
    r = t.add(rng.integers(1, 50, root))
    kids = [t.add(rng.integers(1, 50, n), r) for n in children]
    if grand:
        t.add(rng.integers(1, 50, grand), kids[0])
    return t


def attend(fn, mask, heads=6, kv_heads=2, dim=8, seed=0, grad=False):
    """Output (and the query/key/value gradients of a fixed random projection of it) of ``fn`` on random inputs."""
    g = torch.Generator().manual_seed(seed)
    B, Q, K = mask.shape[0], mask.shape[-2], mask.shape[-1]
    q = torch.randn(B, heads, Q, dim, generator=g, requires_grad=grad)
    k = torch.randn(B, kv_heads, K, dim, generator=g, requires_grad=grad)
    v = torch.randn(B, kv_heads, K, dim, generator=g, requires_grad=grad)
    out, _ = fn(Heads(heads // kv_heads), q, k, v, mask, scaling=dim ** -0.5)
    if not grad:
        return out, ()
    (out * torch.randn(out.shape, generator=g)).sum().backward()
    return out, (q.grad, k.grad, v.grad)


def assert_same(mask, **kw):
    ref, ref_g = attend(sdpa_attention_forward, mask, **kw)
    got, got_g = attend(ba.sdpa_blocks_forward, mask, **kw)
    torch.testing.assert_close(got, ref, atol=2e-6, rtol=1e-5)
    for a, b in zip(got_g, ref_g):  # sums over many more terms: rounding of a unit-scale gradient
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_one_packed_tree_equals_plain_sdpa_with_gradients():
    t = tree(np.random.default_rng(0), 150, [40, 7, 90, 3, 260, 12], grand=30)
    _, _, mask = collate([t], 0, torch.float32)
    assert_same(mask, grad=True)


def test_padded_trees_equal_plain_sdpa():
    rng = np.random.default_rng(1)
    _, _, mask = collate([tree(rng, 100, [20, 30, 5]), tree(rng, 70, [140, 2])], 0, torch.float32)
    assert_same(mask, grad=True)
    assert_same(mask, heads=4, kv_heads=4)


def test_bool_causal_mask_over_a_cache_equals_plain_sdpa():
    """Left-padded queries after 50 cached keys, as a batch's own tokens after a shared prefix (a bool mask)."""
    Q, off = 200, 50
    causal = torch.ones(Q, Q + off, dtype=torch.bool).tril(off)
    mask = causal[None, None].repeat(3, 1, 1, 1)
    for b, pad in enumerate((0, 17, 130)):
        mask[b, :, :, off:off + pad] = False  # left padding: nobody sees the pad keys
    assert_same(mask, grad=True)


def test_short_queries_and_no_mask_go_to_the_plain_kernel(monkeypatch):
    calls = []
    monkeypatch.setattr(ba, "block_plan", lambda m: calls.append(m) or [])
    mask = torch.ones(1, 1, 1, 90, dtype=torch.bool)  # one decoding step
    assert_same(mask)
    q = torch.randn(1, 2, 100, 8)
    out, _ = ba.sdpa_blocks_forward(Heads(1), q, q, q, None)
    torch.testing.assert_close(out, sdpa_attention_forward(Heads(1), q, q, q, None)[0])
    assert calls == []


def test_blocks_start_at_segments_and_cover_the_queries():
    t = tree(np.random.default_rng(2), 300, [40, 7, 90, 3, 200])
    allow = torch.from_numpy(t.allowed())[None]
    blocks = ba.query_blocks(allow, block_rows=128)
    assert blocks[0][0] == 0 and blocks[-1][1] == len(t)
    assert all(a < b <= a + 128 for a, b in blocks) and all(x[1] == y[0] for x, y in zip(blocks, blocks[1:]))
    starts = {t.start[s] for s in range(len(t.parent))}
    assert {a for a, _ in blocks} <= starts | {s + k for s in starts for k in range(128, 400, 128)}
    # by hand: the 300-token root cut at 128 and 256; its 44-row tail takes the 40- and 7-token children (91
    # rows; the 90 would make 181); the 90 and the 3 share one (93); the 200 is cut at 128
    assert blocks == [(0, 128), (128, 256), (256, 347), (347, 440), (440, 568), (568, 640)]
    for a, b in blocks:  # every key a query of the block may see is among the block's columns
        cols = ba._columns(allow[:, a:b])
        seen = torch.zeros(len(t), dtype=torch.bool)
        seen[cols] = True
        assert not (allow[0, a:b] & ~seen).any()


def test_the_plan_follows_the_mask_it_was_made_for():
    _, _, mask = collate([tree(np.random.default_rng(3), 80, [30, 30])], 0, torch.float32)
    first = ba.block_plan(mask)
    assert ba.block_plan(mask) is first  # every layer of one pass reuses it
    mask[..., 85:, :80] = torch.finfo(mask.dtype).min  # the children no longer see the root
    changed = ba.block_plan(mask)
    assert changed is not first and all(isinstance(c, slice) for _, _, c in changed)
    assert_same(mask)


def test_inference_mode_masks_get_a_plan_each_time():
    """Inference tensors keep no version counter: an in-place change must still reach the plan."""
    with torch.inference_mode():
        _, _, mask = collate([tree(np.random.default_rng(6), 80, [30, 30])], 0, torch.float32)
        first = ba.block_plan(mask)
        mask[..., 85:, :80] = torch.finfo(mask.dtype).min
        assert ba.block_plan(mask) != first
        assert_same(mask)


def test_per_head_masks_go_to_the_plain_kernel(monkeypatch):
    with pytest.raises(ValueError, match="shared by all heads"):
        ba.allowed(torch.zeros(1, 2, 4, 4))
    monkeypatch.setattr(ba, "block_plan", lambda m: pytest.fail("a per-head mask has no plan"))
    mask = torch.ones(1, 6, 100, 100, dtype=torch.bool).tril()
    mask[:, 3, :, :10] = False  # one head sees less
    assert_same(mask)


@pytest.fixture(scope="module")
def models():
    ba.register()
    return toy_model(arch="llama", layers=2, attn="sdpa"), toy_model(arch="llama", layers=2, attn=ba.NAME)


def test_packed_model_logits_and_gradients_equal_sdpa(models, monkeypatch):
    planned = []
    monkeypatch.setattr(ba, "block_plan", lambda m, plan=ba.block_plan: planned.append(1) or plan(m))
    ids, pos, mask = collate([tree(np.random.default_rng(4), 120, [60, 9, 75], grand=20)], 0, torch.float32)
    outs = []
    for m in models:
        m.zero_grad()
        logits = m(input_ids=ids, position_ids=pos, attention_mask=mask).logits
        logits.square().mean().backward()
        outs.append((logits.detach(), [p.grad.clone() for p in m.parameters()]))
    torch.testing.assert_close(outs[1][0], outs[0][0], atol=1e-5, rtol=1e-5)
    for a, b in zip(outs[1][1], outs[0][1]):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)
    assert len(planned) == 2  # both layers of the sdpa_blocks model went through the blocks


def test_suite_generation_with_a_shared_prefix_equals_sdpa(tok, monkeypatch):
    """The suite's generate (inference mode, ``model.prefix_cache``): each row's own tokens after the shared
    prefix are one block-masked call of 70 or more queries, so they take the blocks."""
    import pandas as pd

    from edit_lib.model.generate import SamplingConfig, generate
    from edit_lib.model.hf import init_tiny_model
    from test_prefix_cache import HEAD, TAILS
    ba.register()
    planned = []
    monkeypatch.setattr(ba, "block_plan", lambda m, plan=ba.block_plan: planned.append(m.is_inference()) or plan(m))
    prompts = [f"{HEAD} " + " ".join([t] * (12 + i)) for i, t in enumerate(TAILS)]
    runs = []
    for attn in ("sdpa", ba.NAME):
        m = init_tiny_model(tok, seed=3, hidden=32, layers=2, heads=2, intermediate=64, max_position=512)
        m.set_attn_implementation(attn)
        cfg = SamplingConfig.evaluation(max_new_tokens=8, batch_size=3)
        runs.append(generate(m, tok, prompts, cfg, progress=False, share_prefix=True))
    pd.testing.assert_frame_equal(runs[0], runs[1])
    assert planned and all(planned)  # the blocks ran, on inference tensors


def test_greedy_generation_equals_sdpa(models):
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(1, 60, (3, 90), generator=g)
    att = torch.ones_like(ids)
    att[1, :25] = 0  # a left-padded row
    runs = [m.generate(input_ids=ids, attention_mask=att, max_new_tokens=12, do_sample=False, pad_token_id=0)
            for m in models]
    assert torch.equal(runs[0], runs[1])
