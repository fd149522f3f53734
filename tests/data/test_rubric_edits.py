"""App. I rubric edits: hand-computed cases, exact doubling under LoR A2, counted exclusions."""
import math
from fractions import Fraction

import pytest

from edit_lib.data.rubric_edits import EDITS, apply_edit, regold
from edit_lib.data.schema import (Coverage, Dataset, Level, LevelScheme, MarkingPoint, PointsScheme,
                                  Question, Response)
from edit_lib.data.synthetic import WorldConfig, generate_world


def _pts(values, cap=None):
    pts = tuple(MarkingPoint(id=f"p{i + 1}", text=f"t{i}", value=float(v)) for i, v in enumerate(values))
    s = PointsScheme(points=pts, cap=cap)
    return Question(id="q", subject="s", text="", reference_answer="", scheme=s, max_mark=s.max_mark)


def _lor():
    levels = (Level(1, "basic", 1, 2, 1, 1), Level(2, "clear", 3, 5, 3, 1), Level(3, "thorough", 6, 8, 5, 2))
    s = LevelScheme(points=tuple(MarkingPoint(id=f"p{i + 1}", text="t") for i in range(6)), levels=levels)
    return Question(id="q", subject="s", text="", reference_answer="", scheme=s, max_mark=s.max_mark)


@pytest.mark.parametrize("covered,gold", [((), 0), (("p1",), 1), (("p1", "p2"), 1), (("p3",), 2),
                                          (("p1", "p3"), 2), (("p1", "p2", "p3"), 3)])
def test_pts_half_fractional_case(covered, gold):
    # values 1,1,3 x0.5 -> 0.5,0.5,1.5; totals 0.5->1, 1.0->1, 1.5->2, 2.0->2, 2.5->3 (half-up at the end)
    q = apply_edit(_pts([1, 1, 3]), "pts_x0.5")
    assert [p.value for p in q.scheme.points] == [0.5, 0.5, 1.5]
    assert q.max_mark == 3
    assert q.scheme.gold(covered) == gold


@pytest.mark.parametrize("name,covered,gold,max_mark", [
    ("pts_x1.5", ("p1",), 2, 8),          # 1.5 -> 2 ; max 1.5+1.5+4.5 = 7.5 -> 8
    ("pts_x1.5", ("p1", "p2"), 3, 8),     # 3.0
    ("pts_x1.5", ("p3",), 5, 8),          # 4.5 -> 5
    ("pts_x2.0", ("p1", "p3"), 8, 10),
])
def test_pts_up_rescales(name, covered, gold, max_mark):
    q = apply_edit(_pts([1, 1, 3]), name)
    assert q.max_mark == max_mark and q.scheme.gold(covered) == gold


def test_pts_cap_scaled():
    q = apply_edit(_pts([2, 2, 3], cap=5.0), "pts_x0.5")  # values 1,1,1.5 cap 2.5
    assert q.scheme.cap == 2.5 and q.max_mark == 3
    assert q.scheme.gold(["p1", "p2", "p3"]) == 3  # min(3.5, 2.5) = 2.5 -> 3
    assert q.scheme.gold(["p1"]) == 1


def test_lor_hand_cases():
    q = _lor()
    cov = {0: (), 1: ("p1",), 2: ("p1", "p2"), 3: ("p1", "p2", "p3"), 5: tuple(f"p{i}" for i in range(1, 6)),
           6: tuple(f"p{i}" for i in range(1, 7))}
    base = {c: q.scheme.gold(ids) for c, ids in cov.items()}
    assert base == {0: 0, 1: 1, 2: 2, 3: 3, 5: 6, 6: 8}
    a1 = apply_edit(q, "lor_a1")
    assert {c: a1.scheme.gold(ids) for c, ids in cov.items()} == {0: 0, 1: 3, 2: 4, 3: 5, 5: 8, 6: 10}
    assert a1.max_mark == 10
    b1 = apply_edit(q, "lor_b1")  # +1 / +2 / +2 from lowest to highest band
    assert [(lv.low, lv.high) for lv in b1.scheme.levels] == [(2, 3), (5, 7), (8, 10)]
    assert {c: b1.scheme.gold(ids) for c, ids in cov.items()} == {0: 0, 1: 2, 2: 3, 3: 5, 5: 8, 6: 10}
    a2 = apply_edit(q, "lor_a2")
    assert {c: a2.scheme.gold(ids) for c, ids in cov.items()} == {c: 2 * g for c, g in base.items()}
    assert a2.max_mark == 16


def test_wrong_kind_raises_and_unknown_name():
    with pytest.raises(TypeError):
        apply_edit(_pts([1, 2]), "lor_a1")
    with pytest.raises(TypeError):
        apply_edit(_lor(), "pts_x2.0")
    with pytest.raises(KeyError):
        apply_edit(_lor(), "lor_z9")


@pytest.fixture(scope="module")
def world():
    return generate_world(WorldConfig(seed=5, shape="sas_like", n_questions=40, answers_per_question=5,
                                      ood_questions=10))


def test_regold_lor_a2_doubles_every_gold(world):
    ed = regold(world, "lor_a2")
    before = {r.id: r.gold for r in world.responses}
    assert ed.responses and all(r.gold == 2 * before[r.id] for r in ed.responses)
    assert all(q.scheme.kind == "lor" for q in ed.questions.values())
    for qid, q in ed.questions.items():
        assert q.max_mark == 2 * world.questions[qid].max_mark


def test_regold_counts_exclusions(world):
    n_pts_q = sum(q.scheme.kind == "pts" for q in world.questions.values())
    n_pts_r = sum(world.question(r).scheme.kind == "pts" for r in world.responses)
    ed = regold(world, "lor_a1")
    info = ed.meta["regold"]
    assert info["excluded_questions_other_kind"] == n_pts_q
    assert info["excluded_responses_other_kind"] == n_pts_r
    assert info["kept_responses"] + n_pts_r == len(world.responses)
    # level 0 stays 0; every other LoR gold moves up by exactly 2
    before = {r.id: r.gold for r in world.responses}
    assert all(r.gold == (0 if before[r.id] == 0 else before[r.id] + 2) for r in ed.responses)


def _half_up(x: Fraction) -> int:
    return math.floor(x + Fraction(1, 2))


@pytest.mark.parametrize("name,factor", [("pts_x0.5", Fraction(1, 2)), ("pts_x1.5", Fraction(3, 2)),
                                         ("pts_x2.0", Fraction(2))])
def test_regold_pts_against_exact_fractions(world, name, factor):
    """Gold and M_q recomputed independently from the ORIGINAL scheme: exact fractions, every point value and the
    cap times the factor, the covered total capped and rounded half-up once at the end (App. I)."""
    ed = regold(world, name)
    by_id = {r.id: r for r in ed.responses}
    n_half = n_per_point = 0
    for r in world.responses:
        q = world.question(r)
        if q.scheme.kind != "pts":
            continue
        covered = {c.point_id for c in r.coverage if c.covered}
        vals = {p.id: Fraction(str(p.value)) * factor for p in q.scheme.points}
        cap = None if q.scheme.cap is None else Fraction(str(q.scheme.cap)) * factor
        total = sum((v for pid, v in vals.items() if pid in covered), Fraction(0))
        full = sum(vals.values(), Fraction(0))
        total, full = (total, full) if cap is None else (min(total, cap), min(full, cap))
        assert by_id[r.id].gold == _half_up(total), r.id
        assert ed.question(by_id[r.id]).max_mark == _half_up(full)
        n_half += total.denominator == 2
        n_per_point += sum(_half_up(v) for pid, v in vals.items() if pid in covered) != _half_up(total)
    if factor.denominator == 2:  # the cases that tell half-up-at-the-end from banker's or per-point rounding
        assert n_half > 0 and n_per_point > 0


def test_regold_counts_missing_coverage():
    q = _pts([1, 2])
    covered = (Coverage("p1", "verbatim", "a", True), Coverage("p2", "verbatim", "a", True))
    ds = Dataset("d", {"q": q}, [Response("r1", "q", "a", 1, "train"), Response("r2", "q", "a", 3, "train", covered)])
    ed = regold(ds, "pts_x2.0")
    assert ed.meta["regold"]["excluded_responses_no_coverage"] == 1 and [r.gold for r in ed.responses] == [6]


def test_registry_names():
    assert set(EDITS) == {"lor_a1", "lor_a2", "lor_b1", "pts_x0.5", "pts_x1.5", "pts_x2.0"}


# ------------------------------------------------------------------ gold-only regold (App. I without coverage)

from dataclasses import replace as _replace  # noqa: E402

from edit_lib.data.rubric_edits import gold_only_mark, regold_from_gold  # noqa: E402


@pytest.mark.parametrize("shape", ["sas_like", "science_like"])
def test_gold_only_regold_equals_coverage_regold_on_the_synthetic_world(shape):
    ds = generate_world(WorldConfig(shape=shape, n_questions=24, answers_per_question=6, ood_questions=4,
                                    seed=3))
    for name in EDITS:
        exact = {r.id: r.gold for r in regold(ds, name).responses}
        derived = regold_from_gold(ds, name)
        got = {r.id: r.gold for r in derived.responses}
        assert got, name
        assert set(got) <= set(exact)
        assert all(got[i] == exact[i] for i in got), name
        # the synthetic world's schemes (integral point values, disjoint bands) never need coverage
        assert derived.meta["regold"]["excluded_responses_needs_coverage"] == 0
        assert set(got) == set(exact)


def test_gold_only_needs_coverage_for_fractional_points():
    q = _pts([1, 0.5, 1.5])  # totals 2.5 and 3.0 both give gold 3: the edited gold is not known from it
    for name in ("pts_x0.5", "pts_x1.5", "pts_x2.0"):
        assert gold_only_mark(q, apply_edit(q, name), 3) is None
    q = _pts([1, 2, 3], cap=4.0)
    e = apply_edit(q, "pts_x1.5")  # cap 6.0, total capped at 4 -> 6
    assert gold_only_mark(q, e, 4) == 6 == e.scheme.gold(["p2", "p3"])
    assert gold_only_mark(q, apply_edit(q, "pts_x0.5"), 3) == 2  # 1.5 -> 2 (half-up)


def test_gold_only_lor_cases():
    q = _lor()  # bands 1-2, 3-5, 6-8 (step 2 in the top band)
    cov = {0: (), 1: ("p1",), 3: ("p1", "p2", "p3"), 4: ("p1", "p2", "p3", "p4"),
           5: tuple(f"p{i}" for i in range(1, 6)), 6: tuple(f"p{i}" for i in range(1, 7))}
    for name in ("lor_a1", "lor_a2", "lor_b1"):
        e = apply_edit(q, name)
        for ids in cov.values():
            assert gold_only_mark(q, e, q.scheme.gold(ids)) == e.scheme.gold(ids), (name, ids)
    # overlapping bands: a gold of 2 could be either level, so the edited gold needs coverage
    lv = (Level(1, "a", 1, 3, 1, 1), Level(2, "b", 2, 4, 2, 1))
    s = LevelScheme(points=tuple(MarkingPoint(id=f"p{i}", text="t") for i in range(1, 5)), levels=lv)
    ov = Question(id="o", subject="s", text="", reference_answer="", scheme=s, max_mark=s.max_mark)
    assert gold_only_mark(ov, apply_edit(ov, "lor_a1"), 2) is None


def test_regold_from_gold_counts_what_it_cannot_do():
    frac = _replace(_pts([1, 0.5]), id="frac")
    whole = _replace(_pts([1, 2]), id="whole")
    lor = _replace(_lor(), id="lor")
    rs = [Response(id="a", question_id="frac", answer="x", gold=1, split="train"),
          Response(id="b", question_id="whole", answer="x", gold=2, split="train"),
          Response(id="c", question_id="lor", answer="x", gold=3, split="train")]
    ds = Dataset(name="d", questions={q.id: q for q in (frac, whole, lor)}, responses=rs)
    out = regold_from_gold(ds, "pts_x2.0")
    assert [(r.id, r.gold) for r in out.responses] == [("b", 4)]
    m = out.meta["regold"]
    assert (m["excluded_responses_needs_coverage"], m["excluded_responses_other_kind"]) == (1, 1)
    with pytest.raises(KeyError):
        regold_from_gold(ds, "pts_x3")
