"""Table 1's SAS-Avg with an interval: the plain mean over the subjects of each subject's metrics (QWK macro over
its questions, ACC, within-1 and MAE over its responses; ``tables.main_table``), resampled by a cluster bootstrap
stratified by subject (App. G's unit, the question, drawn within each subject, so every resample keeps the three
subjects the average is over). The claims ledger judges "EDIT-RL achieves the best results on average across all
metrics" (Sec. 3.2) on it: EDIT-RL against its runner-up on that same average, paired on the same resamples.
App. G's question-pooled QWK (``significance``) weights questions, not subjects, and is another quantity. Below it,
the response-level bootstrap for runs with too few held-out questions (``response_bootstrap``, ``versus_runner_up``).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from edit_lib import metrics
from edit_lib.evaluation.significance import MAIN_RIVALS, _boot_means, _counts, bootstrap_p, question_table
from edit_lib.evaluation.tables import TABLE_METRICS, first_seed
from edit_lib.power import paired_summary, percentile_interval
from edit_lib.systems import BASE, EDIT_RL, MAIN


LOWER_IS_BETTER = {"mae"}


def table1_rows(preds: pd.DataFrame) -> pd.DataFrame:
    """07's predictions Table 1 is built from: each system's first seed (``tables.first_seed``), the OOD answers of
    the datasets evaluated on OOD questions only (no ID test split), one ``block`` per (dataset, subject)."""
    p = first_seed(preds[preds["system"].isin(MAIN)])
    ood_only = [d for d, g in p.groupby("dataset") if set(g["split"]) == {"ood_test"}]
    p = p[p["dataset"].isin(ood_only)]
    return p.assign(block=p["dataset"].astype(str) + "/" + p["subject"].astype(str))


def _per_question(rows: pd.DataFrame, invalid: str) -> pd.DataFrame:
    """One row per (system, block, question): its QWK (``significance.question_table``) and the sums of its
    responses' exact, within-1 and absolute errors, with parse failures scored as ``metrics.grading_metrics``
    scores them (``eval.invalid_as``)."""
    r = rows if invalid != "exclude" else rows[rows["mark"].notna()]
    marks = r["mark"].astype(int) if invalid == "exclude" else scored_marks(r, invalid)
    err = (marks - r["gold"].astype(int)).abs()
    sums = r.assign(n=1, acc=(err == 0).astype(float), within1=(err <= 1).astype(float), mae=err.astype(float))
    sums = sums.groupby(["system", "block", "question_id"], sort=True)[["n", "acc", "within1", "mae"]].sum()
    qwk = question_table(rows.assign(dataset=rows["block"]), invalid)  # the block stands in for the dataset
    qwk = qwk.rename(columns={"dataset": "block"}).set_index(["system", "block", "question_id"])["qwk"]
    return sums.join(qwk).reset_index()


def subject_average(preds: pd.DataFrame, n_boot: int = 10000, ci: float = 0.95, seed: int = 0,
                    invalid: str = "wrong", target: str = EDIT_RL, rivals=MAIN_RIVALS,
                    min_questions: int = 0) -> pd.DataFrame:
    """Table 1's SAS-Avg (Sec. 3.2) of ``target`` against its runner-up on each metric, with a paired interval:
    one row per metric with ``value`` (the target's average, as Table 1 prints it), ``versus`` (the best of
    ``rivals`` on that same average: the highest, or the lowest MAE) and its ``versus_value``, ``delta`` (the
    target's advantage: target minus runner-up, runner-up minus target for MAE) with its percentile interval,
    ``delta_se``, ``mde`` (80% power) and ``p`` (two-sided, as App. G's), ``subjects`` and ``n_questions``;
    ``few_questions`` below ``min_questions`` questions in all. The average is over the subjects the target was
    graded on (``subjects_missing`` names Table 1's others), and only a rival graded on each of them can be the
    runner-up. Questions are resampled within each subject (seed ``seed + k`` for the k-th subject), shared by every
    system and metric. Empty where the target or every such rival is absent."""
    from edit_lib.evaluation.significance import bootstrap_p
    rows = table1_rows(preds)
    every = sorted(rows["block"].unique())
    blocks = sorted(rows.loc[rows["system"] == target, "block"].unique())  # the subjects the target was graded on
    graded = rows.groupby("system")["block"].agg(set)
    systems = [s for s in [target, *rivals] if s in graded and set(blocks) <= graded[s]]
    if target not in systems or len(systems) < 2:
        return pd.DataFrame()
    pq = _per_question(rows[rows["system"].isin(systems) & rows["block"].isin(blocks)], invalid)
    point, boot = {}, {}  # metric -> (S,) and (S x B): the average over subjects
    per_block = []
    for k, b in enumerate(blocks):
        g = pq[pq["block"] == b]
        qids = sorted(g["question_id"].unique())
        _, counts = _counts(len(qids), n_boot, seed + k)
        ones = np.ones((1, len(qids)))

        def mat(col):
            return g.pivot(index="system", columns="question_id", values=col).reindex(index=systems,
                                                                                    columns=qids).to_numpy(float)
        n = mat("n")
        stats = {}
        for metric in TABLE_METRICS:
            if metric == "qwk":
                x = mat("qwk")
                stats[metric] = (_boot_means(x, ones)[:, 0], _boot_means(x, counts))
            else:
                s = np.nan_to_num(mat(metric))
                nn = np.nan_to_num(n)
                with np.errstate(invalid="ignore", divide="ignore"):
                    stats[metric] = ((ones @ s.T / (ones @ nn.T))[0], (counts @ s.T / (counts @ nn.T)).T)
        per_block.append(stats)
    for metric in TABLE_METRICS:
        point[metric] = np.mean([st[metric][0] for st in per_block], axis=0)
        boot[metric] = np.mean([st[metric][1] for st in per_block], axis=0)
    out = []
    for metric in TABLE_METRICS:
        sign = -1.0 if metric in LOWER_IS_BETTER else 1.0
        vals = {s: point[metric][i] for i, s in enumerate(systems) if s != target and not np.isnan(point[metric][i])}
        if not vals:
            continue
        versus = (min if metric in LOWER_IS_BETTER else max)(vals, key=vals.get)
        t, v = systems.index(target), systems.index(versus)
        db = sign * (boot[metric][t] - boot[metric][v])
        s = paired_summary(sign * (point[metric][t] - point[metric][v]), db, ci)
        out.append(dict(metric=metric, system=target, versus=versus, value=point[metric][t],
                        versus_value=point[metric][v], delta=s.delta, delta_ci_low=s.ci_low, delta_ci_high=s.ci_high,
                        delta_se=s.se, mde=s.mde, p=bootstrap_p(db), subjects=len(blocks),
                        subjects_missing=", ".join(b for b in every if b not in blocks),
                        n_questions=int(pq.drop_duplicates(["block", "question_id"]).shape[0]),
                        few_questions=pq.drop_duplicates(["block", "question_id"]).shape[0] < min_questions))
    return pd.DataFrame(out)


# ------------------------------------------------------------------ a response-level bootstrap for few questions
# A suite's choice, shown beside App. G's question-level bootstrap in 09, never in its place: with 3 held-out
# questions (``cpu-real``) a question-level interval says little, so this resamples responses within each question
# (the questions fixed): each system's QWK (macro over questions, as Table 1) gets a percentile interval, its paired
# difference from Base (same responses in every resample) an interval, SE and MDE (``power.paired_summary``).
# The intervals speak for these questions only. QWK per resample comes from counts (checked against
# ``metrics.quadratic_weighted_kappa``). ``versus_runner_up`` pairs EDIT-RL with its runner-up the same way on OOD
# splits (Table 2's "highest OOD QWK", read by the claims ledger where App. G's bootstrap has too few questions).

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
