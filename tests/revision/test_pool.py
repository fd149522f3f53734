"""Outcome filter, Success@N, Retention, pool and App. B bookkeeping on hand-built tables (hand-computed)."""

import numpy as np
import pandas as pd
import pytest

from edit_lib.config import Decoding, RevisionConfig, RolloutConfig
from edit_lib.revision.pool import (TABLE6_ARMS, TABLE6_POOL_COLUMNS, TRUNCATED, UNPARSED, bookkeeping, build_pool,
                                    outcome_filter, retention, success_at_n, table6_pools)

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


def test_success_counts_truncated_rewrites_per_rule_inside_the_denominator():
    """App. F's Success@N over every rewrite generated; a rewrite cut by its budget is counted apart per rule."""
    revs = pd.DataFrame([dict(dataset="d", response_id="a", rollout_id=i, revision_id=f"{rule}{i}", rule=rule, k=1,
                              gold=1, status=s, revised_prefix="")
                         for rule, statuses in (("edit", ["ok", "rewrite_truncated", "rewrite_parse",
                                                          "checklist_missing_points"]),
                                                ("wo_atomic", ["rewrite_truncated", "rewrite_truncated", "ok"]))
                         for i, s in enumerate(statuses)])
    o = outcome_filter(revs, conts({"edit0": [1, 0], "wo_atomic2": [0, 0]}), 2)
    s = success_at_n(o).set_index("rule")
    assert s.loc["edit", ["revisions", "rewrites", "truncated", "successes"]].tolist() == [4, 3, 1, 1]
    assert s.loc["edit", "success_at_n"] == pytest.approx(1 / 3)  # the cut rewrite stays in the denominator
    assert s.loc["wo_atomic", ["rewrites", "truncated", "successes"]].tolist() == [3, 2, 0]
    assert set(UNPARSED) == {"rewrite_parse", TRUNCATED}


def _book(system, **kw):
    row = dict(system=system, dataset="h", rule="r", revisions_tried=10, accepted=5, kept=2, golden_rollouts=3,
               pool_size=5, pool_trained=4)
    return {**row, **kw}


def test_table6_pools_shows_each_arm_whole():
    """Table 6's arms: the App. B bookkeeping, the rewrites cut by their budget and the SFT run, per arm."""
    book = pd.DataFrame([
        _book("edit_sft", rejected_rewrite_parse=1, rejected_checklist_missing_points=2),
        _book("wo_atomic", revisions_tried=8, accepted=1, kept=0, golden_rollouts=0, pool_size=0, pool_trained=0,
              rejected_rewrite_truncated=6, rejected_rewrite_parse=1),
        _book("wo_checklist"),
        _book("int_sft"),  # not a Table 6 arm
        _book("edit_sft", dataset="other", kept=9),  # another dataset
    ])
    runs = pd.DataFrame([dict(system="edit_sft", dataset="h", status="trained", n_pairs=4, steps=7),
                         dict(system="wo_atomic", dataset="h", status="empty_pool", n_pairs=0, steps=np.nan)])
    settings = RevisionConfig(rewrite_decoding=Decoding(greedy=True, max_new_tokens=256)).resolved(RolloutConfig(decoding=Decoding(max_new_tokens=1024)))
    t = table6_pools(book, runs, settings, "h")
    assert list(t.columns) == TABLE6_POOL_COLUMNS
    assert t["system"].tolist() == ["edit_sft", "wo_checklist", "wo_atomic"]  # Table 6's order; wo_localiser absent
    t = t.set_index("system")
    # edit: 10 picks, 2 blocked by the checklist -> 8 rewrites; one unparsed, none cut
    assert t.loc["edit_sft", ["revisions", "rewrites", "truncated", "unparsed", "kept", "golden_rollouts"]].tolist() \
        == [10, 8, 0, 1, 2, 3]
    assert t.loc["edit_sft", ["rewrite_budget", "sft_status", "sft_pairs", "sft_steps"]].tolist() == \
        [256, "trained", 4, 7]
    assert t.loc["wo_atomic", ["rewrites", "truncated", "unparsed", "rewrite_budget", "sft_steps"]].tolist() == \
        [8, 6, 1, 1024, 0]  # the whole-suffix rewrite gets the rollouts' budget
    assert t.loc["wo_checklist", ["truncated", "sft_status", "sft_pairs"]].tolist() == [0, "not_run", 0]


def test_table6_arms_match_the_ablation_rewriters():
    from edit_lib.revision.phase1 import ABLATIONS
    arms = {s: atomic for s, _, atomic in TABLE6_ARMS}
    assert arms.pop("edit_sft") is True
    assert arms == {name: v.atomic for name, (_, v) in ABLATIONS.items()}
    assert all(s == rule for s, rule, _ in TABLE6_ARMS[1:])  # an ablation's outcome rows carry its own name
