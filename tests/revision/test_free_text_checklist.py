"""Rubric checklist against a free-text rubric (edit_lib/revision/checklist.py; Sec. 2.2): the clause
rule and the span rule on Chinese and English text, every failure reason, drop_lines, the clause share, and the
checklist prompt and source of a free-text question."""
import math

import pytest

from edit_lib.data.schema import FreeTextScheme, MarkingPoint, PointsScheme, Question
from edit_lib.prompts.rewrite import CHECKLIST_TASK, CHECKLIST_TASK_FREE, render_checklist_prompt
from edit_lib.revision.checklist import (Checklist, ChecklistFailure, checklist_context, checklist_rubric, clause_share,
                                         clauses, is_span, parse_free_checklist, rubric_text, span_tokens, verify_free)

# SAS-Bench History item (reference answer of the unlabelled copy's first record, shortened)
ZH_RUBRIC = "（1）不同之处，第五琦：官营专卖，官府专利。\n（2）促进盐业发展：增加政府财政收入；有助于社会稳定。"
ZH_ANSWER = "刘晏的改革促进盐业发展，也增加了财政收入。"
EN_RUBRIC = "Award 1 mark each: the heart pumps blood; valves stop backflow. Pressure is 6.5 kPa."
EN_ANSWER = "the heart pumps blood round the body"


def test_clauses_chinese_cut_at_cjk_punctuation_and_drop_enumerators():
    assert clauses(ZH_RUBRIC) == ["不同之处", "第五琦", "官营专卖", "官府专利", "促进盐业发展", "增加政府财政收入",
                                  "有助于社会稳定"]


def test_clauses_english_keep_decimals_whole():
    assert clauses(EN_RUBRIC) == ["Award 1 mark each", "the heart pumps blood", "valves stop backflow",
                                  "Pressure is 6.5 kPa"]


def test_span_tokens_cjk_one_token_per_character_and_spaced_digits_joined():
    assert span_tokens("增加 财政，收入") == list("增加财政收入")
    assert span_tokens("mark 1 2 / 2 6 ; Heart") == ["mark", "12", "26", "heart"]


@pytest.mark.parametrize("hay,needle,expected", [
    (ZH_RUBRIC, "增加政府财政收入", True),
    (ZH_RUBRIC, "政府财政", True),               # part of a clause is a span (one token per character)
    (ZH_RUBRIC, "增加 政府 财政收入。", True),    # whitespace and punctuation ignored
    (ZH_RUBRIC, "增加国家财政收入", False),
    (ZH_RUBRIC, "官营专卖官府专利", True),         # across a clause boundary: still a span of the text
    (ZH_RUBRIC, "官府专利促进盐业发展", False),    # the enumerator (2) stands between: not a span
    (EN_RUBRIC, "The heart, pumps blood", True),
    (EN_RUBRIC, "heart pump", False),              # whole tokens only (English words are not cut)
    (EN_RUBRIC, "6.5 kPa", True),
    (EN_RUBRIC, "6 kPa", False),
    (EN_RUBRIC, " ; ", False),                     # nothing to match
])
def test_is_span(hay, needle, expected):
    assert is_span(hay, needle) is expected


def _zh(lines):
    return "\n".join(lines)


ZH_GOOD = _zh(["point 1 促进盐业发展 ; covered ; evidence 促进盐业发展",
               "point 2 增加政府财政收入 ; not covered ; evidence none",
               "point 3 有助于社会稳定 ; not covered ; evidence none",
               "covered 1 of 3 points"])
EN_GOOD = _zh(["point 1 the heart pumps blood ; covered ; evidence the heart pumps blood",
               "point 2 valves stop backflow ; not covered ; evidence none",
               "covered 1 of 2 points"])


def test_a_colon_keeps_a_point_that_starts_with_a_number_apart_from_its_index():
    rubric = "速度为 600 m/s；高度为 20 m"
    ok = "point 1: 600 m/s ; not covered ; evidence none\npoint 2: 高度为 20 m ; not covered ; evidence none\n" \
         "covered 0 of 2 points"
    assert isinstance(parse_free_checklist(ok, rubric, ""), Checklist)
    joined = ok.replace("point 1: 600", "point 1 600")  # read as point 1600
    assert parse_free_checklist(joined, rubric, "").reason == "missing_points"


def test_good_chinese_and_english_checklists():
    c = parse_free_checklist(ZH_GOOD, ZH_RUBRIC, ZH_ANSWER)
    assert isinstance(c, Checklist) and c.n_points == 3 and tuple(it.index for it in c.items if it.covered) == (1,)
    c = parse_free_checklist(EN_GOOD, EN_RUBRIC, EN_ANSWER)
    assert isinstance(c, Checklist) and c.n_points == 2 and c.items[0].evidence == "the heart pumps blood"


@pytest.mark.parametrize("text,reason", [
    ("", "empty"),
    ("a remark\n" + ZH_GOOD, "malformed_line"),
    (ZH_GOOD.replace("; covered ;", "; partial ;"), "unknown_verdict"),
    (ZH_GOOD.replace("point 1 ", "point 0 "), "point_out_of_range"),
    (ZH_GOOD.replace("point 2 增加政府财政收入", "point 2 促进盐业发展"), "duplicate_point"),
    (ZH_GOOD.replace("point 3 ", "point 2 "), "duplicate_point"),
    (ZH_GOOD.replace("point 3 ", "point 4 "), "missing_points"),
    (ZH_GOOD.replace("增加政府财政收入", "增加国家财政收入"), "point_not_verbatim"),
    (ZH_GOOD.replace("evidence 促进盐业发展", "evidence none"), "covered_without_evidence"),
    (ZH_GOOD.replace("evidence 促进盐业发展", "evidence 促进经济发展"), "evidence_not_in_answer"),
    (ZH_GOOD.replace("\ncovered 1 of 3 points", ""), "count_missing"),
    (ZH_GOOD.replace("covered 1 of 3", "covered 2 of 3"), "count_inconsistent"),
    (EN_GOOD.replace("valves stop backflow", "valves stop blood"), "point_not_verbatim"),
])
def test_failure_reasons(text, reason):
    f = parse_free_checklist(text, ZH_RUBRIC if "促进" in text or not text or "remark" in text else EN_RUBRIC,
                             ZH_ANSWER if "促进" in text else EN_ANSWER)
    assert isinstance(f, ChecklistFailure) and f.reason == reason, f


def test_drop_lines_keeps_the_lines_that_verify_alone():
    bad = ZH_GOOD.replace("增加政府财政收入", "增加国家财政收入")
    kept = verify_free(bad, ZH_RUBRIC, ZH_ANSWER)[1]
    assert kept.split("\n") == [bad.split("\n")[0], bad.split("\n")[2]]  # point 2 and the count line dropped
    assert verify_free(ZH_GOOD, ZH_RUBRIC, ZH_ANSWER)[1] == ZH_GOOD


def test_clause_share_counts_the_clauses_a_point_covers_or_lies_in():
    # 7 clauses: the 3 listed ones, and '官府专利' lies in the point '官营专卖官府专利' (which spans two clauses)
    assert clause_share(["促进盐业发展", "增加政府财政收入", "有助于社会稳定"], ZH_RUBRIC) == pytest.approx(3 / 7)
    assert clause_share(["官营专卖官府专利"], ZH_RUBRIC) == pytest.approx(2 / 7)
    assert clause_share(["财政"], ZH_RUBRIC) == pytest.approx(1 / 7)  # a point inside a clause
    assert math.isnan(clause_share(["x"], "（1）。"))
    parsed, text, share = verify_free(ZH_GOOD, ZH_RUBRIC, ZH_ANSWER)
    assert isinstance(parsed, Checklist) and text == ZH_GOOD and share == pytest.approx(3 / 7)
    bad = ZH_GOOD.replace("增加政府财政收入", "增加国家财政收入")
    parsed, text, share = verify_free(bad, ZH_RUBRIC, ZH_ANSWER)
    assert parsed.reason == "point_not_verbatim" and share == pytest.approx(2 / 7)  # the verified points only


def _question(scheme, ref="促进盐业发展 ; 增加政府财政收入"):
    return Question("q1", "history", "说明刘晏改革榷盐法的意义。", ref, scheme, 4)


def test_rubric_text_and_source_of_a_question():
    q = _question(FreeTextScheme("意义：促进盐业发展。", 4))
    assert rubric_text(q) == "促进盐业发展 ; 增加政府财政收入\n意义：促进盐业发展。"
    assert checklist_rubric(q) == "free_text"
    assert checklist_rubric(_question(FreeTextScheme("", 4), ref="")) == "none"
    pts = _question(PointsScheme((MarkingPoint("p1", "heart pumps blood"),)))
    assert checklist_rubric(pts) == "points"
    with pytest.raises(TypeError, match="lists its points"):
        rubric_text(pts)


def test_free_text_checklist_prompt_shows_the_reference_and_asks_to_quote_it():
    q = _question(FreeTextScheme("意义：促进盐业发展。", 4))
    p = render_checklist_prompt(q, ZH_ANSWER, 2, style="chat")
    assert "reference answer: 促进盐业发展 ; 增加政府财政收入" in p and "意义：促进盐业发展。" in p
    assert CHECKLIST_TASK_FREE in p and CHECKLIST_TASK not in p and "point 1: <words of the rubric>" in p
    pts = _question(PointsScheme((MarkingPoint("p1", "heart pumps blood"),)))
    assert CHECKLIST_TASK in render_checklist_prompt(pts, "x", 1, style="chat")
    assert "reference answer" not in render_checklist_prompt(pts, "x", 1, style="chat")
    # the tiny grader's prompt is the one its weights were trained on, for either kind of rubric
    tiny = render_checklist_prompt(q, ZH_ANSWER, 2)
    assert tiny.endswith(CHECKLIST_TASK) and "reference answer" not in tiny and "意义：促进盐业发展。" in tiny


def test_keep_gives_a_failed_free_text_checklist_to_the_reviser():
    class Row:  # one write_checklists row
        status, text, verified_text, detail = "point_not_verbatim", "T", "V", ""
    assert checklist_context(Row, "keep") == ("T", None)
    assert checklist_context(Row, "drop_lines") == ("V", None)
    assert checklist_context(Row, "block") == (None, "checklist_point_not_verbatim")


def test_real_sasbench_rubrics_cut_into_clauses_that_verify_as_points():
    """On SAS-Bench's own Chinese rubrics (the unlabelled copy: reference answer + analysis, LaTeX in Physics):
    every rubric has clauses, a checklist listing each distinct clause verbatim verifies, and an altered clause
    does not."""
    from edit_lib.data.registry import data_root
    from edit_lib.data.sasbench import load_sasbench_unlabelled
    path = data_root() / "sas_bench_unlabelled"
    if not path.exists():
        pytest.skip(f"SAS-Bench unlabelled copy not found at {path} (set EDIT_SUITE_DATA to the folder holding it)")
    questions = load_sasbench_unlabelled(path).questions.values()
    assert len(questions) > 100
    for q in questions:
        rubric = rubric_text(q)
        distinct = {}
        for c in clauses(rubric):  # a clause the rubric repeats is one point
            distinct.setdefault(tuple(span_tokens(c)), c)
        cl = list(distinct.values())
        assert cl, q.id
        lines = [f"point {i}: {c} ; not covered ; evidence none" for i, c in enumerate(cl, start=1)]
        parsed = parse_free_checklist("\n".join(lines + [f"covered 0 of {len(cl)} points"]), rubric, "")
        assert isinstance(parsed, Checklist) and parsed.n_points == len(cl), (q.id, parsed)
        assert clause_share(cl, rubric) == 1.0
        assert not is_span(rubric, cl[0] + "虚构之词"), q.id
