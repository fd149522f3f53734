"""InT-SFT baseline's pure logic (Sec. 3 Baselines; App. B; Yang et al. 2026): sub-steps, prompt, parser, leak
filter, SFT target and outcome filter, each against hand-built cases."""
import random

import pytest

from edit_lib.baselines.intervention_sft import (AFTER_ERROR, BAD_INDEX, BEYOND_T, EMPTY, LEAK, NO_FIRST_ERROR, NO_INTERVENTION, OK, REASONS, InterventionParse, leaked_forms, number_word_pattern, parse_intervention, screen, sft_completion, split_substeps)
from edit_lib.config import IntConfig
from edit_lib.prompts.rewrite import INT_FORMAT, INT_TASK, render_int_prompt
from edit_lib.config import RevisionConfig
from edit_lib.data.schema import MarkingPoint, PointsScheme, Question
from edit_lib.prompts.grading import render_scheme
from edit_lib.segment import split_steps

Q = Question("q1", "bio", "explain osmosis", "", PointsScheme((MarkingPoint("p1", "water moves", 1.0),
                                                               MarkingPoint("p2", "membrane", 1.0))), 2)
ROLLOUT = "step 1: point 1 is met , 1 mark\nstep 2: point 2 is not met , 0 marks\nFinal mark: 1/2"


def _output(err="2", loc="2", body="point 2 is met : the answer says membrane", log="step 1: correct"):
    return (f"<verification>\n{log}\n</verification>\n<first_error step=\"{err}\">membrane is there</first_error>\n"
            f"<intervention step=\"{loc}\">{body}</intervention>")


# ---------------------------------------------------------------- sub-steps

def test_substeps_are_the_grader_steps_and_blank_line_split_is_degenerate():
    assert split_substeps(ROLLOUT) == ["point 1 is met , 1 mark", "point 2 is not met , 0 marks"]
    # InT's own blank-line split sees one sub-step in a one-step-per-line rollout: no location to choose
    assert split_substeps(ROLLOUT, "paragraphs") == ["point 1 is met , 1 mark step 2: point 2 is not met , 0 marks"]
    assert split_substeps("first block\nmore\n\nsecond block\nFinal mark: 1/2", "paragraphs") == [
        "first block more", "second block"]
    with pytest.raises(ValueError, match="steps.rule"):
        split_substeps(ROLLOUT, "blank")


# ---------------------------------------------------------------- prompt

def test_prompt_holds_every_section_in_order():
    p = render_int_prompt(Q, "water moves across", 2, ["point 1 is met", "point 2 is not met"])
    expected = "\n".join(["question: explain osmosis", render_scheme(Q), "answer: water moves across",
                          "reference: correct mark = 2 / 2", "attempt:", "step 1: point 1 is met",
                          "step 2: point 2 is not met", INT_TASK, INT_FORMAT])
    assert p == expected
    for tag in ("<verification>", '<first_error step="i">', '<intervention step="i">'):
        assert tag in p
    with pytest.raises(ValueError, match="no sub-steps"):
        render_int_prompt(Q, "a", 1, [])
    with pytest.raises(ValueError, match="gold mark 3 outside 0..2"):
        render_int_prompt(Q, "a", 3, ["x"])


def test_every_word_of_the_prompt_is_in_the_tiny_vocabulary():
    from edit_lib.embedded.recipe import grader_vocabulary, text_words
    template = " ".join([INT_TASK, INT_FORMAT, "question answer reference correct mark attempt step"])
    assert text_words(template) - set(grader_vocabulary()) == set()


# ---------------------------------------------------------------- parser

def test_parse_a_well_formed_output():
    p = parse_intervention(_output(), 2)
    assert p == InterventionParse(OK, 2, 2, "point 2 is met : the answer says membrane", "step 1: correct")


@pytest.mark.parametrize("text,status", [
    ("", NO_INTERVENTION),
    ("no tags at all", NO_INTERVENTION),
    ('<intervention step="2">x', NO_INTERVENTION),  # unclosed
    ('<intervention step="2">x</intervention>', NO_FIRST_ERROR),
    (_output(err="two"), BAD_INDEX),
    (_output(err="0"), BAD_INDEX),
    (_output(loc=""), BAD_INDEX),
    (_output(loc="-1"), BAD_INDEX),
    (_output(loc="1.5"), BAD_INDEX),
    (_output(err="3"), BEYOND_T),
    (_output(loc="7"), BEYOND_T),
    (_output(body="   \n "), EMPTY),
    (_output(body="step 2:"), EMPTY),
    (_output(err="1", loc="2"), AFTER_ERROR),
])
def test_parse_failure_reasons(text, status):
    assert parse_intervention(text, 2).status == status


def test_parse_canonical_form_last_block_and_one_line_step():
    canonical = ('< verification >\nstep 1 : correct\n< / verification >\n< first _ error step = " 1 2 " > '
                 'x < / first _ error >\n< intervention step = " 1 0 " >\nstep 1 0 : point 3\nis met\n'
                 '< / intervention >')
    p = parse_intervention(canonical, 12)
    assert (p.status, p.first_error, p.location, p.text) == (OK, 12, 10, "point 3 is met")
    two = _output(loc="1", body="early") + "\n" + _output(loc="2", body="late")
    assert parse_intervention(two, 2).location == 2 and parse_intervention(two, 2).text == "late"
    assert parse_intervention(_output(log="x").replace("<verification>", "<v>"), 2).verification is None


def test_parser_never_raises_on_model_output():
    rng = random.Random(0)
    pieces = ["<intervention", ">", "</intervention>", '<first_error step="', '"', "1", "x", "\n", "step 2:",
              "</first_error>", "<verification>", "=", " "]
    for _ in range(500):
        p = parse_intervention("".join(rng.choice(pieces) for _ in range(rng.randint(0, 30))), rng.randint(1, 4))
        assert p.status == OK or p.status in REASONS


# ---------------------------------------------------------------- leak filter

@pytest.mark.parametrize("text,gold,forms", [
    ("the answer earns 2 marks", 2, ("digit",)),
    ("so it is 2/4 overall", 2, ("fraction",)),
    ("so it is 2 / 4 overall", 2, ("fraction",)),
    ("this earns two marks", 2, ("word",)),
    ("Two of them hold", 2, ("word",)),
    ("2 marks , two points", 2, ("digit", "word")),
    ("point 2 is met", 2, ()),            # an index, not a mark
    ("step 2 was wrong", 2, ()),
    ("the total is out of 4/2", 2, ()),   # the denominator is the public maximum
    ("12 words long", 2, ()),             # 12 is another number (InT's substring test would drop it)
    ("1 2 words long", 2, ()),            # the tokenizer's form of 12
    ("1 2 words long", 12, ("digit",)),
    ("a value of 1.2 here", 2, ()),       # a decimal
    ("a value of 1 . 2 here", 2, ()),
    ("network", 1, ()),                   # "one" inside a word is not the word
    ("someone", 1, ()),
    ("each one counts", 1, ("word",)),    # a pronoun counts too (strict, as InT)
    ("zero marks", 0, ("word",)),
    ("0 marks", 0, ("digit",)),
    ("twenty-one points", 21, ("word",)),
    ("twenty one points", 21, ("word",)),
    ("twenty one points", 20, ()),
    ("twenty points", 20, ("word",)),
    ("", 3, ()),
])
def test_leak_forms(text, gold, forms):
    assert leaked_forms(text, gold) == forms


def test_index_words_are_a_parameter_and_number_words_stop_at_99():
    assert leaked_forms("point 2 is met", 2, index_words=()) == ("digit",)
    assert leaked_forms("level 2 applies", 2) == ("digit",)
    assert leaked_forms("level 2 applies", 2, index_words=("level",)) == ()
    assert number_word_pattern(100) is None and number_word_pattern(-1) is None
    assert number_word_pattern(99).search("ninety nine") and number_word_pattern(13).search("Thirteen")


def test_screen():
    leak = screen(_output(body="so the answer earns 2 marks"), 2, gold=2)
    assert (leak.status, leak.location, leak.text) == (LEAK, 2, "so the answer earns 2 marks")
    ok = screen(_output(), 2, gold=1)
    assert ok.status == OK  # "point 2" is an index; gold 1 not stated
    assert screen("nothing", 2, gold=1).status != OK


# ---------------------------------------------------------------- SFT target and outcome filter

def test_sft_target_is_prefix_plus_intervention_without_continuation_or_final_line():
    steps = ["point 1 is met", "point 2 is not met", "total 1"]
    p = parse_intervention(_output(err="2", loc="2", body="point 2 is met : membrane"), 3)
    target = sft_completion(steps, p)
    assert target == "step 1: point 1 is met\nstep 2: point 2 is met : membrane\n"
    assert "final mark" not in target.lower() and "total 1" not in target
    assert split_steps(target) == ["point 1 is met", "point 2 is met : membrane"]  # segments back to T' = 2
    first = InterventionParse(OK, 1, 1, "x")
    assert sft_completion(steps, first) == "step 1: x\n"
    with pytest.raises(ValueError, match="status 'ok'"):
        sft_completion(steps, InterventionParse(LEAK, 1, 1, "x"))
    with pytest.raises(ValueError, match="beyond the 3 sub-steps"):
        sft_completion(steps, InterventionParse(OK, 4, 4, "x"))
    lines = sft_completion(steps, p, "lines")  # a chain of plain lines keeps its own format (no markers)
    assert lines == "point 1 is met\npoint 2 is met : membrane\n" and split_steps(lines, "lines") == split_steps(target)
    assert sft_completion(steps, first, "paragraphs") == "x\n\n"
    with pytest.raises(ValueError, match="resolved rule"):
        sft_completion(steps, first, "auto")


def test_config_uses_the_same_n_as_edit():
    cfg = IntConfig()
    assert cfg.n_continuations == RevisionConfig().n_continuations == 4
    assert cfg.rule == "auto" and cfg.index_words == ("point", "step") and cfg.n_proposals == 4
