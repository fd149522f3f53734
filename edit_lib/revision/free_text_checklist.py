"""Rubric checklist against a free-text rubric (Sec. 2.2, for schemes that do not list their marking points).

SAS-Bench gives a reference answer and a marking explanation as text, not a list of points. The checklist keeps
the line format of ``revision.checklist`` and is verified against the rubric text (``rubric_text``): every listed
point a span of it, every evidence quote a span of the answer, both in the normal form of ``span_tokens`` (case,
whitespace and punctuation ignored; a CJK character, a number, a run of other letters: one token each); points
numbered 1..N, each index and text once; the count line gives (covered, N). ``clauses`` cuts the rubric at line
breaks and clause punctuation (ASCII and CJK) only to report the share it lists (``clause_share``): a short list
is not a failure. Failure reasons are those of ``checklist.FAILURE_REASONS``.

The rule and its limits: book/departures.md, section "Rubric checklist from a free-text rubric
(edit_lib/revision/free_text_checklist.py)".
"""
from __future__ import annotations

import re

from edit_lib.data.schema import FreeTextScheme, Question
from edit_lib.revision.checklist import (_POINT, Checklist, ChecklistFailure, ChecklistItem, _fail,
                                         _parse_point_line, evidence_and_count, read_lines)
from edit_lib.revision.text import norm

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN = re.compile(rf"[{_CJK}]|\d+(?:\.\d+)?|[^\W\d_{_CJK}]+")
# clause boundaries: line breaks, CJK clause punctuation, ASCII , ; : ! ? and a full stop not inside a number
_CLAUSE_SPLIT = re.compile(r"[\n\r。；;！!？?，,、：:]|(?<!\d)\.|\.(?!\d)")
_ENUMERATOR = re.compile(r"^\s*[（(]\s*\d+\s*[)）]")  # a leading '(1)' / '（1）'
_LETTER = re.compile(rf"[^\W\d_]|[{_CJK}]")


def span_tokens(text: str) -> list[str]:
    """The token form of ``text`` for the span rule: ``text.norm`` (case-folded, digit runs re-joined), then every
    CJK character, number and run of other letters one token; whitespace and punctuation dropped."""
    return _TOKEN.findall(norm(text))


def is_span(haystack: str, needle: str) -> bool:
    """True when ``needle`` is a non-empty whole-token span of ``haystack`` under ``span_tokens`` (CJK-safe)."""
    n = span_tokens(needle)
    if not n:
        return False
    h = span_tokens(haystack)
    return any(h[i:i + len(n)] == n for i in range(len(h) - len(n) + 1))


def rubric_text(question: Question) -> str:
    """The text a free-text checklist quotes its points from (Sec. 2.2): the reference answer, then the marking
    explanation (SAS-Bench ``reference`` and ``analysis``)."""
    if not isinstance(question.scheme, FreeTextScheme):
        raise TypeError(f"question {question.id}: a {question.scheme.kind!r} scheme lists its points")
    return "\n".join(t for t in (question.reference_answer.strip(), question.scheme.text.strip()) if t)


def checklist_rubric(q: Question) -> str:
    """Where a question's checklist comes from (Sec. 2.2): "points" when its scheme lists marking points (PTS,
    LoR; checked by ``checklist.parse_checklist``), "free_text" for a rubric given as text (SAS-Bench; checked by
    ``parse_free_checklist``), "none" for a free-text rubric with no text at all."""
    if not isinstance(q.scheme, FreeTextScheme):
        return "points"
    return "free_text" if rubric_text(q) else "none"


def clauses(text: str) -> list[str]:
    """The rubric's clauses (module docstring): pieces between boundaries, a leading enumerator ('(1)', '（1）')
    and surrounding whitespace removed, that hold a letter or a CJK character."""
    pieces = (_ENUMERATOR.sub("", c).strip() for c in _CLAUSE_SPLIT.split(text))
    return [c for c in pieces if _LETTER.search(c)]


def clause_share(points: list[str], rubric: str) -> float:
    """Share of the rubric's clauses that a listed point covers or lies in (either is a span of the other);
    NaN for a rubric without clauses."""
    cl = clauses(rubric)
    if not cl:
        return float("nan")
    return sum(any(is_span(c, p) or is_span(p, c) for p in points) for c in cl) / len(cl)


def _admit(lineno: int, item: ChecklistItem, items: dict) -> ChecklistFailure | None:
    """A free-text point line: an index from 1, neither index nor text listed before."""
    if item.index < 1:
        return _fail("point_out_of_range", f"line {lineno}: point {item.index} is below 1")
    if item.index in items or any(it.text == item.text for it in items.values()):
        return _fail("duplicate_point", f"line {lineno}: point {item.index} ({item.text!r}) listed twice")
    return None


def parse_free_checklist(text: str, rubric: str, answer: str) -> Checklist | ChecklistFailure:
    """Parse and verify a checklist against a free-text ``rubric`` (``rubric_text``) and the answer (module
    docstring; Sec. 2.2). Never raises on model output."""
    got = read_lines(text, _admit)
    if isinstance(got, ChecklistFailure):
        return got
    items, count = got
    n = len(items)
    missing = [i for i in range(1, n + 1) if i not in items]
    if missing:
        return _fail("missing_points", f"point(s) {missing} missing from the numbering 1..{n}")
    ordered = tuple(items[i] for i in range(1, n + 1))
    for it in ordered:
        if not is_span(rubric, it.text):
            return _fail("point_not_verbatim", f"point {it.index}: {it.text!r} is not a span of the rubric text")
    return evidence_and_count(ordered, count, answer, is_span)


def _verified(text: str, rubric: str, answer: str) -> list[tuple[str, ChecklistItem]]:
    kept, seen, texts = [], set(), set()
    for lineno, raw in enumerate(text.split("\n"), start=1):
        body = norm(raw)
        if not _POINT.match(body):
            continue
        it = _parse_point_line(lineno, body)
        if (isinstance(it, ChecklistFailure) or it.index < 1 or it.index in seen or it.text in texts
                or not is_span(rubric, it.text) or (it.covered and it.evidence is None)
                or (it.evidence is not None and not is_span(answer, it.evidence))):
            continue
        seen.add(it.index)
        texts.add(it.text)
        kept.append((raw, it))
    return kept


def verify_free(text: str, rubric: str, answer: str) -> tuple[Checklist | ChecklistFailure, str, float]:
    """(``parse_free_checklist``, the lines that verify, ``clause_share`` of the points that verify) of one
    checklist written against a free-text rubric (Sec. 2.2). The lines that verify are what
    ``revision.checklist_failure = 'drop_lines'`` keeps, as ``checklist.verified_lines`` keeps them for listed
    points: each point line that parses, is the first with its index and its text, quotes a span of the rubric
    and, when covered, evidence that is a span of the answer; the count line only when the whole checklist
    verifies. Lines as written, newline-joined ('' if none); the whole text when it verifies."""
    parsed = parse_free_checklist(text, rubric, answer)
    if isinstance(parsed, Checklist):
        return parsed, text, clause_share([it.text for it in parsed.items], rubric)
    kept = _verified(text, rubric, answer)
    return parsed, "\n".join(raw for raw, _ in kept), clause_share([it.text for _, it in kept], rubric)
