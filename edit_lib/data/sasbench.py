"""SAS-Bench (Lai et al. 2025): the labelled release and the unlabelled copy (App. A, Table 8; App. E).

``load_sasbench`` reads the labelled release (``<n>_<Subject>_ShortAns.jsonl``): one record per student answer,
its steps the answer's segments, gold = ``manual_label``, per-step labels in ``meta["step_labels"]`` for
validation (App. E). Splits are question-disjoint (App. A: SAS has no ID split): a seeded per-subject shuffle
puts ``n_ood`` questions in ``ood_test`` (the paper's counts where the subject has the paper's number of
questions). ``load_sasbench_unlabelled`` reads the unlabelled copy, which has NO gold marks, for inspection and
statistics only, never a ``Dataset``.

Details: book/departures.md, section "SAS-Bench loader (edit_lib/data/sasbench.py)".
"""
from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from edit_lib.data.schema import DataError, DataFileNotFound, Dataset, FreeTextScheme, Question, Response, SkipReport
from edit_lib.data.records import (check_mark_scale, get_mark, check_on_error, get_int, get_str, iter_jsonl, skip,
                                   skip_meta)

FILE_RE = re.compile(r"^\d+_([A-Za-z]+)_ShortAns\.jsonl$")
PAPER_QUESTION_COUNTS = {"History": (102, 26), "Geography": (22, 6), "Physics": (19, 5)}  # (train, ood)


def subject_of(path: str | Path) -> str:
    """'History' from '1_History_ShortAns.jsonl'."""
    m = FILE_RE.match(Path(path).name)
    if not m:
        raise DataError("file name is not like '<n>_<Subject>_ShortAns.jsonl'", path=str(path))
    return m.group(1)


def question_id(subject: str, text: str) -> str:
    """Stable question id from the question text (App. A: questions are grouped by text)."""
    return f"sas-{subject.lower()}-{hashlib.sha1(text.strip().encode('utf-8')).hexdigest()[:10]}"


def sasbench_files(path: str | Path) -> list[Path]:
    """The ``*_ShortAns.jsonl`` files of a folder (or the file itself)."""
    p = Path(path)
    if not p.exists():
        raise DataFileNotFound(f"{p}: no such file or folder (expected labelled SAS-Bench '<n>_<Subject>_ShortAns"
                               ".jsonl' files; data_cards/sas_bench.md)")
    files = [p] if p.is_file() else sorted(f for f in p.iterdir() if FILE_RE.match(f.name))
    if not files:
        raise DataError("no '<n>_<Subject>_ShortAns.jsonl' files", path=str(p))
    return files


def _record_id(rec: dict, where: dict) -> str:
    v = rec.get("id")
    if isinstance(v, bool) or not isinstance(v, (str, int)) or str(v).strip() == "":
        raise DataError("missing field" if v is None else f"expected a string or integer id, got {v!r}",
                        field="id", **where)
    return str(v)


def _parse_steps(rec: dict, where: dict) -> list[dict]:
    steps = rec.get("steps")
    if steps is None:
        raise DataError("missing field", field="steps", **where)
    if not isinstance(steps, list) or not steps:
        raise DataError(f"expected a non-empty list of steps, got {steps!r:.60}", field="steps", **where)
    out = []
    for k, st in enumerate(steps):
        f = f"steps[{k}]"
        if not isinstance(st, dict):
            raise DataError(f"expected an object, got {type(st).__name__}", field=f, **where)
        text = get_str(st, "response", where) if "response" in st else None
        if text is None:
            raise DataError("missing field", field=f"{f}.response", **where)
        label = st.get("label")
        if isinstance(label, bool) or not isinstance(label, (int, float)):
            raise DataError(f"expected a number, got {label!r}", field=f"{f}.label", **where)
        errors = st.get("errors", [])
        if not isinstance(errors, list):
            raise DataError(f"expected a list, got {errors!r}", field=f"{f}.errors", **where)
        out.append(dict(text=text, label=label, errors=errors))
    return out


def read_sasbench_file(path: str | Path, on_error: str = "raise", report: SkipReport | None = None,
                       mark_scale: int = 1) -> tuple[dict[str, Question], list[Response], list[dict[str, Any]]]:
    """One labelled file -> (questions, responses with split "" = unassigned, step-label rows)
    (App. A schema in the module docstring; ``mark_scale`` as in ``records.py``: total and manual_label)."""
    check_on_error(on_error, report)
    check_mark_scale(mark_scale)
    subject = subject_of(path)
    questions: dict[str, Question] = {}
    responses: list[Response] = []
    steps_out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for line, rec in iter_jsonl(path, report):
        where = dict(path=str(path), line=line)
        try:
            rid = f"sas-{subject.lower()}-{_record_id(rec, where)}"
            if rid in seen:
                raise DataError(f"duplicate id {rec['id']!r}", field="id", **where)
            text = get_str(rec, "question", where, empty=False)
            ref, analysis = get_str(rec, "reference", where), get_str(rec, "analysis", where)
            total = get_mark(rec, "total", where, mark_scale)
            if total < 1:
                raise DataError(f"total must be >= 1, got {total}", field="total", **where)
            gold = get_mark(rec, "manual_label", where, mark_scale)
            if not 0 <= gold <= total:
                raise DataError(f"manual_label {gold} outside [0, {total}]", field="manual_label", **where)
            steps = _parse_steps(rec, where)
            qid = question_id(subject, text)
            q = Question(qid, subject, text, ref, FreeTextScheme(analysis, total), total)
            if qid in questions and questions[qid] != q:
                old = questions[qid]
                bad = next(f for f, a, b in (("reference", old.reference_answer, ref),
                                             ("analysis", old.scheme.text, analysis),
                                             ("total", old.max_mark, total)) if a != b)
                raise DataError("differs from an earlier record of the same question", field=bad, **where)
        except DataError as e:
            skip(report, e)
            continue
        seen.add(rid)
        questions.setdefault(qid, q)
        pos = 0
        for k, st in enumerate(steps):
            start = pos + (1 if k else 0)
            pos = start + len(st["text"])
            steps_out.append(dict(response_id=rid, step=k, start=start, end=pos,
                                  **{**st, "label": st["label"] * mark_scale}))  # on the dataset's mark scale
        responses.append(Response(rid, qid, "\n".join(st["text"] for st in steps), gold, ""))
    return questions, responses, steps_out


def ood_question_counts(n_questions: dict[str, int], ood_fraction: float = 0.2,
                        ood_counts: dict[str, int] | None = None) -> dict[str, int]:
    """OOD questions per subject (App. A, Table 8): explicit ``ood_counts``, else the paper's count
    when a subject has the paper's number of questions, else round(ood_fraction * n) in [1, n-1]."""
    out = {}
    for subj, n in n_questions.items():
        if ood_counts is not None and subj in ood_counts:
            k = ood_counts[subj]
        elif subj in PAPER_QUESTION_COUNTS and sum(PAPER_QUESTION_COUNTS[subj]) == n:
            k = PAPER_QUESTION_COUNTS[subj][1]
        else:
            k = min(max(round(ood_fraction * n), 1), n - 1) if n >= 2 else 0
        if not 0 <= k <= n:
            raise ValueError(f"{subj}: {k} OOD questions requested, {n} available")
        out[subj] = k
    return out


def split_questions(qids: dict[str, list[str]], n_ood: dict[str, int], seed: int = 0) -> dict[str, str]:
    """Question -> split, question-disjoint per subject: seeded shuffle of the sorted ids (App. A)."""
    out = {}
    for subj, ids in qids.items():
        ids = sorted(ids)
        random.Random(f"{seed}:{subj}").shuffle(ids)
        out.update({q: ("ood_test" if i < n_ood[subj] else "train") for i, q in enumerate(ids)})
    return out


def load_sasbench(path: str | Path, *, subjects=None, ood_fraction: float = 0.2,
                  ood_counts: dict[str, int] | None = None, n_ood_questions: int | None = None,
                  seed: int = 0, on_error: str = "raise", mark_scale: int = 1, name: str = "sas_bench") -> Dataset:
    """The labelled SAS-Bench release (a folder or one subject file) as a Dataset with
    question-disjoint train/ood_test splits (App. A, Table 8); ``meta["step_labels"]`` holds the
    per-step labels (App. E). OOD question counts: ``ood_counts`` per subject, or
    ``n_ood_questions`` for a single-subject input, else the paper's / ``ood_fraction`` rule.
    ``mark_scale``: half marks (``records.py``; step labels are scaled too); the original scale stays in ``meta``."""
    report = SkipReport() if on_error == "skip" else None
    questions: dict[str, Question] = {}
    responses: list[Response] = []
    steps: list[dict] = []
    for f in sasbench_files(path):
        if subjects is not None and subject_of(f) not in subjects:
            continue
        q, r, s = read_sasbench_file(f, on_error, report, mark_scale)
        questions.update(q)
        responses += r
        steps += s
    by_subj: dict[str, list[str]] = {}
    for q in questions.values():
        by_subj.setdefault(q.subject, []).append(q.id)
    if n_ood_questions is not None:
        if len(by_subj) > 1:
            raise ValueError(f"n_ood_questions needs one subject, got {sorted(by_subj)}; use ood_counts")
        ood_counts = {s: n_ood_questions for s in by_subj}
    n_ood = ood_question_counts({k: len(v) for k, v in by_subj.items()}, ood_fraction, ood_counts)
    split = split_questions(by_subj, n_ood, seed)
    responses = [replace(r, split=split[r.question_id]) for r in responses]
    meta = dict(source=str(path), seed=seed, ood_questions=n_ood, step_labels=steps, mark_scale=mark_scale,
                **skip_meta(report, len(responses), questions, mark_scale))
    return Dataset(name, questions, responses, meta)


# ---------------------------------------------------------------- unlabelled copy (no gold)

@dataclass(frozen=True)
class UnlabelledAnswer:
    """A student answer WITHOUT a gold mark. ``source``: 'bad_student_answer' | 'good_student_answer'."""

    id: str
    question_id: str
    answer: str
    source: str
    segments: tuple[str, ...] = ()


@dataclass
class UnlabelledSAS:
    """Questions and answer texts of the unlabelled copy, for inspection and statistics only."""

    questions: dict[str, Question]
    answers: list[UnlabelledAnswer]
    meta: dict[str, Any] = field(default_factory=dict)
    has_gold: bool = False  # always False: there are no gold marks to train or evaluate on


def load_sasbench_unlabelled(path: str | Path, subjects=None) -> UnlabelledSAS:
    """The unlabelled SAS-Bench copy (App. A): questions (max mark = ``score``, reference =
    ``answer``, scheme = ``analysis``) and every bad/good student answer, WITHOUT gold."""
    questions: dict[str, Question] = {}
    answers: list[UnlabelledAnswer] = []
    index: dict[str, int] = {}
    for f in sasbench_files(path):
        subject = subject_of(f)
        if subjects is not None and subject not in subjects:
            continue
        for line, rec in iter_jsonl(f):
            where = dict(path=str(f), line=line)
            rid = f"sas-{subject.lower()}-{_record_id(rec, where)}"
            text = get_str(rec, "question", where, empty=False)
            max_mark = get_int(rec, "score", where)
            q = Question(question_id(subject, text), subject, text, get_str(rec, "answer", where),
                         FreeTextScheme(get_str(rec, "analysis", where), max_mark), max_mark)
            if questions.setdefault(q.id, q) != q:
                raise DataError("differs from an earlier record of the same question", field="score", **where)
            if isinstance(rec.get("index"), int):
                index[q.id] = rec["index"]
            segs = rec.get("bad_student_answer_segs") or []
            answers.append(UnlabelledAnswer(rid, q.id, get_str(rec, "bad_student_answer", where),
                                            "bad_student_answer", tuple(map(str, segs))))
            if rec.get("good_student_answer") is not None:
                answers.append(UnlabelledAnswer(rid + ":good", q.id, get_str(rec, "good_student_answer", where),
                                                "good_student_answer"))
    return UnlabelledSAS(questions, answers, dict(source=str(path), index=index, has_gold=False))
