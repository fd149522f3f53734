"""The warm-up's prefix-shared trainer (edit_lib/train/packed_sft.py): one packed pass gives the loss and the
gradients of separate plain passes, batches hold one question each and drop nothing, LoRA sits on the asked
layers only, and the schedule is transformers' own."""
import math

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from edit_lib.config import LoraConfig
from edit_lib.train import packed_sft as P


def _model(seed=0):
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      attn_implementation="eager")
    return LlamaForCausalLM(cfg).float()


PAIRS = [([1, 2, 3, 4, 5, 9, 9], [7, 8, 2]),      # prompt ids, completion ids (+ EOS)
         ([1, 2, 3, 4, 5, 11], [6, 2]),
         ([1, 2, 3, 4, 5, 12, 13, 14], [7, 7, 7, 2])]


def _separate_loss(model, pairs, weights=None):
    """The independent computation: one plain causal pass per pair, summed token losses over all tokens (each
    times its weight, over the weights' sum, when ``weights`` gives each pair's)."""
    total, n = 0.0, 0.0
    for k, (p, c) in enumerate(pairs):
        ids = torch.tensor([p + c])
        logits = model(input_ids=ids).logits[0]
        lp = torch.log_softmax(logits.float(), -1)
        for j, t in enumerate(c):
            w = 1.0 if weights is None or weights[k] is None else weights[k][j]
            total = total - w * lp[len(p) + j - 1, t]
            n += w
    return total / n


def test_the_packed_loss_and_gradients_equal_separate_passes():
    model = _model()
    tree, targets = P.pair_tree(PAIRS)
    assert len(tree) == 5 + 5 + 3 + 7  # the shared prefix once, then each remainder
    assert len(targets) == sum(len(c) for _, c in PAIRS)
    packed = P.packed_loss(model, tree, targets)
    packed.backward()
    g_packed = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    plain = _separate_loss(model, PAIRS)
    plain.backward()
    assert packed.item() == pytest.approx(plain.item(), rel=1e-5)
    for a, b in zip(g_packed, (p.grad for p in model.parameters())):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_packs_cut_a_batch_within_the_cap_and_keep_every_pair_in_order():
    assert P.packed_length(PAIRS) == 20 and P.batch_packs(PAIRS) == [[0, 1, 2]]  # the whole batch fits: one pack
    assert P.batch_packs(PAIRS, cap=14) == [[0, 1], [2]]  # 5 + 5 + 3 shared-root tree: 13 tokens; the third alone
    assert P.batch_packs(PAIRS, cap=4) == [[0], [1], [2]]  # a pair longer than the cap stands alone
    for cap in (4, 10, 14, 19, 20):
        packs = P.batch_packs(PAIRS, cap)
        assert [i for pk in packs for i in pk] == [0, 1, 2]
        assert all(len(pk) == 1 or P.packed_length([PAIRS[i] for i in pk]) <= cap for pk in packs)


def test_a_batch_cut_into_packs_gives_the_loss_and_gradients_of_separate_passes():
    """Several packs (``backward_batch``): the token-weighted sum of their losses and their summed gradients are
    the whole batch's mean loss and gradient, checked against separate plain passes; one pack is
    ``packed_loss`` itself, bit for bit."""
    model = _model()
    plain = _separate_loss(model, PAIRS)
    plain.backward()
    g_plain = [p.grad.clone() for p in model.parameters()]
    for cap in (4, 14):
        model.zero_grad()
        loss = P.backward_batch(model, PAIRS, cap)
        assert loss == pytest.approx(plain.item(), rel=1e-5)
        for a, b in zip(g_plain, (p.grad for p in model.parameters())):
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)
    model.zero_grad()
    whole = P.packed_loss(model, *P.pair_tree(PAIRS))
    assert P.backward_batch(model, PAIRS) == float(whole.detach())


def test_a_mark_weighted_loss_equals_separate_weighted_passes_in_one_pack_and_in_several():
    """``model.warmup.mark_weight``: the weighted mean of ``backward_batch`` (one pack and cut into packs) and its
    gradients against separate plain passes weighted token by token; a pair without weights counts 1 a token."""
    weights = [[1.0, 5.0, 1.0], None, [1.0, 1.0, 5.0, 1.0]]
    model = _model()
    plain = _separate_loss(model, PAIRS, weights)
    plain.backward()
    g_plain = [p.grad.clone() for p in model.parameters()]
    assert abs(plain.item() - _separate_loss(model, PAIRS).item()) > 1e-3  # the weights matter
    for cap in (P.PACK_TOKENS, 4, 14):
        model.zero_grad()
        assert P.backward_batch(model, PAIRS, cap, weights) == pytest.approx(plain.item(), rel=1e-5)
        for a, b in zip(g_plain, (p.grad for p in model.parameters())):
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)
    model.zero_grad()
    whole = float(P.packed_loss(model, *P.pair_tree(PAIRS)).detach())
    assert P.backward_batch(model, PAIRS, weights=[None] * 3) == whole


def _word_tokenizer():
    """A fast word-level tokenizer built here (no hub), digits one token each, with offsets."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    words = ["The", "rubric", "awards", "up", "to", "marks", ".", "I", "count", "Final", "mark", ":", "/", "\n",
             "1", "0", "2", "7", "a", "b", "c", "ok", "[UNK]", "</s>"]
    raw = Tokenizer(models.WordLevel({w: i + 3 for i, w in enumerate(words)}, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                 pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.Punctuation()])
    return PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="</s>", unk_token="[UNK]")


def test_completion_weights_fall_on_the_final_lines_mark_tokens_only():
    from edit_lib.model.warmup import judgement
    from edit_lib.prompts.grading import format_final_line
    tok = _word_tokenizer()
    comp = "I count .\n" + format_final_line(10, 12)  # 'Final mark: 10/12': the mark is two digit tokens
    ids = tok(comp, add_special_tokens=False)["input_ids"]
    marks = P.mark_tokens(tok, comp)
    assert [tok.convert_ids_to_tokens(ids[i]) for i in marks] == ["1", "0"]  # not M's '1', '2'
    w = P.completion_weights(marks, len(ids) + 1, 4.0)  # the completion's tokens and the EOS
    assert [tok.convert_ids_to_tokens(i) for i, x in zip(ids, w) if x == 4.0] == ["1", "0"]
    assert len(w) == len(ids) + 1 and sorted(set(w)) == [1.0, 4.0] and w.count(4.0) == 2
    assert P.completion_weights(marks, len(ids) + 1, 1.0) is None  # the plain mean
    role = "point 1 : covered\ncovered 1 of 2 points"  # a Phase-1 role's output ends in no final line
    assert P.mark_tokens(tok, role) == [] and P.completion_weights([], 9, 4.0) is None
    one = judgement(2, 1)
    assert P.completion_weights(P.mark_tokens(tok, one), 40, 3.0).count(3.0) == 1


def test_training_records_the_mark_tokens_loss_and_weighs_them_as_asked():
    """``train_packed``'s curve: each step's loss and, where completions end in a final line, their mark tokens'
    mean loss (``mark_loss``); ``mark_weight`` changes the training, 1 is the plain mean."""
    from edit_lib.model.policy import Policy
    from edit_lib.prompts.grading import format_final_line
    tok = _word_tokenizer()
    pairs = [(f"a b {x}", f"I count .\n{format_final_line(m, 2)}") for x, m in (("a", 0), ("b", 2), ("c", 1))]
    curves = {}
    for w in (1.0, 8.0):
        pol = Policy(model=_model(), tokenizer=tok, kind="tiny", name="toy")
        curves[w] = P.train_packed(pol, pairs * 2, ["q"] * 6, steps=3, batch_size=3, learning_rate=1e-2,
                                   lora=LoraConfig(r=2, alpha=4, dropout=0.0), progress=False,
                                   mark_weight=w).loss_curve
    assert all(set(c) == {"step", "loss", "mark_loss"} for c in curves[1.0] + curves[8.0])
    assert curves[1.0][0]["mark_loss"] == pytest.approx(curves[8.0][0]["mark_loss"], rel=1e-6)  # same start
    assert curves[1.0][0]["loss"] != pytest.approx(curves[8.0][0]["loss"], rel=1e-4)  # weighted mean
    assert curves[1.0][-1]["mark_loss"] != pytest.approx(curves[8.0][-1]["mark_loss"], rel=1e-4)
    pol = Policy(model=_model(), tokenizer=tok, kind="tiny", name="toy")
    plain = P.train_packed(pol, [("a b a", "ok"), ("a b c", "ok .")], ["q"] * 2, steps=1, batch_size=2,
                           learning_rate=1e-2, lora=LoraConfig(r=2, alpha=4, dropout=0.0), progress=False,
                           mark_weight=8.0).loss_curve
    assert set(plain[0]) == {"step", "loss"}  # no final line: nothing to weigh or record


def test_the_shared_root_never_reaches_into_a_completion():
    same = [([1, 2, 3], [4, 5]), ([1, 2, 3], [4, 6])]  # identical prompts, completions share a token
    tree, targets = P.pair_tree(same)
    assert tree.stop[0] == 3 and [t for _, t in targets] == [4, 5, 4, 6]
    model = _model()
    assert P.packed_loss(model, tree, targets).item() == pytest.approx(_separate_loss(model, same).item(), rel=1e-5)
    with pytest.raises(ValueError, match="non-empty prompt"):
        P.pair_tree([([], [4, 2]), ([1], [4, 2])])


def test_batches_hold_one_group_each_and_drop_nothing():
    groups = ["a"] * 7 + ["b"] * 3 + ["c"]
    batches = P.group_batches(groups, 3, seed=0)
    assert sorted(i for b in batches for i in b) == list(range(len(groups)))
    assert all(len({groups[i] for i in b}) == 1 and len(b) <= 3 for b in batches)
    assert sorted(len(b) for b in batches) == [1, 1, 3, 3, 3]  # a: 3+3+1, b: 3, c: 1
    assert P.group_batches(groups, 3, seed=0) == batches  # seeded


def test_lora_sits_on_the_last_layers_only():
    lora = LoraConfig(r=2, alpha=4, dropout=0.0)
    m = P.lora_on_layers(_model(), lora, 1)
    layers = {int(n.split("layers.")[1].split(".")[0]) for n, p in m.named_parameters() if p.requires_grad}
    assert layers == {2}
    every = P.lora_on_layers(_model(), lora, 0)
    assert {int(n.split("layers.")[1].split(".")[0]) for n, p in every.named_parameters() if p.requires_grad} \
        == {0, 1, 2}
    with pytest.raises(ValueError, match="lora_layers must be 0..3"):
        P.lora_on_layers(_model(), lora, 4)


def test_warmup_steps_round_up_as_transformers_warmup_ratio():
    assert [P.warmup_steps(n) for n in (1, 10, 11, 96)] == [1, 1, 2, 10]
    assert all(P.warmup_steps(n) == math.ceil(n * 0.1) for n in range(1, 200))


class _Tok:
    eos_token_id = 2

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [3 + (ord(ch) % 40) for ch in text]}


def test_training_runs_the_asked_steps_calls_the_hook_and_lowers_the_loss():
    from edit_lib.model.policy import Policy
    pol = Policy(model=_model(), tokenizer=_Tok(), kind="tiny", name="toy")
    pairs = [("question one answer a", "ok"), ("question one answer b", "no"), ("question two answer c", "ok")]
    seen = []
    res = P.train_packed(pol, pairs * 4, ["q1", "q1", "q2"] * 4, steps=12, batch_size=4, learning_rate=1e-2,
                         lora=LoraConfig(r=4, alpha=8, dropout=0.0), on_step=lambda m, s: seen.append(s))
    assert seen == list(range(13)) and res.steps == 12 and len(res.loss_curve) == 12
    assert res.loss_curve[-1]["loss"] < res.loss_curve[0]["loss"]
    assert not res.policy.model.training
    with pytest.raises(ValueError, match="one group per pair"):
        P.train_packed(pol, pairs, ["q1"], steps=1, batch_size=1, learning_rate=1e-3, lora=LoraConfig())
