"""`edit-suite bench suite`: per-stage wall times of a run, grouped as the time budget is."""
import json

import pytest

from edit_lib.runner.bench import bench_suite, format_suite


def test_bench_suite_groups_and_totals(tmp_path):
    res = tmp_path / "smoke" / "results"
    res.mkdir(parents=True)
    times = {"00_data": 6.0, "01_base_policy": 60.0, "04_counterfactual_selection": 30.0, "07_evaluation": 12.0,
             "09_significance": 6.0}
    for name, sec in times.items():
        payload = dict(key="k", seconds=sec - 1, runner_seconds=sec, reused_stale=name == "04_counterfactual_selection")
        (res / f"{name}.json").write_text(json.dumps(payload))
    out = bench_suite("smoke", tmp_path)
    assert [r["stage"] for r in out["stages"]] == list(times)
    groups = {g["group"]: g["minutes"] for g in out["groups"]}
    assert groups == {"00-03": pytest.approx(1.1), "04": pytest.approx(0.5), "07-09": pytest.approx(0.3)}
    assert out["total_minutes"] == pytest.approx(114 / 60, abs=0.01) and out["within_budget"]
    assert "reused stale" in format_suite(out)


def test_bench_suite_without_a_run_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="edit-suite run --profile smoke"):
        bench_suite("smoke", tmp_path)
