"""ASAP-SAS (Kaggle/Hewlett 2012) as the public analogue of Private-Science (App. A, Table 8).

Reads ``$EDIT_SUITE_DATA/asap_sas`` by default (``data.registry.data_root``; the folder tree is in ``data_cards/asap_sas.md``):
one question per essay set, built from its rubric document; gold = Score1 (the official final score). ID/OOD
splits are like Private-Science's (App. A): questions in ``ood_sets`` (default ``(5, 10)``) are unseen in
training and their answers form ``ood_test``. Files are strict UTF-8 (``encoding_errors="replace"`` counts each
bad byte); ``on_error="skip"`` drops a malformed answer row into a ``SkipReport``. Main entry: ``load_asap``.

Details: book/departures.md, section "ASAP-SAS loader (edit_lib/data/asap.py)".
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from edit_lib.data.schema import DataError, DataFileNotFound, Dataset, FreeTextScheme, Question, Response, SkipReport
from edit_lib.data.key_elements import parse_key_elements
from edit_lib.data.records import sample_rows, check_on_error, get_int, get_str, iter_csv, read_text, skip, skip_meta

DEFAULT_OOD_SETS = (5, 10)
SUBJECT_GROUPS = {"science": ("science", "biology"), "english": ("english", "english language arts")}
RUBRIC_START = re.compile(r"^(Scoring Rubric\b|Rubric for\b|Reading for Information Scoring and Rubric)")
REFERENCE_HEAD = re.compile(r"^(Possible Correct Responses|Sample Response|Key Elements|Examples):\s*$")
REFERENCE_END = re.compile(r"^(\d-Point Rubric:|Rubric:|Score \d|\d points?)\s*$")
TRAIN_COLS = ("Id", "EssaySet", "Score1", "EssayText")


@dataclass(frozen=True)
class AsapRubric:
    """The parts of one ASAP set document (App. A: question, rubric, maximum mark)."""

    set_id: int
    subject: str
    max_mark: int
    prompt: str
    rubric: str
    reference: str
    header: dict[str, str]


def _read(path: str | Path, encoding_errors: str, replaced: list[str] | None) -> str:
    """A file's text (module docstring: strict UTF-8, or counted replacement)."""
    try:
        text, bad = read_text(path, encoding_errors)
    except DataError as e:
        raise DataError(f"{e.reason}; or load ASAP with the option encoding_errors: replace (each bad byte "
                        "becomes U+FFFD and is counted)", path=e.path, line=e.line) from None
    if replaced is not None:
        replaced += [f"{path}:{line}" for line, _ in bad]
    return text


def _clean(lines: list[str]) -> str:
    text = "\n".join(ln.rstrip() for ln in lines).strip()
    return re.sub(r"\n{3,}", "\n\n", text)


def read_rubric(path: str | Path, encoding_errors: str = "strict",
                replaced: list[str] | None = None) -> AsapRubric:
    """Parse ``rubrics/set_NN.txt`` (App. A): header pairs ("Key:" line, value line) up to
    "Rubric range", the prompt, then the rubric from its first heading to the end.
    ``replaced`` collects "file:line" of bytes replaced under ``encoding_errors="replace"``."""
    path = Path(path)
    lines = _read(path, encoding_errors, replaced).replace("\r", "").split("\n")
    header: dict[str, str] = {}
    i, set_id, end_header = 0, None, None
    while i < len(lines):
        s = lines[i].strip()
        m = re.match(r"Data Set #(\d+)$", s)
        if m:
            set_id = int(m.group(1))
        elif s.endswith(":") and i + 1 < len(lines):
            header[s[:-1]] = lines[i + 1].strip()
            if s == "Rubric range:":
                end_header = i + 2
                break
            i += 1
        i += 1
    if end_header is None:
        raise DataError("no 'Rubric range:' line", path=str(path), field="Rubric range")
    m = re.fullmatch(r"0\s*[-\u2013]\s*(\d+)", header["Rubric range"])
    if not m:
        raise DataError(f"cannot read a range like '0-3' from {header['Rubric range']!r}",
                        path=str(path), line=end_header, field="Rubric range")
    start = next((j for j in range(end_header, len(lines)) if RUBRIC_START.match(lines[j].strip())), None)
    if start is None:
        raise DataError("no rubric heading ('Rubric for ...', 'Scoring Rubric ...')",
                        path=str(path), field="rubric")
    ref: list[str] = []
    for j in range(start, len(lines)):
        if REFERENCE_HEAD.match(lines[j].strip()):
            for ln in lines[j + 1:]:
                if REFERENCE_END.match(ln.strip()):
                    break
                ref.append(ln)
            break
    return AsapRubric(set_id=set_id or 0, subject=header.get("Subject", ""), max_mark=int(m.group(1)),
                      prompt=_clean(lines[end_header:start]), rubric=_clean(lines[start:]),
                      reference=_clean(ref), header=header)


def asap_question(rub: AsapRubric, key_elements: bool = False, where: str = "rubric") -> Question:
    """One essay set as a Question (App. A): a free-text scheme, or with ``key_elements`` the guide's count-to-band
    scheme where it lists key elements (``key_elements.parse_key_elements``, a documented departure)."""
    scheme = parse_key_elements(rub.rubric, rub.max_mark, where) if key_elements else None
    return Question(id=f"asap-{rub.set_id:02d}", subject=rub.subject, text=rub.prompt,
                    reference_answer=rub.reference,
                    scheme=scheme or FreeTextScheme(text=rub.rubric, max_mark_=rub.max_mark), max_mark=rub.max_mark)


def read_answers(path: str | Path, q: Question, set_id: int, split: str, *, report: SkipReport | None = None,
                 encoding_errors: str = "strict", replaced: list[str] | None = None) -> list[Response]:
    """Rows of one ASAP CSV as Responses (gold = Score1); DataError names file, line and column.
    With ``report`` a bad row is recorded there and dropped; a missing column always stops."""
    text = _read(path, encoding_errors, replaced)
    out = []
    for line, row in iter_csv(path, report, text=text):
        where = dict(path=str(path), line=line)
        missing = [c for c in TRAIN_COLS if c not in row]
        if missing:
            raise DataError("missing column", path=str(path), line=1, field=missing[0])
        try:
            rid = get_int(row, "Id", where, cells=True)
            if get_int(row, "EssaySet", where, cells=True) != set_id:
                raise DataError(f"EssaySet {row['EssaySet']!r} in the folder of set {set_id}",
                                field="EssaySet", **where)
            gold = get_int(row, "Score1", where, cells=True)
            if not 0 <= gold <= q.max_mark:
                raise DataError(f"score {gold} outside the rubric range [0, {q.max_mark}]",
                                field="Score1", **where)
            answer = get_str(row, "EssayText", where)
        except DataError as e:
            skip(report, e)
            continue
        out.append(Response(f"asap{set_id:02d}-{rid}", q.id, answer, gold, split))
    return out


def _subject_ok(subject: str, subjects) -> bool:
    want = {s.lower() for s in subjects}
    names = {subject.lower()} | {g for g, members in SUBJECT_GROUPS.items() if subject.lower() in members}
    return bool(want & names)


def load_asap(root: str | Path, *, sets=None, subjects=None, ood_sets=DEFAULT_OOD_SETS,
              ood_answers: str = "all", max_per_question: int | None = None, seed: int = 0,
              on_error: str = "raise", encoding_errors: str = "strict", key_elements: bool = False,
              name: str = "asap_sas") -> Dataset:
    """ASAP-SAS as a Dataset with ID/OOD splits (App. A, Table 8; see module docstring).

    ``sets``: essay sets to load (default: every ``set_NN`` folder); ``subjects``: keep sets whose
    rubric Subject matches, or a group ("science" = Science+Biology = sets 1, 2, 5, 6, 10;
    "english"); ``max_per_question``: deterministic per-(question, split) subsample (seeded);
    ``on_error``/``encoding_errors``: module docstring; ``key_elements``: score sets whose guide lists key
    elements with its count-to-band scheme (``asap_question``; ``meta["key_element_sets"]`` names them)."""
    root = Path(root)
    if ood_answers not in ("all", "test"):
        raise ValueError(f"ood_answers must be 'all' or 'test', not {ood_answers!r}")
    if encoding_errors not in ("strict", "replace"):
        raise ValueError(f"encoding_errors must be 'strict' or 'replace', not {encoding_errors!r}")
    report = SkipReport() if on_error == "skip" else None
    check_on_error(on_error, report)
    if not root.is_dir():
        raise DataFileNotFound(f"{root}: no such folder (expected the asap_sas folder; data_cards/asap_sas.md)")
    found = sorted(int(p.name[4:]) for p in root.glob("set_[0-9][0-9]") if p.is_dir())
    if not found:
        raise DataError("no set_NN folders (is this the asap_sas folder?)", path=str(root))
    sets = sorted(found if sets is None else set(sets))
    for s in sets:
        if s not in found:
            raise DataError(f"essay set {s} requested but {root / f'set_{s:02d}'} is absent", path=str(root))
    ood = set(ood_sets or ())
    questions, responses, notes, counts, replaced = {}, [], {}, {}, []
    for s in sets:
        rub_path = root / "rubrics" / f"set_{s:02d}.txt"
        rub = read_rubric(rub_path, encoding_errors, replaced)
        if subjects is not None and not _subject_ok(rub.subject, subjects):
            continue
        q = asap_question(rub, key_elements, str(rub_path))
        questions[q.id] = q
        if not rub.reference:
            notes[q.id] = "the ASAP document gives no reference answer; left empty"
        files = {"train": ["train.csv", "val.csv"], "id_test": ["test.csv"]}
        if s in ood:
            files = {"ood_test": ["train.csv", "val.csv", "test.csv"] if ood_answers == "all" else ["test.csv"]}
        for split, names in files.items():
            paths = [root / f"set_{s:02d}" / f for f in names]
            paths = [f for f in paths if f.name != "val.csv" or f.exists()]  # val.csv is optional
            rows = [r for f in paths for r in read_answers(f, q, s, split, report=report,
                                                            encoding_errors=encoding_errors, replaced=replaced)]
            counts[f"{q.id}/{split}"] = len(rows)
            rows = sample_rows(rows, max_per_question, seed, q.id, split)
            responses += rows
    meta = dict(source=str(root), sets=sorted(int(k[5:]) for k in questions),
                ood_sets=sorted(ood & {int(k[5:]) for k in questions}), ood_answers=ood_answers,
                max_per_question=max_per_question, seed=seed, full_counts=counts, reference_notes=notes,
                encoding_errors=encoding_errors, replaced_bytes=len(replaced), replaced_bytes_at=replaced[:20],
                key_element_sets=sorted(int(k[5:]) for k, q in questions.items() if q.scheme.kind == "lor"),
                **skip_meta(report, sum(counts.values())))
    meta["n_records"] += len(questions)  # the rubrics are records too
    return Dataset(name, questions, responses, meta)
