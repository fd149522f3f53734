"""Shared fixtures: one smoke run of every notebook per test session."""
import pytest

from edit_lib.pipeline import run


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    status = run("smoke", run_root=str(root), log=lambda *_: None)  # every notebook written so far
    return root / "smoke", status


