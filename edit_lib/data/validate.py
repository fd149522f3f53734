"""``edit-suite data validate PATH``: check a data file or folder with the loaders' own code (App. A).

Formats: ``questions`` / ``responses`` (the native schema of ``jsonl.py``), ``dataset`` (a folder with
``questions.{jsonl,csv}`` and ``responses.{jsonl,csv}``), ``asap`` (an ``asap_sas`` folder),
``sasbench`` (labelled release) and ``sasbench-unlabelled``; ``auto`` guesses from names and the first
record. Nothing here parses a record: every check is the loader's (``records.py``, ``jsonl.py``,
``asap.py``, ``sasbench.py``) plus what the pipeline needs of a dataset (``Dataset.check_splits``: a
train split and an evaluation split; a responses file is checked the same way, since it holds all of a
dataset's responses). So data that validates is data that ``00_data`` builds.

Outcomes (the command's exit codes): the data is valid (0); the data is invalid - a ``DataError``
naming file, line and field, or with ``on_error="skip"`` at least one record dropped (1); the command
cannot be carried out as asked - a missing file or folder (``DataFileNotFound``), a format that cannot
be told or does not fit the path (``UsageError``), bad arguments (2).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from edit_lib.data.asap import load_asap
from edit_lib.data.schema import SPLITS, DataError, DataFileNotFound, Dataset, SkipReport
from edit_lib.data.jsonl import load_dataset, read_questions, read_responses
from edit_lib.data.records import check_mark_scale, iter_records, require_file
from edit_lib.data.sasbench import FILE_RE, load_sasbench, load_sasbench_unlabelled, sasbench_files

FORMATS = ("auto", "questions", "responses", "dataset", "asap", "sasbench", "sasbench-unlabelled")


class UsageError(ValueError):
    """The validation cannot be carried out as asked (unknown or undetectable format, wrong kind of path)."""


@dataclass
class Outcome:
    """A finished validation: the summary, and what skip mode dropped (None in raise mode)."""

    summary: str
    skipped: SkipReport | None = None

    @property
    def ok(self) -> bool:
        return not self.skipped


def _pair(folder: Path) -> tuple[Path, Path] | None:
    """The questions/responses files of a native dataset folder, if both are there."""
    found = {}
    for stem in ("questions", "responses"):
        hits = [folder / f"{stem}{ext}" for ext in (".jsonl", ".csv") if (folder / f"{stem}{ext}").exists()]
        if hits:
            found[stem] = hits[0]
    return (found["questions"], found["responses"]) if len(found) == 2 else None


def _first_record(path: Path) -> dict:
    for _, rec in iter_records(path, SkipReport()):  # a bad first line must not hide the format
        return rec
    raise DataError("no valid record to tell the format from; pass --format", path=str(path))


def detect_format(path: str | Path) -> str:
    """Guess the format of ``path`` (see module docstring)."""
    p = Path(path)
    if not p.exists():
        raise DataFileNotFound(f"{p}: no such file or folder")
    if p.is_dir():
        if (p / "rubrics").is_dir() and any(p.glob("set_[0-9][0-9]")):
            return "asap"
        if _pair(p):
            return "dataset"
        if any(FILE_RE.match(f.name) for f in p.iterdir()):
            p = sasbench_files(p)[0]
        else:
            raise UsageError(f"{p}: cannot tell the format of this folder (no questions/responses files, "
                             "no asap set_NN folders, no SAS-Bench files); pass --format")
    rec = _first_record(p)
    if FILE_RE.match(p.name) or "manual_label" in rec or "bad_student_answer" in rec:
        return "sasbench-unlabelled" if "bad_student_answer" in rec else "sasbench"
    if "question_id" in rec:
        return "responses"
    if {"scheme", "rubric", "max_mark"} & set(rec):
        return "questions"
    raise UsageError(f"{p}: cannot tell the format from the first record's fields {sorted(rec)}; pass --format")


def summarize(ds: Dataset) -> str:
    """Table 8-style lines (App. A): responses / questions per split and the range of max marks."""
    lines = [f"dataset {ds.name!r}: {len(ds.questions)} questions, {len(ds.responses)} responses"]
    for s in SPLITS:
        rs = ds.split(s)
        if rs:
            lines.append(f"  {s:8s} {len(rs):6d} resp / {len({r.question_id for r in rs})} q")
    marks = [q.max_mark for q in ds.questions.values()]
    if marks:
        kinds = Counter(q.scheme.kind for q in ds.questions.values())
        lines.append(f"  max marks {min(marks)}-{max(marks)}; schemes: "
                     + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    if ds.meta.get("mark_scale", 1) != 1:
        lines.append(f"  mark_scale {ds.meta['mark_scale']}: marks are stored x{ds.meta['mark_scale']} "
                     "(original scale in meta['original_max_marks'])")
    if ds.meta.get("replaced_bytes"):
        lines.append(f"  {ds.meta['replaced_bytes']} invalid UTF-8 bytes replaced by U+FFFD (encoding_errors="
                     f"'replace'), first at {', '.join(ds.meta['replaced_bytes_at'][:3])}")
    return "\n".join(lines)


def _dataset(ds: Dataset, report: SkipReport | None, prefix: str = "OK ") -> Outcome:
    ds.validate()
    ds.check_splits()
    return Outcome(prefix + summarize(ds), report)


def check_path(path: str | Path, fmt: str = "auto", questions: str | Path | None = None, *,
               on_error: str = "raise", mark_scale: int = 1, encoding_errors: str = "strict") -> Outcome:
    """Validate a data file or folder (module docstring). ``on_error="skip"`` goes on past bad records
    and returns them in ``Outcome.skipped``; ``mark_scale`` as the loaders' option (``records.py``);
    ``encoding_errors`` applies to ASAP only (``asap.py``)."""
    if fmt not in FORMATS:
        raise UsageError(f"format must be one of {', '.join(FORMATS)}; not {fmt!r}")
    if on_error not in ("raise", "skip"):
        raise UsageError(f"on_error must be 'raise' or 'skip', not {on_error!r}")
    try:
        check_mark_scale(mark_scale)
    except ValueError as e:
        raise UsageError(str(e)) from None
    p = Path(path)
    if not p.exists():
        raise DataFileNotFound(f"{p}: no such file or folder")
    if questions is not None:
        require_file(questions, "questions file")
    report = SkipReport() if on_error == "skip" else None
    fmt = detect_format(p) if fmt == "auto" else fmt
    if fmt in ("questions", "responses") and p.is_dir():
        raise UsageError(f"{p} is a folder; --format {fmt} needs a file")
    if fmt == "questions":
        qs = read_questions(p, on_error, report, mark_scale)
        kinds = Counter(q.scheme.kind for q in qs.values())
        marks = [q.max_mark for q in qs.values()] or [0]
        return Outcome(f"OK questions {p}: {len(qs)} questions; schemes "
                       + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
                       + f"; max marks {min(marks)}-{max(marks)}", report)
    if fmt == "responses":
        qs = read_questions(questions, on_error, report, mark_scale) if questions is not None else None
        rs = read_responses(p, qs, on_error, report, mark_scale)
        Dataset(p.name, qs or {}, rs, dict(source=str(p))).check_splits()
        splits = ", ".join(f"{s} {n}" for s, n in sorted(Counter(r.split for r in rs).items()))
        head = f"OK responses {p}: {len(rs)} responses ({splits}), {len({r.question_id for r in rs})} question ids"
        if qs is None:
            head += ("\n  structure only (fields, types, split): question ids and gold ranges were "
                     "NOT checked - pass the questions file to check them")
        else:
            head += f"; checked against {questions}"
        return Outcome(head, report)
    if fmt == "dataset":
        pair = _pair(p) if p.is_dir() else None
        if pair is None:
            raise DataFileNotFound(f"{p}: a dataset folder needs questions.{{jsonl,csv}} and "
                                   "responses.{jsonl,csv}")
        ds = load_dataset(*pair, on_error=on_error, mark_scale=mark_scale)
        return _dataset(ds, ds.meta.get("skip_report"))
    if fmt == "asap":
        ds = load_asap(p, on_error=on_error, encoding_errors=encoding_errors)
        return _dataset(ds, ds.meta.get("skip_report"), "OK (default splits) ")
    if fmt == "sasbench":
        ds = load_sasbench(p, on_error=on_error, mark_scale=mark_scale)
        return _dataset(ds, ds.meta.get("skip_report"))
    u = load_sasbench_unlabelled(p)
    return Outcome(f"OK unlabelled SAS-Bench {p}: {len(u.questions)} questions, {len(u.answers)} answers; "
                   "NO gold marks (inspection and statistics only)")
