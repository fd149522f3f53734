"""Reading records from data files: strict UTF-8 text, JSONL and CSV rows, typed field access, fractional marks and
the per-question cap (App. A). Every loader (native JSONL/CSV, ASAP-SAS, SAS-Bench) reads through here, and so does
``edit-suite data validate``: what validates is what loads. The rules:

* text is **strict UTF-8**; a leading byte-order mark is dropped. An invalid byte is a ``DataError`` naming the
  file, the line and the byte offset, in both error modes; ``errors="replace"`` is an explicit opt-in (the ASAP
  loader offers it) that substitutes U+FFFD and returns where each bad byte was, to count and report them;
* a file with no records (0 bytes, only blank lines, a CSV header alone) is an error; ``SkipReport.n_records``
  counts every non-blank record read, kept or skipped;
* ``mark_scale=k`` (half marks are common in real data: 3.5 of 5): the suite grades integer marks 0..M_q (Eq. 1
  is a distribution over them), so every mark, M_q and the scheme's values, caps and bands are multiplied by k,
  the original scale kept in ``meta``; without it a non-integer mark is an error naming it, and with it a mark
  that is not a multiple of 1/k names the file, line and field;
* ``max_per_question`` (a suite's choice bounding a profile's work on large files): each (question, split) keeps a
  seeded sample of n answers in file order, the full counts in ``meta["full_counts"]``.
"""
from __future__ import annotations

import csv
import io
import json
import math
import random
from pathlib import Path
from typing import Any, Iterator, Sequence, TypeVar

from edit_lib.data.schema import DataError, DataFileNotFound, Dataset, SkipReport


JSONL_EXT = (".jsonl", ".ndjson", ".json")
BOM = "\ufeff"


def require_file(path: str | Path, what: str = "data file") -> Path:
    """``path`` as a Path; ``DataFileNotFound`` when it is absent, ``DataError`` when it is a folder."""
    p = Path(path)
    if not p.exists():
        raise DataFileNotFound(f"{p}: no such {what}")
    if p.is_dir():
        raise DataError(f"is a folder, expected a {what}", path=str(p))
    return p


def bad_utf8_offsets(data: bytes) -> list[int]:
    """Byte offsets of every invalid UTF-8 sequence in ``data`` (empty when it decodes strictly)."""
    out, pos = [], 0
    while True:
        try:
            data[pos:].decode("utf-8")
            return out
        except UnicodeDecodeError as e:
            out.append(pos + e.start)
            pos += e.end


def read_text(path: str | Path, errors: str = "strict") -> tuple[str, list[tuple[int, int]]]:
    """The text of a UTF-8 file without its BOM, and the (line, byte offset) of each replaced byte.

    ``errors="strict"`` (default): an invalid byte raises ``DataError`` (file, line, byte offset);
    ``errors="replace"``: it becomes U+FFFD and is listed in the second return value."""
    if errors not in ("strict", "replace"):
        raise ValueError(f"errors must be 'strict' or 'replace', not {errors!r}")
    data = require_file(path).read_bytes()
    bad = bad_utf8_offsets(data)
    where = [(data.count(b"\n", 0, off) + 1, off) for off in bad]
    if bad and errors == "strict":
        line, off = where[0]
        more = f" ({len(bad)} invalid sequences in the file)" if len(bad) > 1 else ""
        raise DataError(f"not valid UTF-8: byte 0x{data[off]:02x} at byte offset {off}{more}; "
                        "re-save the file as UTF-8", path=str(path), line=line)
    text = data.decode("utf-8", errors="replace")
    return (text[1:] if text.startswith(BOM) else text), where


def file_format(path: str | Path) -> str:
    """'jsonl' or 'csv' from the extension; DataError otherwise."""
    suffix = Path(path).suffix.lower()
    if suffix in JSONL_EXT:
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    raise DataError(f"unknown file type {suffix!r} (expected .jsonl or .csv)", path=str(path))


def _empty(path: str | Path, what: str) -> DataError:
    return DataError(f"no records ({what}): a dataset needs at least one", path=str(path))


def iter_jsonl(path: str | Path, report: SkipReport | None = None,
               text: str | None = None) -> Iterator[tuple[int, dict]]:
    """Yield (1-based line, object) per non-blank line; bad JSON raises, or goes to ``report``.
    ``text``: the already decoded file (else it is read with ``read_text``)."""
    text = read_text(path)[0] if text is None else text
    n_records = 0
    for n, line in enumerate(io.StringIO(text, newline=None), 1):
        if not line.strip():
            continue
        n_records += 1
        if report is not None:
            report.n_records += 1
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict):
                raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
        except ValueError as e:  # JSONDecodeError is a ValueError
            skip(report, DataError(f"invalid JSON: {e}", path=str(path), line=n, field="<record>"), from_none=True)
            continue
        yield n, obj
    if not n_records:
        raise _empty(path, "empty file" if not text.strip() else "only blank lines")


def iter_csv(path: str | Path, report: SkipReport | None = None,
             text: str | None = None) -> Iterator[tuple[int, dict]]:
    """Yield (line where the row starts, row dict); a row with the wrong number of cells is an error."""
    text = read_text(path)[0] if text is None else text
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if header is None:
        raise DataError("empty CSV file (no header row)", path=str(path), line=1)
    start, n_records = reader.line_num + 1, 0
    for row in reader:
        line, start = start, reader.line_num + 1
        if not any(c.strip() for c in row):
            continue
        n_records += 1
        if report is not None:
            report.n_records += 1
        if len(row) != len(header):
            skip(report, DataError(f"row has {len(row)} cells, header has {len(header)}",
                                   path=str(path), line=line, field="<row>"))
            continue
        yield line, dict(zip(header, row))
    if not n_records:
        raise _empty(path, "a header row only")


def iter_records(path: str | Path, report: SkipReport | None = None) -> Iterator[tuple[int, dict]]:
    """Records of a JSONL or CSV file with their line numbers."""
    it = iter_jsonl if file_format(path) == "jsonl" else iter_csv
    return it(path, report)


def skip(report: SkipReport | None, err: DataError, *, from_none: bool = False) -> None:
    """A bad record: raise ``err`` (``from_none``: ``from None``), or record it in ``report`` when there is one."""
    if report is None:
        if from_none:
            raise err from None
        raise err
    report.add(err)


def skip_meta(report: SkipReport | None, n_records: int, questions: dict | None = None, mark_scale: int = 1) -> dict:
    """A loader's ``meta`` entries: ``skipped``; ``n_records`` (the report's count, else ``n_records``);
    ``original_max_marks`` when ``mark_scale`` != 1; ``skip_report`` when there is a report (an empty one too)."""
    out: dict[str, Any] = dict(skipped=len(report) if report is not None else 0,
                               n_records=report.n_records if report is not None else n_records)
    if mark_scale != 1:
        out["original_max_marks"] = {q.id: q.max_mark / mark_scale for q in questions.values()}
    if report is not None:
        out["skip_report"] = report
    return out


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


def get_number(rec: dict, name: str, where: dict, *, cells: bool = False) -> int | float:
    """A required number field (int, or float; with ``cells=True`` (CSV cells) also a numeric string)."""
    if name not in rec or rec[name] is None or rec[name] == "":
        raise DataError("missing field", field=name, **where)
    v = rec[name]
    if isinstance(v, bool) or (isinstance(v, str) and not cells) or not isinstance(v, (int, float, str)):
        raise DataError(f"expected an integer, got {type(v).__name__} {v!r}", field=name, **where)
    if isinstance(v, str):
        try:
            v = float(v.strip())
        except ValueError:
            raise DataError(f"not an integer: {rec[name]!r}", field=name, **where) from None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return v


def get_int(rec: dict, name: str, where: dict, *, cells: bool = False) -> int:
    """A required integer field; integral floats (2.0) are accepted, and with ``cells=True`` (CSV
    cells) strings like "2" or "2.0"."""
    v = get_number(rec, name, where, cells=cells)
    if not isinstance(v, int):
        raise DataError(f"not an integer: {rec[name]!r}", field=name, **where)
    return v


# ---------------------------------------------------------------- fractional marks (mark_scale)

HINT = ("set the loader option mark_scale (e.g. mark_scale: 2 grades half marks on a doubled scale; "
        "data_cards/private_science.md)")


def check_mark_scale(k: Any) -> int:
    """``k`` if it is an integer >= 1, else ValueError."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"mark_scale must be an integer >= 1, not {k!r}")
    return k


def scale_value(v: Any, k: int, field: str, where: dict) -> int:
    """``v * k`` as an integer; DataError when ``v`` is not a multiple of ``1/k``."""
    x = v * k if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan
    if not math.isfinite(x) or abs(x - round(x)) > 1e-9 * max(1.0, abs(x)):
        if k == 1:
            raise DataError(f"not an integer: {v!r}; {HINT}", field=field, **where)
        raise DataError(f"{v!r} is not a multiple of 1/{k} (mark_scale={k})", field=field, **where)
    return int(round(x))


def get_mark(rec: dict, name: str, where: dict, k: int = 1, *, cells: bool = False) -> int:
    """A required mark field on the scale ``k`` (module docstring)."""
    return scale_value(get_number(rec, name, where, cells=cells), k, name, where)


def scale_scheme_dict(sd: dict, k: int, where: dict) -> dict:
    """A scheme's dict form (``schema.scheme_from_dict``) with its marks multiplied by ``k``: PTS point
    values and cap, LoR band ``low``/``high``/``step`` (``min_points`` counts points and stays), the
    free-text scheme's ``max_mark``. Non-numbers are left for the scheme checks to report."""
    if k == 1:
        return sd
    out = dict(sd)
    num = (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool))
    if isinstance(sd.get("points"), list):
        out["points"] = [{**p, "value": p.get("value", 1.0) * k}  # 1.0: MarkingPoint's default value
                         if isinstance(p, dict) and num(p.get("value", 1.0)) else p for p in sd["points"]]
    if num(sd.get("cap")):
        out["cap"] = sd["cap"] * k
    if isinstance(sd.get("levels"), list):
        out["levels"] = [_scale_level({"step": 1, **lv}, k, where) if isinstance(lv, dict) else lv
                         for lv in sd["levels"]]  # step 1: Level's default
    if sd.get("kind") == "text" and num(sd.get("max_mark")) and sd["max_mark"]:
        out["max_mark"] = scale_value(sd["max_mark"], k, "scheme.max_mark", where)
    return out


def _scale_level(lv: dict, k: int, where: dict) -> dict:
    return {**lv, **{f: scale_value(lv[f], k, f"scheme.levels.{f}", where)
                     for f in ("low", "high", "step") if isinstance(lv.get(f), (int, float))
                     and not isinstance(lv.get(f), bool)}}


# ---------------------------------------------------------------- the per-question cap (max_per_question)

T = TypeVar("T")


def sample_rows(rows: Sequence[T], n: int | None, seed: int, question_id: str, split: str) -> list[T]:
    """At most ``n`` of ``rows`` (one question's answers in one split): a sample seeded by (seed, question, split),
    kept in their order; all of them when ``n`` is None or not smaller."""
    if n is None or len(rows) <= n:
        return list(rows)
    if n < 1:
        raise ValueError(f"max_per_question must be at least 1, got {n}")
    keep = set(random.Random(f"{seed}:{question_id}:{split}").sample(range(len(rows)), n))
    return [r for i, r in enumerate(rows) if i in keep]


def cap_per_question(ds: Dataset, n: int | None, seed: int) -> Dataset:
    """``ds`` with at most ``n`` answers per (question, split) (``sample_rows``); records the full counts and the
    cap in ``ds.meta``. Returns ``ds`` itself (changed in place)."""
    by: dict[tuple[str, str], list] = {}
    for r in ds.responses:
        by.setdefault((r.question_id, r.split), []).append(r)
    ds.meta["full_counts"] = {f"{q}/{s}": len(rs) for (q, s), rs in sorted(by.items())}
    ds.meta["max_per_question"] = n
    if n is not None:
        kept = {id(r) for (q, s), rs in by.items() for r in sample_rows(rs, n, seed, q, s)}
        ds.responses = [r for r in ds.responses if id(r) in kept]
    return ds
