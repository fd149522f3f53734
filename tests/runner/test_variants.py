"""Variants beside the main run, the notebooks' knobs and sweeps (edit_lib/runner/variants.py, stage.py,
edit_lib/tools/sweep.py)."""
from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

import pytest
import yaml

from edit_lib.config import ConfigError, describe, load_profile
from edit_lib.runner import variants
from edit_lib.runner.keys import STAGES, _allows
from edit_lib.runner.stage import FIXED, KNOBS, MAX_KNOBS, fold, parameters_cell, yaml_value
from edit_lib.runner.stage import NOTEBOOK_DIR
from edit_lib.tools.sweep import is_swept, split_values, until_stages

HELPS = {k: h for k, _, h in describe()}


def _cells(stage: str) -> list[dict]:
    return [c for c in json.loads((NOTEBOOK_DIR / f"{stage}.ipynb").read_text())["cells"] if c["cell_type"] == "code"]


@pytest.mark.parametrize("stage", list(STAGES))
def test_parameters_cell_lists_the_stages_knobs(stage):
    """The cell is the one ``parameters_cell`` writes; every knob is a profile key the stage declares; no other
    cell of the notebook rebinds a knob's name (an import of that name would hide the knob)."""
    params = [c for c in _cells(stage) if "parameters" in c["metadata"].get("tags", [])]
    assert len(params) == 1
    assert "".join(params[0]["source"]) == parameters_cell(stage, HELPS)
    assert 1 <= len(KNOBS[stage]) <= MAX_KNOBS
    for var, path in KNOBS[stage].items():
        assert path in HELPS, f"{stage}: knob {var} names no profile key {path}"
        assert _allows(STAGES[stage].sections, path), f"{stage} does not declare {path}"
    bound = set()
    for c in _cells(stage):
        if "parameters" in c["metadata"].get("tags", []):
            continue
        for node in ast.walk(ast.parse("".join(c["source"]))):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound.add(node.id)
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                bound |= {a.asname or a.name.split(".")[0] for a in node.names}
    assert not bound & (set(KNOBS[stage]) | set(FIXED))
    assert f'stage("{stage}", profile, overrides, run_root, variant, knobs=globals())' in "".join(
        "".join(c["source"]) for c in _cells(stage))


def test_knobs_fold_into_overrides_the_loader_reads_back():
    ns = dict(learning_rate=5e-06, seeds=[1, 2], calibrate=False, steps=None, gamma=1e20)
    ovs = fold("06_rl", ns)
    assert ovs == ["rl.learning_rate=5.0e-06", "rl.seeds=[1, 2]", "rl.shaping.gamma=1.0e+20",
                   "rl.shaping.calibrate=false"]
    prof = load_profile("smoke", ovs)
    assert (prof.rl.learning_rate, prof.rl.seeds, prof.rl.shaping.calibrate) == (5e-06, [1, 2], False)
    assert yaml.safe_load(yaml_value(0.05)) == 0.05 and yaml.safe_load(yaml_value("a b")) == "a b"
    assert fold("04_counterfactual_selection", None) == [] and fold("09_significance", dict(n_boot=None)) == []


def test_what_makes_a_variant(tmp_path):
    """A keyed value makes one, named from it; worker counts and ops do not; a name for no change is an error."""
    _, paths, changed = variants.resolve("smoke", ["selection.shortlist_k=5"], tmp_path)
    assert changed == {"selection.shortlist_k": 5}
    assert paths.root == tmp_path / "smoke" / "variants" / "selection.shortlist_k=5"
    assert paths.artifacts == tmp_path / "smoke" / "artifacts" and paths.results == paths.root / "results"
    for ovs in (["rl.workers=0", "model.generation_workers=0", "ops.resume_every=5"], []):
        _, main, changed = variants.resolve("smoke", ovs, tmp_path)
        assert not changed and main.root == tmp_path / "smoke" and variants.name_of(main) is None
    with pytest.raises(ConfigError, match="change no value"):
        variants.resolve("smoke", ["rl.workers=0"], tmp_path, variant="mine")
    with pytest.raises(ConfigError, match="variant name"):
        variants.resolve("smoke", ["run.seed=3"], tmp_path, variant="../x")
    _, named, _ = variants.resolve("smoke", ["run.seed=3", "probe.temperature=0.5"], tmp_path, variant="mine")
    assert named.root.name == "mine"
    long = variants.variant_name({f"a.b{i}": "x" * 20 for i in range(9)})
    assert len(long) <= variants.MAX_NAME and variants.check_name(long) is None


def test_an_adopted_stage_has_the_main_runs_skipped_records(tmp_path):
    """``adopt``: the variant's skipped records of the stage become the main run's (a stale one of an earlier
    variant run goes), other stages' stay; nothing is written where neither run skipped a record."""
    _, paths, _ = variants.resolve("smoke", ["selection.shortlist_k=5"], tmp_path)
    main = paths.main_paths
    main.results_file("00_data").parent.mkdir(parents=True)
    main.results_file("00_data").write_text(json.dumps({"key": "k"}))
    variants.adopt(paths, "00_data")
    assert not paths.skipped_records.exists()
    lines = [{"stage": "00_data", "dataset": "a", "reason": "old"}, {"stage": "02_probing", "dataset": "a"}]
    paths.skipped_records.parent.mkdir(parents=True, exist_ok=True)
    paths.skipped_records.write_text("".join(json.dumps(x) + "\n" for x in lines))
    variants.adopt(paths, "00_data")
    assert [json.loads(x) for x in paths.skipped_records.read_text().splitlines()] == lines[1:]
    main.skipped_records.write_text(json.dumps({"stage": "00_data", "dataset": "b", "reason": "new"}) + "\n")
    variants.adopt(paths, "00_data")
    got = [json.loads(x) for x in paths.skipped_records.read_text().splitlines()]
    assert got == [lines[1], {"stage": "00_data", "dataset": "b", "reason": "new"}]


def test_sweep_values_and_stages():
    assert split_values("run.skip_systems=[a,b],[c],[]") == ("run.skip_systems", ["[a,b]", "[c]", "[]"])
    assert split_values("selection.shortlist_k=1, 3,5") == ("selection.shortlist_k", ["1", "3", "5"])
    for bad in ("selection.shortlist_k=1", "selection.shortlist_k", "a=1,,2"):
        with pytest.raises(ConfigError):
            split_values(bad)
    assert is_swept("a.b=1,2") and not is_swept("run.skip_systems=[a,b]") and is_swept("x=[a,b],[c]")
    assert until_stages("02_probing") == ["00_data", "01_base_policy", "02_probing"] and until_stages(None) is None
    with pytest.raises(ConfigError, match="not a stage"):
        until_stages("04")


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*"))
            if p.is_file() and "variants" not in p.parts and "sweeps" not in p.parts and "compare" not in p.parts
            and "artifacts" not in p.parts}


@pytest.mark.notebook
@pytest.mark.slow
def test_notebook_04_with_a_knob_writes_a_variant(smoke_copy, capsys):
    """04 through a real kernel with ``shortlist_k`` set: a variant is written, the main run's files are unchanged,
    and `edit-suite compare MAIN NAME` names the value and 04's tables."""
    import papermill as pm

    from edit_lib.cli import main

    run_dir = smoke_copy()
    before = _digest(run_dir)
    pm.execute_notebook(str(NOTEBOOK_DIR / "04_counterfactual_selection.ipynb"), str(run_dir.parent / "04.ipynb"),
                        parameters=dict(profile="smoke", run_root=str(run_dir.parent), shortlist_k=1),
                        cwd=str(NOTEBOOK_DIR), kernel_name="python3", progress_bar=False)
    variant = run_dir / "variants" / "selection.shortlist_k=1"
    res = json.loads((variant / "results" / "04_counterfactual_selection.json").read_text())
    assert res["params"]["selection"]["shortlist_k"] == 1 and res["executed_by"] == "hand"
    assert json.loads((variant / "results" / "02_probing.json").read_text())["adopted_from"] == str(run_dir.resolve())
    assert _digest(run_dir) == before
    capsys.readouterr()
    assert main(["compare", str(run_dir), "selection.shortlist_k=1", "--limit", "1"]) == 1
    out = capsys.readouterr().out
    assert "selection.shortlist_k: 3 -> 1   (04_counterfactual_selection)" in out
    assert "04_counterfactual_selection / table12" in out and "02_probing /" not in out


@pytest.mark.slow
def test_run_with_an_override_and_a_sweep_write_variants(smoke_copy, tmp_path):
    """`run -p` writes a variant that runs only 09 (00-08 read from the main run) and `compare` finds only 09
    moved; a sweep over the same value reuses it and the main run, and the main run's book gets the Variants page
    with the sweep's figure and the comparison's page."""
    from edit_lib.book.build import stage_executed_notebooks
    from edit_lib.book.variants_page import sweep_metrics
    from edit_lib.runner.run import run
    from edit_lib.tools.compare import book_json_path, compare_cli, compare_runs
    from edit_lib.tools.sweep import sweep

    run_dir = smoke_copy()
    root, before = str(run_dir.parent), _digest(run_dir)
    status = run("smoke", overrides=["significance.ci=0.9"], run_root=root, log=lambda *_: None)
    assert [s["status"] for s in status] == ["main_run"] * 9 + ["ran"]
    assert _digest(run_dir) == before
    variant = run_dir / "variants" / "significance.ci=0.9"  # the changed value is listed, only 09's tables moved
    c = compare_runs(run_dir, variant)
    assert [(v["path"], v["a"], v["b"], v["stages"]) for v in c["values"]] == [
        ("significance.ci", 0.95, 0.9, ["09_significance"])]
    assert [(k["stage"], k["why"]) for k in c["keys"]] == [("09_significance", ["parameters changed: significance.ci"])]
    assert {t["stage"] for t in c["tables"]} == {"09_significance"}
    cols = {m["column"] for m in next(t for t in c["tables"] if t["table"] == "significance")["moved"]}
    assert {"ci_low", "ci_high"} <= cols and "qwk" not in cols  # the interval narrows, the estimate stays
    assert not any(t.get("not_keyed") or t.get("only_in") or t["only_a"] or t["only_b"] for t in c["tables"])
    assert compare_cli(str(run_dir), str(variant), book=True) == 1
    with pytest.raises(ConfigError, match="change no value"):
        run("smoke", overrides=["model.generation_workers=0"], run_root=root, variant="x", log=lambda *_: None)
    kept = sorted((run_dir / "artifacts" / "08_rsr_interventions").iterdir())
    forced = run("smoke", only=["08_rsr_interventions", "09_significance"], overrides=["significance.ci=0.9"],
                 force=True, run_root=root, log=lambda *_: None)  # --force recomputes 09 only, never a main key
    assert [s["status"] for s in forced] == ["main_run", "ran"] and _digest(run_dir) == before
    lines = []  # a new variant with --only: the upstream stages it shares with the main run are read from there
    alone = run("smoke", only=["09_significance"], overrides=["significance.ci=0.8"], run_root=root, log=lines.append)
    assert [s["status"] for s in alone] == ["ran"] and _digest(run_dir) == before
    assert any("the main run's 00_data, 01_base_policy" in line and "07_evaluation" in line for line in lines), lines
    assert json.loads((run_dir / "variants" / "significance.ci=0.8" / "results" / "07_evaluation.json").read_text()
                      )["adopted_from"] == str(run_dir.resolve())
    assert sorted((run_dir / "artifacts" / "08_rsr_interventions").iterdir()) == kept
    out = sweep("smoke", "significance.ci=0.9,0.95", until="09_significance", run_root=root, log=lambda *_: None)
    record = json.loads(out.read_text())
    assert [r["folder"] for r in record["runs"]] == ["variants/significance.ci=0.9", "."]
    after = _digest(run_dir)  # 0.95 is the main run's value: the sweep ran it (all cached), its status file aside
    assert after.pop("run_status.json") and {k: v for k, v in before.items() if k != "run_status.json"} == after
    a, b = (r["metrics"] for r in sweep_metrics(run_dir, record))
    qwk = next(n for n in a if n.startswith("QWK") and a[n]["ci_low"] is not None)
    assert a[qwk]["estimate"] == b[qwk]["estimate"] and b[qwk]["ci_low"] <= a[qwk]["ci_low"]  # 90% is narrower
    dest = stage_executed_notebooks("smoke", root, out=tmp_path / "book")
    page = (dest / "executed" / "variants.md").read_text()
    assert "## Variant `significance.ci=0.9`" in page and "| significance.ci | 0.95 | 0.9 | 09_significance |" in page
    assert "## Sweep of `significance.ci`" in page and (dest / "executed" / "sweep_significance.ci.png").exists()
    compared = dest / "executed" / f"compare_{book_json_path(run_dir, variant).stem}.md"  # compare --book's page
    assert "significance.ci" in compared.read_text() and f"executed/{compared.stem}" in (dest / "_toc.yml").read_text()
    vbook = stage_executed_notebooks("smoke", root, out=tmp_path / "vbook", variant="significance.ci=0.9")
    assert "# Executed notebooks (run `smoke, variant significance.ci=0.9`)" in (vbook / "executed" / "index.md"
                                                                                ).read_text()
    assert not (vbook / "executed" / "variants.md").exists()


def test_compare_takes_a_variant_by_name(tmp_path):
    from edit_lib.tools.compare import NotARunFolder, variant_folder

    main = tmp_path / "demo"
    (main / "variants" / "selection.shortlist_k=1" / "results").mkdir(parents=True)
    assert variant_folder(main, "selection.shortlist_k=1") == str(main / "variants" / "selection.shortlist_k=1")
    assert variant_folder(main, str(tmp_path / "other")) == str(tmp_path / "other")  # a path stays a path
    with pytest.raises(NotARunFolder, match=r"nor a variant of .*\(its variants: selection.shortlist_k=1\)"):
        variant_folder(main, "selection.shortlist_k=2")
