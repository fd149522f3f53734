"""Bring-your-own data: the suite's native questions/responses format (App. A, the Private-Science case).

A dataset is two files, each JSONL (one JSON object per line; blank lines are ignored) or CSV
(header row; the format follows the extension: ``.jsonl``/``.ndjson``/``.json`` or ``.csv``).

**Questions file** - one record per question:

=================  ========  ===================================================================
field              type      meaning
=================  ========  ===================================================================
id                 string    unique question id
subject            string    e.g. "Biology"
text               string    the question as shown to students (non-empty)
reference_answer   string    a model answer (optional; may be empty)
scheme             object    mark scheme, ``{"kind": "pts"|"lor"|"text", ...}`` (below)
max_mark           integer   maximum mark M_q >= 1; must equal what a pts/lor scheme implies
=================  ========  ===================================================================

Scheme kinds: ``{"kind": "pts", "points": [{"id", "text", "value"}], "cap": null}`` (points-total),
``{"kind": "lor", "points": [...], "levels": [{"level", "descriptor", "low", "high", "min_points",
"step"}]}`` (level-of-response) and ``{"kind": "text", "text": "<rubric>"}`` (a free-text rubric;
its ``max_mark`` defaults to the question's). In CSV the ``scheme`` column holds that JSON object;
alternatively a ``rubric`` text column (and no ``scheme`` column) makes a free-text scheme.

**Responses file** - one record per student answer:

===========  ========  =================================================================
field        type      meaning
===========  ========  =================================================================
id           string    unique response id
question_id  string    id of a question in the questions file
answer       string    the student's answer text
gold         integer   the gold (human) mark, 0 <= gold <= max_mark of its question
split        string    one of "train", "id_test", "ood_test"
coverage     list      optional; per-point ground truth (synthetic world only)
===========  ========  =================================================================

Example (JSONL, one line each)::

    {"id": "bio-q1", "subject": "Biology", "text": "Describe two functions of the liver.",
     "reference_answer": "Produces bile; stores glycogen.", "max_mark": 2,
     "scheme": {"kind": "pts", "points": [{"id": "p1", "text": "produces bile", "value": 1},
                                          {"id": "p2", "text": "stores glycogen", "value": 1}]}}
    {"id": "r1", "question_id": "bio-q1", "answer": "It makes bile.", "gold": 1, "split": "train"}

Other fields are ignored. Every malformed record raises ``DataError`` naming the file, the 1-based
line (for CSV: the line where the record starts) and the field. With ``on_error="skip"`` the bad
record is dropped and its error recorded in a ``SkipReport`` - never silently.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Iterator

from .errors import DataError, SkipReport
from .schema import (SPLITS, Coverage, Dataset, FreeTextScheme, Question, Response, dumps_jsonl,
                     question_to_dict, response_to_dict, scheme_from_dict)

JSONL_EXT = (".jsonl", ".ndjson", ".json")
QUESTION_FIELDS = ("id", "subject", "text", "reference_answer", "scheme", "max_mark")
RESPONSE_FIELDS = ("id", "question_id", "answer", "gold", "split")


# ---------------------------------------------------------------- record readers

def file_format(path: str | Path) -> str:
    """'jsonl' or 'csv' from the extension; DataError otherwise."""
    suffix = Path(path).suffix.lower()
    if suffix in JSONL_EXT:
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    raise DataError(f"unknown file type {suffix!r} (expected .jsonl or .csv)", path=str(path))


def iter_jsonl(path: str | Path, report: SkipReport | None = None) -> Iterator[tuple[int, dict]]:
    """Yield (1-based line, object) per non-blank line; bad JSON raises, or goes to ``report``."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                if not isinstance(obj, dict):
                    raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
            except ValueError as e:  # JSONDecodeError is a ValueError
                err = DataError(f"invalid JSON: {e}", path=str(path), line=n, field="<record>")
                if report is None:
                    raise err from None
                report.add(err)
                continue
            yield n, obj


def iter_csv(path: str | Path, report: SkipReport | None = None) -> Iterator[tuple[int, dict]]:
    """Yield (line where the row starts, row dict); a row with the wrong number of cells is an error."""
    with open(path, encoding="utf-8-sig", errors="replace", newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            raise DataError("empty CSV file (no header row)", path=str(path), line=1)
        start = reader.line_num + 1
        for row in reader:
            line, start = start, reader.line_num + 1
            if not any(c.strip() for c in row):
                continue
            if len(row) != len(header):
                err = DataError(f"row has {len(row)} cells, header has {len(header)}",
                                path=str(path), line=line, field="<row>")
                if report is None:
                    raise err
                report.add(err)
                continue
            yield line, dict(zip(header, row))


def iter_records(path: str | Path, report: SkipReport | None = None) -> Iterator[tuple[int, dict]]:
    """Records of a JSONL or CSV file with their line numbers."""
    it = iter_jsonl if file_format(path) == "jsonl" else iter_csv
    return it(path, report)


def check_on_error(on_error: str, report: SkipReport | None) -> None:
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', not {on_error!r}")
    if on_error == "skip" and report is None:
        raise ValueError("on_error='skip' needs report=SkipReport() so dropped records are recorded")


# ---------------------------------------------------------------- field checks

def get_str(rec: dict, name: str, where: dict, *, empty: bool = True) -> str:
    """A required string field (``empty=False``: must be non-blank)."""
    if name not in rec or rec[name] is None:
        raise DataError("missing field", field=name, **where)
    v = rec[name]
    if not isinstance(v, str):
        raise DataError(f"expected a string, got {type(v).__name__} {v!r}", field=name, **where)
    if not empty and not v.strip():
        raise DataError("must not be empty", field=name, **where)
    return v


def get_int(rec: dict, name: str, where: dict, *, cells: bool = False) -> int:
    """A required integer field; integral floats (2.0) are accepted, and with ``cells=True`` (CSV
    cells) strings like "2" or "2.0"."""
    if name not in rec or rec[name] is None or rec[name] == "":
        raise DataError("missing field", field=name, **where)
    v = rec[name]
    if isinstance(v, bool) or (isinstance(v, str) and not cells):
        raise DataError(f"expected an integer, got {type(v).__name__} {v!r}", field=name, **where)
    if isinstance(v, str):
        try:
            v = float(v.strip())
        except ValueError:
            raise DataError(f"not an integer: {rec[name]!r}", field=name, **where) from None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if not isinstance(v, int):
        raise DataError(f"not an integer: {rec[name]!r}", field=name, **where)
    return v


def _json_cell(rec: dict, name: str, where: dict) -> Any:
    """A field that holds JSON: already parsed in JSONL, a JSON string in CSV."""
    v = rec[name]
    if isinstance(v, str):
        try:
            return json.loads(v)
        except ValueError as e:
            raise DataError(f"invalid JSON in cell: {e}", field=name, **where) from None
    return v


# ---------------------------------------------------------------- questions

def parse_question(rec: dict, where: dict, *, cells: bool = False) -> Question:
    """One questions-file record -> Question (App. A schema above); DataError on any problem.
    ``cells=True``: the record is a CSV row (all cells strings)."""
    qid = get_str(rec, "id", where, empty=False)
    subject = get_str(rec, "subject", where)
    text = get_str(rec, "text", where, empty=False)
    ref = get_str(rec, "reference_answer", where) if rec.get("reference_answer") is not None else ""
    max_mark = get_int(rec, "max_mark", where, cells=cells)
    if max_mark < 1:
        raise DataError(f"max_mark must be >= 1, got {max_mark}", field="max_mark", **where)
    if rec.get("scheme") not in (None, ""):
        sd = _json_cell(rec, "scheme", where)
        if not isinstance(sd, dict):
            raise DataError(f"expected an object, got {type(sd).__name__}", field="scheme", **where)
        if sd.get("kind") == "text" and sd.get("max_mark") in (None, 0):
            sd = {**sd, "max_mark": max_mark}
        try:
            scheme = scheme_from_dict(sd)
        except KeyError as e:
            raise DataError(f"scheme lacks key {e}", field="scheme", **where) from None
        except (TypeError, ValueError) as e:
            raise DataError(f"bad scheme: {e}", field="scheme", **where) from None
        _check_scheme(scheme, where)
    elif rec.get("rubric") not in (None, ""):
        scheme = FreeTextScheme(text=get_str(rec, "rubric", where), max_mark_=max_mark)
    else:
        raise DataError("missing field (or a 'rubric' text column)", field="scheme", **where)
    if scheme.max_mark != max_mark:
        raise DataError(f"scheme implies max mark {scheme.max_mark} but max_mark is {max_mark}",
                        field="max_mark", **where)
    return Question(qid, subject, text, ref, scheme, max_mark)


def _check_scheme(scheme, where: dict) -> None:
    """Structural checks a dataclass cannot make: unique point ids, numeric values, sane bands."""
    if scheme.kind == "text":
        return
    ids = [p.id for p in scheme.points]
    if len(ids) != len(set(ids)):
        raise DataError(f"duplicate marking point ids in {ids}", field="scheme.points", **where)
    for p in scheme.points:
        if isinstance(p.value, bool) or not isinstance(p.value, (int, float)) or p.value <= 0:
            raise DataError(f"point {p.id!r} value must be a positive number, got {p.value!r}",
                            field="scheme.points", **where)
    if scheme.kind == "pts" and not scheme.points:
        raise DataError("a pts scheme needs at least one point", field="scheme.points", **where)
    if scheme.kind == "lor":
        if not scheme.levels:
            raise DataError("a lor scheme needs at least one level", field="scheme.levels", **where)
        for lv in scheme.levels:
            nums = (lv.level, lv.low, lv.high, lv.min_points, lv.step)
            if not all(isinstance(x, int) and not isinstance(x, bool) for x in nums):
                raise DataError(f"level {lv.level!r}: level/low/high/min_points/step must be integers",
                                field="scheme.levels", **where)
            if not 0 <= lv.low <= lv.high:
                raise DataError(f"level {lv.level}: band [{lv.low}, {lv.high}] is invalid",
                                field="scheme.levels", **where)


def read_questions(path: str | Path, on_error: str = "raise",
                   report: SkipReport | None = None) -> dict[str, Question]:
    """Read a questions file (App. A schema, module docstring). ``on_error="skip"`` drops bad
    records into ``report`` (required then); duplicates keep the first record."""
    check_on_error(on_error, report)
    out: dict[str, Question] = {}
    cells = file_format(path) == "csv"
    for line, rec in iter_records(path, report):
        where = dict(path=str(path), line=line)
        try:
            q = parse_question(rec, where, cells=cells)
            if q.id in out:
                raise DataError(f"duplicate question id {q.id!r}", field="id", **where)
        except DataError as e:
            if report is None:
                raise
            report.add(e)
            continue
        out[q.id] = q
    return out


# ---------------------------------------------------------------- responses

def parse_response(rec: dict, where: dict, questions: dict[str, Question] | None, *,
                   cells: bool = False) -> Response:
    """One responses-file record -> Response; without ``questions`` only structure is checked.
    ``cells=True``: the record is a CSV row (all cells strings)."""
    rid = get_str(rec, "id", where, empty=False)
    qid = get_str(rec, "question_id", where, empty=False)
    answer = get_str(rec, "answer", where)
    gold = get_int(rec, "gold", where, cells=cells)
    split = get_str(rec, "split", where)
    if split not in SPLITS:
        raise DataError(f"unknown split {split!r} (expected one of {SPLITS})", field="split", **where)
    if gold < 0:
        raise DataError(f"gold mark {gold} is negative", field="gold", **where)
    if questions is not None:
        if qid not in questions:
            raise DataError(f"unknown question id {qid!r}", field="question_id", **where)
        m = questions[qid].max_mark
        if gold > m:
            raise DataError(f"gold mark {gold} outside [0, {m}]", field="gold", **where)
    coverage: tuple[Coverage, ...] = ()
    if rec.get("coverage") not in (None, ""):
        cov = _json_cell(rec, "coverage", where)
        try:
            coverage = tuple(Coverage(**c) for c in cov)
        except TypeError as e:
            raise DataError(f"bad coverage entry: {e}", field="coverage", **where) from None
    return Response(rid, qid, answer, gold, split, coverage)


def read_responses(path: str | Path, questions: dict[str, Question] | None,
                   on_error: str = "raise", report: SkipReport | None = None) -> list[Response]:
    """Read a responses file against ``questions`` (None: structure only - fields, types, split)."""
    check_on_error(on_error, report)
    out: list[Response] = []
    seen: set[str] = set()
    cells = file_format(path) == "csv"
    for line, rec in iter_records(path, report):
        where = dict(path=str(path), line=line)
        try:
            r = parse_response(rec, where, questions, cells=cells)
            if r.id in seen:
                raise DataError(f"duplicate response id {r.id!r}", field="id", **where)
        except DataError as e:
            if report is None:
                raise
            report.add(e)
            continue
        seen.add(r.id)
        out.append(r)
    return out


# ---------------------------------------------------------------- datasets

def load_dataset(questions_path: str | Path, responses_path: str | Path, name: str | None = None,
                 on_error: str = "raise") -> Dataset:
    """Load a questions + responses pair into a Dataset (App. A). A ``meta.json`` beside the
    questions file (written by ``write_dataset``) restores the name and meta. In skip mode,
    ``meta["skipped"]`` is the count and ``meta["skip_report"]`` the SkipReport."""
    report = SkipReport() if on_error == "skip" else None
    questions = read_questions(questions_path, on_error, report)
    responses = read_responses(responses_path, questions, on_error, report)
    meta: dict[str, Any] = {}
    meta_path = Path(questions_path).parent / "meta.json"
    if meta_path.exists():
        saved = json.loads(meta_path.read_text(encoding="utf-8"))
        meta.update(saved.get("meta", {}))
        name = name or saved.get("name")
    meta.update(source=str(questions_path), skipped=len(report) if report is not None else 0)
    if report is not None:
        meta["skip_report"] = report
    return Dataset(name or Path(questions_path).resolve().parent.name, questions, responses, meta)


def _json_safe(meta: dict[str, Any]) -> dict[str, Any]:
    """The meta entries that survive a JSON round trip (the skip report etc. are dropped)."""
    out = {}
    for k, v in meta.items():
        try:
            json.dumps(v)
        except TypeError:
            continue
        out[k] = v
    return out


def write_dataset(ds: Dataset, out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``questions.jsonl``, ``responses.jsonl`` and ``meta.json`` in the native format
    (sorted keys: byte-identical for equal datasets); returns the two data paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    qp, rp = out / "questions.jsonl", out / "responses.jsonl"
    qp.write_text(dumps_jsonl(question_to_dict(q) for q in ds.questions.values()), encoding="utf-8")
    rp.write_text(dumps_jsonl(response_to_dict(r) for r in ds.responses), encoding="utf-8")
    meta = {k: v for k, v in _json_safe(ds.meta).items() if k not in ("source", "skipped")}
    (out / "meta.json").write_text(json.dumps({"name": ds.name, "meta": meta}, ensure_ascii=False,
                                              sort_keys=True, indent=1), encoding="utf-8")
    return qp, rp
