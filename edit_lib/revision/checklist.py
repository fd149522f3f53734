"""Rubric-checklist parser (Sec. 2.2), for a scheme that lists its marking points and for a free-text rubric, and the
normal form every revision check reads text in.

The policy writes the checklist with the gold mark as privileged input (``prompts.rewrite.render_checklist_prompt``):
every marking point verbatim, covered / not covered, and a quoted evidence span, one line each, then ``covered 1 of
2 points`` (the format the embedded grader learnt). A free-text rubric (SAS-Bench's reference answer and marking
explanation) keeps the line format and is verified against the rubric text (``verify_free``): every point a span
of it, every quote a span of the answer, in the normal form of ``span_tokens``. ``norm``: model output comes
written ("point 12 ... total 6.5") or in the embedded tokenizer's canonical form ("point 1 2 ... 6 . 5"); both map
to case-folded word pieces with digit runs and decimal points re-joined (adjacent digits one space apart are one
number, as ``prompts.grading`` reads them). Canonical forms, failures (``FAILURE_REASONS``) and departures:
book/departures.md, sections "Rubric checklist (edit_lib/revision/checklist.py)" and "Rubric checklist from a
free-text rubric (edit_lib/revision/checklist.py)".
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

from edit_lib.data.schema import FreeTextScheme, LevelScheme, PointsScheme, Question


_PIECE = re.compile(r"\d|[^\w\s]|_|[^\W\d_]+")
_DIGIT_RUN = re.compile(r"(?<![\w.])\d(?: \d)+(?![\w.])")
_DECIMAL = re.compile(r"(?<![\w.])(\d+) \. (\d+)(?![\w.])")
NUMBER = r"\d+(?:\.\d+)?"


def norm(text: str) -> str:
    """The normal form of ``text`` (module docstring); newlines become spaces."""
    s = " ".join(_PIECE.findall(text.casefold()))
    s = _DIGIT_RUN.sub(lambda m: m.group(0).replace(" ", ""), s)
    return _DECIMAL.sub(r"\1.\2", s)


def contains_span(haystack: str, needle: str) -> bool:
    """True when normalised ``needle`` is a whole-token span of normalised ``haystack``."""
    h, n = f" {norm(haystack)} ", f" {norm(needle)} "
    return bool(n.strip()) and n in h


def numbers(text: str) -> list[float]:
    """Every number written in ``text`` (after ``norm``)."""
    return [float(x) for x in re.findall(rf"(?<![\w.]){NUMBER}(?![\w.])", norm(text))]


COVERED, NOT_COVERED = "covered", "not covered"
# ---------------------------------------------------------------- the checklist

FAILURE_REASONS = (
    "empty",                     # no point line at all
    "malformed_line",            # a non-blank line that is neither a point line nor the count line
    "unknown_verdict",           # verdict other than covered / not covered (e.g. 'partial')
    "point_out_of_range",        # point index outside 1..N
    "duplicate_point",           # the same point listed twice
    "missing_points",            # a scheme point not listed
    "point_not_verbatim",        # point text differs from the scheme's point text
    "covered_without_evidence",  # 'covered' with evidence none (Sec. 2.2: supported by a quoted span)
    "evidence_not_in_answer",    # evidence that is not a span of the answer
    "count_missing",             # no 'covered n of N points' line
    "count_inconsistent",        # n or N disagree with the point lines / the scheme
)

_POINT = re.compile(r"^point (\d+) (.*)$")
_COUNT = re.compile(r"^covered (\d+) of (\d+) points?$")


@dataclass(frozen=True)
class ChecklistItem:
    """One marking point as judged in the checklist."""

    index: int  # 1-based, as in the scheme
    text: str  # the point text as written (normalised form)
    covered: bool
    evidence: str | None  # normalised evidence span, None for 'evidence none'
    contradicts: bool = False  # the answer states the opposite of the point


@dataclass(frozen=True)
class Checklist:
    """A parsed rubric checklist (Sec. 2.2): one item per scheme point, in scheme order."""

    items: tuple[ChecklistItem, ...]
    n_covered: int
    n_points: int


@dataclass(frozen=True)
class ChecklistFailure:
    """A checklist that failed to parse or verify: ``reason`` in FAILURE_REASONS, ``detail`` says where."""

    reason: str
    detail: str


def scheme_points(question: Question) -> list[str]:
    """The marking point texts of a PTS or LoR scheme (what the checklist must list verbatim, Sec. 2.2)."""
    if not isinstance(question.scheme, (PointsScheme, LevelScheme)):
        raise TypeError(f"question {question.id}: a checklist needs listed marking points (PTS or LoR), "
                        f"got a {question.scheme.kind!r} scheme")
    return [p.text for p in question.scheme.points]


def _fail(reason: str, detail: str) -> ChecklistFailure:
    assert reason in FAILURE_REASONS, reason
    return ChecklistFailure(reason, detail)


def _parse_point_line(lineno: int, body: str) -> ChecklistItem | ChecklistFailure:
    m = _POINT.match(body)
    idx, rest = int(m.group(1)), m.group(2)
    fields = [f.strip() for f in rest.split(" ; ")]
    if len(fields) < 3 or not fields[2].startswith("evidence"):
        return _fail("malformed_line", f"line {lineno}: expected 'point i <text> ; <verdict> ; evidence <span>"
                                       f"[ ; contradicts]', got {body!r}")
    text, verdict, evidence = fields[0], fields[1], fields[2][len("evidence"):].strip()
    extra = fields[3:]
    if verdict not in (COVERED, NOT_COVERED):
        return _fail("unknown_verdict", f"line {lineno}: verdict {verdict!r} is neither 'covered' nor 'not covered'")
    if extra not in ([], ["contradicts"]):
        return _fail("malformed_line", f"line {lineno}: unexpected trailing field(s) {extra!r}")
    if not evidence:
        return _fail("malformed_line", f"line {lineno}: the evidence field is empty (write 'evidence none')")
    return ChecklistItem(idx, text, verdict == COVERED, None if evidence == "none" else evidence, bool(extra))


Admit = Callable[[int, ChecklistItem, dict], "ChecklistFailure | None"]


def read_lines(text: str, admit: Admit) -> tuple[dict[int, ChecklistItem], tuple[int, int] | None] | ChecklistFailure:
    """The point lines (by index) and the count line of a checklist (Sec. 2.2), each point line first parsed and
    then passed to ``admit(lineno, item, items so far)``, whose failure stops the reading; a line that is neither
    is ``malformed_line``, no point line at all ``empty``."""
    items: dict[int, ChecklistItem] = {}
    count: tuple[int, int] | None = None
    for lineno, raw in enumerate(text.split("\n"), start=1):
        body = norm(raw)
        if not body:
            continue
        if _POINT.match(body):
            item = _parse_point_line(lineno, body)
            fail = item if isinstance(item, ChecklistFailure) else admit(lineno, item, items)
            if fail is not None:
                return fail
            items[item.index] = item
        elif _COUNT.match(body):
            m = _COUNT.match(body)
            count = (int(m.group(1)), int(m.group(2)))
        else:
            return _fail("malformed_line", f"line {lineno}: neither a point line nor the count line: {raw.strip()!r}")
    if not items:
        return _fail("empty", "no 'point i ...' line found")
    return items, count


def parse_checklist(text: str, points: Sequence[str], answer: str) -> Checklist | ChecklistFailure:
    """Parse and verify a rubric checklist (Sec. 2.2) against the scheme's point texts and the answer.

    ``points``: the scheme's marking point texts in order (``scheme_points``); point text must match them
    verbatim (after ``norm``), evidence must be a whole-token span of ``answer``, and the count line must
    agree with the point lines and with len(points). Never raises on model output.
    """
    def admit(lineno: int, item: ChecklistItem, items: dict) -> ChecklistFailure | None:
        if not 1 <= item.index <= len(points):
            return _fail("point_out_of_range", f"line {lineno}: point {item.index} outside 1..{len(points)}")
        if item.index in items:
            return _fail("duplicate_point", f"line {lineno}: point {item.index} listed twice")
        return None

    got = read_lines(text, admit)
    if isinstance(got, ChecklistFailure):
        return got
    items, count = got
    missing = [i for i in range(1, len(points) + 1) if i not in items]
    if missing:
        return _fail("missing_points", f"point(s) {missing} of {len(points)} not listed")
    ordered = tuple(items[i] for i in range(1, len(points) + 1))
    for it in ordered:
        if it.text != norm(points[it.index - 1]):
            return _fail("point_not_verbatim", f"point {it.index}: {it.text!r} is not the scheme's "
                                               f"{norm(points[it.index - 1])!r}")
    return evidence_and_count(ordered, count, answer, contains_span)


def evidence_and_count(ordered: tuple[ChecklistItem, ...], count: tuple[int, int] | None, answer: str,
                       in_answer: Callable[[str, str], bool]) -> Checklist | ChecklistFailure:
    """The last checks of a checklist (Sec. 2.2), the same for listed points and free-text rubrics: a covered
    point quotes evidence, every quote is a span of ``answer`` (``in_answer(answer, quote)``), and the count
    line gives (covered, number of points)."""
    for it in ordered:
        if it.covered and it.evidence is None:
            return _fail("covered_without_evidence", f"point {it.index} is covered but quotes no evidence")
        if it.evidence is not None and not in_answer(answer, it.evidence):
            return _fail("evidence_not_in_answer", f"point {it.index}: evidence {it.evidence!r} is not a span of "
                                                   f"the answer")
    if count is None:
        return _fail("count_missing", "no 'covered n of N points' line")
    n_cov = sum(it.covered for it in ordered)
    if count != (n_cov, len(ordered)):
        return _fail("count_inconsistent", f"count line says {count[0]} of {count[1]}, the point lines give "
                                           f"{n_cov} of {len(ordered)}")
    return Checklist(ordered, n_cov, len(ordered))


def verified_lines(text: str, points: Sequence[str], answer: str) -> str:
    """The lines of a checklist that verify on their own (``revision.checklist_failure = 'drop_lines'``, Sec. 2.2):
    each point line that parses, names a point in 1..N for the first time, quotes the scheme's point verbatim
    and, when covered, quotes evidence that is a span of ``answer``; the count line only when every line was
    kept and the whole checklist verifies. Lines are returned as written, newline-joined ('' if none)."""
    if isinstance(parse_checklist(text, points, answer), Checklist):
        return text
    kept, seen = [], set()
    for lineno, raw in enumerate(text.split("\n"), start=1):
        body = norm(raw)
        if not _POINT.match(body):
            continue
        it = _parse_point_line(lineno, body)
        if (isinstance(it, ChecklistFailure) or not 1 <= it.index <= len(points) or it.index in seen
                or it.text != norm(points[it.index - 1]) or (it.covered and it.evidence is None)
                or (it.evidence is not None and not contains_span(answer, it.evidence))):
            continue
        seen.add(it.index)
        kept.append(raw)
    return "\n".join(kept)


def checklist_context(checklist, failure_policy: str) -> tuple[str | None, str | None]:
    """(the checklist text the reviser sees, or None; the blocking status, or None) of one ``write_checklists``
    row under ``revision.checklist_failure`` (Sec. 2.2 uses the checklist as the reviser's context): a verified
    checklist is given as written; a failed one is given as written ('keep'), reduced to its verified lines
    ('drop_lines'; None when none is left) or blocks the rewrite ('block': status ``checklist_<reason>``). A
    question without listed points has no checklist to give."""
    if checklist.status == "ok":
        return checklist.text, None
    if failure_policy == "block":
        return None, f"checklist_{checklist.status}"
    if failure_policy == "keep":
        return (checklist.text or None) if checklist.status != "no_points" else None, None
    if failure_policy == "drop_lines":
        return (getattr(checklist, "verified_text", "") or None), None
    raise ValueError(f"revision.checklist_failure must be keep, drop_lines or block, got {failure_policy!r}")


# ---------------------------------------------------------------- a free-text rubric (Sec. 2.2: no listed points)
# Points numbered 1..N, each index and text once; the count line gives (covered, N). ``span_tokens``: case,
# whitespace and punctuation ignored; a CJK character, a number, a run of other letters: one token each. ``clauses``
# cuts the rubric at line breaks and clause punctuation (ASCII and CJK) only to report the share it lists
# (``clause_share``): a short list is not a failure.

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN = re.compile(rf"[{_CJK}]|\d+(?:\.\d+)?|[^\W\d_{_CJK}]+")
# clause boundaries: line breaks, CJK clause punctuation, ASCII , ; : ! ? and a full stop not inside a number
_CLAUSE_SPLIT = re.compile(r"[\n\r。；;！!？?，,、：:]|(?<!\d)\.|\.(?!\d)")
_ENUMERATOR = re.compile(r"^\s*[（(]\s*\d+\s*[)）]")  # a leading '(1)' / '（1）'
_LETTER = re.compile(rf"[^\W\d_]|[{_CJK}]")


def span_tokens(text: str) -> list[str]:
    """The token form of ``text`` for the span rule: ``norm`` (case-folded, digit runs re-joined), then every
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
