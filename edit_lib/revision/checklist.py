"""Rubric-checklist parser (Sec. 2.2).

The policy writes the checklist with the gold mark as privileged input (``prompts.rewrite.render_checklist_prompt``):
every marking point verbatim, covered / not covered, and a quoted evidence span. The format (the one the
embedded grader learnt)::

    point 1 <point text> ; covered ; evidence <span of the answer>
    point 2 <point text> ; not covered ; evidence none
    point 3 <point text> ; not covered ; evidence <span> ; contradicts
    covered 1 of 3 points

Canonical forms, failures (``parse_checklist``, ``FAILURE_REASONS``) and departures from the paper and from public
code: book/departures.md, section "Rubric checklist (edit_lib/revision/checklist.py)".
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

from edit_lib.data.schema import LevelScheme, PointsScheme, Question
from edit_lib.revision.text import contains_span, norm

COVERED, NOT_COVERED = "covered", "not covered"
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
    verbatim (after ``text.norm``), evidence must be a whole-token span of ``answer``, and the count line must
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
