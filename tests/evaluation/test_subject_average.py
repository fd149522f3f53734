"""Table 1's SAS-Avg with a subject-stratified bootstrap (edit_lib/evaluation/significance.py) and Table 3's gain
ratio (significance.gain_ratios), against independent computations: Table 1's own layout (tables.main_table over
metrics.grading_metrics) for the point values, and naive loops over the same question draws for the intervals."""
import numpy as np
import pandas as pd
import pytest

from edit_lib import metrics
from edit_lib.evaluation import significance as sg
from edit_lib.evaluation.significance import subject_average
from edit_lib.evaluation.tables import metrics_long
from edit_lib.systems import MAIN

SUBJECTS = {"history": 5, "geography": 3, "physics": 4}  # questions per subject


def _preds(seed=0, systems=MAIN, fail_rate=0.05):
    """OOD predictions of one SAS-like dataset with three subjects; EDIT-RL with two seeds (Table 1 reads the
    first), the others seedless."""
    rng = np.random.default_rng(seed)
    rows = []
    for subj, n_q in SUBJECTS.items():
        for q in range(n_q):
            m, n = int(rng.integers(2, 8)), int(rng.integers(3, 9))
            gold = rng.integers(0, m + 1, n)
            for s in systems:
                for sd in ((0, 1) if s == "edit_sft_edit_rl" else (None,)):
                    pred = np.clip(gold + rng.integers(-2, 3, n), 0, m).astype(float)
                    pred[rng.random(n) < fail_rate] = np.nan
                    rows += [dict(system=s, seed=sd, dataset="sas", split="ood_test", subject=subj,
                                  question_id=f"{subj}{q}", response_id=f"{subj}{q}_{i}", gold=int(gold[i]),
                                  mark=pred[i], max_mark=m) for i in range(n)]
    return pd.DataFrame(rows)


def _table1_avg(preds, invalid):
    """Table 1's SAS-Avg by its own path: metrics per subject (first seed), their plain mean."""
    m = metrics_long(preds, invalid)
    m = m[(m["subject"] != "all") & ((m["seed"].isna()) | (m["seed"] == 0))]
    return m.groupby("system")[["acc", "within1", "mae", "qwk"]].mean()


@pytest.mark.parametrize("invalid", ["wrong", "zero", "exclude"])
def test_the_point_values_are_table1s_subject_average(invalid):
    preds = _preds()
    t = subject_average(preds, n_boot=50, invalid=invalid).set_index("metric")
    avg = _table1_avg(preds, invalid)
    for metric, r in t.iterrows():
        assert r["value"] == pytest.approx(avg.loc["edit_sft_edit_rl", metric])
        assert r["versus_value"] == pytest.approx(avg.loc[r["versus"], metric])
        rivals = avg.drop("edit_sft_edit_rl")[metric]
        assert r["versus"] == (rivals.idxmin() if metric == "mae" else rivals.idxmax())  # the same average picks it
        sign = -1 if metric == "mae" else 1
        assert r["delta"] == pytest.approx(sign * (r["value"] - r["versus_value"]))
    assert set(t.index) == {"acc", "within1", "mae", "qwk"} and (t["subjects"] == 3).all()
    assert (t["n_questions"] == sum(SUBJECTS.values())).all()


def test_the_interval_resamples_questions_within_each_subject_as_a_naive_loop_does():
    preds, n_boot, seed = _preds(1), 40, 7
    t = subject_average(preds, n_boot=n_boot, seed=seed).set_index("metric")
    rows = preds[(preds["seed"].isna()) | (preds["seed"] == 0)]
    blocks = sorted(rows.assign(block="sas/" + rows["subject"])["block"].unique())
    draws = {b: sg.resample_indices(SUBJECTS[b[4:]], n_boot, seed + k)
             for k, b in enumerate(blocks)}
    for metric, r in t.iterrows():
        diffs = []
        for i in range(n_boot):
            per_sys = {}
            for s in ("edit_sft_edit_rl", r["versus"]):
                vals = []
                for b in blocks:
                    subj = b[4:]
                    qids = sorted(rows.loc[rows["subject"] == subj, "question_id"].unique())
                    parts = [rows[(rows["system"] == s) & (rows["question_id"] == qids[j])] for j in draws[b][i]]
                    got = metrics.grading_metrics(
                        [f"{k}" for k, p in enumerate(parts) for _ in range(len(p))],  # a drawn twice: two questions
                        [g for p in parts for g in p["gold"]],
                        [None if np.isnan(x) else int(x) for p in parts for x in p["mark"]],
                        [mm for p in parts for mm in p["max_mark"]])
                    vals.append(got[metric])
                per_sys[s] = np.mean(vals)
            sign = -1 if metric == "mae" else 1
            diffs.append(sign * (per_sys["edit_sft_edit_rl"] - per_sys[r["versus"]]))
        lo, hi = np.percentile(diffs, [2.5, 97.5])
        assert (r["delta_ci_low"], r["delta_ci_high"]) == pytest.approx((lo, hi)), metric


def test_no_target_or_no_rival_gives_no_rows():
    preds = _preds()
    assert subject_average(preds[preds["system"] != "edit_sft_edit_rl"]).empty
    assert subject_average(preds[preds["system"] == "edit_sft_edit_rl"]).empty


def test_the_gain_ratio_is_a_ratio_of_paired_pooled_gains_on_the_same_draws():
    rng = np.random.default_rng(3)
    n_q, systems = 15, ["base", "base_grpo", "int_sft", "edit_sft", "edit_sft_edit_rl"]
    lift = dict(base=0.0, base_grpo=0.05, int_sft=0.04, edit_sft=0.1, edit_sft_edit_rl=0.15)
    base = rng.uniform(0.3, 0.7, n_q)
    pq = pd.DataFrame([dict(dataset="sas", system=s, question_id=f"q{q:02d}", qwk=base[q] + lift[s] +
                            rng.normal(0, 0.01)) for s in systems for q in range(n_q)])
    t = sg.gain_ratios(pq, n_boot=200, seed=5).set_index("system")
    idx = sg.resample_indices(n_q, 200, 5)
    x = pq.pivot(index="system", columns="question_id", values="qwk")
    d = {s: (x.loc[s] - x.loc["base"]).to_numpy() for s in systems}
    for s in ("edit_sft", "edit_sft_edit_rl"):
        den = (d["base_grpo"].mean() + d["int_sft"].mean()) / 2
        assert t.loc[s, "ratio"] == pytest.approx(d[s].mean() / den)
        boot = [d[s][i].mean() / ((d["base_grpo"][i].mean() + d["int_sft"][i].mean()) / 2) for i in idx]
        assert (t.loc[s, "ratio_ci_low"], t.loc[s, "ratio_ci_high"]) == pytest.approx(tuple(np.percentile(boot,
                                                                                                         [2.5, 97.5])))
        assert t.loc[s, "defined"]
    flat = pq.assign(qwk=np.where(pq["system"].isin(["base_grpo", "int_sft"]), pq["qwk"] - pq["system"].map(lift),
                                  pq["qwk"]))  # the baselines gain nothing: no ratio
    t = sg.gain_ratios(flat, n_boot=200, seed=5)
    assert not t["defined"].any() and t["ratio_ci_low"].isna().all()


def test_a_subject_the_target_was_not_graded_on_is_named_and_left_out():
    """The smoke profile trains RL on one of its two SAS-like datasets: EDIT-RL's average is over the subjects it
    was graded on, a rival over the same ones, and the other subjects are named."""
    preds = _preds()
    part = preds[~((preds["system"] == "edit_sft_edit_rl") & (preds["subject"] == "physics"))]
    t = subject_average(part, n_boot=30).set_index("metric")
    assert (t["subjects"] == 2).all() and (t["subjects_missing"] == "sas/physics").all()
    two = _table1_avg(preds[preds["subject"] != "physics"], "wrong")
    assert t.loc["qwk", "value"] == pytest.approx(two.loc["edit_sft_edit_rl", "qwk"])
    assert t.loc["qwk", "versus_value"] == pytest.approx(two.loc[t.loc["qwk", "versus"], "qwk"])
