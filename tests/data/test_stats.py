"""The summaries notebooks 00 and 01 record, as library functions: gold histogram, dataset overview, mark errors
of sampled rollouts and the behaviour tables; each against a hand-computed case."""
import math

import pandas as pd
import pytest

from edit_lib.data.stats import dataset_overview, gold_histogram, gold_table
from edit_lib.data.synthetic import WorldConfig, generate_world
from edit_lib.model.rollouts import mark_error_counts


def _gold(rows):
    return pd.DataFrame([dict(dataset=d, split=s, gold_fraction=f) for d, s, f in rows])


def test_gold_histogram_hand_computed():
    # fractions 0, 0.3 (= 3/10, floating product 0.3 * 10 > 3), 0.7 (7/10), 0.95 and 1.0 (full marks: last bin)
    g = _gold([("a", "train", 0.0), ("a", "train", 3 / 10), ("a", "train", 6 / 20), ("a", "train", 7 / 10),
               ("a", "train", 0.95), ("a", "train", 1.0), ("b", "ood_test", 0.5)])
    h = gold_histogram(g, bins=10)
    assert list(h.columns) == ["dataset", "split", "bin", "lo", "hi", "count", "share"]
    a = h[h.dataset == "a"].set_index("bin")
    assert len(a) == 10 and a["count"].to_dict() == {0: 1, 1: 0, 2: 0, 3: 2, 4: 0, 5: 0, 6: 0, 7: 1, 8: 0, 9: 2}
    assert a["share"].sum() == pytest.approx(1.0) and a.loc[3, "share"] == pytest.approx(2 / 6)
    assert (a.loc[3, "lo"], a.loc[3, "hi"]) == pytest.approx((0.3, 0.4))
    b = h[h.dataset == "b"].set_index("bin")
    assert b["count"].to_dict() == {i: int(i == 5) for i in range(10)}
    h2 = gold_histogram(g, bins=2).query("dataset == 'a'")
    assert h2["count"].tolist() == [3, 3]  # [0, 0.5) holds 0, 0.3, 0.3; [0.5, 1] holds 0.7, 0.95, 1.0


def test_gold_histogram_rejects_bad_input_and_agrees_with_exact_fractions():
    from fractions import Fraction
    with pytest.raises(ValueError, match="bins"):
        gold_histogram(_gold([("a", "train", 0.5)]), bins=0)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        gold_histogram(_gold([("a", "train", 1.5)]))
    ds = generate_world(WorldConfig(seed=5, shape="sas_like", n_questions=12, answers_per_question=4,
                                    ood_questions=3))
    gold = gold_table(ds)
    h = gold_histogram(gold, bins=5)
    for split, sub in gold.groupby("split"):
        # exact reference: bin = floor(5 * gold / M_q) in rational arithmetic (marks on an edge such as 3/5 are
        # where floating-point edges, e.g. numpy's linspace 0.6000000000000001, would misplace them)
        ref = [0] * 5
        for g, m in zip(sub.gold, sub.max_mark):
            ref[min(int(Fraction(int(g), int(m)) * 5), 4)] += 1
        assert h[h.split == split]["count"].tolist() == ref


def test_dataset_overview():
    ds = generate_world(WorldConfig(seed=0, shape="sas_like", n_questions=3, answers_per_question=2,
                                    ood_questions=1))
    ds.meta["note"] = "x"
    ov = dataset_overview({"w": ds})
    assert ov["w"]["questions"] == 4 and ov["w"]["responses"] == 8
    assert ov["w"]["meta"]["note"] == "x" and "concepts" not in ov["w"]["meta"]  # only scalar meta entries


def test_mark_error_counts_hand_computed():
    ro = pd.DataFrame(dict(dataset=["a"] * 5 + ["b"] * 2, mark=pd.array([3, 1, None, 3, 5, 0, 0], dtype="Int64"),
                           gold=[3, 3, 3, 2, 3, 0, 1]))
    err = mark_error_counts(ro)
    got = {(r.dataset, r.error): (r.count, r.share) for r in err.itertuples()}
    # a: errors 0, -2, (parse failure left out), +1, +2 over 4 parsed rollouts; b: 0 and -1
    assert got == {("a", -2): (1, 0.25), ("a", 0): (1, 0.25), ("a", 1): (1, 0.25), ("a", 2): (1, 0.25),
                   ("b", -1): (1, 0.5), ("b", 0): (1, 0.5)}
    assert mark_error_counts(ro.assign(mark=pd.array([None] * 7, dtype="Int64"))).empty


def test_behaviour_tables_over_datasets_and_decodings():
    from edit_lib.embedded.behaviour import analyse_behaviour, behaviour_tables
    from edit_lib.embedded.teacher import teacher_grade
    import numpy as np

    ds = generate_world(WorldConfig(seed=2, shape="sas_like", n_questions=3, answers_per_question=2,
                                    ood_questions=0))
    rng = np.random.default_rng(0)
    frame = pd.DataFrame([dict(dataset="w", response_id=r.id, rollout_id=0,
                               text=teacher_grade(ds.question(r), r, rng).completion) for r in ds.responses])
    tables = behaviour_tables({"w": ds}, {"greedy": frame, "rollouts": frame.iloc[:3]})
    assert set(tables) == {"credit_by_status", "error_types", "behaviour_summary"}
    s = tables["behaviour_summary"].set_index("decoding")
    assert list(s.index) == ["greedy", "rollouts"] and set(s["dataset"]) == {"w"}
    ref = analyse_behaviour(ds, frame.iloc[:3])  # the table is the per-dataset report, labelled
    assert s.loc["rollouts", "n_rollouts"] == ref.summary["n_rollouts"] == 3
    acc = s.loc["rollouts", "accuracy"]
    assert (math.isnan(acc) and math.isnan(ref.summary["accuracy"])) or acc == ref.summary["accuracy"]
    by = tables["credit_by_status"]
    pd.testing.assert_frame_equal(by[by.decoding == "rollouts"].drop(columns=["dataset", "decoding"])
                                  .reset_index(drop=True), ref.by_status)
    # a dataset without coverage ground truth stands for real data
    real = generate_world(WorldConfig(seed=2, shape="sas_like", n_questions=1, answers_per_question=1,
                                      ood_questions=0))
    real.responses = [type(r)(**{**r.__dict__, "coverage": ()}) for r in real.responses]
    assert behaviour_tables({"real": real}, {"greedy": frame}) == {}
