"""Step segmentation (Sec. 2.1): what real graders write, cut into steps with exact character boundaries."""
import random

import pytest

from edit_lib.data.synthetic import WorldConfig, generate_world
from edit_lib.embedded.teacher import teacher_grade
from edit_lib.segment import RULES, is_final_line, resolve_rule, segment, split_steps, step_boundaries


def _pieces(text, seg):
    return [text[a:b] for a, b in zip(seg.bounds, seg.bounds[1:])]


def _check_invariants(text, seg):
    assert seg.bounds[0] == 0 and list(seg.bounds) == sorted(seg.bounds) and seg.bounds[-1] <= len(text)
    assert len(seg.bounds) == seg.n_steps + 1 == len(seg.spans) + 1
    for (a, b), lo, hi in zip(seg.spans, seg.bounds, seg.bounds[1:]):
        assert lo <= a < b <= hi  # each step's text lies between its two boundaries
    # the final-mark line is never inside a step
    assert "final mark" not in text[:seg.bounds[-1]].lower()


@pytest.mark.parametrize("text,rule,steps", [
    # numbered 'Step N:' lines in their written forms
    ("Step 1: osmosis is credited.\nStep 2: mitosis is missing.\nFinal mark: 2/3", "markers",
     ["osmosis is credited.", "mitosis is missing."]),
    ("**Step 1:** osmosis is credited.\n**Step 2:** mitosis is missing.\n\n**Final mark:** 2/3", "markers",
     ["osmosis is credited.", "mitosis is missing."]),
    ("step 1: a\nstep 2: b\nFinal mark: 1/2", "markers", ["a", "b"]),
    ("### Step 1\nThe answer states X.\n\n### Step 2\nIt misses Y.\nFinal mark: 1/2", "markers",
     ["The answer states X.", "It misses Y."]),
    # numbered items '1.' / '1)' / '(1)'
    ("1. Point one is met.\n2. Point two is missing.\nFinal mark: 1/2", "markers",
     ["Point one is met.", "Point two is missing."]),
    ("1) Point one is met.\n2) Point two is missing.\nFinal mark: 1/2", "markers",
     ["Point one is met.", "Point two is missing."]),
    # bullets; sub-bullets stay inside their item
    ("- point A is credited\n  - evidence: water moves\n- point B is not credited\nFinal mark: 1/2", "markers",
     ["point A is credited - evidence: water moves", "point B is not credited"]),
    ("• a is right\n• b is wrong\n* c is partly right\nFinal mark: 1/3", "markers",
     ["a is right", "b is wrong", "c is partly right"]),
    # a conclusion after a list, separated by a blank line, is a step of its own
    ("1. Point one is met.\n2. Point two is missing.\n\nSo the total is 1.\nFinal mark: 1/2", "markers",
     ["Point one is met.", "Point two is missing.", "So the total is 1."]),
    # blank-line paragraphs (a '---' rule counts as blank)
    ("The answer explains osmosis\nwith an example.\n\nIt does not mention mitosis.\n\n---\n\nTotal 1.\n"
     "Final mark: 1/2", "paragraphs",
     ["The answer explains osmosis with an example.", "It does not mention mitosis.", "Total 1."]),
    # plain one-judgement-per-line text
    ("The answer mentions osmosis, credit 1.\nIt does not mention mitosis, credit 0.\nTotal 1.\nFinal mark: 1/2",
     "lines", ["The answer mentions osmosis, credit 1.", "It does not mention mitosis, credit 0.", "Total 1."]),
])
def test_auto_segments_what_graders_write(text, rule, steps):
    seg = segment(text)
    assert seg.rule == rule == resolve_rule(text)
    assert list(seg.steps) == steps
    _check_invariants(text, seg)
    # every piece between two boundaries ends with the newline that ends its step
    assert all(p.endswith("\n") for p in _pieces(text, seg))


def test_boundaries_by_hand():
    text = "intro\nstep 1: a\nmore\nstep 2: b\nFinal mark: 1/2"
    seg = segment(text)
    assert seg.steps == ("intro", "a more", "b")
    assert seg.bounds == (0, 6, 21, 31)  # "intro\n" | "step 1: a\nmore\n" | "step 2: b\n"
    assert seg.spans == ((0, 5), (6, 20), (21, 30))
    assert step_boundaries("step 1: a\nmore\nstep 2: b") == [0, 15, 24]  # no trailing newline: capped at len
    text = "A first.\n\nB second.\nFinal mark: 1/2"
    assert segment(text).bounds == (0, 9, 20)  # the blank line opens the next piece


def test_explicit_rules_override_auto():
    text = "Step 1: a\nnote on a\n\nStep 2: b\nFinal mark: 1/2"
    assert segment(text, "markers").steps == ("a note on a", "b")
    assert segment(text, "lines").steps == ("a", "note on a", "b")  # markers stripped from step text
    assert segment(text, "paragraphs").steps == ("a note on a", "b")
    plain = "one judgement\nanother judgement\nFinal mark: 1/2"
    assert segment(plain, "markers").steps == ("one judgement another judgement",)  # no marker: one step
    assert segment(plain, "paragraphs").steps == ("one judgement another judgement",)
    assert segment(plain).steps == ("one judgement", "another judgement")
    with pytest.raises(ValueError, match="steps.rule"):
        segment(plain, "sentences")
    assert set(RULES) == {"auto", "markers", "lines", "paragraphs"}


def test_auto_needs_a_list_for_numbered_or_bullet_markers():
    # one stray numbered line is not a list: the text falls back to lines
    text = "The answer lists causes.\n2) is wrong here.\nTotal 0.\nFinal mark: 0/2"
    assert segment(text).rule == "lines" and segment(text).n_steps == 3
    # a decimal at the start of a line is not a marker
    assert segment("1.5 marks for the method\n0.5 marks for units\nFinal mark: 2/2").rule == "lines"


def test_final_line_is_never_a_step_and_ends_the_chain():
    for line in ("Final mark: 3/5", "**Final mark:** 3/5", "final mark : 3 / 5", "**Final mark: 3/5**",
                 "### Final mark: 3/5"):
        assert is_final_line(line)
        assert segment(f"step 1: a\n{line}\nstep 2: after the mark").steps == ("a",)
    assert not is_final_line("The final mark should be high")
    assert segment("").steps == () and segment("").bounds == (0,)
    assert segment("Final mark: 3/5").n_steps == 0


def test_embedded_grader_output_segments_as_before():
    """The embedded grader's `step N:` lines (written and canonical tokenised form) keep their segmentation."""
    comp = "step 1 : point 1 a ; credit 1 2\nstep 1 0 : total 1 2 = 1 2\nFinal mark : 1 2 / 1 4"
    seg = segment(comp)
    assert seg.rule == "markers" and seg.steps == ("point 1 a ; credit 1 2", "total 1 2 = 1 2")
    assert seg.bounds == (0, 32, 59)
    ds = generate_world(WorldConfig(shape="sas_like", n_questions=6, answers_per_question=3, ood_questions=0,
                                    seed=5, subjects=("history",)))
    rng = random.Random(1)
    for r in ds.responses:
        g = teacher_grade(ds.question(r), r, rng)
        assert split_steps(g.completion) == [s.text for s in g.reasoning_steps]
        lines = g.completion.split("\n")
        # one boundary after every 'step N:' line, the final line outside
        ends = [sum(len(x) + 1 for x in lines[:i + 1]) for i in range(len(lines) - 1)]
        assert step_boundaries(g.completion) == [0] + ends
