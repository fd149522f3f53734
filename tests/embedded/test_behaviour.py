"""Tests for edit_lib.embedded.behaviour on hand-written completions against a hand-made synthetic question."""
import random

import pandas as pd
import pytest

from edit_lib.embedded.behaviour import analyse_behaviour, analyse_completion, parse_chain
from edit_lib.data.schema import Coverage, Dataset, Level, LevelScheme, MarkingPoint, PointsScheme, Question, Response
from edit_lib.data.synthetic import WorldConfig, generate_world
from edit_lib.embedded.teacher import ErrorModel, teacher_grade
from edit_lib.embedded.tokenizer import canonicalize

P1, P2, P3 = "osmosis moves water membrane", "diffusion spreads particles cells", "mitosis divides nucleus cells"
PTS = Question("q1", "biology", "explain osmosis diffusion and mitosis .", "", PointsScheme(
    (MarkingPoint("p1", P1, 1.0), MarkingPoint("p2", P2, 2.0), MarkingPoint("p3", P3, 1.0))), 4)
LOR = Question("q2", "biology", "explain osmosis diffusion and mitosis .", "", LevelScheme(
    (MarkingPoint("p1", P1), MarkingPoint("p2", P2), MarkingPoint("p3", P3)),
    (Level(1, "basic", 1, 2, 1, 1), Level(2, "clear", 3, 5, 2, 2))), 5)
ANSWER = "osmosis moves water membrane . diffusion basically disperses molecules tissue ."
COV = (Coverage("p1", "verbatim", "osmosis moves water membrane", True),
       Coverage("p2", "marked_paraphrase", "diffusion basically disperses molecules tissue", True, "marked_a"),
       Coverage("p3", "absent"))


def resp(q, gold):
    return Response(f"{q.id}-r", q.id, ANSWER, gold, "train", COV)


def test_credit_on_absent_and_verbatim_quotes():
    text = (f"step 1: point 1 {P1} ; answer osmosis moves water membrane ; matches ; credit 1\n"
            f"step 2: point 2 {P2} ; answer diffusion disperses molecules ; wording differs ; credit 0\n"
            f"step 3: point 3 {P3} ; answer mitosis divides nucleus cells ; matches ; credit 1\n"
            "step 4: total 1 + 0 + 1 = 2\nFinal mark: 2/4")
    rows, ro = analyse_completion(PTS, resp(PTS, 3), text)
    r = {x["point"]: x for x in rows}
    assert r[1]["quote_verbatim"] is True and r[1]["quote_is_span"] is True
    assert r[2]["quote_verbatim"] is False  # words dropped: not word for word
    assert r[2]["wording_mismatch"] is True  # a covered paraphrase rejected
    assert r[3]["credit_absent"] is True and r[3]["quote_verbatim"] is False
    assert ro["final_mark"] == 2 and not ro["correct"] and ro["miscount"] is False
    assert ro["chain_mark"] == 2 and ro["final_consistent"]


def test_canonical_form_parses_the_same():
    text = (f"step 1: point 1 {P1} ; answer none ; missing ; credit 0\n"
            f"step 2: point 2 {P2} ; answer {COV[1].span} ; same meaning ; credit 2\n"
            f"step 3: point 3 {P3} ; answer none ; missing ; credit 0\n"
            "step 4: total 0 + 2 + 0 = 12\nFinal mark: 12/14")
    a = analyse_completion(PTS, resp(PTS, 3), text)
    b = analyse_completion(PTS, resp(PTS, 3), canonicalize(text))
    assert a[1]["sum_stated"] == b[1]["sum_stated"] == 12
    assert a[1]["miscount"] is True and b[1]["miscount"] is True  # 12 != 0 + 2 + 0
    assert a[1]["parse_status"] == "out_of_range"  # 12 > M_q = 4


def test_miscount_detection():
    text = (f"step 1: point 1 {P1} ; answer {P1} ; matches ; credit 1\n"
            f"step 2: point 2 {P2} ; answer {COV[1].span} ; same meaning ; credit 2\n"
            f"step 3: point 3 {P3} ; answer none ; missing ; credit 0\n"
            "step 4: total 1 + 2 + 0 = 4\nFinal mark: 4/4")
    _, ro = analyse_completion(PTS, resp(PTS, 3), text)
    assert ro["miscount"] is True and ro["sum_written"] == 3 and ro["chain_mark"] == 3
    assert not ro["final_consistent"] and ro["final_matches_synthesis"]


def test_wrong_band_detection():
    base = (f"step 1: point 1 {P1} ; answer {P1} ; matches ; credit 1\n"
            f"step 2: point 2 {P2} ; answer {COV[1].span} ; same meaning ; credit 1\n"
            f"step 3: point 3 {P3} ; answer none ; missing ; credit 0\nstep 4: count 1 + 1 + 0 = 2\n")
    right = base + "step 5: level 2 clear needs 2 points ; band 3 to 5\nstep 6: mark 3 + 2 x 0 = 3\nFinal mark: 3/5"
    wrong = base + "step 5: level 1 basic needs 1 points ; band 1 to 2\nstep 6: mark 1 + 1 x 1 = 2\nFinal mark: 2/5"
    _, ok = analyse_completion(LOR, resp(LOR, 3), right)
    _, bad = analyse_completion(LOR, resp(LOR, 3), wrong)
    assert ok["wrong_band"] is False and ok["correct"] and ok["final_consistent"]
    assert bad["wrong_band"] is True and not bad["final_consistent"] and bad["synthesis_mark"] == 2


def test_unparseable_text_is_counted_not_raised():
    _, ro = analyse_completion(PTS, resp(PTS, 3), "point point ; ; credit\nFinal mark")
    assert ro["parse_status"] == "no_mark" and not ro["parsed"] and ro["n_judged"] == 0
    assert parse_chain("").judgements == []


def test_report_against_teacher_rates():
    ds = generate_world(WorldConfig(shape="sas_like", n_questions=20, answers_per_question=5, ood_questions=0))
    rng = random.Random(0)
    rows = [dict(response_id=r.id, rollout_id=k, text=canonicalize(teacher_grade(ds.question(r), r, rng).completion))
            for r in ds.responses for k in range(2)]
    rep = analyse_behaviour(ds, pd.DataFrame(rows))
    s = rep.summary
    assert s["parse_rate"] == 1 and s["credit_absent"] == 0 and s["quote_verbatim"] == 1
    assert s["wording_gap"] > 0.5 and set(rep.by_status["status"]) >= {"absent", "marked_paraphrase"}
    assert {"plain_a", "marked_a"} <= set(rep.by_family["family"])
    assert rep.errors.set_index("opportunity").loc["marked paraphrase", "rate"] > 0.5
    clean = [dict(response_id=r.id, text=teacher_grade(ds.question(r), r, rng, ErrorModel.none()).completion)
             for r in ds.responses]
    assert analyse_behaviour(ds, pd.DataFrame(clean)).summary["accuracy"] == 1


def test_real_data_without_coverage_raises():
    ds = Dataset("x", {PTS.id: PTS}, [Response("r", PTS.id, "a", 0, "train")])
    with pytest.raises(ValueError, match="coverage"):
        analyse_behaviour(ds, pd.DataFrame([dict(response_id="r", text="")]))
