"""Table 1's SAS-Avg with an interval: the plain mean over the subjects of each subject's metrics (QWK macro over
its questions, ACC, within-1 and MAE over its responses; ``tables.main_table``), resampled by a cluster bootstrap
stratified by subject (App. G's unit, the question, drawn within each subject, so every resample keeps the three
subjects the average is over). The claims ledger judges "EDIT-RL achieves the best results on average across all
metrics" (Sec. 3.2) on it: EDIT-RL against its runner-up on that same average, paired on the same resamples.
App. G's question-pooled QWK (``significance``) weights questions, not subjects, and is another quantity.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from edit_lib.evaluation.response_bootstrap import scored_marks
from edit_lib.evaluation.significance import MAIN_RIVALS, _boot_means, _counts, bootstrap_p, question_table
from edit_lib.evaluation.tables import TABLE_METRICS, first_seed
from edit_lib.power import paired_summary
from edit_lib.systems import EDIT_RL, MAIN

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
