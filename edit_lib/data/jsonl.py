"""Bring-your-own data: the suite's native questions/responses format (App. A, the Private-Science case).

A dataset is two files, each JSONL or CSV: a questions file (id, subject, text, reference_answer, scheme,
max_mark; scheme kinds ``pts``, ``lor``, ``text``) and a responses file (id, question_id, answer, gold, split,
optional coverage). Every malformed record raises ``DataError`` naming the file, line and field
(``on_error="skip"`` records it in a ``SkipReport``); ``mark_scale=k`` reads half marks. Main entries:
``load_dataset``, ``read_questions``, ``read_responses``, ``write_dataset``.

Details: book/departures.md, section "The JSONL data format (edit_lib/data/jsonl.py)".
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from edit_lib.data.schema import (SPLITS, Coverage, DataError, Dataset, FreeTextScheme, Question, Response, SkipReport,
                                  dumps_jsonl, question_to_dict, response_to_dict, scheme_from_dict)
from edit_lib.data.records import (check_mark_scale, get_mark, scale_scheme_dict, check_on_error, file_format, get_str,
                                   iter_records, require_file, skip, skip_meta)


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

def parse_question(rec: dict, where: dict, *, cells: bool = False, mark_scale: int = 1) -> Question:
    """One questions-file record -> Question (App. A schema above); DataError on any problem.
    ``cells=True``: the record is a CSV row (all cells strings); ``mark_scale``: module docstring."""
    qid = get_str(rec, "id", where, empty=False)
    subject = get_str(rec, "subject", where)
    text = get_str(rec, "text", where, empty=False)
    ref = get_str(rec, "reference_answer", where) if rec.get("reference_answer") is not None else ""
    max_mark = get_mark(rec, "max_mark", where, mark_scale, cells=cells)
    if max_mark < 1:
        raise DataError(f"max_mark must be >= 1, got {max_mark}", field="max_mark", **where)
    if rec.get("scheme") not in (None, ""):
        sd = _json_cell(rec, "scheme", where)
        if not isinstance(sd, dict):
            raise DataError(f"expected an object, got {type(sd).__name__}", field="scheme", **where)
        sd = scale_scheme_dict(sd, mark_scale, where)
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


def read_questions(path: str | Path, on_error: str = "raise", report: SkipReport | None = None,
                   mark_scale: int = 1) -> dict[str, Question]:
    """Read a questions file (App. A schema, module docstring). ``on_error="skip"`` drops bad
    records into ``report`` (required then); duplicates keep the first record."""
    return _read_unique(path, "questions file", "question", on_error, report, mark_scale,
                        lambda rec, where, cells: parse_question(rec, where, cells=cells, mark_scale=mark_scale))


def _read_unique(path, what: str, kind: str, on_error: str, report: SkipReport | None, mark_scale: int,
                 parse) -> dict:
    """{id: record} of a questions or responses file in file order, each record by ``parse(rec, where, cells)``;
    a repeated id is a bad record (the first one kept). Bad records raise, or go to ``report`` when given."""
    check_on_error(on_error, report)
    check_mark_scale(mark_scale)
    require_file(path, what)
    out: dict = {}
    cells = file_format(path) == "csv"
    for line, rec in iter_records(path, report):
        where = dict(path=str(path), line=line)
        try:
            item = parse(rec, where, cells)
            if item.id in out:
                raise DataError(f"duplicate {kind} id {item.id!r}", field="id", **where)
        except DataError as e:
            skip(report, e)
            continue
        out[item.id] = item
    return out


# ---------------------------------------------------------------- responses

def parse_response(rec: dict, where: dict, questions: dict[str, Question] | None, *,
                   cells: bool = False, mark_scale: int = 1) -> Response:
    """One responses-file record -> Response; without ``questions`` only structure is checked.
    ``cells=True``: the record is a CSV row (all cells strings); ``mark_scale``: module docstring."""
    rid = get_str(rec, "id", where, empty=False)
    qid = get_str(rec, "question_id", where, empty=False)
    answer = get_str(rec, "answer", where)
    gold = get_mark(rec, "gold", where, mark_scale, cells=cells)
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
                   on_error: str = "raise", report: SkipReport | None = None,
                   mark_scale: int = 1) -> list[Response]:
    """Read a responses file against ``questions`` (None: structure only - fields, types, split)."""
    return list(_read_unique(path, "responses file", "response", on_error, report, mark_scale,
                             lambda rec, where, cells: parse_response(rec, where, questions, cells=cells,
                                                                      mark_scale=mark_scale)).values())


# ---------------------------------------------------------------- datasets

def load_dataset(questions_path: str | Path, responses_path: str | Path, name: str | None = None,
                 on_error: str = "raise", mark_scale: int = 1) -> Dataset:
    """Load a questions + responses pair into a Dataset (App. A). A ``meta.json`` beside the
    questions file (written by ``write_dataset``) restores the name and meta. ``meta["n_records"]``
    counts the records read (kept or skipped); in skip mode ``meta["skipped"]`` is the count of
    dropped ones and ``meta["skip_report"]`` the SkipReport. ``mark_scale``: module docstring."""
    check_mark_scale(mark_scale)
    report = SkipReport() if on_error == "skip" else None
    questions = read_questions(questions_path, on_error, report, mark_scale)
    responses = read_responses(responses_path, questions, on_error, report, mark_scale)
    meta: dict[str, Any] = {}
    meta_path = Path(questions_path).parent / "meta.json"
    if meta_path.exists():
        saved = json.loads(meta_path.read_text(encoding="utf-8"))
        meta.update(saved.get("meta", {}))
        name = name or saved.get("name")
    meta.update(source=str(questions_path), responses_source=str(responses_path),
                **skip_meta(report, len(questions) + len(responses), questions, mark_scale))
    if mark_scale != 1 or "mark_scale" not in meta:  # a written dataset keeps the scale it was loaded with
        meta["mark_scale"] = mark_scale
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
    (sorted keys: byte-identical for equal datasets); returns the two data paths.

    The files are written into a hidden sibling folder that replaces ``out_dir`` only when all three
    are complete, so a failure never leaves a partial or empty dataset behind."""
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        (tmp / "questions.jsonl").write_text(dumps_jsonl(question_to_dict(q) for q in ds.questions.values()),
                                             encoding="utf-8")
        (tmp / "responses.jsonl").write_text(dumps_jsonl(response_to_dict(r) for r in ds.responses),
                                             encoding="utf-8")
        meta = {k: v for k, v in _json_safe(ds.meta).items()
                if k not in ("source", "responses_source", "skipped", "n_records")}  # set again on reading
        (tmp / "meta.json").write_text(json.dumps({"name": ds.name, "meta": meta}, ensure_ascii=False,
                                                  sort_keys=True, indent=1), encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out / "questions.jsonl", out / "responses.jsonl"
