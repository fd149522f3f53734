"""Rubric-checklist parser (Sec. 2.2): teacher checklists parse to the coverage ground truth; every failure
reason is reachable and named."""

import pytest

from edit_lib.data.schema import MarkingPoint, PointsScheme, Question
from edit_lib.data.synthetic import WorldConfig, generate_world
from edit_lib.embedded.teacher import teacher_checklist
from edit_lib.embedded.tokenizer import canonicalize
from edit_lib.revision.checklist import Checklist, ChecklistFailure, parse_checklist, scheme_points

POINTS = ["enzymes increases oxygen genes", "transpiration limits cells roots"]
ANSWER = "transpiration limits cells roots . enzymes lowers proteins genes ."
GOOD = ("point 1 enzymes increases oxygen genes ; not covered ; evidence enzymes lowers proteins genes ; contradicts\n"
        "point 2 transpiration limits cells roots ; covered ; evidence transpiration limits cells roots\n"
        "covered 1 of 2 points")


@pytest.fixture(scope="module")
def world():
    return generate_world(WorldConfig(seed=4, shape="sas_like", n_questions=12, answers_per_question=10))


def test_teacher_checklists_parse_to_ground_truth(world):
    for r in world.responses:
        q = world.question(r)
        text = teacher_checklist(q, r)
        for form in (text, canonicalize(text)):
            c = parse_checklist(form, scheme_points(q), r.answer)
            assert isinstance(c, Checklist), (r.id, c)
            assert [it.covered for it in c.items] == [cov.covered for cov in r.coverage]
            assert c.n_covered == sum(cov.covered for cov in r.coverage) and c.n_points == len(r.coverage)
            assert [it.evidence is None for it in c.items] == [cov.span is None for cov in r.coverage]


def test_good_hand_checklist():
    c = parse_checklist(GOOD, POINTS, ANSWER)
    assert isinstance(c, Checklist)
    assert tuple(it.index for it in c.items if it.covered) == (2,)
    assert c.items[0].contradicts and not c.items[1].contradicts
    assert c.items[1].evidence == "transpiration limits cells roots"


def test_multi_digit_point_in_canonical_form():
    pts = [f"concept{i} holds" for i in range(1, 13)]
    lines = [f"point {' '.join(str(i))} concept{i} holds ; not covered ; evidence none" for i in range(1, 13)]
    c = parse_checklist("\n".join(lines + ["covered 0 of 1 2 points"]), pts, "nothing relevant")
    assert isinstance(c, Checklist) and c.n_points == 12


@pytest.mark.parametrize("text,reason", [
    ("", "empty"),
    ("the answer looks fine\n" + GOOD, "malformed_line"),
    (GOOD.replace("; covered ;", "; partial ;"), "unknown_verdict"),
    (GOOD.replace("point 2", "point 3"), "point_out_of_range"),
    (GOOD.replace("point 2 transpiration limits cells roots ; covered",
                  "point 1 transpiration limits cells roots ; covered"), "duplicate_point"),
    ("\n".join(GOOD.split("\n")[1:]), "missing_points"),
    (GOOD.replace("point 2 transpiration limits cells", "point 2 transpiration limits some cells"),
     "point_not_verbatim"),
    (GOOD.replace("covered ; evidence transpiration limits cells roots", "covered ; evidence none"),
     "covered_without_evidence"),
    (GOOD.replace("evidence transpiration limits cells roots", "evidence transpiration stops cells roots"),
     "evidence_not_in_answer"),
    (GOOD.replace("evidence transpiration limits cells roots", "evidence transpiration limits cell"),
     "evidence_not_in_answer"),  # not a whole-token span
    ("\n".join(GOOD.split("\n")[:2]), "count_missing"),
    (GOOD.replace("covered 1 of 2", "covered 2 of 2"), "count_inconsistent"),
    (GOOD.replace("covered 1 of 2", "covered 1 of 3"), "count_inconsistent"),
])
def test_failure_reasons(text, reason):
    f = parse_checklist(text, POINTS, ANSWER)
    assert isinstance(f, ChecklistFailure), f
    assert f.reason == reason, f


def test_failure_detail_names_the_line():
    f = parse_checklist(GOOD.replace("; covered ;", "; partial ;"), POINTS, ANSWER)
    assert "line 2" in f.detail and "partial" in f.detail


def test_free_text_scheme_has_no_points():
    from edit_lib.data.schema import FreeTextScheme
    q = Question("q", "s", "t", "", FreeTextScheme("award marks", 3), 3)
    with pytest.raises(TypeError, match="q"):
        scheme_points(q)
    q2 = Question("q2", "s", "t", "", PointsScheme((MarkingPoint("p1", "a b"),)), 1)
    assert scheme_points(q2) == ["a b"]


def test_norm_joins_canonical_digits_and_decimals():
    from edit_lib.revision.checklist import contains_span, norm, numbers
    assert norm("Final mark : 1 2 / 1 4") == norm("Final mark: 12/14") == "final mark : 12 / 14"
    assert norm("round 6 . 5 to 7") == "round 6.5 to 7"
    assert numbers("total 0 + 2 + 1 0 = 1 2") == [0.0, 2.0, 10.0, 12.0]
    assert contains_span("a b c .", "b c") and not contains_span("a bc", "b")
