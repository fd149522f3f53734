"""07's tables on hand-built predictions (Tables 1, 2, 4, 5, 6, 13); the prediction cache is tested in
test_predictions.py."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from edit_lib.evaluation import tables as et
from edit_lib.metrics import grading_metrics


def _preds(rows):
    df = pd.DataFrame(rows, columns=["system", "seed", "dataset", "split", "subject", "question_id", "response_id",
                                     "gold", "mark", "max_mark"])
    df["seed"] = pd.array(df["seed"], dtype="Int64")
    df["mark"] = pd.array(df["mark"], dtype="Int64")
    return df


def _world():
    rng = np.random.default_rng(0)
    rows = []
    for system, shift in (("base", 0), ("edit_sft", 1)):
        for subj in ("history", "physics"):
            for q in range(3):
                for r in range(6):
                    g = int(rng.integers(0, 5))
                    mark = int(np.clip(g + rng.integers(-shift - 1, 2), 0, 4))
                    rows.append((system, None, "sas", "ood_test", subj, f"{subj}{q}", f"{subj}{q}-{r}", g, mark, 4))
    return _preds(rows)


class _DS:  # the two attributes main_table reads
    def __init__(self, subjects, id_split):
        self.questions = {i: type("Q", (), {"subject": s})() for i, s in enumerate(subjects)}
        self._id = id_split

    def split(self, name):
        return [1] if (name == "id_test" and self._id) else []


def test_metrics_long_equals_grading_metrics_per_subject():
    p = _world()
    m = et.metrics_long(p)
    row = m[(m["system"] == "base") & (m["subject"] == "physics")].iloc[0]
    g = p[(p["system"] == "base") & (p["subject"] == "physics")]
    want = grading_metrics(g["question_id"], g["gold"], [int(x) for x in g["mark"]], g["max_mark"])
    assert row["qwk"] == pytest.approx(want["qwk"]) and row["mae"] == pytest.approx(want["mae"])
    assert set(m["subject"]) == {"all", "history", "physics"}


def test_table1_layout_average_and_best():
    m = et.metrics_long(_world())
    t = et.main_table(m, {"sas": _DS(["history", "physics"], False)}, ["base", "edit_sft"], "Table 1")
    assert list(t["subject"].unique()) == ["history", "physics", "Avg"]
    assert list(t["metric"].unique()) == ["acc", "within1", "mae", "qwk"]
    avg = t[(t["subject"] == "Avg") & (t["metric"] == "qwk")].iloc[0]
    subj = t[(t["subject"] != "Avg") & (t["metric"] == "qwk")]
    assert avg["base"] == pytest.approx(subj["base"].mean())  # the plain mean of subjects, as SAS-Avg
    assert avg["paper_subject"] == "SAS-Avg"
    mae = t[(t["subject"] == "history") & (t["metric"] == "mae")].iloc[0]
    assert mae["best"] == ("base" if mae["base"] < mae["edit_sft"] else "edit_sft")  # lower is better
    assert et.main_table(m, {"sas": _DS(["history"], False)}, ["base"], "Table 2").empty


def test_best_of_ties_and_nan():
    row = dict(metric="qwk", a=0.5, b=0.5, c=float("nan"))
    assert et.best_of(row, ["a", "b", "c"]) == "all tie"
    assert et.best_of(dict(metric="qwk", a=0.5, b=0.6, c=0.6), ["a", "b", "c"]) == "b / c"
    assert et.best_of(dict(metric="mae", a=0.5, b=0.6), ["a", "b"]) == "a"


def test_seeds_table_matches_a_paired_t_interval():
    rows = []
    a = [0.50, 0.52, 0.49]
    b = [0.55, 0.53, 0.56]
    for s, (x, y) in zip((42, 43, 44), zip(a, b)):
        rows += [dict(system="edit_sft_grpo", seed=s, dataset="bio", split="ood_test", subject="all", qwk=x),
                 dict(system="edit_sft_edit_rl", seed=s, dataset="bio", split="ood_test", subject="all", qwk=y)]
    t = et.seeds_table(pd.DataFrame(rows)).iloc[0]
    ci = stats.ttest_rel(b, a).confidence_interval(0.95)
    assert t["delta"] == pytest.approx(np.mean(np.subtract(b, a)))
    assert (t["delta_ci_low"], t["delta_ci_high"]) == (pytest.approx(ci.low), pytest.approx(ci.high))
    assert t["edit_sft_grpo_sd"] == pytest.approx(np.std(a, ddof=1)) and t["wins"] == 3 and t["n_seeds"] == 3
    assert t["ci_excludes_zero"] == bool(ci.low > 0 or ci.high < 0)


def test_first_seed_keeps_seedless_and_smallest_seed():
    m = pd.DataFrame(dict(system=["base", "g", "g", "h"], seed=[None, 43, 42, 7], v=[1, 2, 3, 4]))
    assert et.first_seed(m)["v"].tolist() == [1, 3, 4]


def test_zero_recall_counts_parse_failures_as_not_zero():
    p = _preds([("base", None, "d", "ood_test", "s", "q", "r1", 0, 0, 4),
                ("base", None, "d", "ood_test", "s", "q", "r2", 0, None, 4),
                ("base", None, "d", "ood_test", "s", "q", "r3", 0, 2, 4),
                ("base", None, "d", "ood_test", "s", "q", "r4", 3, 0, 4)])
    z = et.zero_recall(p).iloc[0]
    assert (z["gold_zero"], z["marked_zero"]) == (3, 1)
    assert z["zero_recall"] == pytest.approx(1 / 3) and z["gold_zero_share"] == 0.75


def test_grid_and_ablation_tables_select_their_systems():
    rows = []
    for s in ("base", "base_grpo", "edit_sft_edit_rl", "edit_sft", "wo_atomic", "wo_checklist", "wo_localiser"):
        for split in ("id_test", "ood_test"):
            rows.append(dict(system=s, seed=None if s in ("base", "edit_sft") or s.startswith("wo") else 1,
                             dataset="bio", split=split, subject="all", qwk=0.5, acc=0.4, within1=0.8, mae=1.0,
                             n=10, n_invalid=0))
    m = pd.DataFrame(rows)
    g = et.grid_table(m)
    assert g["system"].tolist() == ["base", "base_grpo", "edit_sft_edit_rl"]  # grid order; absent arms absent
    a = et.ablation_table(m)
    assert a["system"].tolist()[:4] == ["edit_sft", "wo_localiser", "wo_checklist", "wo_atomic"]
    assert et.ablation_table(m[m["system"] != "wo_atomic"]).empty  # all four or nothing


def test_beside_paper_matches_by_subject_and_leaves_the_rest_nan():
    ours = pd.DataFrame([dict(dataset="sas", subject="history", split="ood", metric="qwk", paper_subject="History",
                              base=0.7),
                         dict(dataset="sas", subject="chemistry", split="ood", metric="qwk",
                              paper_subject="Chemistry", base=0.6)])
    from edit_lib import paper_reference
    comp = et.beside_paper(ours, paper_reference.table("Table 1"), ["base"])
    assert comp.loc[comp["subject"] == "history", "paper"].item() == 0.783  # Table 1, History / QWK, Base
    assert math.isnan(comp.loc[comp["subject"] == "chemistry", "paper"].item())
