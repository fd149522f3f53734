"""``edit-suite data validate PATH``: check a data file or folder, stop at the first bad record (App. A).

Formats: ``questions`` / ``responses`` (the native schema of ``jsonl.py``), ``dataset`` (a folder with
``questions.{jsonl,csv}`` and ``responses.{jsonl,csv}``), ``asap`` (an ``asap_sas`` folder),
``sasbench`` (labelled release) and ``sasbench-unlabelled``; ``auto`` guesses from names and the first
record. Returns a short summary; raises ``DataError`` (file, line, field) on the first error.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from .asap import load_asap
from .errors import DataError
from .jsonl import iter_records, load_dataset, read_questions, read_responses
from .sasbench import FILE_RE, load_sasbench, load_sasbench_unlabelled, sasbench_files
from .schema import SPLITS, Dataset

FORMATS = ("auto", "questions", "responses", "dataset", "asap", "sasbench", "sasbench-unlabelled")


def _pair(folder: Path) -> tuple[Path, Path] | None:
    """The questions/responses files of a native dataset folder, if both are there."""
    found = {}
    for stem in ("questions", "responses"):
        hits = [folder / f"{stem}{ext}" for ext in (".jsonl", ".csv") if (folder / f"{stem}{ext}").exists()]
        if hits:
            found[stem] = hits[0]
    return (found["questions"], found["responses"]) if len(found) == 2 else None


def _first_record(path: Path) -> dict:
    for _, rec in iter_records(path):
        return rec
    raise DataError("no records (empty file)", path=str(path))


def detect_format(path: str | Path) -> str:
    """Guess the format of ``path`` (see module docstring)."""
    p = Path(path)
    if not p.exists():
        raise DataError("no such file or folder", path=str(p))
    if p.is_dir():
        if (p / "rubrics").is_dir() and any(p.glob("set_[0-9][0-9]")):
            return "asap"
        if _pair(p):
            return "dataset"
        if any(FILE_RE.match(f.name) for f in p.iterdir()):
            p = sasbench_files(p)[0]
        else:
            raise DataError("cannot tell the format of this folder (no questions/responses files, "
                            "no asap set_NN folders, no SAS-Bench files); pass --format", path=str(p))
    rec = _first_record(p)
    if FILE_RE.match(p.name) or "manual_label" in rec or "bad_student_answer" in rec:
        return "sasbench-unlabelled" if "bad_student_answer" in rec else "sasbench"
    if "question_id" in rec:
        return "responses"
    if {"scheme", "rubric", "max_mark"} & set(rec):
        return "questions"
    raise DataError(f"cannot tell the format from the first record's fields {sorted(rec)}; pass --format",
                    path=str(p))


def summarize(ds: Dataset) -> str:
    """Table 6-style lines (App. A): responses / questions per split and the range of max marks."""
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
    return "\n".join(lines)


def validate_path(path: str | Path, fmt: str = "auto", questions: str | Path | None = None) -> str:
    """Validate a data file or folder; returns a summary, raises DataError on the first error.
    A responses file without ``questions`` is checked for structure only (fields, types, split)."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, not {fmt!r}")
    p = Path(path)
    if not p.exists():
        raise DataError("no such file or folder", path=str(p))
    fmt = detect_format(p) if fmt == "auto" else fmt
    if fmt == "questions":
        qs = read_questions(p)
        kinds = Counter(q.scheme.kind for q in qs.values())
        marks = [q.max_mark for q in qs.values()] or [0]
        return (f"OK questions {p}: {len(qs)} questions; schemes "
                + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
                + f"; max marks {min(marks)}-{max(marks)}")
    if fmt == "responses":
        qs = read_questions(questions) if questions is not None else None
        rs = read_responses(p, qs)
        splits = ", ".join(f"{s} {n}" for s, n in sorted(Counter(r.split for r in rs).items()))
        head = f"OK responses {p}: {len(rs)} responses ({splits}), {len({r.question_id for r in rs})} question ids"
        if qs is None:
            return head + ("\n  structure only (fields, types, split): question ids and gold ranges were "
                           "NOT checked - pass the questions file to check them")
        return head + f"; checked against {questions}"
    if fmt == "dataset":
        pair = _pair(p) if p.is_dir() else None
        if pair is None:
            raise DataError("a dataset folder needs questions.{jsonl,csv} and responses.{jsonl,csv}", path=str(p))
        ds = load_dataset(*pair)
        ds.validate()
        return "OK " + summarize(ds)
    if fmt == "asap":
        return "OK (default splits) " + summarize(load_asap(p))
    if fmt == "sasbench":
        return "OK " + summarize(load_sasbench(p))
    u = load_sasbench_unlabelled(p)
    return (f"OK unlabelled SAS-Bench {p}: {len(u.questions)} questions, {len(u.answers)} answers; "
            "NO gold marks (inspection and statistics only)")
