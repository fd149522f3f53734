"""Shared fixtures: one smoke run of every notebook and one micro-grader build per test session; the test tiers.

Tiers (README, "Tests"): `make test-fast` runs every test marked neither `notebook` (executes notebooks,
directly or through the `smoke_run` / `smoke_book` fixtures, marked here) nor `slow` (trains, builds a grader or
runs a model for seconds; marked in the test files); `make test` runs them all. Layout: tests/<room>/ holds the tests of edit_lib/<room>/, tests/ itself those of edit_lib's
top-level modules and the helpers the rooms share, tests/notebooks/ and tests/project/ the rest
(tests/project/test_layout.py)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from edit_lib.artifacts import CACHE_ENV
from edit_lib.embedded.build import ensure_micro_grader
from edit_lib.runner.register import register_all
from edit_lib.runner.run import run

register_all()  # tests load named models ('embedded', 'micro') and the synthetic annotator as a run does

NOTEBOOK_FIXTURES = {"smoke_run", "smoke_book", "smoke_copy"}


GRADER_FIXTURES = {"micro_grader", "fresh_cache"}
# the session's smoke run, in a process of its own beside the tests that need neither it nor the micro grader
# (which it builds, once: ensure_micro_grader's lock): started when the collected tests need it, awaited by the
# `smoke_run` fixture
BACKGROUND = """import sys
from edit_lib.runner.register import register_all
from edit_lib.runner.run import run
register_all()
run("smoke", run_root=sys.argv[1], log=lambda line: print(line, flush=True))
"""
_background: dict = {}


def _needs(item, fixtures: set) -> bool:
    return bool(fixtures & set(getattr(item, "fixturenames", ())))


def pytest_collection_modifyitems(config, items):
    for item in items:  # a test that needs the session's smoke run executes notebooks, whatever it asserts
        if _needs(item, NOTEBOOK_FIXTURES):
            item.add_marker(pytest.mark.notebook)
    # the tests that need neither the smoke run nor the micro grader first, while the background run makes both
    items.sort(key=lambda it: 2 if _needs(it, NOTEBOOK_FIXTURES) else 1 if _needs(it, GRADER_FIXTURES) else 0)


def pytest_collection_finish(session):
    if session.config.option.collectonly or not any(_needs(it, NOTEBOOK_FIXTURES) for it in session.items):
        return
    root = Path(tempfile.mkdtemp(prefix="edit-suite-smoke-"))
    log = root / "smoke.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-c", BACKGROUND, str(root)], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    _background.update(root=root, log=log, proc=proc)


def pytest_sessionfinish(session):
    if not _background:
        return
    proc = _background["proc"]
    if proc.poll() is None:  # the session stopped before it was needed (-x, Ctrl-C): its kernels with it
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    shutil.rmtree(_background["root"], ignore_errors=True)


@pytest.fixture(scope="session")
def micro_grader():
    """The micro grader, built once per session into the suite's cache (where a run's first model load puts it)."""
    return ensure_micro_grader()


@pytest.fixture()
def fresh_cache(tmp_path, monkeypatch, micro_grader):
    """An empty suite cache for one test ($EDIT_SUITE_CACHE) holding a copy of the session's micro grader: what
    the test builds there (a warm-up Base, file digests) starts from nothing, and the grader is not rebuilt (two
    to three minutes on 2 cores, once per test before)."""
    cache = tmp_path / "cache"
    shutil.copytree(micro_grader, cache / micro_grader.name)
    monkeypatch.setenv(CACHE_ENV, str(cache))
    return cache


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """(folder, status) of one smoke run of every notebook: the background one (``pytest_collection_finish``), or,
    where none was started, one in this process."""
    if not _background:
        root = tmp_path_factory.mktemp("runs")
        return root / "smoke", run("smoke", run_root=str(root), log=lambda *_: None)
    root, proc = _background["root"], _background["proc"]
    if proc.wait():
        pytest.fail(f"the session's smoke run failed (exit {proc.returncode}); its output ends:\n"
                    f"{_background['log'].read_text()[-4000:]}", pytrace=False)
    return root / "smoke", json.loads((root / "smoke" / "run_status.json").read_text())["stages"]


@pytest.fixture()
def smoke_copy(smoke_run, tmp_path):
    """``copy(*stages)``: a copy of the session's smoke run in ``tmp_path/runs/smoke`` without the results of
    ``stages`` (and their artifacts with ``artifacts=True``), so that a run re-runs only those: the one way a test
    re-runs part of the smoke run rather than making its own. Returns the copy's folder."""
    def copy(*stages: str, artifacts: bool = False):
        run_dir = tmp_path / "runs" / "smoke"
        shutil.copytree(smoke_run[0], run_dir)
        for name in stages:
            (run_dir / "results" / f"{name}.json").unlink()
            if artifacts:
                shutil.rmtree(run_dir / "artifacts" / name, ignore_errors=True)
        return run_dir
    return copy
