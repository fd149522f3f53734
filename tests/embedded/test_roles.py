"""The noisy teacher's Phase-1 roles (edit_lib/embedded/teacher.py): each rewrite and the InT diagnosis against an
independent computation, the error-free teacher's own grading."""
import numpy as np
import pytest

from edit_lib.baselines.intervention_sft import EMPTY, OK, LEAK, screen
from edit_lib.data.synthetic import MARKED_PARAPHRASE, WorldConfig, generate_world
from edit_lib.embedded.recipe import ROLES, StreamConfig, make_sampler, role_pair
from edit_lib.embedded.teacher import (ErrorModel, Step, StepLabel, teacher_checklist, teacher_grade,
                                       teacher_intervention, teacher_rewrite, training_hints)
from edit_lib.embedded.recipe import grader_vocabulary, text_words
from edit_lib.prompts.rewrite import parse_rewrite

NONE = ErrorModel.none()


@pytest.fixture(scope="module")
def world():
    return generate_world(WorldConfig(shape="sas_like", n_questions=12, answers_per_question=6, ood_questions=0, seed=3))


def _incorrect(world, seed=0, errors=ErrorModel()):
    rng = np.random.default_rng(seed)
    for r in world.responses:
        q = world.question(r)
        g = teacher_grade(q, r, rng, errors)
        if not g.correct:
            yield q, r, g


def test_free_rewrite_from_the_first_error_is_the_clean_grading_from_there(world):
    n = 0
    for q, r, g in _incorrect(world):
        rs = g.reasoning_steps
        first = next(i for i, s in enumerate(rs, start=1) if not s.label.correct)
        clean = teacher_grade(q, r, None, NONE).reasoning_steps
        block = parse_rewrite(teacher_rewrite(q, r, g, first, atomic=False), max_span=None)
        assert block.location == first
        assert list(block.steps) == [s.text for s in clean[first - 1:]]
        n += 1
    assert n >= 10


def test_rewrite_without_noise_equals_the_checklist_rewrite(world):
    for q, r, g in list(_incorrect(world))[:10]:
        for k in range(1, len(g.reasoning_steps) + 1):
            assert teacher_rewrite(q, r, g, k, np.random.default_rng(0), NONE) == teacher_rewrite(q, r, g, k)


def test_rewrite_without_checklist_keeps_the_systematic_wording_error(world):
    always = ErrorModel(p_reject_marked=1.0, p_reject_paraphrase=0, p_credit_misconception=0, p_miscount=0,
                        p_wrong_band=0)
    seen = 0
    for q, r, g in _incorrect(world, errors=always):
        for k, s in enumerate(g.reasoning_steps, start=1):
            if s.label.kind == "grounding" and s.label.status == MARKED_PARAPHRASE:
                noisy = parse_rewrite(teacher_rewrite(q, r, g, k, np.random.default_rng(1), always)).steps[-1]
                fixed = parse_rewrite(teacher_rewrite(q, r, g, k)).steps[-1]
                assert "wording differs ; credit 0" in noisy and "same meaning" in fixed
                seen += 1
    assert seen >= 3


def test_error_free_diagnosis_names_the_first_erroneous_step(world):
    n = 0
    for q, r, g in _incorrect(world):
        text, first = teacher_intervention(q, r, g, np.random.default_rng(0), NONE)
        true_first = next(i for i, s in enumerate(g.reasoning_steps, start=1) if not s.label.correct)
        assert first == true_first
        p = screen(text, len(g.reasoning_steps), r.gold)
        assert p.status in (OK, LEAK) and p.first_error == p.location == true_first
        assert p.text == teacher_grade(q, r, None, NONE).reasoning_steps[true_first - 1].text
        n += 1
    assert n >= 10


def test_a_correct_attempt_gets_an_empty_intervention(world):
    rng = np.random.default_rng(0)
    r = world.responses[0]
    q = world.question(r)
    g = teacher_grade(q, r, rng, NONE)
    text, first = teacher_intervention(q, r, g, rng, NONE)
    assert first is None and screen(text, len(g.reasoning_steps), r.gold).status == EMPTY


def test_noisy_diagnosis_misses_some_errors():
    """With the shipped error model the self-audit is imperfect: it sometimes names no step or another one."""
    world = generate_world(WorldConfig(shape="sas_like", n_questions=30, answers_per_question=6, ood_questions=0,
                                       seed=4))
    hits = misses = 0
    for q, r, g in _incorrect(world, seed=2):
        _, first = teacher_intervention(q, r, g, np.random.default_rng(len(r.id)))
        true_first = next(i for i, s in enumerate(g.reasoning_steps, start=1) if not s.label.correct)
        hits += first == true_first
        misses += first != true_first
    assert hits > 0 and misses > 0


def test_training_hints_use_the_locator_sentences():
    rng = np.random.default_rng(0)
    bad = training_hints(Step("x", StepLabel("grounding", correct=False)), rng)
    assert bad[0].startswith("the expected mark moves away at this substep by")
    assert len(bad) in (4, 5) and all("from the" in h for h in bad[1:4])


def test_every_role_text_is_in_the_vocabulary_and_shares_are_checked(world):
    vocab = set(grader_vocabulary()) | set(text_words(" ".join(r.answer for r in world.responses)))
    rng = np.random.default_rng(0)
    for role in ROLES:
        for r in world.responses[:6]:
            p, t = role_pair(role, world.question(r), r, rng, ErrorModel())
            assert text_words(p + "\n" + t) <= vocab, (role, sorted(text_words(p + "\n" + t) - vocab))
    with pytest.raises(ValueError, match="unknown role"):
        role_pair("poem", world.question(world.responses[0]), world.responses[0], rng, ErrorModel())
    with pytest.raises(ValueError, match="sum below 1"):
        make_sampler(StreamConfig(share_checklist=0.5, share_rewrite=0.6), ErrorModel())
    assert teacher_checklist(world.question(world.responses[0]), world.responses[0]).startswith("point 1")
