"""Checklist counts per dataset and rubric kind (Sec. 2.2; 04's ``checklist_counts`` table) on a fabricated
checklists table, with and without the rubric / clause_share columns of newer caches."""
import math

import numpy as np
import pandas as pd

from edit_lib.revision.pool import checklist_counts

BUDGET = 100
COLS = ["dataset", "response_id", "text", "status", "detail", "n_covered", "n_prompt_tokens", "n_tokens",
        "verified_text"]


def _row(ds, rid, status, n_tokens, rubric=None, share=np.nan):
    return dict(dataset=ds, response_id=rid, text="x", status=status, detail="", n_covered=None, n_prompt_tokens=10,
                n_tokens=n_tokens, verified_text="", rubric=rubric, clause_share=share)


def _table():
    return pd.DataFrame([
        _row("a", "r1", "ok", 40, "points"),
        _row("a", "r2", "missing_points", 100, "points"),        # cut at the budget
        _row("a", "r3", "count_missing", 60, "points"),
        _row("a", "r4", "ok", 100, "points"),                    # full budget but verified: not truncated
        _row("s", "r1", "ok", 80, "free_text", 0.5),
        _row("s", "r2", "point_not_verbatim", 120, "free_text", 1.0),
        _row("s", "r3", "no_points", np.nan, "free_text"),       # nothing written
    ])


def test_counts_by_dataset_and_rubric():
    got = checklist_counts(_table(), BUDGET)
    assert list(got.columns) == ["dataset", "rubric", "responses", "written", "verified", "failed", "truncated",
                                 "missing_points", "point_not_verbatim", "count_missing", "no_points",
                                 "clause_share"]  # FAILURE_REASONS order, then other statuses
    a = got.set_index("dataset").loc["a"]
    assert (a.rubric, a.responses, a.written, a.verified, a.failed, a.truncated) == ("points", 4, 4, 2, 2, 1)
    assert (a.missing_points, a.count_missing, a.point_not_verbatim, a.no_points) == (1, 1, 0, 0)
    assert math.isnan(a.clause_share)
    s = got.set_index("dataset").loc["s"]
    assert (s.rubric, s.responses, s.written, s.verified, s.failed, s.truncated) == ("free_text", 3, 2, 1, 1, 1)
    assert (s.point_not_verbatim, s.no_points) == (1, 1)
    assert s.clause_share == 0.75  # mean over the written ones; the no_points row has none


def test_older_cache_reads_as_points():
    old = _table()[COLS]  # no rubric, no clause_share
    got = checklist_counts(old, BUDGET)
    assert set(got.rubric) == {"points"} and got.clause_share.isna().all()
    assert got.set_index("dataset").loc["s", ["written", "verified", "truncated"]].tolist() == [2, 1, 1]
    assert got.written.sum() == 6 and got.verified.sum() == 3


def test_one_row_per_rubric_kind_and_budget_matters():
    t = _table()
    t.loc[t.response_id == "r3", "rubric"] = "points"  # dataset a all points; s now split by kind
    got = checklist_counts(t, BUDGET)
    assert sorted(map(tuple, got[["dataset", "rubric"]].to_numpy())) == [("a", "points"), ("s", "free_text"),
                                                                          ("s", "points")]
    assert checklist_counts(_table(), 1000).truncated.sum() == 0
    assert checklist_counts(_table(), 50).truncated.sum() == 3  # every written, failed one used >= 50 tokens
    clean = checklist_counts(_table()[_table().status == "ok"], BUDGET)
    assert [c for c in clean.columns if c not in ("dataset", "rubric", "responses", "written", "verified", "failed",
                                                  "truncated", "clause_share")] == []
