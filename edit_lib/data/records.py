"""Reading records from data files: strict UTF-8 text, JSONL and CSV rows, typed field access (App. A).

Every loader of the suite reads through here (native JSONL/CSV, ASAP-SAS, SAS-Bench), and so does
``edit-suite data validate``: what validates is what loads. The rules:

* text is **strict UTF-8**; a leading byte-order mark is dropped (JSONL and CSV alike). An invalid byte is a
  ``DataError`` naming the file, the line and the byte offset, in both error modes (it is a property of the
  file, not of one record). ``errors="replace"`` is an explicit opt-in (the ASAP loader offers it) that
  substitutes U+FFFD and returns where each bad byte was, so the caller can count and report them;
* a file with no records (0 bytes, only blank lines, a CSV header alone) is an error: a dataset built
  from it could not be run;
* ``SkipReport.n_records`` counts every non-blank record read, kept or skipped.
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Iterator

from edit_lib.data.errors import DataError, DataFileNotFound, SkipReport

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
            err = DataError(f"invalid JSON: {e}", path=str(path), line=n, field="<record>")
            if report is None:
                raise err from None
            report.add(err)
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
            err = DataError(f"row has {len(row)} cells, header has {len(header)}",
                            path=str(path), line=line, field="<row>")
            if report is None:
                raise err
            report.add(err)
            continue
        yield line, dict(zip(header, row))
    if not n_records:
        raise _empty(path, "a header row only")


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
