"""Resume after a kill: `edit-suite run` killed in the middle of a stage, then started again, skips every
finished stage and reuses the finished parts of the killed one (07's per-policy prediction cache)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edit_lib.runner.run import run

pytestmark = pytest.mark.notebook
SUITE = Path(sys.executable).with_name("edit-suite")
KILLED = "07_evaluation"


def test_killed_run_resumes_without_recomputing(smoke_copy):
    run_dir = smoke_copy(KILLED, artifacts=True)  # as if the run had been killed before 07 finished
    root = run_dir.parent
    cache = run_dir / "artifacts" / "predictions_cache"
    shutil.rmtree(cache, ignore_errors=True)
    proc = subprocess.Popen([str(SUITE), "run", "--profile", "smoke", "--run-root", str(root)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 300
        while time.time() < deadline and len(list(cache.glob("*.parquet"))) < 2:
            assert proc.poll() is None, proc.stdout.read().decode()[-2000:]
            time.sleep(0.2)
        assert len(list(cache.glob("*.parquet"))) >= 2, "07 never started grading"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the runner and its notebook kernel
        proc.wait(timeout=30)
    assert not (run_dir / "results" / "07_evaluation.json").exists()
    saved = len(list(cache.glob("*.parquet")))
    log = []
    status = run("smoke", run_root=str(root), log=log.append)
    by = {s["stage"]: s["status"] for s in status}
    assert all(by[s] == "cached" for s in by if s != KILLED), log  # finished stages are not recomputed
    assert by[KILLED] == "ran", log
    res = json.loads((run_dir / "results" / "07_evaluation.json").read_text())
    assert res["extra"]["cache_hits"] >= saved >= 2  # the killed stage's finished policies are not regraded
