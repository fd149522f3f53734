"""The warm-up's Phase-1 role examples (edit_lib/train/warmup.py): each one passes the checker the suite
applies to the model's own output of that role (checklist parser, rewrite parser + locality + mimicry, InT's
parser + leak filter), on the project's ASAP-format rubric fixture."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from edit_lib.baselines.intervention_sft import OK, screen, sft_completion
from edit_lib.config import ConfigError, WarmupConfig
from edit_lib.data.asap import load_asap
from edit_lib.data.key_elements import element_keywords, match_elements
from edit_lib.data.schema import Dataset, FreeTextScheme, Question, Response
from edit_lib.prompts.rewrite import parse_rewrite
from edit_lib.revision.checklist import Checklist, parse_checklist, contains_span
from edit_lib.revision.generation import check_locality
from edit_lib.revision.mimicry import detect_mimicry
from edit_lib.train import warmup as W
from edit_lib.train import warmup as R
from edit_lib.train.packed_sft import group_batches

FIX = Path(__file__).parents[1] / "fixtures" / "asap_keys"


@pytest.fixture(scope="module")
def ds():
    return load_asap(FIX, ood_sets=(), key_elements=True)


def _agreeing(ds, threshold=0.5):
    q = ds.questions["asap-05"]
    return q, [r for r in ds.split("train") if match_elements(q.scheme, r.answer, threshold).band == r.gold]


def test_every_role_example_passes_the_checker_of_that_role(ds):
    q, rs = _agreeing(ds)
    assert {r.gold for r in rs} >= {0, 1, 2}
    rng = np.random.default_rng(0)
    points = [p.text for p in q.scheme.points]
    for r in rs:
        m = match_elements(q.scheme, r.answer, 0.5)
        prompt, text = R.role_example("checklist", q, r, 0.5, rng)
        cl = parse_checklist(text, points, r.answer)
        assert isinstance(cl, Checklist) and tuple(it.index for it in cl.items if it.covered) == m.present and f"correct mark: {r.gold}" in prompt
        assert "format:\npoint 1 <the point verbatim> ; covered ; evidence" in prompt  # the chat prompt's format
        assert q.scheme.gold([q.scheme.points[i - 1].id for i in tuple(it.index for it in cl.items if it.covered)]) == r.gold
        prompt, text = R.role_example("rewrite", q, r, 0.5, rng)
        block = parse_rewrite(text)
        steps = R.template_attempt(q)
        assert check_locality(steps, block, block.location) == (True, "")
        assert detect_mimicry(block.steps, r.gold, q.max_mark) == []
        assert f"Target for rewriting: Substep {block.location}" in prompt
        assert block.steps == (R.element_step(q, m.present),) and block.span == 1  # one sub-step, no mark
        prompt, text = R.role_example("intervention", q, r, 0.5, rng)
        p = screen(text, len(steps), r.gold)
        assert p.status == OK and p.location == p.first_error == 3
        assert sft_completion(steps, p).startswith("step 1: The rubric awards up to 3 marks.\n")


def test_the_continuation_role_continues_a_revised_prefix_to_the_gold_mark(ds):
    from edit_lib.model.warmup import judgement
    from edit_lib.prompts.grading import read_final_mark
    from edit_lib.segment import segment
    q, rs = _agreeing(ds)
    rng = np.random.default_rng(1)
    seen = set()
    for r in rs:
        m = match_elements(q.scheme, r.answer, 0.5)
        prefix, cont = R.role_example("continuation", q, r, 0.5, rng)
        chain = (prefix + cont).split("\n")
        k = chain.index(R.element_step(q, m.present)) + 1  # the revised step, one step per line
        seen.add(k)
        template = judgement(q.max_mark, r.gold).split("\n")
        assert chain == template[:k - 1] + [R.element_step(q, m.present)] + template[k:]  # only step k differs
        assert prefix.endswith("\n") and read_final_mark(cont, q.max_mark).mark == r.gold
        assert list(segment(prefix + cont, "lines").steps) == chain[:-1]  # the chain's steps, the final line apart
    assert seen == {1, 2, 3}  # the revised step is drawn over the whole attempt


def test_role_examples_are_left_out_with_their_reason(ds):
    q = ds.questions["asap-05"]
    wrong = Response(id="x", question_id=q.id, answer="Chlorophyll absorbs light energy.", gold=3, split="train")
    for role in ("checklist", "rewrite", "intervention", "continuation"):
        assert R.role_example(role, q, wrong, 0.5, np.random.default_rng(0)) == "matcher_disagrees"
    blank = dataclasses.replace(q, reference_answer="", scheme=FreeTextScheme(text="", max_mark_=q.max_mark))
    assert R.role_example("checklist", blank, wrong, 0.5, None) == "no_elements"  # a rubric with no text: no points
    ok = next(r for r in _agreeing(ds)[1])
    with pytest.raises(ValueError, match="unknown role"):
        R.role_example("grade", q, ok, 0.5, None)


def _holistic(q: Question, text: str = "holistic"):
    return FreeTextScheme(text=text, max_mark_=q.max_mark)


def test_short_evidence_is_a_span_of_the_answer_holding_the_keywords(ds):
    q, rs = _agreeing(ds)
    keys = element_keywords([p.text for p in q.scheme.points])
    for r in rs:
        m = match_elements(q.scheme, r.answer, 0.5)
        for i, sentence in zip(m.present, m.evidence):
            ev = R.short_evidence(sentence, keys[i - 1], max_words=4)
            assert contains_span(r.answer, ev) and 1 <= len(ev.split()) <= 4
    assert R.short_evidence("plants need the sun", frozenset({"sun"})) == "sun"


def test_the_element_step_names_every_element_found_by_its_rubric_words(ds):
    q = ds.questions["asap-05"]
    assert R.element_step(q, ()) == "The answer states no key element."
    step = R.element_step(q, (1, 3))
    assert step.startswith("The answer states these key elements: Chlorophyll in the chloroplast absorbs light ... ;")
    assert step.count(" ; ") == 1 and not any(c.isdigit() for c in step)


class _Pol:
    """A stand-in policy for pair building: one token per character, inputs as written."""
    tokenizer = staticmethod(lambda text: {"input_ids": list(text)})
    prompt_style = "chat"

    @staticmethod
    def grading_input(q, answer):
        return answer

    @staticmethod
    def input_text(prompt):
        return prompt


def test_warmup_pairs_give_every_phase1_role_the_same_number_of_examples(ds):
    cfg = WarmupConfig(responses_per_question=8, role_responses_per_question=5, max_length=10**5,
                       roles=["grading", "checklist", "rewrite", "intervention"], steps=7, role_batch_size=2)
    train = Dataset(ds.name, ds.questions, ds.split("train"), ds.meta)
    pairs, groups, rep = W.warmup_pairs(_Pol(), {"k": train}, cfg, seed=0,
                                        thresholds={"asap-05": {"threshold": 0.5}})
    kept = {role: rep["roles"][role]["kept"] for role in cfg.roles}
    assert kept == {"grading": 8, "checklist": 5, "rewrite": 5, "intervention": 5}
    assert rep["roles"]["checklist"]["matcher_disagrees"] == sum(
        match_elements(ds.questions["asap-05"].scheme, r.answer, 0.5).band != r.gold for r in ds.split("train"))
    assert sorted(set(groups)) == ["asap-05", "asap-05/checklist", "asap-05/intervention", "asap-05/rewrite"]
    assert all(c.startswith("<rewrite") for (_, c), g in zip(pairs, groups) if g.endswith("/rewrite"))
    batches = group_batches(groups, W.batch_size_of(cfg), seed=0)
    assert sorted(len(b) for b in batches) == [1, 1, 1, 2, 2, 2, 2, 2, 2, 4, 4]  # roles 2+2+1, grading 4+4
    assert all(len({groups[i] for i in b}) == 1 for b in batches)
    assert [W.role_of_group(g) for g in ("q/1", "set/5/rewrite", "asap-05")] == ["grading", "rewrite", "grading"]
    trained = W.trained_per_role(groups, cfg, seed=0)
    assert sum(s for _, s in trained.values()) == 7 and sum(n for n, _ in trained.values()) == \
        sum(len(batches[s % len(batches)]) for s in range(7))


def test_a_continuation_pair_is_the_grading_input_then_the_revised_prefix(ds):
    cfg = WarmupConfig(responses_per_question=2, role_responses_per_question=3, max_length=10**5,
                       roles=["grading", "continuation"])
    train = Dataset(ds.name, ds.questions, ds.split("train"), ds.meta)
    pairs, groups, rep = W.warmup_pairs(_Pol(), {"k": train}, cfg, seed=0, thresholds={"asap-05": {"threshold": 0.5}})
    assert rep["roles"]["continuation"]["kept"] == 3
    answers = {r.answer for r in train.responses}
    for (prompt, comp), g in zip(pairs, groups):
        if g.endswith("/continuation"):  # _Pol's grading input is the answer itself; the prefix follows it
            head = next(a for a in answers if prompt.startswith(a) and "The answer states" in prompt[len(a):])
            assert prompt[len(head):].endswith("\n") and "Final mark" in comp and "Final mark" not in prompt


def test_warmup_roles_are_checked():
    with pytest.raises(ConfigError, match="roles"):
        WarmupConfig(roles=["grading", "grading"])
    with pytest.raises(ConfigError, match="roles"):
        WarmupConfig(roles=["grading", "essay"])
    with pytest.raises(ConfigError, match="role_batch_size"):
        WarmupConfig(role_batch_size=0)


def test_a_rubric_without_points_teaches_grading_only_and_counts_the_rest(ds):
    q = ds.questions["asap-05"]
    blank = dataclasses.replace(q, reference_answer="", scheme=_holistic(q, text=""))
    free = Dataset(ds.name, {q.id: blank}, ds.split("train"), ds.meta)
    cfg = WarmupConfig(responses_per_question=4, max_length=10**5, roles=["grading", "checklist", "intervention"])
    pairs, groups, rep = W.warmup_pairs(_Pol(), {"k": free}, cfg, seed=0)
    assert set(groups) == {"asap-05"} and len(pairs) == 4
    assert rep["roles"]["checklist"] == {"kept": 0, "too_long": 0, "no_elements": len(free.responses)}
