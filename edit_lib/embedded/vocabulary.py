"""The embedded grader's vocabulary: every word the tiny word-level tokenizer must know."""
from __future__ import annotations

import re

from ..data.schema import FreeTextScheme, Level, LevelScheme, MarkingPoint, PointsScheme, Question
from ..data.synthetic import world_vocabulary
from ..prompts import (GRADER_SYSTEM, TINY_SEPARATOR, render_checklist_prompt, render_grading_prompt,
                       render_rewrite_prompt)
from .teacher import TEMPLATE_TEXT

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
        texts += [render_checklist_prompt(q, "", 0), render_rewrite_prompt(q, "", 0, ["qqq"], 1, ["qqq"], "")]
    return sorted(set(world_vocabulary()) | text_words(" ".join(texts)) - {"qqq"})
