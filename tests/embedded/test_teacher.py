"""Teacher: exact gold without errors, error rates, label consistency, checklists, rewrites."""
import random
from dataclasses import replace

import numpy as np
import pytest

from edit_lib.data.schema import (Coverage, Level, LevelScheme, MarkingPoint, PointsScheme, Question,
                                  Response)
from edit_lib.data.synthetic import WorldConfig, generate_world
from edit_lib.embedded.recipe import grader_vocabulary, text_words
from edit_lib.prompts.rewrite import parse_rewrite
from edit_lib.prompts.grading import read_final_mark, render_grading_prompt, split_steps
from edit_lib.embedded.teacher import (CREDIT_MISCONCEPTION, FINAL, GROUNDING, MISCOUNT, SYNTHESIS, WORDING_MISMATCH,
                                       WRONG_BAND, ErrorModel, teacher_checklist, teacher_grade, teacher_rewrite)

NONE = ErrorModel.none()


@pytest.fixture(scope="module")
def world():
    return generate_world(WorldConfig(seed=11, shape="sas_like", n_questions=80, answers_per_question=5,
                                      ood_questions=20))


@pytest.fixture(scope="module")
def big():
    return generate_world(WorldConfig(seed=2, shape="science_like", n_questions=10, answers_per_question=150,
                                      ood_questions=0, id_test_fraction=0.0))


def _q(scheme):
    return Question("q", "biology", "explain a .", "", scheme, scheme.max_mark)


def test_error_free_teacher_reproduces_gold(world):
    rng = random.Random(0)
    for r in world.responses:
        g = teacher_grade(world.question(r), r, rng, NONE)
        assert g.final_mark == r.gold and g.correct
        assert all(s.label.correct for s in g.steps)
        assert read_final_mark(g.completion, g.max_mark).mark == r.gold


def test_hand_case_pts_format():
    pts = (MarkingPoint("p1", "osmosis moves water membrane", 2.0), MarkingPoint("p2", "diffusion spreads cells", 1.0),
           MarkingPoint("p3", "mitosis divides nucleus", 3.0))
    q = _q(PointsScheme(pts, cap=4.0))
    cov = (Coverage("p1", "verbatim", "osmosis moves water membrane", True),
           Coverage("p2", "absent"),
           Coverage("p3", "paraphrase", "mitosis splits core", True, "plain_a"))
    r = Response("r", "q", "mitosis splits core . osmosis moves water membrane .", 4, "train", cov)
    g = teacher_grade(q, r, random.Random(0), NONE)
    assert g.completion == (
        "step 1: point 1 osmosis moves water membrane ; answer osmosis moves water membrane ; matches ; credit 2\n"
        "step 2: point 2 diffusion spreads cells ; answer none ; missing ; credit 0\n"
        "step 3: point 3 mitosis divides nucleus ; answer mitosis splits core ; same meaning ; credit 3\n"
        "step 4: total 2 + 0 + 3 = 5\n"
        "step 5: capped at 4\n"
        "Final mark: 4/4")
    assert [s.label.kind for s in g.steps] == [GROUNDING] * 3 + [SYNTHESIS] * 2 + [FINAL]
    assert [s.label.point_id for s in g.steps[:3]] == ["p1", "p2", "p3"]


def test_hand_case_lor_and_fractional_pts():
    pts = tuple(MarkingPoint(f"p{i}", f"key{'abcd'[i - 1]} x y") for i in range(1, 5))
    q = _q(LevelScheme(pts, (Level(1, "basic", 1, 2, 1), Level(2, "clear", 3, 6, 3, 2))))
    cov = tuple(Coverage(f"p{i}", "verbatim", f"key{'abcd'[i - 1]} x y", True) for i in range(1, 5))
    r = Response("r", "q", "", 5, "train", cov)
    g = teacher_grade(q, r, random.Random(0), NONE)
    assert g.completion.split("\n")[4:] == ["step 5: count 1 + 1 + 1 + 1 = 4",
                                            "step 6: level 2 clear needs 3 points ; band 3 to 6",
                                            "step 7: mark 3 + 2 x 1 = 5", "Final mark: 5/6"]
    # App. I x0.5 style values: exact sum, then half-up rounding
    q2 = _q(PointsScheme((MarkingPoint("p1", "a b", 0.5), MarkingPoint("p2", "c d", 1.5))))
    r2 = Response("r", "q", "", 2, "train", (Coverage("p1", "verbatim", "a b", True),
                                              Coverage("p2", "verbatim", "c d", True)))
    g2 = teacher_grade(q2, r2, random.Random(0), NONE)
    assert g2.completion.split("\n")[2:] == ["step 3: total 0.5 + 1.5 = 2", "Final mark: 2/2"]
    r3 = replace(r2, gold=1, coverage=(r2.coverage[0], Coverage("p2", "absent")))
    g3 = teacher_grade(q2, r3, random.Random(0), NONE)
    assert g3.completion.split("\n")[2:] == ["step 3: total 0.5 + 0 = 0.5", "step 4: round 0.5 to 1",
                                             "Final mark: 1/2"]


def _rates(ds, errors, seed=0):
    rng = np.random.default_rng(seed)  # numpy Generators work as well as random.Random
    out = {k: [0, 0] for k in ("marked_paraphrase", "paraphrase", "misconception", MISCOUNT, WRONG_BAND)}
    for r in ds.responses:
        g = teacher_grade(ds.question(r), r, rng, errors)
        for s in g.steps:
            lab = s.label
            if lab.kind == GROUNDING and lab.status in ("marked_paraphrase", "paraphrase", "misconception"):
                out[lab.status][0] += not lab.correct
                out[lab.status][1] += 1
            if lab.role in ("total", "count"):
                out[MISCOUNT][0] += lab.error == MISCOUNT
                out[MISCOUNT][1] += 1
            if lab.role == "level":
                out[WRONG_BAND][0] += lab.error == WRONG_BAND
                out[WRONG_BAND][1] += 1
    return {k: a / b for k, (a, b) in out.items()}


def test_error_rates_within_tolerance(big):
    em = ErrorModel(p_reject_marked=0.8, p_reject_paraphrase=0.05, p_credit_misconception=0.15,
                    p_miscount=0.1, p_wrong_band=0.2)
    rates = _rates(big, em)
    assert abs(rates["marked_paraphrase"] - 0.8) < 0.04
    assert abs(rates["paraphrase"] - 0.05) < 0.025
    assert abs(rates["misconception"] - 0.15) < 0.04
    assert abs(rates[MISCOUNT] - 0.1) < 0.03  # a miscount always lands on a valid value here
    assert abs(rates[WRONG_BAND] - 0.2) < 0.05


def test_errors_propagate_in_expected_direction(world):
    reject = ErrorModel(1.0, 1.0, 0.0, 0.0, 0.0)
    credit = ErrorModel(0.0, 0.0, 1.0, 0.0, 0.0)
    rng = random.Random(1)
    n_checked = 0
    for r in world.responses:
        q = world.question(r)
        lost = [p.value for p, c in zip(q.scheme.points, r.coverage) if c.status in ("paraphrase", "marked_paraphrase")]
        gained = [p.value for p, c in zip(q.scheme.points, r.coverage) if c.status == "misconception"]
        g_rej, g_cred = teacher_grade(q, r, rng, reject), teacher_grade(q, r, rng, credit)
        assert g_rej.final_mark <= r.gold <= g_cred.final_mark
        errs = [s for s in g_rej.steps if not s.label.correct]
        assert all(s.label.error == WORDING_MISMATCH and s.text.endswith("credit 0") for s in errs)
        assert len(errs) == len(lost)
        assert all(s.label.error == CREDIT_MISCONCEPTION for s in g_cred.steps if not s.label.correct)
        if q.scheme.kind == "pts" and q.scheme.cap is None:  # exact arithmetic propagation
            assert g_rej.final_mark == r.gold - sum(lost)
            assert g_cred.final_mark == r.gold + sum(gained)
            n_checked += 1
    assert n_checked > 50


def test_miscount_and_band_labels(world):
    rng = random.Random(3)
    seen = set()
    for r in world.responses:
        q = world.question(r)
        g = teacher_grade(q, r, rng, ErrorModel(0.0, 0.0, 0.0, 1.0, 0.0))
        bad = [s for s in g.steps if not s.label.correct]
        assert len(bad) == 1 and bad[0].label.error == MISCOUNT and bad[0].label.kind == SYNTHESIS
        written = float(bad[0].text.rsplit(" = ", 1)[1])
        true = sum(float(s.text.rsplit(" ", 1)[1]) for s in g.steps if s.label.kind == GROUNDING)
        assert abs(written - true) == 1
        assert 0 <= g.final_mark <= q.max_mark
        if q.scheme.kind == "lor":
            g2 = teacher_grade(q, r, rng, ErrorModel(0.0, 0.0, 0.0, 0.0, 1.0))
            lv = [s for s in g2.steps if s.label.role == "level"][0]
            assert lv.label.error == WRONG_BAND
            seen.add(g2.final_mark != r.gold)
    assert True in seen


def test_checklist_correct_by_construction(world):
    for r in world.responses[:100]:
        q = world.question(r)
        lines = teacher_checklist(q, r).split("\n")
        assert len(lines) == len(q.scheme.points) + 1
        for p, c, line in zip(q.scheme.points, r.coverage, lines):
            assert p.text in line  # every marking point verbatim
            assert ("; covered ;" in line) == c.covered
            assert line.split(" ; evidence ")[1].startswith(c.span or "none")
        assert lines[-1] == f"covered {sum(c.covered for c in r.coverage)} of {len(q.scheme.points)} points"
    r = world.responses[0]
    with pytest.raises(ValueError, match="gold"):
        teacher_checklist(world.question(r), replace(r, gold=r.gold + 1))


def test_rewrites_fix_the_step_and_parse(world):
    rng = random.Random(5)
    em = ErrorModel(0.8, 0.05, 0.3, 0.1, 0.2)
    n = 0
    for r in world.responses:
        q = world.question(r)
        g = teacher_grade(q, r, rng, em)
        clean = teacher_grade(q, r, rng, NONE)
        bad = [i for i, s in enumerate(g.reasoning_steps, 1) if not s.label.correct]
        if not bad:
            continue
        n += 1
        i = bad[0]
        block = parse_rewrite(teacher_rewrite(q, r, g, i))
        assert block.location == i and 1 <= block.span <= 3
        if g.reasoning_steps[i - 1].label.kind == GROUNDING:
            assert block.steps == (clean.reasoning_steps[i - 1].text,)  # the corrected judgement, atomic
        # a synthesis rewrite after the single grounding error restates it and reaches the clean step
        only_one = len(bad) == 1 and g.reasoning_steps[i - 1].label.kind == GROUNDING
        first_synth = next(k for k, s in enumerate(g.reasoning_steps, 1) if s.label.kind == SYNTHESIS)
        if only_one:
            b2 = parse_rewrite(teacher_rewrite(q, r, g, first_synth))
            assert b2.span == 2 and b2.steps[-1] == clean.reasoning_steps[first_synth - 1].text
            new = [s.text for s in g.reasoning_steps][:b2.location - 1] + list(b2.steps)
            assert len(new) == first_synth + 1
    assert n > 20
    with pytest.raises(ValueError):
        teacher_rewrite(q, r, g, len(g.reasoning_steps) + 1)


def test_completion_words_in_grader_vocabulary(world):
    vocab = set(grader_vocabulary())
    rng = random.Random(0)
    for r in world.responses[:150]:
        q = world.question(r)
        g = teacher_grade(q, r, rng)
        text = render_grading_prompt(q, r.answer) + g.completion + teacher_checklist(q, r)
        assert text_words(text) <= vocab
        assert split_steps(g.completion) == [s.text for s in g.reasoning_steps]


def test_teacher_rejects_free_text_and_bad_coverage(world):
    from edit_lib.data.schema import FreeTextScheme
    r = world.responses[0]
    q = world.question(r)
    with pytest.raises(TypeError):
        teacher_grade(replace(q, scheme=FreeTextScheme("rubric", 3)), r, random.Random(0))
    with pytest.raises(ValueError):
        teacher_grade(q, replace(r, coverage=r.coverage[1:]), random.Random(0))
