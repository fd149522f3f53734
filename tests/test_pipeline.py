"""The runner and 00_data executed by papermill on the smoke profile, with its results JSON checked."""
import json

import pytest

from edit_lib.config import load_profile
from edit_lib.pipeline import STAGES, available_stages, run, stage_key


@pytest.mark.notebook
def test_00_data_results(smoke_run):
    run_dir, status = smoke_run
    assert status[0]["status"] == "ran"
    res = json.loads((run_dir / "results" / "00_data.json").read_text())
    prof = load_profile("smoke")
    assert res["key"] == stage_key(prof, "00_data")
    names = {d.name for d in prof.data.datasets}
    rows = res["tables"]["table6"]
    assert {r["dataset"] for r in rows} == names
    for r in rows:
        assert r["responses"] >= 0 and r["questions"] >= 0
        if r["questions"]:
            assert 1 <= r["min_max_mark"] <= r["max_max_mark"]
    # the table agrees with the artifacts the notebook wrote
    for name in names:
        lines = (run_dir / "artifacts" / "00_data" / res["key"] / name / "responses.jsonl").read_text().splitlines()
        assert len(lines) == sum(r["responses"] for r in rows if r["dataset"] == name)
    assert (run_dir / res["figures"]["gold_distributions"]).exists()
    assert (run_dir / "notebooks" / "00_data.ipynb").exists()


@pytest.mark.notebook
def test_unchanged_stage_is_skipped_and_changed_one_reruns(smoke_run):
    run_dir, _ = smoke_run
    again = run("smoke", only=["00_data"], run_root=str(run_dir.parent), log=lambda *_: None)
    assert again[0]["status"] == "cached"
    first = json.loads((run_dir / "results" / "00_data.json").read_text())
    # same profile and seed -> identical tables (determinism)
    forced = run("smoke", only=["00_data"], force=True, run_root=str(run_dir.parent), log=lambda *_: None)
    assert forced[0]["status"] == "ran"
    second = json.loads((run_dir / "results" / "00_data.json").read_text())
    assert first["tables"] == second["tables"]


def test_stage_keys_depend_on_sections_and_upstream():
    a = load_profile("smoke")
    b = load_profile("smoke", ["run.seed=123"])
    c = load_profile("smoke", ["probe.temperature=0.3"])
    assert stage_key(a, "00_data") != stage_key(b, "00_data")
    assert stage_key(a, "00_data") == stage_key(c, "00_data")
    assert set(available_stages()) <= set(STAGES)


def test_unknown_notebook_is_named():
    with pytest.raises(KeyError, match="unknown notebook"):
        run("smoke", only=["99_nope"], log=lambda *_: None)


@pytest.mark.notebook
def test_failing_notebook_names_the_cell(tmp_path, monkeypatch):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    import edit_lib.pipeline as pl

    nb = new_notebook(cells=[new_code_cell("profile = 'smoke'\noverrides = []\nrun_root = None",
                                           metadata={"tags": ["parameters"]}),
                             new_code_cell("x = 1"), new_code_cell("raise ValueError('boom in cell two')")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    nbformat.write(nb, nbdir / "00_data.ipynb")
    monkeypatch.setattr(pl, "NOTEBOOK_DIR", nbdir)
    with pytest.raises(pl.NotebookFailed) as e:
        pl.run("smoke", only=["00_data"], run_root=str(tmp_path / "runs"), log=lambda *_: None)
    msg = str(e.value)
    assert "00_data" in msg and "ValueError" in msg and "boom in cell two" in msg and "cell" in msg


@pytest.mark.notebook
def test_edited_notebook_is_rerun(tmp_path, monkeypatch):
    import shutil

    import nbformat

    import edit_lib.pipeline as pl

    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    shutil.copy(pl.NOTEBOOK_DIR / "00_data.ipynb", nbdir / "00_data.ipynb")
    monkeypatch.setattr(pl, "NOTEBOOK_DIR", nbdir)
    root = str(tmp_path / "runs")
    assert pl.run("smoke", only=["00_data"], run_root=root, log=lambda *_: None)[0]["status"] == "ran"
    assert pl.run("smoke", only=["00_data"], run_root=root, log=lambda *_: None)[0]["status"] == "cached"
    nb = nbformat.read(nbdir / "00_data.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("An edit."))
    nbformat.write(nb, nbdir / "00_data.ipynb")
    assert pl.run("smoke", only=["00_data"], run_root=root, log=lambda *_: None)[0]["status"] == "ran"
