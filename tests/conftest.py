"""Shared fixtures: one smoke run of every notebook and one micro-grader build per test session; the test tiers.

Tiers (README, "Tests"): `make test-fast` runs every test marked neither `notebook` (executes notebooks,
directly or through the `smoke_run` / `smoke_book` fixtures, marked here) nor `slow` (trains, builds a grader or
runs a model for seconds; marked in the test files); `make test` runs them all. Layout: tests/<room>/ holds the tests of edit_lib/<room>/, tests/ itself those of edit_lib's
top-level modules and the helpers the rooms share, tests/notebooks/ and tests/project/ the rest
(tests/project/test_layout.py)."""
import shutil

import pytest

from edit_lib import systems
from edit_lib.artifacts import CACHE_ENV
from edit_lib.embedded.build import ensure_micro_grader
from edit_lib.runner.keys import register_all
from edit_lib.runner.run import run

register_all()  # tests load named models ('embedded', 'micro') and the synthetic annotator as a run does

NOTEBOOK_FIXTURES = {"smoke_run", "smoke_book", "smoke_copy"}


def pytest_collection_modifyitems(config, items):
    for item in items:  # a test that needs the session's smoke run executes notebooks, whatever it asserts
        if NOTEBOOK_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.notebook)


@pytest.fixture(autouse=True)
def paper_systems_only():
    """Every test starts and ends with the paper's systems: a stage opened in this process loads its profile's
    baselines (``run.baselines``: the smoke profile's toy) into ``systems``' registries, which this undoes."""
    saved = [(r, r.snapshot()) for r in (systems.BASELINES, systems.BY_NAME)]
    yield
    for r, entries in saved:
        r.restore(entries)


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
    root = tmp_path_factory.mktemp("runs")
    status = run("smoke", run_root=str(root), log=lambda *_: None)  # every notebook written so far
    return root / "smoke", status


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
