"""Notebooks 01-03 executed by papermill on the smoke profile (shared run with test_pipeline's fixture)."""
import json

import pytest

from edit_lib.pipeline import available_stages

pytestmark = pytest.mark.notebook


def _results(run_dir, name):
    return json.loads((run_dir / "results" / f"{name}.json").read_text())


def test_every_available_notebook_ran(smoke_run):
    run_dir, status = smoke_run
    assert [s["stage"] for s in status] == available_stages()
    for s in status:
        res = _results(run_dir, s["stage"])
        assert res["key"] == s["key"]
        for fig in res["figures"].values():
            assert (run_dir / fig).exists()


def test_01_base_policy_tables(smoke_run):
    run_dir, _ = smoke_run
    res = _results(run_dir, "01_base_policy")
    base = res["tables"]["base_metrics"]
    splits = {(r["dataset"], r["split"]) for r in base}
    assert ("synth_sas", "ood_test") in splits and ("synth_science", "id_test") in splits
    for r in base:
        assert r["n"] >= 1
        assert r["qwk"] is None or -1.0 <= r["qwk"] <= 1.0
        assert 0.0 <= r["acc"] <= r["within1"] <= 1.0
    summ = {r["dataset"]: r for r in res["tables"]["rollout_summary"]}
    assert set(summ) == {"synth_sas", "synth_science"}
    for r in summ.values():
        assert 0.0 <= r["incorrect_share"] <= 1.0
        assert r["rollouts"] == r["responses"] * 2  # smoke: rollouts.n_per_response = 2
    # parse failures are counted, not hidden: the statuses add up to the number of rollouts
    parse = res["extra"]["rollout_parse"]
    assert sum(parse.values()) == sum(r["rollouts"] for r in summ.values())


def test_02_probing_tables(smoke_run):
    run_dir, _ = smoke_run
    res = _results(run_dir, "02_probing")
    assert res["extra"]["n_probed"] > 0
    for r in res["tables"]["delta_eps_summary"]:
        assert r["steps"] >= 1 and r["min_delta_eps"] <= r["mean_delta_eps"]
    assert res["tables"]["final_agreement"], "some probed rollouts have a parseable mark on smoke"
    for r in res["tables"]["final_agreement"]:
        assert 0.0 <= r["argmax_agrees"] <= 1.0 and 0.0 <= r["mean_p_of_generated"] <= 1.0


def test_03_audit_tables(smoke_run):
    run_dir, _ = smoke_run
    res = _results(run_dir, "03_audit_validation")
    assert res["extra"]["n_steps"] > 0
    labels = {r["label"]: r["steps"] for r in res["tables"]["label_counts"]}
    assert labels.get("grounding", 0) > 0 and labels.get("synthesis", 0) > 0
    signals = {(r["signal"], r["level"]) for r in res["tables"]["table9"]}
    assert ("G_a", "step") in signals and ("G_p", "rollout mean") in signals
    for r in res["tables"]["table9"]:
        if r["r"] is not None:
            assert -1.0 <= r["r"] <= 1.0 and 0.0 <= r["p"] <= 1.0
