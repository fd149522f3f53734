"""Diagnostic hint bullets (App. J / Figure 6) from the locator's measurements, within the grader vocabulary."""
import math
import re

import pytest

from edit_lib.embedded.recipe import grader_vocabulary
from edit_lib.prompts.rewrite import PROMOTED, belief_hint, diagnostic_hints, grounding_hint

P25 = dict(G_rho=0.2, G_a=0.5, G_p_tilde=-0.1)


def test_belief_shift_cases():
    assert belief_hint(-1.234, 0.05) == "the expected mark moves away at this substep by 1.23 marks"
    assert belief_hint(0.6, 0.05) == "the expected mark moves to the correct mark at this substep by 0.60 marks"
    assert belief_hint(-0.04, 0.05) == "the expected mark moves by 0.04 marks at this substep"
    assert belief_hint(-0.05, 0.05) == "the expected mark moves by 0.05 marks at this substep"  # tie: not < -tau
    assert belief_hint(float("nan"), 0.05) is None


def test_grounding_against_p25():
    assert grounding_hint("answer", 0.1, 0.5) == "the judgement of this substep may not be from the answer : 0.10 below 0.50"
    assert grounding_hint("answer", 0.5, 0.5) == "the judgement of this substep is from the answer : 0.50 not below 0.50"


def test_diagnostic_hints_all_low_promoted():
    h = diagnostic_hints(-0.8, dict(G_rho=0.1, G_a=0.4, G_p_tilde=-0.2), P25, True, 0.05)
    assert h[0].startswith("the expected mark moves away")
    assert [("may not" in x) for x in h[1:4]] == [True, True, True]
    assert [x.split(" : ")[0].rsplit(" ", 1)[1] for x in h[1:4]] == ["rubric", "answer", "prefix"]
    assert h[4] == PROMOTED and len(h) == 5


def test_diagnostic_hints_grounded_step_and_missing():
    h = diagnostic_hints(-0.8, dict(G_rho=0.3, G_a=0.1, G_p_tilde=math.nan), P25, False, 0.05)
    assert len(h) == 3 and "is from the rubric" in h[1] and "may not be from the answer" in h[2]
    with pytest.raises(KeyError, match="G_a"):
        diagnostic_hints(-0.8, dict(G_rho=0.3, G_p_tilde=0.0), P25, False, 0.05)


def test_hint_words_are_in_the_grader_vocabulary():
    known = set(grader_vocabulary())
    hints = diagnostic_hints(-0.8, dict(G_rho=0.1, G_a=0.4, G_p_tilde=-0.2), P25, True, 0.05)
    hints += diagnostic_hints(0.8, dict(G_rho=0.9, G_a=0.9, G_p_tilde=0.9), P25, False, 0.05)
    hints += diagnostic_hints(0.0, P25, P25, False, 0.05)
    words = set(re.findall(r"[A-Za-z]+", " ".join(hints)))
    assert words - known == set()
