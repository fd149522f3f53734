"""The embedded grader's vocabulary: every word the tiny word-level tokenizer must know."""
from __future__ import annotations

import re

from edit_lib.data.schema import FreeTextScheme, Level, LevelScheme, MarkingPoint, PointsScheme, Question
from edit_lib.data.synthetic import world_vocabulary
from edit_lib.prompts.intervention import render_int_output, render_int_prompt
from edit_lib.prompts.grading import GRADER_SYSTEM, TINY_SEPARATOR, render_grading_prompt
from edit_lib.prompts.rewrite import render_checklist_prompt, render_rewrite_prompt
from edit_lib.prompts.rewrite_hints import diagnostic_hints
from edit_lib.embedded.teacher import TEMPLATE_TEXT

_WORD = re.compile(r"[A-Za-z]+")


def text_words(text: str) -> set[str]:
    """The letter-only words of a text (digits and punctuation are separate tokens)."""
    return set(_WORD.findall(text))


def grader_vocabulary() -> list[str]:
    """Every word the tiny grader can meet: the world's words plus the words of every template here and in
    the teacher (found by rendering each template on a dummy question, so a template edit cannot be missed)."""
    pt = (MarkingPoint("p1", "", 1.0),)
    dummies = [Question("d", "d", "", "", PointsScheme(pt, cap=1.0), 1),
               Question("d", "d", "", "", LevelScheme(pt, (Level(1, "", 1, 1, 1),)), 1),
               Question("d", "d", "", "", FreeTextScheme("", 1), 1)]
    texts = [TEMPLATE_TEXT, TINY_SEPARATOR, GRADER_SYSTEM]
    for q in dummies:
        texts += [render_grading_prompt(q, "", mask) for mask in (None, "rubric", "answer")]
        texts += [render_checklist_prompt(q, "", 0), render_int_prompt(q, "", 0, ["qqq"])]
        texts += [render_rewrite_prompt(q, "", 0, ["qqq"], 1, ["qqq"], c, atomic) for c in ("", None)
                  for atomic in (True, False)]
    texts.append(render_int_output([(True, ""), (False, "qqq")], 2, "qqq", "qqq"))
    sig = {"G_rho": 0.0, "G_a": 0.0, "G_p_tilde": 0.0}
    for delta in (-1.0, 0.0, 1.0):  # every sentence the locator's hints can use (rewrite_hints)
        texts += diagnostic_hints(delta, sig, {k: 1.0 for k in sig}, True, 0.5)
        texts += diagnostic_hints(delta, sig, {k: -1.0 for k in sig}, False, 0.5)
    return sorted(set(world_vocabulary()) | text_words(" ".join(texts)) - {"qqq"})
