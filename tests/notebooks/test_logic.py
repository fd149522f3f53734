"""Logic that moved out of the notebooks into edit_lib (issue 21): each function against a hand computation."""
from __future__ import annotations

import pandas as pd
import pytest

from edit_lib.config import ConfigError, RSRConfig
from edit_lib.data.synthetic import WorldConfig, generate_world
from edit_lib.evaluation import rsr, tables
from edit_lib.evaluation.significance import few_questions_warning, held_out_scopes
from edit_lib.revision import phase1
from edit_lib.selection import selection_counts

R = ["dataset", "response_id", "rollout_id"]


def test_selection_counts_by_hand():
    rows = [("d", "r1", 0, 2, "edit"), ("d", "r1", 0, 2, "belief_shift_only"), ("d", "r2", 0, 1, "edit"),
            ("d", "r2", 0, 3, "belief_shift_only"), ("d", "r2", 0, 1, "random"), ("d", "r3", 0, 4, "edit"),
            ("d", "r3", 0, 5, "edit")]
    sel = pd.DataFrame(rows, columns=[*R, "k", "rule"])
    got = selection_counts(sel).set_index("rule")
    # edit: 4 picks over 3 rollouts; bso: 2 picks, same as EDIT on r1 only; random: 1 pick on r2, same as EDIT there
    assert got.loc["edit", ["picks", "rollouts_with_picks", "same_steps_as_edit"]].tolist() == [4, 3, 3]
    assert got.loc["belief_shift_only", ["picks", "rollouts_with_picks", "same_steps_as_edit"]].tolist() == [2, 2, 1]
    assert got.loc["random", ["picks", "rollouts_with_picks", "same_steps_as_edit"]].tolist() == [1, 1, 1]


def _pq():
    rows = []
    for ds, splits in (("a", ["id_test", "ood_test"]), ("b", ["ood_test"]), ("c", ["ood_test"])):
        for s in splits:
            for q in range(3):
                rows.append(dict(dataset=ds, split=s, question_id=q, system="base", qwk=0.5))
    return pd.DataFrame(rows)


def test_held_out_scopes():
    out = held_out_scopes(_pq())
    scopes = out.groupby(["dataset", "scope"]).size().to_dict()
    assert scopes[("a", "id_test")] == 3 and scopes[("a", "ood_test")] == 3 and scopes[("a", "all held-out")] == 6
    assert ("b", "all held-out") not in scopes  # one split only: nothing to pool
    pooled = out[out["dataset"] == "b+c"]
    assert len(pooled) == 6 and set(pooled["question_id"]) == {f"{d}/{q}" for d in "bc" for q in range(3)}


def test_few_questions_warning():
    sig = pd.DataFrame(dict(dataset=["a", "a", "b"], scope=["ood_test", "ood_test", "ood_test"],
                            few_questions=[True, True, False], n_questions=[4, 4, 40]))
    w = few_questions_warning(sig, 10)
    assert len(w) == 1 and "a/ood_test (4)" in w[0] and "b/" not in w[0]
    assert few_questions_warning(sig.assign(few_questions=False), 10) == []


def test_rsr_targets():
    sas = generate_world(WorldConfig(shape="sas_like", n_questions=3, answers_per_question=2, ood_questions=1))
    ds = {"s": sas}
    assert rsr.rsr_targets(RSRConfig(), ds) == (["s"] if any(
        q.scheme.kind in ("pts", "lor") for q in sas.questions.values()) else [], [])
    with pytest.raises(ConfigError, match="rsr.datasets names datasets this run does not have"):
        rsr.rsr_targets(RSRConfig(datasets=["x"]), ds)


def test_repair_sample_caps_with_a_seeded_sample():
    keys = pd.DataFrame([("d", f"r{i}", 0) for i in range(6)], columns=R)
    steps = keys.loc[keys.index.repeat(2)].assign(k=[1, 2] * 6)
    all_steps = steps.assign(n_steps=2, u=0.5, delta_eps=-0.1, G_rho=0.0, G_a=0.0, G_p_tilde=0.0)
    orig = phase1.step_table
    phase1.step_table = lambda *a: all_steps
    try:
        s = phase1.repair_sample(None, None, None, max_rollouts=4, seed=0)
        again = phase1.repair_sample(None, None, None, max_rollouts=4, seed=0)
        whole = phase1.repair_sample(None, None, None, max_rollouts=0, seed=0)
    finally:
        phase1.step_table = orig
    assert len(s.keys) == 4 and s.keys.equals(again.keys) and len(s.steps) == 8
    assert len(whole.keys) == 6 and len(whole.steps) == 12


def test_absent_systems():
    plan = pd.DataFrame(dict(system=["base", "edit_sft"]))
    absent = tables.absent_systems(plan, skipped=["base_dgpo"])
    assert "base" not in absent and "edit_sft" not in absent and "base_dgpo" not in absent and "base_grpo" in absent
