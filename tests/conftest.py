"""Shared fixtures: one smoke run of every notebook per test session; the test tiers.

Tiers (README, "Tests"): `make test-fast` runs every test marked neither `notebook` (executes notebooks,
directly or through the `smoke_run` / `smoke_book` fixtures, marked here) nor `slow` (trains, builds a grader or
runs a model for seconds; marked in the test files); `make test` runs them all."""
import pytest

from edit_lib.runner.register import register_all
from edit_lib.runner.run import run

register_all()  # tests load named models ('embedded', 'micro') and the synthetic annotator as a run does

NOTEBOOK_FIXTURES = {"smoke_run", "smoke_book"}


def pytest_collection_modifyitems(config, items):
    for item in items:  # a test that needs the session's smoke run executes notebooks, whatever it asserts
        if NOTEBOOK_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.notebook)


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    status = run("smoke", run_root=str(root), log=lambda *_: None)  # every notebook written so far
    return root / "smoke", status
