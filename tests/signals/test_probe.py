"""Posterior belief probe (Eq. 1-2): Eq. 1 against a hand-built logit table, the next-token and the sequence
read, packed single-pass probe == naive passes for both reads, exact multi-token marks."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from edit_lib.signals import belief_from_scores, mark_continuations, probe_rollouts, probe_rollouts_naive
from edit_lib.signals.packing import SegmentTree, collate
from edit_lib.signals.probe import build_probe_tree, mark_readout, single_token_marks

from toy_models import toy_model, toy_tokenizer

torch.set_num_threads(1)
SCAFFOLD = "Final mark : "


@pytest.fixture(scope="module")
def tok():
    return toy_tokenizer()


@pytest.fixture(scope="module", params=[("qwen3", "sdpa"), ("qwen3", "eager"), ("llama", "sdpa"), ("llama", "eager")],
                ids=lambda p: "-".join(p))
def model(request, tok):
    arch, attn = request.param
    # large init so that attention is far from uniform and any mask/position error shows up in the numbers
    return toy_model(arch, vocab_size=len(tok), attn=attn, seed=1, init_range=0.2)


def _rollouts(vocab, seed=0):
    rng = np.random.default_rng(seed)
    ids = lambda n: rng.integers(3, vocab, n).tolist()  # noqa: E731
    prompts = [ids(9), ids(15), ids(6)]
    steps = [[ids(4), ids(1), ids(6)], [ids(3), ids(7)], []]  # different T, one rollout with no steps
    return prompts, steps, [3, 11, 0]


def test_mark_continuations_split_digits(tok):
    scaffold, marks = mark_continuations(tok, SCAFFOLD, 13)
    assert tok.convert_ids_to_tokens(scaffold) == ["Final", "mark", ":"]
    assert len(marks) == 14
    assert tok.convert_ids_to_tokens(marks[12]) == ["1", "2", "/"]
    assert tok.convert_ids_to_tokens(marks[1]) == ["1", "/"]
    assert all(len(m) == (3 if i >= 10 else 2) for i, m in enumerate(marks))


def test_mark_continuations_errors(tok):
    with pytest.raises(ValueError, match="prefix"):  # no terminator: "1" is a prefix of "12"
        mark_continuations(tok, SCAFFOLD, 12, terminator="")
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    raw = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()  # no digit split: "mark12" is one word
    raw.train_from_iterator(["mark 1 2 /"], trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
    merging = PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]")
    with pytest.raises(ValueError, match="merges"):
        mark_continuations(merging, "mark", 3)


def test_tree_layout_positions_and_trie(tok):
    scaffold, marks = mark_continuations(tok, SCAFFOLD, 13)
    prompt, steps = [5] * 7, [[6] * 4, [7] * 2]
    tree, queries, slots = build_probe_tree(prompt, steps, scaffold, marks)
    # boundary k's scaffold starts right after s_k: positions 7, 11, 13
    sc_segs = [s for s in range(len(tree.parent)) if tree.parent[s] in (0, 1, 2) and s > 2]
    assert [tree.positions[tree.start[s]] for s in sc_segs] == [7, 11, 13]
    # trie: 10 first digits + 4 second digits (10..13) + 14 terminators per boundary
    assert len(queries) == 3 * 28
    assert len(tree) == 7 + 6 + 3 * (len(scaffold) + 28)
    allowed = tree.allowed()
    i = tree.start[sc_segs[1]]  # first scaffold token of boundary 1 sees prompt + s_1, not s_2
    assert allowed[i, :11].all() and not allowed[i, 11:13].any()


@pytest.mark.parametrize("read,max_mark", [("next_token", 9), ("sequence", 9), ("sequence", 13)])
def test_packed_matches_naive(model, tok, read, max_mark):
    ro = mark_readout(tok, SCAFFOLD, max_mark, read=read)
    assert ro.read == read
    scaffold, marks = ro.scaffold, ro.marks
    prompts, steps, gold = _rollouts(len(tok))
    gold = [min(g, max_mark) for g in gold]
    packed = probe_rollouts(model, prompts, steps, scaffold, marks, gold=gold, temperature=0.7, batch_size=3)
    naive = probe_rollouts_naive(model, prompts, steps, scaffold, marks, gold=gold, temperature=0.7)
    for p, n, st in zip(packed, naive, steps):
        assert p.read == n.read == read
        assert p.probs.shape == (len(st) + 1, max_mark + 1)
        np.testing.assert_allclose(p.probs, n.probs, atol=1e-4, rtol=0)
        np.testing.assert_allclose(p.log_scores, n.log_scores, atol=1e-4, rtol=0)
        np.testing.assert_allclose(p.probs.sum(1), 1.0, atol=1e-12)
    # the probe must actually vary across boundaries (otherwise prefixes were not seen)
    assert np.abs(packed[0].probs[0] - packed[0].probs[-1]).max() > 1e-3


def test_batching_equals_one_at_a_time(model, tok):
    scaffold, marks = mark_continuations(tok, SCAFFOLD, 13)
    prompts, steps, gold = _rollouts(len(tok), seed=3)
    batched = probe_rollouts(model, prompts, steps, scaffold, marks, gold=gold, batch_size=3)
    for i in range(3):
        one = probe_rollouts(model, prompts[i], steps[i], scaffold, marks, gold=gold[i])
        np.testing.assert_allclose(batched[i].probs, one.probs, atol=1e-5, rtol=0)
        np.testing.assert_allclose(batched[i].eps, one.eps, atol=1e-4, rtol=0)


def test_two_digit_marks_exact_vs_first_token(tok):
    model = toy_model("qwen3", vocab_size=len(tok), seed=2, init_range=0.2)
    scaffold, marks = mark_continuations(tok, SCAFFOLD, 12)
    prompt, steps = _rollouts(len(tok))[0][0], [_rollouts(len(tok))[1][0][0]]
    exact = probe_rollouts(model, prompt, steps, scaffold, marks, temperature=0.7)
    naive = probe_rollouts_naive(model, prompt, steps, scaffold, marks, temperature=0.7)
    np.testing.assert_allclose(exact.probs, naive.probs, atol=1e-4, rtol=0)
    # first-token-only read: marks 1, 10, 11, 12 all get p("1") -> confused
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + steps[0] + scaffold])).logits[0, -1]
    lp = torch.log_softmax(logits / 0.7, -1).double().numpy()
    first = np.exp(lp[[m[0] for m in marks]])
    first /= first.sum()
    assert first[1] == first[10] == first[11] == first[12]
    tv = 0.5 * np.abs(first - exact.probs[-1]).sum()
    assert tv > 0.1, tv
    assert abs(first @ np.arange(13) - exact.expected[-1]) > 0.5


def test_temperature_applied_by_hand(tok):
    model = toy_model("llama", vocab_size=len(tok), seed=4, init_range=0.2)
    scaffold, marks = mark_continuations(tok, SCAFFOLD, 12)
    prompt, steps = [4, 5, 6, 7, 8], [[9, 10, 11]]
    for temp in (0.7, 1.0, 2.0):
        res = probe_rollouts(model, prompt, steps, scaffold, marks, temperature=temp)
        for k, prefix in enumerate([prompt, prompt + steps[0]]):
            for m in (3, 12):
                seq = prefix + scaffold + marks[m]
                with torch.no_grad():
                    logits = model(input_ids=torch.tensor([seq])).logits[0].double()
                lp = torch.log_softmax(logits / temp, -1)
                n = len(marks[m])
                want = sum(lp[len(seq) - n - 1 + t, marks[m][t]].item() for t in range(n))
                assert res.log_scores[k, m] == pytest.approx(want, abs=1e-4)
    p07 = probe_rollouts(model, prompt, steps, scaffold, marks, temperature=0.7).probs
    p10 = probe_rollouts(model, prompt, steps, scaffold, marks, temperature=1.0).probs
    assert np.abs(p07 - p10).max() > 1e-3


def test_eps_and_delta_eps_by_hand():
    probs = np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0], [0.25, 0.5, 0.25], [0.0, 1.0, 0.0]])
    res = belief_from_scores(np.log(probs + 1e-300), gold=1)
    np.testing.assert_allclose(res.probs, probs, atol=1e-12)
    np.testing.assert_allclose(res.expected, [0.5, 2.0, 1.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(res.eps, [0.5, 1.0, 0.0, 0.0], atol=1e-12)
    # delta_eps_k = eps_{k-1} - eps_k: step 1 moved away (-0.5), step 2 back (+1), step 3 neutral
    np.testing.assert_allclose(res.delta_eps, [-0.5, 1.0, 0.0], atol=1e-12)
    assert belief_from_scores(np.zeros((2, 3))).eps is None
    # scale-free: log scores shifted per boundary give the same posterior
    shifted = belief_from_scores(np.log(probs + 1e-300) + np.array([[-700.0], [3.0], [0.0], [50.0]]), gold=1)
    np.testing.assert_allclose(shifted.probs, probs, atol=1e-12)


def test_bool_4d_mask_is_silently_wrong_under_eager():
    """Pitfall (oversubscription is 10-50x slower): transformers 5 passes a 4D mask through untouched; eager ADDS it to the scores."""
    tree = SegmentTree()
    root = tree.add(list(range(3, 10)))
    tree.add([11, 12, 13], root)
    tree.add([14, 15], root)  # a sibling branch: must not see [11, 12, 13]
    ref_ids = torch.tensor([list(range(3, 10)) + [14, 15]])
    for attn, bool_ok in (("eager", False), ("sdpa", True)):
        m = toy_model("qwen3", vocab_size=48, attn=attn, init_range=0.2)
        ids, pos, mask = collate([tree], 0, torch.float32)
        with torch.no_grad():
            ref = m(input_ids=ref_ids).logits[0, -1]
            good = m(input_ids=ids, position_ids=pos, attention_mask=mask).logits[0, -1]
            bad = m(input_ids=ids, position_ids=pos, attention_mask=mask == 0).logits[0, -1]
        assert (good - ref).abs().max() < 1e-4
        assert ((bad - ref).abs().max() < 1e-4) == bool_ok


def test_marks_up_to_26_many_queries(tok):
    """More than 256 scored tokens in one row (exercises the chunked log-softmax) and 27 marks."""
    model = toy_model("qwen3", vocab_size=len(tok), seed=6, init_range=0.2)
    scaffold, marks = mark_continuations(tok, SCAFFOLD, 26)
    rng = np.random.default_rng(7)
    prompt, steps = rng.integers(3, len(tok), 8).tolist(), [rng.integers(3, len(tok), 2).tolist() for _ in range(5)]
    assert len(build_probe_tree(prompt, steps, scaffold, marks)[1]) == 6 * (10 + 17 + 27) > 256
    packed = probe_rollouts(model, prompt, steps, scaffold, marks, gold=20)
    naive = probe_rollouts_naive(model, prompt, steps, scaffold, marks, gold=20)
    np.testing.assert_allclose(packed.probs, naive.probs, atol=1e-4, rtol=0)
    np.testing.assert_allclose(packed.delta_eps, naive.delta_eps, atol=1e-3, rtol=0)


def test_bf16_model_runs_close_to_fp32(tok):
    """The additive mask uses finfo(model dtype).min, so half-precision graders work too."""
    model = toy_model("qwen3", vocab_size=len(tok), seed=1, init_range=0.2)
    scaffold, marks = mark_continuations(tok, SCAFFOLD, 13)
    prompts, steps, gold = _rollouts(len(tok))
    ref = probe_rollouts(model, prompts[:2], steps[:2], scaffold, marks, gold=gold[:2])
    low = probe_rollouts(model.to(torch.bfloat16), prompts[:2], steps[:2], scaffold, marks, gold=gold[:2])
    for a, b in zip(ref, low):
        assert np.isfinite(b.probs).all()
        assert np.abs(a.probs - b.probs).max() < 0.05


# ---------------------------------------------------------------------------------------------------- Eq. 1 itself

class TableLM(torch.nn.Module):
    """A stub causal LM with a hand-built logit table: the logits after token t at position i are
    ``table[t] + i * drift`` (no attention at all, so every number can be computed by hand)."""

    def __init__(self, table, drift):
        super().__init__()
        self.table = torch.nn.Parameter(torch.as_tensor(table, dtype=torch.float64), requires_grad=False)
        self.drift = torch.as_tensor(drift, dtype=torch.float64)
        self.config = SimpleNamespace(pad_token_id=0, eos_token_id=None)

    def forward(self, input_ids, position_ids=None, attention_mask=None, logits_to_keep=None, use_cache=None):
        if position_ids is None:
            position_ids = torch.arange(input_ids.shape[1])[None].expand_as(input_ids)
        logits = self.table[input_ids] + position_ids[..., None].double() * self.drift
        if isinstance(logits_to_keep, torch.Tensor):
            logits = torch.take_along_dim(logits, logits_to_keep[..., None], dim=1)
        return SimpleNamespace(logits=logits)


def _softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


@pytest.fixture(scope="module")
def table_lm():
    rng = np.random.default_rng(11)
    vocab = 12
    return TableLM(rng.normal(0, 2, (vocab, vocab)), rng.normal(0, 0.3, vocab)), vocab


@pytest.mark.parametrize("impl", [probe_rollouts, probe_rollouts_naive], ids=["packed", "naive"])
def test_eq1_next_token_read_against_hand_built_logits(table_lm, impl):
    """Eq. 1: p_k(m) = softmax over the valid marks of logit(m | prefix_k, scaffold) / tau, read at the
    scaffold's last token; m-hat_k, eps_k and delta-eps_k (Eq. 2) follow by hand."""
    model, vocab = table_lm
    table, drift = model.table.numpy(), model.drift.numpy()
    prompt, steps, scaffold = [1, 2, 3], [[4, 5], [6], [7, 8, 2]], [9, 10]
    mark_tokens = [3, 5, 0, 11]  # marks 0..3, one token each
    tau, gold = 0.7, 2
    res = impl(model, prompt, steps, scaffold, [[t] for t in mark_tokens], gold=gold, temperature=tau)
    ends = np.cumsum([len(prompt)] + [len(s) for s in steps])  # prefix length at k = 0..T
    want = []
    for n in ends:
        logits = table[scaffold[-1]] + (n + len(scaffold) - 1) * drift  # position of the last scaffold token
        want.append(_softmax(logits[mark_tokens] / tau))
    want = np.array(want)
    np.testing.assert_allclose(res.probs, want, atol=1e-6)  # the packed path reads float32 logits
    expected = want @ np.arange(4)
    np.testing.assert_allclose(res.expected, expected, atol=1e-6)
    eps = np.abs(expected - gold)
    np.testing.assert_allclose(res.delta_eps, eps[:-1] - eps[1:], atol=1e-6)
    assert res.read == "next_token"
    # log_scores are log p over the whole vocabulary: the mass on valid marks is below one
    full = np.array([_softmax((table[scaffold[-1]] + (n + 1) * drift) / tau) for n in ends])
    np.testing.assert_allclose(res.mark_mass, full[:, mark_tokens].sum(1), atol=1e-6)


@pytest.mark.parametrize("impl", [probe_rollouts, probe_rollouts_naive], ids=["packed", "naive"])
def test_sequence_read_is_eq1_times_terminator_probability(table_lm, impl):
    """The sequence read scores 'm' + terminator: for single-token marks p(m) * p(term | m), renormalised."""
    model, vocab = table_lm
    table, drift = model.table.numpy(), model.drift.numpy()
    prompt, steps, scaffold, term, tau = [1, 2], [[4, 5, 6]], [9], 10, 1.3
    mark_tokens = [3, 5, 0]
    res = impl(model, prompt, steps, scaffold, [[t, term] for t in mark_tokens], temperature=tau)
    for k, n in enumerate([2, 5]):
        pos = n + len(scaffold) - 1
        p_mark = _softmax((table[scaffold[-1]] + pos * drift) / tau)[mark_tokens]
        p_term = np.array([_softmax((table[t] + (pos + 1) * drift) / tau)[term] for t in mark_tokens])
        np.testing.assert_allclose(res.probs[k], p_mark * p_term / (p_mark * p_term).sum(), atol=1e-6)
        eq1 = p_mark / p_mark.sum()
        assert np.abs(res.probs[k] - eq1).max() > 1e-3  # the two reads differ whenever p(term | m) varies
    assert res.read == "sequence"


def test_mark_readout_next_token_and_fallback(tok):
    ro = mark_readout(tok, SCAFFOLD, 9)
    assert ro.read == "next_token" and all(len(m) == 1 for m in ro.marks)
    assert tok.convert_ids_to_tokens([m[0] for m in ro.marks]) == [str(d) for d in range(10)]
    assert single_token_marks(tok, SCAFFOLD, 9) == [m[0] for m in ro.marks]
    # M_q >= 10 with digit-split tokens: no single next token per mark -> the exact sequence read
    assert single_token_marks(tok, SCAFFOLD, 10) is None
    ro = mark_readout(tok, SCAFFOLD, 12)
    assert ro.read == "sequence" and tok.convert_ids_to_tokens(ro.marks[12]) == ["1", "2", "/"]
    seq = mark_readout(tok, SCAFFOLD, 5, read="sequence")
    assert seq.read == "sequence" and tok.convert_ids_to_tokens(seq.marks[3]) == ["3", "/"]
    with pytest.raises(ValueError, match="probe.read"):
        mark_readout(tok, SCAFFOLD, 5, read="first_token")


def test_mixed_reads_in_one_packed_batch(model, tok):
    """Questions with M_q <= 9 (next-token read) and M_q >= 10 (sequence read) in one packed call."""
    small, large = mark_readout(tok, SCAFFOLD, 5), mark_readout(tok, SCAFFOLD, 13)
    prompts, steps, _ = _rollouts(len(tok), seed=5)
    marks = [small.marks, large.marks, small.marks]
    gold = [2, 11, 0]
    packed = probe_rollouts(model, prompts, steps, small.scaffold, marks, gold=gold, batch_size=3)
    naive = probe_rollouts_naive(model, prompts, steps, small.scaffold, marks, gold=gold)
    assert [p.read for p in packed] == ["next_token", "sequence", "next_token"]
    for p, n in zip(packed, naive):
        np.testing.assert_allclose(p.probs, n.probs, atol=1e-4, rtol=0)
