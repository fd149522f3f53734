"""The points a warm-up judgement and its Phase-1 role examples can name, for every scheme kind (a suite's choice
for models too small to grade zero-shot, the ``cpu-real`` profile; the paper's Base grades zero-shot, App. B).

* LoR, ASAP's key elements among them: the scheme's points; the count reaches the scheme's mark (``LevelScheme.gold``).
* PTS: the listed points; the values of those found sum to the mark under the cap (``PointsScheme.gold``).
* Free text: the rubric's clauses (``free_text_checklist.clauses`` of ``rubric_text``: the reference answer, then
  the rubric), repeats and clauses without a content word left out; the share found maps to
  round-half-up(max_mark x found / clauses), a suite's rule, since a free-text rubric states no other.

The lexical matcher (``data.element_match.match_texts``) finds a point where one sentence of the answer holds
enough of its keywords, at a threshold fitted per question on training answers. A match *agrees* when its mark is
the gold mark; only then does a judgement or a role example name points. Details: book/departures.md, section
"A warm-up judgement for every scheme kind (edit_lib/train/rubric_match.py)".
"""
from __future__ import annotations

from typing import Sequence

from edit_lib.data.element_match import ElementMatch, _stems, fit_threshold, match_texts
from edit_lib.data.schema import FreeTextScheme, LevelScheme, PointsScheme, Question, round_half_up
from edit_lib.revision.free_text_checklist import clauses, rubric_text, span_tokens


def rubric_points(q: Question) -> tuple[str, ...]:
    """The point texts a judgement of ``q`` can name (module docstring): a PTS or LoR scheme's points, a
    free-text rubric's clauses; () when there are none (a free-text rubric without text)."""
    if isinstance(q.scheme, (PointsScheme, LevelScheme)):
        return tuple(p.text for p in q.scheme.points)
    if not rubric_text(q):
        return ()
    out, seen = [], set()
    for c in clauses(rubric_text(q)):
        key = tuple(span_tokens(c))
        if key not in seen and _stems(c):
            seen.add(key)
            out.append(c)
    return tuple(out)


def points_mark(q: Question, present: Sequence[int]) -> int:
    """The mark the points ``present`` (1-based indices into ``rubric_points``) reach under ``q``'s scheme
    (module docstring)."""
    s = q.scheme
    if isinstance(s, (PointsScheme, LevelScheme)):
        return s.gold([s.points[i - 1].id for i in present])
    n = len(rubric_points(q))
    if not n:
        return 0
    return round_half_up(q.max_mark * len(present) / n)


def match_answer(q: Question, answer: str, threshold: float) -> ElementMatch:
    """The points of ``q`` that ``answer`` states, their evidence sentences and the mark they reach (``band``)."""
    present, evidence = match_texts(rubric_points(q), answer, threshold)
    return ElementMatch(present, evidence, points_mark(q, present))


def fit_question_threshold(q: Question, answers: Sequence[str], golds: Sequence[int]) -> tuple[float, float]:
    """(threshold, balanced agreement) of ``q``'s matcher on training answers (``element_match.fit_threshold``)."""
    return fit_threshold(lambda a, t: match_answer(q, a, t).band, answers, golds)


def point_kind(q: Question) -> str:
    """'lor', 'pts' or 'text': the wording a judgement or role example uses for ``q``'s points."""
    return "text" if isinstance(q.scheme, FreeTextScheme) else q.scheme.kind
