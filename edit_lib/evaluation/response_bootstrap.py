"""A response-level bootstrap for runs with too few held-out questions for App. G's question-level one (a suite's
choice, shown beside it in 09, never in its place).

App. G resamples questions. With 3 held-out questions (the ``cpu-real`` profile) a question-level interval or MDE
says little, so this resamples *responses within each question* (the questions stay fixed): each system's QWK
(macro over questions, as Table 1) gets a percentile interval, and each system's paired difference from Base
(same responses in every resample) gets an interval, SE and MDE (``power.paired_summary``, at level ``ci``). The
intervals speak for these questions only, not for other questions. QWK per resample is computed from counts
(observed and expected weighted disagreement), checked against ``metrics.quadratic_weighted_kappa``.
:func:`versus_runner_up` pairs EDIT-RL with its runner-up the same way on OOD splits (Table 2's "highest OOD QWK",
read by the claims ledger where App. G's bootstrap has too few questions).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from edit_lib import metrics
from edit_lib.power import paired_summary, percentile_interval
from edit_lib.systems import BASE


def scored_marks(preds: pd.DataFrame, invalid: str = "wrong") -> pd.Series:
    """The mark each prediction is scored with: its parsed mark, or for a parse failure ``metrics.farthest_mark``
    (``invalid='wrong'``) or 0 (``'zero'``), as ``metrics.grading_metrics`` scores it."""
    if invalid not in ("wrong", "zero"):
        raise ValueError(f"the response bootstrap scores parse failures as 'wrong' or 'zero', got {invalid!r}")
    fill = [metrics.farthest_mark(int(g), int(m)) if invalid == "wrong" else 0
            for g, m in zip(preds["gold"], preds["max_mark"])]
    return pd.Series(np.where(preds["mark"].isna(), fill, preds["mark"].fillna(0)).astype(int), index=preds.index)


def weighted_qwk(gold: np.ndarray, pred: np.ndarray, max_mark: int, counts: np.ndarray) -> np.ndarray:
    """QWK of one question under each row of ``counts`` (B x n: how often each response is drawn); NaN where
    undefined. Equals ``metrics.quadratic_weighted_kappa`` on the responses repeated as counted."""
    k = max_mark + 1
    idx = np.arange(k)
    w = (idx[:, None] - idx[None, :]) ** 2
    observed = counts @ w[gold, pred].astype(float)
    cg, cp = counts @ np.eye(k)[gold], counts @ np.eye(k)[pred]
    expected = np.einsum("ba,ac,bc->b", cg, w, cp) / counts.sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(expected > 0, 1 - observed / expected, np.nan)


def response_bootstrap(preds: pd.DataFrame, systems: list[str] | None = None, base: str = BASE, n_boot: int = 1000,
                       ci: float = 0.95, seed: int = 0, invalid: str = "wrong",
                       scope_cols: tuple[str, ...] = ("dataset", "split"),
                       below_questions: int | None = None) -> pd.DataFrame:
    """Per scope and system: macro QWK with its response-level interval, and the paired difference from ``base``
    with its interval, bootstrap SE and MDE (module docstring). ``preds``: 07's predictions (one greedy mark per
    system and response; only the first seed of a system counts); ``systems`` None: every system in it.
    Responses are paired on ``response_id``. ``below_questions``: only scopes with fewer held-out questions
    (``significance.min_questions``, where App. G's question-level bootstrap says little)."""
    preds = preds.assign(scored=scored_marks(preds, invalid))
    if systems is None:
        systems = [s for s in dict.fromkeys(preds["system"]) if s != base]
    if "seed" in preds:
        first = preds.groupby("system")["seed"].transform(lambda s: s.dropna().min() if s.notna().any() else np.nan)
        preds = preds[preds["seed"].isna() | (preds["seed"] == first)]
    rng = np.random.default_rng(seed)
    rows = []
    for scope, g in preds.groupby(list(scope_cols), sort=True):
        have = [s for s in [base, *systems] if s in set(g["system"])]
        if base not in have or (below_questions is not None and g["question_id"].nunique() >= below_questions):
            continue
        wide = g.pivot_table(index=["question_id", "response_id"], columns="system", values="scored",
                             aggfunc="first")[have].dropna()
        gold = g.drop_duplicates("response_id").set_index("response_id")["gold"]
        mm = g.drop_duplicates("question_id").set_index("question_id")["max_mark"]
        boot = {s: [] for s in have}
        point = {s: [] for s in have}
        for qid, part in wide.groupby(level="question_id"):
            n = len(part)
            counts = rng.multinomial(n, np.full(n, 1 / n), size=n_boot).astype(float)
            gq = gold.loc[part.index.get_level_values("response_id")].to_numpy(int)
            for s in have:
                p = part[s].to_numpy(int)
                boot[s].append(weighted_qwk(gq, p, int(mm[qid]), counts))
                point[s].append(metrics.quadratic_weighted_kappa(gq, p, int(mm[qid])))
        bq = {s: np.nanmean(np.vstack(v), axis=0) for s, v in boot.items()}
        nan = float("nan")
        for s in have:
            est, est_base = float(np.nanmean(point[s])), float(np.nanmean(point[base]))
            qwk_lo, qwk_hi = percentile_interval(bq[s], ci)
            pair = paired_summary(est - est_base, bq[s] - bq[base], ci) if s != base else None
            rows.append(dict(zip(scope_cols, scope if isinstance(scope, tuple) else (scope,)), system=s,
                             n_questions=len(point[s]), n_responses=len(wide), qwk=est, qwk_lo=qwk_lo, qwk_hi=qwk_hi,
                             delta=pair.delta if pair else nan, delta_lo=pair.ci_low if pair else nan,
                             delta_hi=pair.ci_high if pair else nan, delta_se=pair.se if pair else nan,
                             mde=pair.mde if pair else nan))
    return pd.DataFrame(rows)


def versus_runner_up(preds: pd.DataFrame, pairwise: pd.DataFrame, splits: tuple[str, ...] = ("ood_test",),
                     **kw) -> pd.DataFrame:
    """Table 2's "highest OOD QWK" at the response level: for each runner-up row of 09's ``pairwise`` (App. G's
    question-level bootstrap; ``kind`` 'runner-up') on a split of ``splits``, ``system`` minus ``versus`` on that
    dataset's split by :func:`response_bootstrap` (``kw``: its options, e.g. ``below_questions``). One row per
    comparison: dataset, split, system, versus, versus_qwk and the system's row (delta, its interval, SE, MDE)."""
    if pairwise.empty:
        return pd.DataFrame()
    out = []
    for r in pairwise[(pairwise["kind"] == "runner-up") & pairwise["scope"].isin(splits)].itertuples():
        g = preds[(preds["dataset"] == r.dataset) & (preds["split"] == r.scope)]
        t = response_bootstrap(g, [r.system], base=r.versus, **kw)
        t = t.set_index("system") if len(t) else t  # empty: the split is not below ``below_questions``
        if r.system in t.index:
            out.append(dict(system=r.system, versus=r.versus, versus_qwk=t.loc[r.versus, "qwk"], **t.loc[r.system]))
    return pd.DataFrame(out)
