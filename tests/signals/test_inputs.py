"""Probe and audit inputs cut from real rollouts of the shipped grader (packed == naive on the embedded model, both
probe reads), and free-form reasoning rendered with the Qwen3 chat template, cut into its lines and probed at every
boundary on a tiny random Qwen3."""
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from edit_lib.config import AuditConfig, ProbeConfig
from edit_lib.data.synthetic import WorldConfig, generate_world
from edit_lib.model.policy import load_policy, Policy
from edit_lib.data.schema import MarkingPoint, PointsScheme, Question
from edit_lib.prompts.grading import GRADER_SYSTEM, render_grading_prompt, split_steps
from edit_lib.segment import segment
from edit_lib.signals.grounding import audit_rollouts, audit_rollouts_naive
from edit_lib.signals.probe import masked_contexts, probe_readout, rollout_tokens, segment_ids
from edit_lib.signals.probe import probe_rollouts, probe_rollouts_naive
from edit_lib.embedded.teacher import teacher_grade

from toy_models import qwen_like_tokenizer, toy_model

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def setup():
    model, tok, kind = load_policy("embedded")
    pol = Policy(model, tok, kind, "embedded")
    ds = generate_world(WorldConfig(shape="sas_like", n_questions=4, answers_per_question=1, ood_questions=0,
                                    seed=3, subjects=("history", "geography")))
    rng = random.Random(0)
    items = []
    # two questions with two-digit marks (sequence read) and two with M_q <= 9 (next-token read, Eq. 1)
    chosen = ([r for r in ds.responses if ds.question(r).max_mark >= 10][:2]
              + [r for r in ds.responses if ds.question(r).max_mark <= 9][:2])
    assert len(chosen) == 4
    for r in chosen:
        q = ds.question(r)
        items.append((q, r, teacher_grade(q, r, rng).completion))
    return pol, ds, items


def test_segments_partition_the_tokenisation(setup):
    pol, _, items = setup
    for q, r, completion in items:
        inp = pol.grading_input(q, r.answer)
        toks = rollout_tokens(pol, inp, completion)
        steps = split_steps(completion)
        assert len(toks.steps_ids) == len(steps) > 0
        joined = toks.prompt_ids + [t for s in toks.steps_ids for t in s]
        cut = completion[: completion.index("Final mark")]
        assert joined == pol.tokenizer(inp + cut, add_special_tokens=True)["input_ids"]
        for ids, text in zip(toks.steps_ids, steps):
            assert text.replace(" ", "") in pol.tokenizer.decode(ids).replace(" ", "")  # canonical form splits digits


def test_segment_ids_assigns_tokens_by_start_offset(setup):
    pol, _, _ = setup
    segs = segment_ids(pol.tokenizer, "point 1 ; credit 1\nstep 2 : total 3", [19])
    assert pol.tokenizer.decode(segs[0]).startswith("point") and pol.tokenizer.decode(segs[1]).startswith("step")


@pytest.mark.slow
@pytest.mark.parametrize("read", ["next_token", "sequence"])
def test_probe_packed_equals_naive_on_embedded_grader(setup, read):
    pol, _, items = setup
    cfg = ProbeConfig(read=read)
    prompts, steps, scs, mks, golds, used = [], [], [], [], [], []
    for q, r, completion in items:
        toks = rollout_tokens(pol, pol.grading_input(q, r.answer), completion, "auto")
        ro = probe_readout(pol, cfg.scaffold, cfg.terminator, q.max_mark, cfg.read)
        prompts.append(toks.prompt_ids), steps.append(toks.steps_ids), scs.append(ro.scaffold)
        mks.append(ro.marks), golds.append(r.gold), used.append(ro.read)
    packed = probe_rollouts(pol.model, prompts, steps, scs, mks, gold=golds, temperature=0.7, batch_size=4)
    naive = probe_rollouts_naive(pol.model, prompts, steps, scs, mks, gold=golds, temperature=0.7)
    for a, b in zip(packed, naive):
        assert np.abs(a.probs - b.probs).max() < 1e-4
    assert [a.read for a in packed] == used
    # two-digit marks are in play (sequence read); with next_token, single-digit questions read Eq. 1 exactly
    assert max(q.max_mark for q, _, _ in items) >= 10
    assert used == (["sequence"] * 2 + ["next_token"] * 2 if read == "next_token" else ["sequence"] * 4)


def test_audit_packed_equals_naive_on_embedded_grader(setup):
    pol, _, items = setup
    args = [[], [], [], []]
    for q, r, completion in items[:2]:
        toks = rollout_tokens(pol, pol.grading_input(q, r.answer), completion)
        full = list(pol.tokenizer(pol.grading_input(q, r.answer), add_special_tokens=True)["input_ids"])
        assert toks.prompt_ids == full  # the full context is the rollout's own prompt
        rho, ans = masked_contexts(pol, q, r.answer)
        for acc, x in zip(args, (full, rho, ans, toks.steps_ids)):
            acc.append(x)
    packed = audit_rollouts(pol.model, *args, batch_size=2)
    naive = audit_rollouts_naive(pol.model, *args)
    for a, b in zip(packed, naive):
        for v in a.nll:
            assert np.abs(a.nll[v] - b.nll[v]).max() < 1e-4  # summed NLL of a step, fp32
        assert {x.shape for x in a.nll.values()} == {a.n_tokens.shape}
    assert AuditConfig().nll_reduction == "sum"


def test_select_rollouts_keeps_every_incorrect_rollout_and_is_seeded():
    import pandas as pd

    from edit_lib.signals.tables import select_rollouts

    df = pd.DataFrame(dict(dataset="d", response_id=[f"r{i}" for i in range(50)], rollout_id=0,
                           n_steps=[0 if i % 10 == 0 else 4 for i in range(50)],
                           correct=[i >= 20 for i in range(50)]))
    s = select_rollouts(df, 25, seed=1)  # 18 incorrect with steps, all kept; 7 correct fill the cap
    assert len(s) == 25 and (s.n_steps > 0).all()
    assert (~s.correct).sum() == 18 and s.correct.sum() == 7
    assert s.equals(select_rollouts(df, 25, seed=1)) and not s.equals(select_rollouts(df, 25, seed=2))
    assert len(select_rollouts(df, 10, seed=1)) == 18  # Phase 1 repairs every incorrect rollout (Sec. 2.2)
    assert len(select_rollouts(df, 0)) == 45


# ------------------------------------------------------------------ free-form reasoning from a real chat template

FIXTURES = Path(__file__).parents[1] / "fixtures"
CHAT_Q = Question("qc", "biology", "Explain how water enters a root hair cell.", "",
                  PointsScheme((MarkingPoint("p1", "water moves by osmosis", 2.0),
                                MarkingPoint("p2", "from dilute soil water to the concentrated cell sap", 1.0)),
                               cap=None), 3)
CHAT_ANSWER = "Water goes into the root by osmosis because the soil is wet."
CHAT_REPLIES = {  # what a chat model writes under the one-judgement-per-line instruction, and two looser forms
    "lines": ("Point 1 (osmosis): the answer says 'by osmosis', so it is met: credit 2.\n"
              "Point 2 (dilute to concentrated): the answer only says the soil is wet, no gradient: credit 0.\n"
              "Adding the credits: 2 + 0 = 2.\n"
              "Final mark: 2/3"),
    "paragraphs": ("Point 1 asks for osmosis.\nThe answer names osmosis, so it earns 2 marks.\n\n"
                   "Point 2 asks for the gradient from dilute to concentrated.\nThe answer is silent on it: 0.\n\n"
                   "**Total:** 2 marks out of 3.\n\n**Final mark:** 2/3"),
    "markers": ("1. Osmosis is named in the answer: credit 2.\n2. The concentration gradient is missing: credit 0.\n"
                "3. Total 2 + 0 = 2.\nFinal mark: 2/3"),
}


@pytest.fixture(scope="module")
def chat_policy():
    """A tiny random Qwen3 with a Qwen-like byte-level BPE and the Qwen3 chat template (tests/fixtures)."""
    template = (FIXTURES / "qwen3_chat_template.jinja").read_text()
    corpus = [render_grading_prompt(CHAT_Q, CHAT_ANSWER, style="chat"), GRADER_SYSTEM, *CHAT_REPLIES.values()]
    tok = qwen_like_tokenizer(corpus)
    tok.chat_template = template
    model = toy_model("qwen3", vocab_size=len(tok), seed=3, init_range=0.2)
    return Policy(model, tok, "chat", "toy-qwen3")


@pytest.mark.parametrize("read", ["next_token", "sequence"])
@pytest.mark.parametrize("form", list(CHAT_REPLIES))
def test_free_form_chat_reasoning_segments_and_probes_at_every_boundary(chat_policy, form, read):
    pol, reply = chat_policy, CHAT_REPLIES[form]
    inp = pol.grading_input(CHAT_Q, CHAT_ANSWER)
    assert inp.startswith(f"<|im_start|>system\n{GRADER_SYSTEM}<|im_end|>\n<|im_start|>user\nquestion: ")
    assert inp.endswith("<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert "one judgement per line" in inp and "'Final mark: m/3'" in inp
    seg = segment(reply)
    assert seg.rule == form and seg.n_steps == 3
    toks = rollout_tokens(pol, inp, reply, "auto")
    assert len(toks.steps_ids) == 3
    # the pieces are ONE tokenisation of input + reasoning, cut at the step boundaries
    whole = pol.tokenizer(inp + reply[:seg.bounds[-1]], add_special_tokens=True)["input_ids"]
    assert toks.prompt_ids + [t for s in toks.steps_ids for t in s] == whole
    assert pol.tokenizer.decode(toks.prompt_ids) == inp
    for k, ids in enumerate(toks.steps_ids):  # a merged '.\n\n' stays with the step it ends
        assert pol.tokenizer.decode(ids).strip() == reply[seg.bounds[k]:seg.bounds[k + 1]].strip()
    ro = probe_readout(pol, "Final mark: ", "/", CHAT_Q.max_mark, read)
    assert ro.read == read  # marks 0..3 are single tokens after the scaffold
    packed = probe_rollouts(pol.model, toks.prompt_ids, toks.steps_ids, ro.scaffold, ro.marks, gold=2)
    naive = probe_rollouts_naive(pol.model, toks.prompt_ids, toks.steps_ids, ro.scaffold, ro.marks, gold=2)
    assert packed.probs.shape == (4, 4) and packed.delta_eps.shape == (3,)
    np.testing.assert_allclose(packed.probs, naive.probs, atol=1e-4, rtol=0)
    assert np.abs(packed.probs[0] - packed.probs[-1]).max() > 1e-3  # each boundary sees its own prefix


def test_probe_and_audit_refuse_a_rollout_segmented_by_another_rule():
    from edit_lib.signals.tables import _check_steps

    rec = dict(dataset="d", response_id="r1", rollout_id=0, n_steps=3)
    _check_steps(rec, 3, "auto")
    with pytest.raises(ValueError, match=r"d/r1/0: 01_base_policy recorded n_steps=3 but steps.rule='lines' gives 5"):
        _check_steps(rec, 5, "lines")
