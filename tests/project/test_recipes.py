"""The recipes of edit_lib/ARCHITECTURE.md, each done as it says: add a data source (one loader and one entry of
``data.registry.SOURCES``), add a metric (one entry of ``metrics.METRICS``), add a baseline (one file a profile
names: the smoke profile's ``tests/fixtures/toy_baseline.py``, trained, graded and tested by the smoke run)."""
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from edit_lib import metrics, systems
from edit_lib.config import ConfigError, DatasetSpec, load_profile
from edit_lib.data import registry as data_registry
from edit_lib.data.jsonl import load_dataset
from edit_lib.data.registry import resolve_path
from edit_lib.evaluation.tables import metrics_long

NATIVE = Path(__file__).resolve().parents[1] / "fixtures" / "native"
LIB = Path(__file__).resolve().parents[2] / "edit_lib"


# ---------------------------------------------------------------- add a data source

def _one_file(spec: DatasetSpec, seed: int, on_error: str):
    """A loader for a made-up format: one JSONL file of {"kind": "question" | "response", ...} records."""
    path = resolve_path(spec.options["path"])
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    parts = {}
    for kind in ("question", "response"):
        parts[kind] = path.with_name(f"{path.stem}.{kind}s.jsonl")
        parts[kind].write_text("".join(json.dumps({k: v for k, v in r.items() if k != "kind"}) + "\n"
                                       for r in rows if r["kind"] == kind))
    return load_dataset(parts["question"], parts["response"], name=spec.name, on_error=on_error)


def test_add_a_data_source(tmp_path, monkeypatch):
    f = tmp_path / "mine.jsonl"
    f.write_text("".join(json.dumps(dict(json.loads(line), kind=kind)) + "\n"
                         for kind in ("question", "response")
                         for line in (NATIVE / f"{kind}s.jsonl").read_text().splitlines()))
    monkeypatch.setitem(data_registry.SOURCES, "one_file",
                        data_registry.Source(_one_file, inputs=lambda opts: [resolve_path(opts["path"])]))
    spec = DatasetSpec("mine", "one_file", {"path": str(f)})
    ds = data_registry.build_dataset(spec)
    want = load_dataset(NATIVE / "questions.jsonl", NATIVE / "responses.jsonl")
    assert sorted(ds.questions) == sorted(want.questions) and len(ds.responses) == len(want.responses)
    assert data_registry.input_paths(spec) == [f]  # 00_data's key hashes the file: an edit re-runs it
    prof = load_profile("smoke", ["data.datasets=[{name: mine, source: one_file, options: {path: %s}}]" % f])
    assert [d.source for d in prof.data.datasets] == ["one_file"]
    with pytest.raises(ConfigError, match="names no data source.*'one_file'"):
        data_registry.build_dataset(DatasetSpec("mine", "one_fil", {"path": str(f)}))


# ---------------------------------------------------------------- add a metric

def test_add_a_metric(monkeypatch):
    """A metric of one function joins every metrics table: here the share of marks within 2 of gold."""
    monkeypatch.setitem(metrics.METRICS, "within2", metrics.Metric(
        lambda gold, pred, max_mark: float(np.mean(np.abs(gold - pred) <= 2)), higher_is_better=True,
        over="responses"))
    gold, pred = [0, 1, 4, 4], [3, 1, 2, None]
    got = metrics.grading_metrics(["q"] * 4, gold, pred, [4] * 4)
    assert got["within2"] == pytest.approx(np.mean([False, True, True, False]))  # the failed parse: mark 0, off by 4
    preds = pd.DataFrame(dict(system="base", seed=None, dataset="d", split="ood_test", question_id="q",
                              gold=gold, mark=[3, 1, 2, np.nan], max_mark=4))
    assert metrics_long(preds)["within2"].tolist() == [got["within2"]]


# ---------------------------------------------------------------- add a baseline

def test_add_a_baseline_the_smoke_runs_toy(smoke_run):
    """tests/fixtures/toy_baseline.py, named by configs/smoke.yaml: 05 trains it, 07 grades it into Tables 1-2,
    09 compares it with Base in the 'baseline' Holm family, and no library file names it."""
    run_dir, _ = smoke_run
    res = {s: json.loads((run_dir / "results" / f"{s}.json").read_text())
           for s in ("05_edit_sft", "07_evaluation", "09_significance")}
    assert set(res["05_edit_sft"]["extra"]["adapters"]["toy_rft"]) == {"synth_sas", "synth_bio", "synth_phys",
                                                                      "sas_synth"}
    book = pd.DataFrame(res["05_edit_sft"]["tables"]["pool_bookkeeping"])
    toy = book[book["system"] == "toy_rft"]
    assert len(toy) == 4 and (toy["pool_trained"] > 0).all() and (toy["revisions_trained"] == 0).all()
    t2 = pd.DataFrame(res["07_evaluation"]["tables"]["table2"])
    assert t2["toy_rft"].notna().all() and t2["base"].notna().all()  # one column of Table 2 per graded system
    sig = pd.DataFrame(res["09_significance"]["tables"]["significance"])
    assert set(sig.loc[sig["system"] == "toy_rft", "family"]) == {"baseline"}
    assert not any("toy_rft" in p.read_text() for p in LIB.rglob("*.py"))
    assert "toy_rft" not in systems.BY_NAME  # the runner's check loaded it and left the test process as it was
