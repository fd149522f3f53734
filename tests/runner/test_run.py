"""The runner and 00_data executed by papermill on the smoke profile, with its results JSON checked; a profile
file, papermill by hand, warnings and skipped records, and a run that writes nothing into the repository."""
import json
import subprocess

import pytest

from edit_lib.config import load_profile
from edit_lib.runner.stage import STAGES, available_stages, stage_key
from edit_lib.runner.run import run


@pytest.mark.notebook
def test_00_data_results(smoke_run):
    run_dir, status = smoke_run
    assert status[0]["status"] == "ran"
    res = json.loads((run_dir / "results" / "00_data.json").read_text())
    prof = load_profile("smoke")
    assert res["key"] == stage_key(prof, "00_data")
    names = {d.name for d in prof.data.datasets}
    rows = res["tables"]["table8"]
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
def test_unchanged_stage_is_skipped_and_changed_one_reruns(smoke_copy):
    # a copy: --force drops 00's artifact folder, which a test on another pytest-xdist worker may be copying
    run_dir = smoke_copy()
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

    import edit_lib.runner.run as rn
    import edit_lib.runner.stage as pl

    nb = new_notebook(cells=[new_code_cell("profile = 'smoke'\noverrides = []\nrun_root = None",
                                           metadata={"tags": ["parameters"]}),
                             new_code_cell("x = 1"), new_code_cell("raise ValueError('boom in cell two')")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    nbformat.write(nb, nbdir / "00_data.ipynb")
    monkeypatch.setattr(pl, "NOTEBOOK_DIR", nbdir)
    with pytest.raises(rn.NotebookFailed) as e:
        rn.run("smoke", only=["00_data"], run_root=str(tmp_path / "runs"), log=lambda *_: None)
    msg = str(e.value)
    assert "00_data" in msg and "ValueError" in msg and "boom in cell two" in msg and "cell" in msg


@pytest.mark.notebook
def test_edited_notebook_is_rerun(smoke_run, tmp_path, monkeypatch):
    import shutil

    import nbformat

    import edit_lib.runner.run as rn
    import edit_lib.runner.stage as pl

    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    shutil.copy(pl.NOTEBOOK_DIR / "00_data.ipynb", nbdir / "00_data.ipynb")
    monkeypatch.setattr(pl, "NOTEBOOK_DIR", nbdir)
    root = str(tmp_path / "runs")
    run_dir, _ = smoke_run  # its finished 00_data, copied: the stage the runner decides on (no execution needed)
    for rel in ("results/00_data.json", "notebooks/00_data.ipynb"):
        (tmp_path / "runs" / "smoke" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(run_dir / rel, tmp_path / "runs" / "smoke" / rel)
    assert rn.run("smoke", only=["00_data"], run_root=root, log=lambda *_: None)[0]["status"] == "cached"
    nb = nbformat.read(nbdir / "00_data.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("An edit."))
    nbformat.write(nb, nbdir / "00_data.ipynb")
    assert rn.run("smoke", only=["00_data"], run_root=root, log=lambda *_: None)[0]["status"] == "ran"


def _smoke_file(tmp_path, n_questions):
    """A profile file outside configs/: smoke with another synth_sas size, so its tables show which file ran."""
    import yaml

    raw = yaml.safe_load((pl_config_dir() / "smoke.yaml").read_text())
    raw["data"]["datasets"][0]["options"]["n_questions"] = n_questions
    f = tmp_path / "elsewhere" / "my_profile.yaml"
    f.parent.mkdir()
    f.write_text(yaml.safe_dump(raw))
    return f


def pl_config_dir():
    from edit_lib.config import CONFIG_DIR
    return CONFIG_DIR


def _questions(results_file, dataset):
    rows = json.loads(results_file.read_text())["tables"]["table8"]
    return sum(r["questions"] for r in rows if r["dataset"] == dataset)


@pytest.mark.notebook
def test_file_profile_runs_through_the_runner_and_papermill_by_hand(tmp_path, caplog):
    import logging

    import papermill as pm

    import edit_lib.runner.stage as pl

    f = _smoke_file(tmp_path, n_questions=5)
    runs = tmp_path / "runs"
    status = run(str(f), only=["00_data"], run_root=str(runs), log=lambda *_: None)
    assert status[0]["status"] == "ran"
    res_file = runs / "my_profile" / "results" / "00_data.json"
    assert json.loads(res_file.read_text())["profile"] == "my_profile"
    five = _questions(res_file, "synth_sas")
    # papermill by hand: the same file, overrides as a JSON string, no parameter-parsing complaints
    out = tmp_path / "by_hand.ipynb"
    with caplog.at_level(logging.INFO, logger="papermill"):
        pm.execute_notebook(str(pl.NOTEBOOK_DIR / "00_data.ipynb"), str(out), cwd=str(tmp_path),
                            parameters=dict(profile=str(f), run_root=str(tmp_path / "by_hand"),
                                            overrides='["data.datasets.synth_sas.options.n_questions=7"]'),
                            progress_bar=False, kernel_name="python3")
    msgs = " ".join(r.getMessage() for r in caplog.records)
    assert "Unable to parse" not in msgs and "unknown parameter" not in msgs
    # an override by hand makes a variant beside the file's main run, named from the value it changes
    by_hand = (tmp_path / "by_hand" / "my_profile" / "variants" / "data.datasets.synth_sas.options.n_questions=7"
               / "results" / "00_data.json")
    opts = [json.loads(r.read_text())["inputs"]["params"]["data"]["datasets"][0]["options"]
            for r in (res_file, by_hand)]
    assert [o["n_questions"] for o in opts] == [5, 7]  # the file's value, then the file's plus the override
    assert _questions(by_hand, "synth_sas") > five > 0


def _repo_state():
    """Untracked and ignored files of the repository (a run must add none) and changed tracked files."""
    root = pl_config_dir().parent
    out = subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all"], cwd=root,
                         capture_output=True, text=True, check=True).stdout.splitlines()
    # byte-code caches and the test runner's own files are not run outputs
    return {line for line in out if "__pycache__" not in line and ".pytest_cache" not in line
            and not line.startswith("!! .venv/")}


@pytest.mark.notebook
def test_run_and_book_leave_the_repository_unchanged(tmp_path, monkeypatch):
    from edit_lib.book.build import build_book

    monkeypatch.setenv("EDIT_SUITE_CACHE", str(tmp_path / "cache"))
    before = _repo_state()
    runs = tmp_path / "runs"
    assert run("smoke", only=["00_data"], run_root=str(runs), log=lambda *_: None)[0]["status"] == "ran"
    index = build_book("smoke", run_root=str(runs))
    assert index == runs / "smoke" / "book" / "_build" / "html" / "index.html" and index.exists()
    assert _repo_state() - before == set()


def test_warnings_and_skipped_records_are_kept_and_enforced(tmp_path, capsys):
    from edit_lib.cli import main
    from edit_lib.data.schema import DataError
    import edit_lib.runner.run as rn
    import edit_lib.runner.stage as pl

    runs = tmp_path / "runs"
    ctx = pl.stage("00_data", "smoke", [], str(runs))
    ctx.warn("most rollouts have one step")
    errs = [DataError("gold out of range", path="r.jsonl", line=i, field="gold") for i in range(2, 8)]
    errs.append(DataError("missing field", path="r.jsonl", line=9, field="split"))
    ctx.record_skipped("synth_sas", 40, errs)
    ctx.save()
    assert "WARNING: most rollouts have one step" in capsys.readouterr().out
    res = json.loads(ctx.paths.results_file("00_data").read_text())
    assert res["warnings"] == ["most rollouts have one step"]
    assert res["skipped"] == [dict(dataset="synth_sas", n_records=40, n_skipped=7,
                                   by_reason={"gold out of range": 6, "missing field": 1},
                                   first=[str(e) for e in errs[:5]])]
    lines = [json.loads(x) for x in ctx.paths.skipped_records.read_text().splitlines()]
    assert [(r["line"], r["field"], r["reason"]) for r in lines] == [(e.line, e.field, e.reason) for e in errs]
    assert lines[0]["path"] == "r.jsonl" and lines[0]["message"] == str(errs[0]) and lines[0]["stage"] == "00_data"
    # the stage looks finished to the runner: it prints the summary and fails on 7/40 > 5%
    ctx.paths.notebooks.mkdir(parents=True)
    (ctx.paths.notebooks / "00_data.ipynb").write_text("{}")
    assert main(["run", "--profile", "smoke", "--run-root", str(runs), "--only", "00_data"]) == 3
    cap = capsys.readouterr()
    assert "data.max_skipped_fraction" in cap.err and "7 of 40" in cap.err
    assert "gold out of range (6)" in cap.out and "WARNING" in cap.out and "line 2" in cap.out
    log: list[str] = []
    prof = load_profile("smoke", ["data.max_skipped_fraction=0.2"])
    rn._report(prof, ctx.paths, "00_data", log.append)  # raised deliberately: reported, not fatal
    assert any("skipped 7 of 40" in line for line in log)
    # a re-run that skips less replaces the records of that dataset instead of appending
    ctx.record_skipped("synth_sas", 40, errs[:1])
    assert len(ctx.paths.skipped_records.read_text().splitlines()) == 1


def test_a_stage_run_by_hand_says_so_and_drops_the_runners_stale_copy(tmp_path, monkeypatch):
    """A notebook run by hand (papermill or Jupyter, outside `edit-suite run`) writes the stage's results as the
    runner would and records `executed_by: hand`; the runner's executed copy, which shows the previous run's
    numbers, is removed so the book never pairs it with these results. Under the runner both stay."""
    import json

    import edit_lib.runner.stage as pl

    monkeypatch.delenv(pl.RUNNER_ENV, raising=False)
    ctx = pl.stage("00_data", "smoke", [], str(tmp_path))
    copy = ctx.paths.notebooks / "00_data.ipynb"
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text("{}")
    res = json.loads(ctx.save().read_text())
    assert res["executed_by"] == "hand" and not copy.exists()
    copy.write_text("{}")
    monkeypatch.setenv(pl.RUNNER_ENV, "1")
    assert json.loads(ctx.save().read_text())["executed_by"] == "runner" and copy.exists()


def test_a_stage_records_the_kernels_numerics(tmp_path, monkeypatch):
    """``numerics`` in every results JSON (``runner.keys``): ATen's CPU capability as torch reports it, the
    stage's thread count (the profile's ``model.torch_threads``) and an environment cap on a kernel library's
    instruction set when one is set, so ``edit-suite compare`` can say two runs' kernels differed."""
    import json

    import torch

    import edit_lib.runner.stage as pl

    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    ctx = pl.stage("00_data", "smoke", [], str(tmp_path))
    rec = json.loads(ctx.save().read_text())["numerics"]
    assert rec["cpu_capability"] == torch.backends.cpu.get_cpu_capability() and rec["torch"] == torch.__version__
    assert rec["torch_threads"] == ctx.full_profile.model.torch_threads == torch.get_num_threads()
    assert rec["isa_env"] == {"ONEDNN_MAX_CPU_ISA": "AVX2"}
