"""Lean decoding's shared-prompt attention (edit_lib.model.lean_decode): the attention of a step against eager
attention over each row's own full cache (the prompt's keys repeated per row, grouped-query heads, padding, uneven
groups, rows dropped); the groups of a batch; and whole decoding runs with it against the plain lean loop (the same
tokens, every live row's scores within 1e-5) on the embedded grader and the toy Qwen3 (grouped-query) and Llama
models, greedy, row-seeded and batch-seeded."""
import warnings
from unittest import mock

import pytest
import torch
from transformers import LogitsProcessorList
from transformers.models.qwen3.modeling_qwen3 import repeat_kv

from edit_lib.model import generate as gen_mod, lean_decode
from edit_lib.model.generate import SamplingConfig, generate
from edit_lib.model.lean_decode import (GrowingLayer, lean_generate, padding_mask, PromptGroups, SharedPromptCache,
                                        shared_prompt_attention)
from edit_lib.model.policy import Policy, load_policy
from edit_lib.model.lean_decode import left_pad
from test_lean_decode import Record, TOY_PROMPTS
from toy_models import toy_model, toy_tokenizer

torch.set_num_threads(1)


def eager_reference(query, keys, values, mask, scaling):
    """Eager attention as transformers' Qwen3 computes it (``eager_attention_forward``): repeat_kv, scaled scores
    plus the additive mask, float32 softmax, values; output (R, 1, heads, dim)."""
    rep = query.shape[1] // keys.shape[1]
    k, v = repeat_kv(keys, rep), repeat_kv(values, rep)
    w = torch.matmul(query, k.transpose(2, 3)) * scaling + mask
    w = torch.softmax(w.float(), dim=-1).to(query.dtype)
    return torch.matmul(w, v).transpose(1, 2)


@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (6, 2)])
def test_attention_equals_eager_attention_over_each_rows_full_cache(heads, kv_heads):
    g = torch.Generator().manual_seed(0)
    dim, width, own = 8, 7, 5
    groups = PromptGroups(prefixes=[[1] * 7, [2] * 4, [3] * 7], group=torch.tensor([0, 0, 1, 0, 1, 2]),
                          slot=torch.tensor([0, 1, 0, 2, 1, 0]), width=3)
    rows, n = len(groups.group), len(groups.prefixes)
    pk, pv = (torch.randn(n, kv_heads, width, dim, generator=g) for _ in range(2))
    pmask = torch.ones(n, width, dtype=torch.long)
    pmask[1, :3] = 0  # the second group's prefix is shorter: left-padded
    omask = torch.ones(rows, own, dtype=torch.long)
    omask[[0, 4], :2] = 0  # two rows' own prompt tokens are fewer: left-padded
    ok, ov = (torch.randn(rows, kv_heads, own, dim, generator=g) for _ in range(2))
    q = torch.randn(rows, heads, 1, dim, generator=g)
    p_add = padding_mask(pmask, n, width, torch.float32, "eager")[groups.group]  # each row's prefix mask
    o_add = padding_mask(omask, rows, own, torch.float32, "eager")
    got = shared_prompt_attention(q, pk, pv, p_add, ok, ov, o_add, groups, 0.3)
    full_k = torch.cat([pk[groups.group], ok], dim=2)  # each row's own copy of its prefix, then its tokens
    full_v = torch.cat([pv[groups.group], ov], dim=2)
    want = eager_reference(q, full_k, full_v, torch.cat([p_add, o_add], dim=-1), 0.3)
    assert got.shape == want.shape == (rows, 1, heads, dim)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    # drop rows 1 and 5: the third group has no row left and is read no more
    keep = torch.tensor([0, 2, 3, 4])
    alive = groups.select(keep)
    assert alive.tolist() == [0, 1] and groups.group.tolist() == [0, 1, 0, 1] and len(groups.prefixes) == 2
    got = shared_prompt_attention(q[keep], pk[alive], pv[alive], p_add[keep], ok[keep], ov[keep], o_add[keep],
                                  groups, 0.3)
    torch.testing.assert_close(got, want[keep], rtol=1e-5, atol=1e-6)


def test_cache_keeps_each_prefix_once_and_drops_finished_groups():
    groups = PromptGroups(prefixes=[[1] * 20, [2] * 20], group=torch.tensor([0, 0, 1, 1]),
                          slot=torch.tensor([0, 1, 0, 1]), width=2)
    prompt = [(torch.randn(2, 1, 3, 4), torch.randn(2, 1, 3, 4)) for _ in range(2)]
    row_mask = torch.arange(4.0)[:, None, None, None].expand(4, 1, 1, 3)
    cache = SharedPromptCache(prompt, row_mask, groups, [GrowingLayer(3), GrowingLayer(3)])
    k, _ = cache.update(torch.randn(4, 1, 1, 4), torch.randn(4, 1, 1, 4), 1)
    assert k.shape == (4, 1, 1, 4) and cache.get_seq_length(1) == 4 and cache.get_seq_length(0) == 3
    cache.batch_select_indices(torch.tensor([2, 3]))  # the first group's rows finished
    assert torch.equal(cache.prompt[1][0], prompt[1][0][1:]) and cache.row_mask[:, 0, 0, 0].tolist() == [2.0, 3.0]
    assert cache.layers[1].keys.shape[0] == 2 and groups.group.tolist() == [0, 0] and groups.prefixes == [[2] * 20]


def padded(seqs):
    return left_pad(seqs, 0, "cpu")


def test_groups_save_the_most_prompt_tokens():
    """One prompt's rows share all of it but its last token; one question's prompts their common prefix; a prompt
    that shares under MIN_SHARED tokens with every other keeps its own; the groups follow the rows' order."""
    q1, q2 = list(range(100, 130)), list(range(200, 220))
    seqs = [q1 + [1, 2], q2 + [5], q1 + [1, 2], q1 + [3], list(range(300, 340)), q2 + [6, 7], q1 + [1, 2]]
    groups = PromptGroups.of(*padded(seqs))
    assert groups.group.tolist() == [0, 1, 0, 0, 2, 1, 0] and groups.slot.tolist() == [0, 0, 1, 2, 0, 1, 3]
    assert groups.prefixes == [q1, q2, list(range(300, 339))] and groups.width == 4
    # q1's three equal rows alone would share 31 tokens; with the fourth, 30 each: 3 x 30 > 2 x 31
    assert PromptGroups.of(*padded([q1 + [1], q1 + [1]])).prefixes == [q1]
    assert PromptGroups.of(*padded([q1, q2, q1 + [4]])) is None  # two groups for three rows
    assert PromptGroups.of(*padded([list(range(10)), list(range(10))])) is None  # 9 shared tokens: under 16
    assert PromptGroups.of(*padded([q1, q1, q1, [7]])) is None  # a one-token prompt would keep no prefix
    ids, mask = padded([q1 + [1], q1 + [1], q1 + [1], q1 + [1]])
    mask[1] = 0  # a masked-out row holds no tokens of its own here; the rows are what the mask keeps
    mask[1, -3:] = 1
    assert PromptGroups.of(ids, mask).group.tolist() == [0, 1, 0, 0]


def test_groups_with_shorter_rows_keep_a_token_of_their_own():
    q = list(range(50, 80))
    groups = PromptGroups.of(*padded([q, q + [1, 2], q, q + [1]]))
    assert groups.prefixes == [q[:-1]] and groups.width == 4


def run(m, t, prompts, n, share, cfg, compact=True):
    """(tokens, the scores each step hands the processors, whether the shared cache was built) of one lean call
    over ``prompts`` each repeated ``n`` times."""
    seqs = [t(p)["input_ids"] for p in prompts for _ in range(n)]
    ids, mask = left_pad(seqs, t.pad_token_id, "cpu")
    gen_cfg = cfg.hf_config(t.pad_token_id, gen_mod.eos_ids(m, t))
    rec, built = Record(), []
    real = lean_decode.SharedPromptCache.__init__
    procs = cfg.sampling_processors([(i, r) for i in range(len(prompts)) for r in range(n)])
    with torch.random.fork_rng(devices=[]), mock.patch.object(lean_decode, "SHARE_PROMPTS", share), \
            mock.patch.object(lean_decode, "COMPACT_EVERY", 4 if compact else 0), \
            mock.patch.object(lean_decode.SharedPromptCache, "__init__",
                              lambda self, *a: built.append(1) or real(self, *a)):
        torch.manual_seed(0)
        out = lean_generate(m, ids, mask, gen_cfg, LogitsProcessorList([*procs, rec]))
    return out, rec.seen, bool(built), ids.shape[1]


def same_tokens_close_scores(m, t, prompts, n, cfg, compact=True, tol=1e-5):
    plain, seen_a, built_a, width = run(m, t, prompts, n, False, cfg, compact)
    shared, seen_b, built_b, _ = run(m, t, prompts, n, True, cfg, compact)
    assert built_b and not built_a
    assert torch.equal(plain, shared) and len(seen_a) == len(seen_b) > 1
    eos = torch.tensor(gen_mod.eos_ids(m, t) or [-1])
    for (ids_a, a), (_, b) in zip(seen_a, seen_b):
        live = ~torch.isin(ids_a[:, width:], eos).any(1)
        finite = torch.isfinite(a[live])  # top-k / top-p set the rest to -inf in both
        assert torch.equal(finite, torch.isfinite(b[live]))
        torch.testing.assert_close(a[live][finite], b[live][finite], rtol=tol, atol=tol)
    return plain


@pytest.fixture(scope="module")
def embedded():
    m, t, kind = load_policy("embedded")
    return m, t, [Policy(m, t, kind).input_text(p) for p in
                  ["Question : name the unit of mass and say why it is used . Answer : grams , it is small",
                   "Question : what is heavy ? Answer : kilograms because it is heavy and the mass is large",
                   "Question : state the method used to measure the mass of the sample . Answer : a balance"]]


@pytest.mark.parametrize("compact", [False, True], ids=["whole-batch", "compacted"])
def test_embedded_grader_greedy_and_row_sampled(embedded, compact):
    m, t, prompts = embedded
    out = same_tokens_close_scores(m, t, prompts, 3, SamplingConfig.evaluation(max_new_tokens=40), compact)
    assert len(out) == 9
    sampled = SamplingConfig(n=4, max_new_tokens=40, seed=3, temperature=1.0, top_p=0.9, top_k=8)
    same_tokens_close_scores(m, t, prompts, 4, sampled, compact)


def test_one_questions_gradings_share_its_rubric(embedded):
    """Greedy grading of several answers to one question (07's batches): distinct prompts sharing a long prefix."""
    m, t, _ = embedded
    stem = ("Question : state the method used to measure the mass of the sample and name two sources of error . "
            "Rubric : one mark for the balance , one for each error . Answer : ")
    answers = ["a balance", "weigh it , zero error", "use a ruler", "a balance and parallax , zero error", "mass"]
    prompts = [Policy(m, t, load_policy("embedded")[2]).input_text(stem + a) for a in answers]
    groups = PromptGroups.of(*left_pad([t(p)["input_ids"] for p in prompts], t.pad_token_id, "cpu"))
    assert len(groups.prefixes) == 1 and len(groups.prefixes[0]) >= 30
    same_tokens_close_scores(m, t, prompts, 1, SamplingConfig.evaluation(max_new_tokens=40))


def test_batch_seeded_sampling_draws_the_same_stream(embedded):
    """HF's own multinomial draw over every row (06's GRPO rollouts): the rows and their draws stay in place."""
    m, t, prompts = embedded
    same_tokens_close_scores(m, t, prompts, 4, SamplingConfig(n=4, max_new_tokens=30, seed=1, seeding="batch"))


@pytest.mark.parametrize("arch,attn", [("qwen3", "sdpa"), ("llama", "eager")])
def test_toy_models(arch, attn):
    """Random weights drawn wide (init range 0.5) make peaked attention, which carries the reordered sums' rounding
    further: 1e-4 here (3.3e-5 measured on the Llama), 1e-5 on the grader."""
    m = toy_model(arch, vocab_size=len(toy_tokenizer()), attn=attn, seed=1, init_range=0.5)
    prompts = [TOY_PROMPTS[1] + " " + p for p in TOY_PROMPTS]  # a shared rubric, then prompts of uneven length
    same_tokens_close_scores(m, toy_tokenizer(), prompts, 2, SamplingConfig.evaluation(max_new_tokens=15), tol=1e-4)


def test_generate_shares_prompts_of_its_rollouts(embedded):
    """``generate`` with ``n`` rollouts per prompt batches a prompt's rows together, so the lean loop shares them;
    its rows equal those of the plain lean loop."""
    m, t, prompts = embedded
    cfg = SamplingConfig(n=4, max_new_tokens=30, seed=2, batch_size=8)
    built = []
    real = lean_decode.SharedPromptCache.__init__
    with mock.patch.object(lean_decode.SharedPromptCache, "__init__",
                           lambda self, *a: built.append(1) or real(self, *a)):
        got = generate(m, t, prompts, cfg, progress=False, lean=True)
    with mock.patch.object(lean_decode, "SHARE_PROMPTS", False):
        want = generate(m, t, prompts, cfg, progress=False, lean=True)
    assert len(built) == 2  # batches of 8 rows: two prompts x 4, then one
    assert got.equals(want)


def test_no_sharing_while_a_dropout_draws(embedded):
    """06's rollouts sample with the policy in training mode, its LoRA dropout drawing from the global stream:
    there the rows keep their own prefix (fewer draws would change every later sample); in eval mode they share."""
    import copy

    from peft import LoraConfig, get_peft_model
    m, t, prompts = embedded
    with warnings.catch_warnings():  # peft 0.21 calls a deprecated transformers 5 helper
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        peft = get_peft_model(copy.deepcopy(m), LoraConfig(r=4, lora_dropout=0.1, target_modules=["q_proj"]))
    ids, mask = left_pad([t(p)["input_ids"] for p in prompts for _ in range(4)], t.pad_token_id, "cpu")
    hf = lean_decode._transformers_model(peft)
    step = lean_decode.LeanStep(hf)
    assert lean_decode._prompt_groups(hf, step, None, ids, mask) is None  # peft leaves the model in training mode
    peft.eval()
    assert len(lean_decode._prompt_groups(hf, step, None, ids, mask).prefixes) == 3
    with mock.patch.object(lean_decode, "SHARE_PROMPTS", False):
        assert lean_decode._prompt_groups(hf, step, None, ids, mask) is None


def test_sampled_calls_compact_unless_a_dropout_draws(embedded):
    """A call sampling from the global stream (06's rollouts, ``seeding='batch'``) drops its finished rows from the
    forward in eval mode: the sampler still draws for every row, so its tokens are those of the call that keeps them.
    A policy in training mode whose LoRA dropout draws keeps every row (fewer rows would draw fewer masks)."""
    import copy

    from peft import LoraConfig, get_peft_model
    m, t, prompts = embedded
    cfg = SamplingConfig(n=4, max_new_tokens=60, seed=1, seeding="batch")
    rows = []
    real = lean_decode.LeanStep.__call__
    with mock.patch.object(lean_decode.LeanStep, "__call__", lambda self, *a: rows.append(a[0].shape[0]) or
                           real(self, *a)):
        kept = run(m, t, prompts, 4, False, cfg, compact=False)[0]
        whole, rows[:] = list(rows), []
        compacted = run(m, t, prompts, 4, False, cfg, compact=True)[0]
        fewer, rows[:] = list(rows), []
        with warnings.catch_warnings():  # peft 0.21 calls a deprecated transformers 5 helper
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            peft = get_peft_model(copy.deepcopy(m), LoraConfig(r=4, lora_dropout=0.1, target_modules=["q_proj"]))
        assert lean_decode.draws_dropout(lean_decode._transformers_model(peft)) and \
            not lean_decode.draws_dropout(m)
        run(peft, t, prompts, 4, False, cfg, compact=True)
    assert torch.equal(kept, compacted)
    assert set(whole) == {12} and min(fewer) < 12 == max(fewer)  # three prompts x 4 rows, then fewer
    assert set(rows) == {12}
