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
from typing import Sequence

import numpy as np

INVALID_MODES = ("wrong", "zero", "exclude")

METRICS = {  # name -> (higher is better, aggregation), in the style of lm-eval-harness registries
    "qwk": (True, "macro over questions"),
    "acc": (True, "mean over responses"),
    "within1": (True, "mean over responses"),
    "mae": (False, "mean over responses"),
    "qwk_pooled": (True, "pooled over responses"),
}


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


def farthest_mark(gold: int, max_mark: int) -> int:
    """The valid mark farthest from ``gold`` in [0, M_q]: 0 or M_q; a tie (gold = M_q / 2) gives 0 (no credit)."""
    return 0 if gold >= max_mark - gold else max_mark


def grading_metrics(question_ids: Sequence, gold: Sequence[int], pred: Sequence[int | None],
                    max_marks: Sequence[int] | dict, invalid: str = "wrong") -> dict:
    """QWK (macro over questions), ACC, within-1, MAE, plus pooled QWK and counts (App. B).

    ``max_marks`` is either one M_q per row or a mapping question id -> M_q; ``invalid`` scores parse failures
    (``"wrong"``, ``"zero"`` or ``"exclude"``, see the module docstring). Returns keys
    ``qwk, acc, within1, mae, qwk_pooled, n, n_questions, qwk_undefined, n_invalid``.
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
        return dict(out, qwk=float("nan"), acc=float("nan"), within1=float("nan"), mae=float("nan"),
                    qwk_pooled=float("nan"), n_questions=0, qwk_undefined=0)
    g = np.array([r[1] for r in rows])
    p = np.array([r[2] for r in rows])
    by_q: dict = defaultdict(list)
    for q, gi, pi, m in rows:
        by_q[q].append((gi, pi, m))
    kappas = []
    undefined = 0
    for q, items in by_q.items():
        ms = {m for _, _, m in items}
        if len(ms) != 1:
            raise ValueError(f"question {q} has inconsistent max marks {sorted(ms)}")
        k = quadratic_weighted_kappa([a for a, _, _ in items], [b for _, b, _ in items], ms.pop())
        if np.isnan(k):
            undefined += 1
        else:
            kappas.append(k)
    out.update(
        qwk=float(np.mean(kappas)) if kappas else float("nan"),
        acc=float(np.mean(g == p)),
        within1=float(np.mean(np.abs(g - p) <= 1)),
        mae=float(np.mean(np.abs(g - p))),
        qwk_pooled=quadratic_weighted_kappa(g, p, max(r[3] for r in rows)),
        n_questions=len(by_q),
        qwk_undefined=undefined,
    )
    return out
