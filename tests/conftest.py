"""Shared fixtures: one smoke run of every notebook and one micro-grader build per test session; the test tiers.

Tiers (README, "Tests"): `make test-fast` runs every test marked neither `notebook` (executes notebooks,
directly or through the `smoke_run` / `smoke_book` fixtures, marked here) nor `slow` (trains, builds a grader or
runs a model for seconds; marked in the test files); `make test` runs them all. Layout: tests/<room>/ holds the tests of edit_lib/<room>/, tests/ itself those of edit_lib's
top-level modules and the helpers the rooms share, tests/notebooks/ and tests/project/ the rest
(tests/project/test_layout.py)."""
import json
import os
import shutil

import pytest
from filelock import FileLock

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Workers share the cores, and each test's torch (and its kernels') OpenMP threads spin while they wait for
    # work by default: with two workers on two cores that spinning took the cores from the other worker's
    # threads. Set before torch is imported here; the kernels and processes the tests start inherit it.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from edit_lib import systems
from edit_lib.artifacts import CACHE_ENV
from edit_lib.embedded.build import ensure_micro_grader
from edit_lib.runner.keys import register_all
from edit_lib.runner.run import run

register_all()  # tests load named models ('embedded', 'micro') and the synthetic annotator as a run does

NOTEBOOK_FIXTURES = {"smoke_run", "smoke_book", "smoke_copy"}
SMOKE_FIRST = "tests/notebooks/test_executed_notebooks.py"  # the file with the most smoke tests


def pytest_collection_modifyitems(config, items):
    """A test that needs the session's smoke run executes notebooks, whatever it asserts: marked ``notebook``.
    Under pytest-xdist (``make test``: ``-n auto --dist loadfile --no-loadscope-reorder``, each file on one worker
    in collection order) the file with the most smoke tests goes first, so one worker makes the smoke run while the
    others run the files that need no notebook, and the other notebook files go last, when it is there."""
    for item in items:
        if NOTEBOOK_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.notebook)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        late = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("notebook")}
        items.sort(key=lambda item: (0 if item.nodeid.startswith(SMOKE_FIRST) else
                                     2 if item.nodeid.split("::")[0] in late else 1))  # stable: in-file order kept


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
    """The smoke run of every notebook written so far: once per test session, also when pytest-xdist's workers
    share the session (``make test``): the first worker to need it runs it under a file lock in their common
    temporary folder, the others wait for it and read its status. Tests copy it (``smoke_copy``) rather than
    change it."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        root = tmp_path_factory.mktemp("runs")
        return root / "smoke", run("smoke", run_root=str(root), log=lambda *_: None)
    root = tmp_path_factory.getbasetemp().parent / "shared_runs"
    done = root / "smoke_status.json"
    with FileLock(str(root) + ".lock"):
        if not done.exists():
            status = run("smoke", run_root=str(root), log=lambda *_: None)
            done.write_text(json.dumps(status))
    return root / "smoke", json.loads(done.read_text())


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
