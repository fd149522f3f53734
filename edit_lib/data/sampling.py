"""A per-question cap on the answers a dataset keeps, the same rule for every source (a suite's choice that bounds
a profile's work on large files; ASAP's ``max_per_question``, and the ``jsonl`` and ``sasbench`` sources' option of
that name). Each (question, split) keeps a seeded sample of ``n`` of its answers, in file order; the full counts go
into ``meta["full_counts"]`` so a notebook can say what was left out.
"""
from __future__ import annotations

import random
from typing import Sequence, TypeVar

from edit_lib.data.schema import Dataset

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
