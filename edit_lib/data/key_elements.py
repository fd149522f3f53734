"""ASAP's key elements: the scoring guides as a count-to-band scheme (a documented departure, App. A), and the lexical
matcher that finds them in real answers (the ``cpu-real`` warm-up's judgements; a suite's choice).

* ``parse_key_elements``: sets 5 and 6 list "Key Elements:" and map how many an answer states to a score ("3
  points / Four key elements", ...); the scheme is a ``LevelScheme`` in the rubric's own wording, one indicative
  point per key element, one level per scored band. The gold mark stays the human Score1. A guide without a
  key-element list (set 10, holistic) gives None and keeps its free-text scheme.
* ``match_texts``: a key element is present when one sentence of the answer holds at least ``ceil(threshold *
  k)`` of its k keywords (content words cut to their first 5 letters, without the words shared by half or more
  of the question's elements); its count maps to a mark through the scheme, and a match is *consistent* when
  that mark is the gold mark. ``fit_threshold`` picks the threshold on training answers only.

Details: book/departures.md, section "ASAP key elements (edit_lib/data/key_elements.py)".
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Sequence

from edit_lib.data.schema import DataError, Level, LevelScheme, MarkingPoint


ELEMENTS_HEAD = re.compile(r"^key elements\s*:\s*$", re.IGNORECASE)
BANDS_HEAD = re.compile(r"^rubric\s*:\s*$", re.IGNORECASE)
BAND = re.compile(r"^(\d+)\s+points?\s*$", re.IGNORECASE)
COUNT_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
               "nine": 9, "ten": 10}
DESCRIPTOR = re.compile(r"^((?:\w+)(?:\s*(?:,|or|and)\s*\w+)*)\s+key\s+elements?\s*$", re.IGNORECASE)


def _counts(descriptor: str) -> list[int]:
    """The element counts a band descriptor names ('One or two key elements' -> [1, 2]); [] when it names none."""
    m = DESCRIPTOR.match(descriptor.strip())
    if not m:
        return []
    words = re.findall(r"[a-z]+|\d+", m.group(1).lower())
    return [int(w) if w.isdigit() else COUNT_WORDS[w] for w in words if w.isdigit() or w in COUNT_WORDS]


def parse_key_elements(rubric: str, max_mark: int, where: str = "rubric") -> LevelScheme | None:
    """The count-to-band scheme of a scoring guide (module docstring), or None when it lists no key elements.

    ``rubric``: the guide's text from its first heading (``asap.AsapRubric.rubric``); ``where`` names the file in
    errors. A guide that lists elements but whose bands cannot be read raises DataError naming the line."""
    lines = [ln.strip() for ln in rubric.replace("\r", "").split("\n")]
    start = next((i for i, ln in enumerate(lines) if ELEMENTS_HEAD.match(ln)), None)
    if start is None:
        return None
    elements, i = [], start + 1
    while i < len(lines) and not BANDS_HEAD.match(lines[i]):
        if lines[i]:
            elements.append(lines[i])
        i += 1
    if not elements:
        raise DataError("'Key Elements:' lists no element", path=where, line=start + 1, field="Key Elements")
    if i == len(lines):
        raise DataError("'Key Elements:' without a 'Rubric:' list of score bands", path=where, field="Rubric")
    levels, seen = [], set()
    j = i + 1
    while j < len(lines):
        m = BAND.match(lines[j])
        if not m:
            j += 1
            continue
        mark = int(m.group(1))
        desc = next((ln for ln in lines[j + 1:] if ln), "")
        counts = _counts(desc)
        if mark > 0:
            if not counts:
                raise DataError(f"band '{lines[j]}' names no count of key elements ({desc!r})", path=where,
                                line=j + 2, field="Rubric")
            if mark in seen or not 0 < mark <= max_mark:
                raise DataError(f"band of {mark} points repeated or outside 1..{max_mark}", path=where,
                                line=j + 1, field="Rubric")
            levels.append(Level(level=mark, descriptor=desc, low=mark, high=mark, min_points=min(counts)))
            seen.add(mark)
        j += 2
    if sorted(seen) != list(range(1, max_mark + 1)):
        raise DataError(f"score bands {sorted(seen)} do not cover 1..{max_mark}", path=where, field="Rubric")
    mins = [lv.min_points for lv in sorted(levels, key=lambda lv: lv.level)]
    if mins != sorted(mins) or len(set(mins)) != len(mins):
        raise DataError(f"higher bands must need more key elements (minimum counts {mins})", path=where,
                        field="Rubric")
    if mins[-1] > len(elements):
        raise DataError(f"the top band needs {mins[-1]} key elements but the guide lists {len(elements)}",
                        path=where, field="Key Elements")
    points = tuple(MarkingPoint(id=f"k{n}", text=t) for n, t in enumerate(elements, start=1))
    return LevelScheme(points=points, levels=tuple(levels))


def band_of(scheme: LevelScheme, n_elements: int) -> int:
    """The mark a count of key elements reaches under a count-to-band scheme (0 below the lowest band)."""
    lv = scheme.level_of(n_elements)
    return 0 if lv is None else lv.low


# ---------------------------------------------------------------- the lexical matcher

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
    ``train.warmup``); ``match_elements`` is its count-to-band use."""
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
