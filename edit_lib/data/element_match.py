"""A lexical matcher of key elements in real answers (the ``cpu-real`` warm-up's judgements; a suite's choice).

Real answers carry no coverage labels, so the warm-up (``train.warmup``) says which key elements an answer states
only where a documented rule can tell: a key element is present when one sentence of the answer holds at least
``ceil(threshold * k)`` of its k keywords (content words cut to their first 5 letters, without the words shared by
half or more of the question's elements). Its count maps to a mark through the count-to-band scheme
(``key_elements``); a match is *consistent* when that mark equals the human gold mark, and only then does the
warm-up judgement name the elements (otherwise it names none). ``fit_threshold`` picks the threshold on training
answers only. Details: book/departures.md, section "ASAP key elements (edit_lib/data/key_elements.py)".
"""
from __future__ import annotations

import math
import re
from functools import lru_cache
from dataclasses import dataclass
from typing import Callable, Sequence

from edit_lib.data.key_elements import band_of
from edit_lib.data.schema import LevelScheme

STOPWORDS = frozenset(
    "a an the and or of to in on at by for from with as is are was were be been being it its this that these "
    "those which who when where than then there their they them into onto out up down over under through via "
    "like such other another each every any all some more most less can could may might will would should "
    "must do does did has have had not no nor but if so also called used using uses use".split())
THRESHOLDS = (0.2, 0.25, 0.34, 0.5, 0.67)
SENTENCE = re.compile(r"[^.!?;\n]+[.!?;]?")


def _stems(text: str) -> list[str]:
    return [w[:5] for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 2 and w not in STOPWORDS]


def element_keywords(elements: Sequence[str]) -> list[frozenset[str]]:
    """Each element's keywords: its content stems minus those shared by half or more of the elements."""
    return list(_keywords(tuple(elements)))


@lru_cache(maxsize=64)
def _keywords(elements: tuple[str, ...]) -> tuple[frozenset[str], ...]:
    """``element_keywords``, computed once per scheme (the matcher runs on every training answer)."""
    stems = [frozenset(_stems(e)) for e in elements]
    common = {s for s in set().union(*stems) if sum(s in st for st in stems) * 2 >= len(stems) > 1}
    return tuple(st - common or st for st in stems)


@dataclass(frozen=True)
class ElementMatch:
    """The key elements one answer states (1-based indices) with the sentence that states each, and the mark
    their count reaches under the scheme."""

    present: tuple[int, ...]
    evidence: tuple[str, ...]
    band: int


def match_texts(texts: Sequence[str], answer: str, threshold: float = 0.5) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """(present, evidence): which of the rubric's point ``texts`` (1-based) ``answer`` states under the module
    docstring's rule, each with the answer's sentence that states it. Any scheme kind's points (the warm-up's
    ``train.rubric_match``); ``match_elements`` is its count-to-band use."""
    keys = element_keywords(list(texts))
    sentences = [s.strip() for s in SENTENCE.findall(answer) if s.strip()]
    present, evidence = [], []
    for i, kw in enumerate(keys, start=1):
        need = max(1, math.ceil(threshold * len(kw)))
        hit = next((s for s in sentences if len(kw & set(_stems(s))) >= need), None)
        if hit is not None:
            present.append(i)
            evidence.append(hit)
    return tuple(present), tuple(evidence)


def match_elements(scheme: LevelScheme, answer: str, threshold: float = 0.5) -> ElementMatch:
    """Which key elements ``answer`` states (module docstring); the evidence is the answer's own sentence."""
    present, evidence = match_texts([p.text for p in scheme.points], answer, threshold)
    return ElementMatch(present, evidence, band_of(scheme, len(present)))


#: A matcher: (answer, threshold) -> the mark its matched points reach.
MarkOf = Callable[[str, float], int]


def _mark_of(scheme: LevelScheme | MarkOf) -> MarkOf:
    return scheme if callable(scheme) else (lambda a, t: match_elements(scheme, a, t).band)


def agreement(scheme: LevelScheme | MarkOf, answers: Sequence[str], golds: Sequence[int], threshold: float) -> float:
    """Share of answers whose matched points reach exactly their gold mark (``scheme``: a count-to-band scheme,
    or any ``MarkOf``)."""
    if not answers:
        return float("nan")
    mark = _mark_of(scheme)
    return sum(mark(a, threshold) == g for a, g in zip(answers, golds, strict=True)) / len(answers)


def balanced_agreement(scheme: LevelScheme | MarkOf, answers: Sequence[str], golds: Sequence[int],
                       threshold: float) -> float:
    """Agreement averaged over the gold marks present (each mark weighs alike, as in the balanced warm-up)."""
    by: dict[int, list[str]] = {}
    for a, g in zip(answers, golds, strict=True):
        by.setdefault(g, []).append(a)
    return sum(agreement(scheme, a, [g] * len(a), threshold) for g, a in by.items()) / len(by)


def fit_threshold(scheme: LevelScheme | MarkOf, answers: Sequence[str], golds: Sequence[int]) -> tuple[float, float]:
    """(threshold, balanced agreement): the one of ``THRESHOLDS`` whose matches agree most with the gold marks
    of these (training) answers, each mark weighing alike (``balanced_agreement``); ties go to the stricter."""
    if not answers:
        raise ValueError("fit_threshold needs training answers")
    scored = [(balanced_agreement(scheme, answers, golds, t), t) for t in THRESHOLDS]
    best = max(scored, key=lambda x: (x[0], x[1]))
    return best[1], best[0]
