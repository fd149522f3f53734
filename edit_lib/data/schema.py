"""Typed schema of a grading dataset: questions with mark schemes, and responses with gold marks.

A mark scheme is one of three kinds (the two structured ones make the gold mark computable, which App. I's rubric
edits need):

* ``PointsScheme`` (PTS, "points-total"): marking points, each worth ``value`` marks; the mark is the sum of the
  covered points' values, capped at ``cap`` when given, rounded half-up when fractional (from App. I rescaling).
* ``LevelScheme`` (LoR, "level-of-response"): ordered levels; a response with ``c`` covered indicative
  points reaches the highest level whose ``min_points <= c``; its mark is
  ``min(high, low + step * (c - min_points))`` inside that level's band ``[low, high]``.
  Level 0 (no creditworthy content) is implicit and worth 0.
* ``FreeTextScheme``: a rubric as text (SAS-Bench analysis, ASAP rubric); gold comes from the data.

``max_mark`` (M_q) is stored on the question, and must equal what the scheme implies for PTS/LoR. Bad input is a
``DataError`` that names the file, the line (or row) and the field.
"""
from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Literal, Union


class DataError(ValueError):
    """A malformed record. The message always names file, line and field so a user can fix it."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None):
        self.path, self.line, self.field, self.reason = path, line, field, message
        where = [w for w, v in ((str(path), path), (f"line {line}", line), (f"field '{field}'", field))
                 if v is not None]
        super().__init__(f"{': '.join([', '.join(where), message]) if where else message}")


class DataFileNotFound(FileNotFoundError):
    """A data file or folder that a profile or command names does not exist (a usage error, not bad data)."""


_VALUES = re.compile(r"'[^']*'|\"[^\"]*\"|-?\d+(?:\.\d+)?")


def reason_of(err: DataError) -> str:
    """The kind of a record error, for counting: its field and its message with values blanked
    ("gold: gold mark N outside [N, N]"), so records that fail the same way group together."""
    return f"{err.field or '<file>'}: {_VALUES.sub('N', err.reason)}"


@dataclass
class SkipReport:
    """What an explicit skip mode dropped, and why (nothing is dropped silently).

    ``n_records`` counts every non-blank record the readers met (kept or skipped), so
    ``len(report) / n_records`` is the share of the input that was dropped."""

    skipped: list[DataError] = field(default_factory=list)
    n_records: int = 0

    def add(self, err: DataError) -> None:
        self.skipped.append(err)

    def __len__(self) -> int:
        return len(self.skipped)

    def reason_counts(self) -> Counter:
        """Skipped records per reason (``reason_of``), most frequent first."""
        return Counter(reason_of(e) for e in self.skipped)

    def summary(self, head: int = 20) -> str:
        """Count, count per reason, and the first ``head`` skipped records in full."""
        if not self.skipped:
            return "0 records skipped"
        of = f" (of {self.n_records} read)" if self.n_records else ""
        lines = [f"{len(self.skipped)} records skipped{of}:"]
        lines += [f"  {n:5d} x {r}" for r, n in self.reason_counts().most_common()]
        lines.append(f"  first {min(head, len(self.skipped))}:")
        lines += [f"  - {e}" for e in self.skipped[:head]]
        if len(self.skipped) > head:
            lines.append(f"  ... and {len(self.skipped) - head} more")
        return "\n".join(lines)


SPLITS = ("train", "id_test", "ood_test")


def round_half_up(x: float) -> int:
    """Round to the nearest integer, halves upwards (0.5 -> 1, 2.5 -> 3); the App. I rounding rule."""
    return int(math.floor(x + 0.5 + 1e-9))


@dataclass(frozen=True)
class MarkingPoint:
    """One creditable point of a scheme (PTS) or one piece of indicative content (LoR)."""

    id: str
    text: str
    value: float = 1.0


def _known(covered: Iterable[str], points: Iterable[MarkingPoint], word: str) -> set[str]:
    """``covered`` as a set; ValueError naming the ids that are not among ``points`` (``word``: their kind)."""
    covered, ids = set(covered), {p.id for p in points}
    if covered - ids:
        raise ValueError(f"unknown {word} point ids {sorted(covered - ids)}")
    return covered


@dataclass(frozen=True)
class PointsScheme:
    """Points-total scheme (PTS)."""

    points: tuple[MarkingPoint, ...]
    cap: float | None = None
    kind: Literal["pts"] = "pts"

    @property
    def max_mark(self) -> int:
        total = sum(p.value for p in self.points)
        return round_half_up(min(total, self.cap) if self.cap is not None else total)

    def gold(self, covered: Iterable[str]) -> int:
        covered = _known(covered, self.points, "marking")
        total = sum(p.value for p in self.points if p.id in covered)
        if self.cap is not None:
            total = min(total, self.cap)
        return round_half_up(total)


@dataclass(frozen=True)
class Level:
    """One level of a LoR scheme: reached with at least ``min_points`` covered points."""

    level: int
    descriptor: str
    low: int
    high: int
    min_points: int
    step: int = 1


@dataclass(frozen=True)
class LevelScheme:
    """Level-of-response scheme (LoR): indicative points and ordered mark bands."""

    points: tuple[MarkingPoint, ...]
    levels: tuple[Level, ...]
    kind: Literal["lor"] = "lor"

    @property
    def max_mark(self) -> int:
        return max(lv.high for lv in self.levels)

    def level_of(self, n_covered: int) -> Level | None:
        reached = [lv for lv in self.levels if lv.min_points <= n_covered]
        return max(reached, key=lambda lv: lv.level) if reached else None

    def gold(self, covered: Iterable[str]) -> int:
        covered = _known(covered, self.points, "indicative")
        lv = self.level_of(len(covered))
        if lv is None:
            return 0
        return min(lv.high, lv.low + lv.step * (len(covered) - lv.min_points))


@dataclass(frozen=True)
class FreeTextScheme:
    """A rubric given as text (SAS-Bench 'analysis', ASAP scoring guide); not computable."""

    text: str
    max_mark_: int = 0
    kind: Literal["text"] = "text"

    @property
    def max_mark(self) -> int:
        return self.max_mark_


MarkScheme = Union[PointsScheme, LevelScheme, FreeTextScheme]


@dataclass(frozen=True)
class Question:
    """A question: id, subject, text, reference answer, mark scheme and maximum mark M_q."""

    id: str
    subject: str
    text: str
    reference_answer: str
    scheme: MarkScheme
    max_mark: int


@dataclass(frozen=True)
class Coverage:
    """Ground truth for one marking point in one synthetic answer (absent -> span is None)."""

    point_id: str
    status: str  # verbatim | paraphrase | marked_paraphrase | misconception | absent
    span: str | None = None
    covered: bool = False
    family: str | None = None  # paraphrase family, for the wording-mismatch analysis


@dataclass(frozen=True)
class Response:
    """A student response with its gold mark and split; ``coverage`` only for the synthetic world."""

    id: str
    question_id: str
    answer: str
    gold: int
    split: str
    coverage: tuple[Coverage, ...] = ()


@dataclass
class Dataset:
    """Questions and responses of one dataset (one subject file, one synthetic shape, ...)."""

    name: str
    questions: dict[str, Question]
    responses: list[Response]
    meta: dict[str, Any] = field(default_factory=dict)

    def split(self, name: str) -> list[Response]:
        return [r for r in self.responses if r.split == name]

    def question(self, response: Response) -> Question:
        return self.questions[response.question_id]

    def validate(self) -> None:
        """Check ids, splits and that every gold mark lies in [0, M_q]."""
        seen: set[str] = set()
        for i, r in enumerate(self.responses):
            where = dict(path=self.name, line=i + 1)
            if r.id in seen:
                raise DataError(f"duplicate response id {r.id!r}", field="id", **where)
            seen.add(r.id)
            if r.question_id not in self.questions:
                raise DataError(f"unknown question id {r.question_id!r}", field="question_id", **where)
            if r.split not in SPLITS:
                raise DataError(f"split {r.split!r} not in {SPLITS}", field="split", **where)
            m = self.questions[r.question_id].max_mark
            if not 0 <= r.gold <= m:
                raise DataError(f"gold mark {r.gold} outside [0, {m}]", field="gold", **where)

    def check_splits(self) -> None:
        """What the pipeline needs of a dataset (App. A splits): responses in ``train`` (01 samples the
        Base policy's rollouts there and every method trains on them) and in at least one evaluation
        split (``id_test`` or ``ood_test``). DataError naming the dataset and its source otherwise."""
        have = {r.split: 0 for r in self.responses}
        for r in self.responses:
            have[r.split] += 1
        found = ", ".join(f"{s} {n}" for s, n in sorted(have.items())) or "no responses at all"
        where = dict(path=str(self.meta.get("responses_source") or self.meta.get("source", self.name)), field="split")
        if not have.get("train"):
            raise DataError(f"dataset {self.name!r} has no 'train' responses (found: {found}); the pipeline "
                            "samples rollouts and trains on the train split", **where)
        if not (have.get("id_test") or have.get("ood_test")):
            raise DataError(f"dataset {self.name!r} has no evaluation split: no 'id_test' or 'ood_test' "
                            f"responses (found: {found})", **where)


# ---------------------------------------------------------------- (de)serialisation

def scheme_to_dict(s: MarkScheme) -> dict[str, Any]:
    d = asdict(s)
    if isinstance(s, FreeTextScheme):
        d["max_mark"] = d.pop("max_mark_")
    return d


def scheme_from_dict(d: dict[str, Any]) -> MarkScheme:
    """Build a scheme from its dict form; raises KeyError/TypeError/ValueError on bad input."""
    kind = d.get("kind")
    if kind == "pts":
        pts = tuple(MarkingPoint(**p) for p in d["points"])
        return PointsScheme(points=pts, cap=d.get("cap"))
    if kind == "lor":
        pts = tuple(MarkingPoint(**p) for p in d.get("points", []))
        lvls = tuple(Level(**lv) for lv in d["levels"])
        return LevelScheme(points=pts, levels=lvls)
    if kind == "text":
        return FreeTextScheme(text=d["text"], max_mark_=int(d.get("max_mark", 0)))
    raise ValueError(f"unknown scheme kind {kind!r} (expected 'pts', 'lor' or 'text')")


def question_to_dict(q: Question) -> dict[str, Any]:
    return dict(id=q.id, subject=q.subject, text=q.text, reference_answer=q.reference_answer,
                scheme=scheme_to_dict(q.scheme), max_mark=q.max_mark)


def response_to_dict(r: Response) -> dict[str, Any]:
    d = dict(id=r.id, question_id=r.question_id, answer=r.answer, gold=r.gold, split=r.split)
    if r.coverage:
        d["coverage"] = [asdict(c) for c in r.coverage]
    return d


def dumps_jsonl(rows: Iterable[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
