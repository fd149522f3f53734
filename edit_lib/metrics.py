"""Grading metrics (App. B "Decoding and evaluation"): QWK per question over [0, M_q], macro-averaged;
exact accuracy, within-1 accuracy, MAE; and a pooled QWK, always labelled as such.

Conventions the paper leaves implicit: a question whose kappa is undefined is left out of the macro average
(``qwk_undefined``); a parse failure is counted in ``n_invalid`` and scored as ``invalid`` says
(``INVALID_MODES``: ``"wrong"`` by default, ``"zero"``, ``"exclude"``); the pooled QWK is ``qwk_pooled``, never
``qwk``. Main entries: ``grading_metrics``, ``quadratic_weighted_kappa``.

Details: book/departures.md, section "Grading metrics conventions (edit_lib/metrics.py)".
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from edit_lib.registry import Registry

INVALID_MODES = ("wrong", "zero", "exclude")


@dataclass(frozen=True)
class Metric:
    """One grading metric: ``fn(gold, pred, max_mark)`` on integer arrays gives a float (NaN: undefined);
    ``over`` 'questions' applies it to each question's responses and averages the defined values (macro; the
    undefined ones counted in ``<name>_undefined``), 'responses' applies it to all of them at once (``max_mark``
    the largest M_q)."""
    fn: Callable[[np.ndarray, np.ndarray, int], float]
    higher_is_better: bool
    over: str


# every metric 07 reports (``grading_metrics``), in the order of its columns; adding one is an entry here
METRICS: Registry[Metric] = Registry("metric", "metrics.METRICS")


def quadratic_weighted_kappa(gold: Sequence[int], pred: Sequence[int], max_mark: int) -> float:
    """Cohen's kappa with quadratic weights over labels 0..max_mark (App. B). NaN when undefined."""
    g = np.asarray(gold, dtype=int)
    p = np.asarray(pred, dtype=int)
    if g.shape != p.shape or g.ndim != 1:
        raise ValueError("gold and pred must be 1-D sequences of equal length")
    if g.size == 0:
        return float("nan")
    k = int(max_mark) + 1
    for name, arr in (("gold", g), ("pred", p)):
        if arr.min() < 0 or arr.max() > max_mark:
            raise ValueError(f"{name} mark outside [0, {max_mark}]: {arr.min()}..{arr.max()}")
    observed = np.zeros((k, k))
    np.add.at(observed, (g, p), 1.0)
    expected = np.outer(observed.sum(1), observed.sum(0)) / g.size
    idx = np.arange(k)
    weights = (idx[:, None] - idx[None, :]) ** 2
    denom = float((weights * expected).sum())
    if denom == 0.0:
        return float("nan")
    return 1.0 - float((weights * observed).sum()) / denom


METRICS.update({
    "qwk": Metric(quadratic_weighted_kappa, True, "questions"),  # App. B: macro over questions
    "acc": Metric(lambda g, p, m: float(np.mean(g == p)), True, "responses"),
    "within1": Metric(lambda g, p, m: float(np.mean(np.abs(g - p) <= 1)), True, "responses"),
    "mae": Metric(lambda g, p, m: float(np.mean(np.abs(g - p))), False, "responses"),
    "qwk_pooled": Metric(quadratic_weighted_kappa, True, "responses"),  # pooled, always labelled as such
})


def farthest_mark(gold: int, max_mark: int) -> int:
    """The valid mark farthest from ``gold`` in [0, M_q]: 0 or M_q; a tie (gold = M_q / 2) gives 0 (no credit)."""
    return 0 if gold >= max_mark - gold else max_mark


def grading_metrics(question_ids: Sequence, gold: Sequence[int], pred: Sequence[int | None],
                    max_marks: Sequence[int] | dict, invalid: str = "wrong") -> dict:
    """Every metric of ``METRICS``: QWK (macro over questions), ACC, within-1, MAE, pooled QWK (App. B), and counts.

    ``max_marks`` is either one M_q per row or a mapping question id -> M_q; ``invalid`` scores parse failures
    (``"wrong"``, ``"zero"`` or ``"exclude"``, see the module docstring). Returns keys
    ``n, n_invalid``, each metric's name (``qwk, acc, within1, mae, qwk_pooled``), ``n_questions`` and, per metric over
    questions, ``<name>_undefined`` (``qwk_undefined``).
    """
    if invalid not in INVALID_MODES:
        raise ValueError(f"invalid must be one of {INVALID_MODES}, got {invalid!r}")
    qids = list(question_ids)
    if not (len(qids) == len(gold) == len(pred)):
        raise ValueError("question_ids, gold and pred must have equal length")
    mm = [max_marks[q] for q in qids] if isinstance(max_marks, dict) else list(max_marks)
    if len(mm) != len(qids):
        raise ValueError("max_marks must give one M_q per row")
    rows = []
    n_invalid = 0
    for q, g, p, m in zip(qids, gold, pred, mm):
        if not 0 <= int(g) <= m:
            raise ValueError(f"question {q}: gold {g} outside [0, {m}]")
        if p is None or (isinstance(p, float) and np.isnan(p)):
            n_invalid += 1
            if invalid == "exclude":
                continue
            p = 0 if invalid == "zero" else farthest_mark(int(g), int(m))
        if not 0 <= int(p) <= m:
            raise ValueError(f"question {q}: prediction {p} outside [0, {m}] (should have been a parse failure)")
        rows.append((q, int(g), int(p), int(m)))
    out = dict(n=len(rows), n_invalid=n_invalid)
    if not rows:
        return dict(out, **{name: float("nan") for name in METRICS}, n_questions=0,
                    **{f"{n}_undefined": 0 for n, m in METRICS.items() if m.over == "questions"})
    g = np.array([r[1] for r in rows])
    p = np.array([r[2] for r in rows])
    by_q: dict = defaultdict(list)
    for q, gi, pi, m in rows:
        by_q[q].append((gi, pi, m))
    per_q = []
    for q, items in by_q.items():
        ms = {m for _, _, m in items}
        if len(ms) != 1:
            raise ValueError(f"question {q} has inconsistent max marks {sorted(ms)}")
        per_q.append((np.array([a for a, _, _ in items]), np.array([b for _, b, _ in items]), ms.pop()))
    undefined = {}
    for name, metric in METRICS.items():
        if metric.over == "questions":
            vals = [v for v in (metric.fn(*x) for x in per_q) if not np.isnan(v)]
            out[name] = float(np.mean(vals)) if vals else float("nan")
            undefined[f"{name}_undefined"] = len(per_q) - len(vals)
        else:
            out[name] = metric.fn(g, p, max(r[3] for r in rows))
    return dict(out, n_questions=len(by_q), **undefined)


def frame_metrics(rows, invalid: str = "wrong") -> dict:
    """``grading_metrics`` of a graded table (columns question_id, gold, mark with a missing mark where the grade
    did not parse, max_mark): Tables 1-2's metrics of one system's rows."""
    import pandas as pd
    return grading_metrics(rows["question_id"].tolist(), rows["gold"].tolist(),
                           [None if pd.isna(x) else int(x) for x in rows["mark"]], rows["max_mark"].tolist(),
                           invalid=invalid)
