"""Outcome filter, Success@N, Retention, pool and App. B bookkeeping on hand-built tables (hand-computed)."""
import math

import numpy as np
import pandas as pd
import pytest

from edit_lib.revision.pool import bookkeeping, build_pool, outcome_filter, retention, success_at_n

NAN = float("nan")
# dataset d: r1 (incorrect), r2 (incorrect), r3 (correct, golden), r4 (unparsed -> incorrect)
ROLLOUTS = pd.DataFrame([
    dict(dataset="d", response_id="a", rollout_id=1, mark=2, gold=3, text="c1"),
    dict(dataset="d", response_id="a", rollout_id=2, mark=4, gold=3, text="c2"),
    dict(dataset="d", response_id="b", rollout_id=1, mark=1, gold=1, text="c3"),
    dict(dataset="d", response_id="b", rollout_id=2, mark=NAN, gold=1, text="c4"),
])
REVISIONS = pd.DataFrame([
    # edit: two revisions of r1 (one kept), one of r2 (not kept), one rejected on r4
    dict(dataset="d", response_id="a", rollout_id=1, revision_id="e1", rule="edit", k=2, gold=3, status="ok",
         revised_prefix="P1\n"),
    dict(dataset="d", response_id="a", rollout_id=1, revision_id="e2", rule="edit", k=3, gold=3, status="ok",
         revised_prefix="P2\n"),
    dict(dataset="d", response_id="a", rollout_id=2, revision_id="e3", rule="edit", k=1, gold=3, status="ok",
         revised_prefix="P3\n"),
    dict(dataset="d", response_id="b", rollout_id=2, revision_id="e4", rule="edit", k=1, gold=1,
         status="gold_labelled", revised_prefix="P4\n"),
    # random: one revision of r2, kept
    dict(dataset="d", response_id="a", rollout_id=2, revision_id="x1", rule="random", k=2, gold=3, status="ok",
         revised_prefix="Q1\n"),
])


def conts(marks: dict) -> pd.DataFrame:
    rows = [dict(revision_id=r, continuation=i, mark=m, text=f"{r}-{i}") for r, ms in marks.items()
            for i, m in enumerate(ms)]
    return pd.DataFrame(rows)


CONTS = conts({"e1": [2, NAN, 3, 3], "e2": [2, 2, 2, 2], "e3": [NAN, NAN, 4, 1], "x1": [3, 0, 0, 0]})


def test_outcome_filter_hand_computed():
    o = outcome_filter(REVISIONS, CONTS, 4).set_index("revision_id")
    assert o.loc["e1", ["n_success", "first_success", "kept"]].tolist() == [2, 2, True]
    assert o.loc["e2", ["n_success", "first_success", "kept"]].tolist() == [0, -1, False]
    assert o.loc["e3", "kept"] == False and o.loc["x1", "first_success"] == 0  # noqa: E712
    assert o.loc["e4", ["n_continuations", "kept"]].tolist() == [0, False]


def test_success_and_retention_hand_computed():
    o = outcome_filter(REVISIONS, CONTS, 4)
    s = success_at_n(o).set_index("rule")
    # edit: 4 tried, 3 accepted, 1 success -> 1/4 and 1/3; random: 1/1
    assert s.loc["edit", ["revisions", "accepted", "successes"]].tolist() == [4, 3, 1]
    assert s.loc["edit", "success_at_n"] == pytest.approx(0.25)
    assert s.loc["edit", "success_at_n_accepted"] == pytest.approx(1 / 3)
    assert s.loc["random", "success_at_n"] == 1.0
    r = retention(ROLLOUTS, o).set_index("rule")
    # 3 incorrect rollouts (r1, r2, unparsed r4); edit retains r1, random retains r2
    assert r.loc["edit", ["incorrect_rollouts", "retained"]].tolist() == [3, 1]
    assert r.loc["edit", "retention"] == pytest.approx(1 / 3)
    assert r.loc["random", "retention"] == pytest.approx(1 / 3)


def test_pool_is_golden_plus_kept_revisions():
    o = outcome_filter(REVISIONS, CONTS, 4)
    pool = build_pool(ROLLOUTS, o, CONTS, rule="edit")
    assert sorted(pool["source"]) == ["golden", "revision"]
    assert pool.loc[pool["source"] == "golden", "completion"].tolist() == ["c3"]
    # revised prefix + the FIRST successful continuation (index 2, the NaN at index 1 is not a success)
    assert pool.loc[pool["source"] == "revision", "completion"].tolist() == ["P1\ne1-2"]


def test_bookkeeping_hand_computed():
    o = outcome_filter(REVISIONS, CONTS, 4)
    b = bookkeeping(ROLLOUTS, o, rule="edit").iloc[0].to_dict()
    assert b["incorrect_rollouts"] == 3 and b["revisions_tried"] == 4
    assert b["rejected_gold_labelled"] == 1 and b["accepted"] == 3 and b["kept"] == 1
    assert b["golden_rollouts"] == 1 and b["pool_size"] == 2
    assert b["retention"] == pytest.approx(1 / 3)
    none = bookkeeping(ROLLOUTS, o, rule="nothing").iloc[0].to_dict()
    assert none["revisions_tried"] == 0 and none["retention"] == 0.0


def test_bad_tables_raise():
    with pytest.raises(ValueError, match="e1.*expected 0..3"):
        outcome_filter(REVISIONS, conts({"e1": [3, 3], "e2": [2] * 4, "e3": [2] * 4, "x1": [2] * 4}), 4)
    with pytest.raises(ValueError, match="e4.*rejected"):
        outcome_filter(REVISIONS, pd.concat([CONTS, conts({"e4": [1] * 4})]), 4)
    with pytest.raises(ValueError, match="no continuations"):
        outcome_filter(REVISIONS, CONTS[CONTS["revision_id"] != "e2"], 4)
    with pytest.raises(KeyError, match="zz"):
        outcome_filter(REVISIONS, pd.concat([CONTS, conts({"zz": [1] * 4})]), 4)
    with pytest.raises(KeyError, match="status"):
        outcome_filter(REVISIONS.drop(columns="status"), CONTS, 4)


def test_success_matches_naive_loop_on_random_tables():
    rng = np.random.default_rng(0)
    revs, marks = [], {}
    for i in range(60):
        g = int(rng.integers(0, 4))
        revs.append(dict(dataset="d", response_id=f"r{i % 20}", rollout_id=0, revision_id=f"v{i}",
                         rule=["edit", "random"][i % 2], k=1, gold=g, status="ok", revised_prefix=""))
        marks[f"v{i}"] = [int(x) for x in rng.integers(0, 4, size=4)]
    o = outcome_filter(pd.DataFrame(revs), conts(marks), 4)
    s = success_at_n(o).set_index("rule")
    for rule in ("edit", "random"):
        mine = [any(m == r["gold"] for m in marks[r["revision_id"]]) for r in revs if r["rule"] == rule]
        assert s.loc[rule, "success_at_n"] == pytest.approx(sum(mine) / len(mine))
