"""The run's engine (edit_lib/engine.py) lives and dies with the run: `edit-suite run` starts one Ray on loopback
for a profile that sends work to it, the kernels' units run on it, and a run stopped by SIGTERM (as `timeout`
stops it) leaves no kernel, raylet, Ray head or worker behind. The processes of the run are found by a marker in
their environment, which every one of them inherits, so nothing else on the machine is touched."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edit_lib.config import ConfigError, OpsConfig
from processes import MARK_ENV, kill_marked, marked, new_marker

SUITE = Path(sys.executable).with_name("edit-suite")
LATE = ("07_evaluation", "08_rsr_interventions", "09_significance")


@pytest.mark.notebook
def test_a_run_stopped_by_sigterm_leaves_no_kernel_or_ray_process(smoke_copy):
    run_dir = smoke_copy(*LATE)  # 07 runs again, its greedy grading on the engine (generation_workers 0: no key moves)
    root = run_dir.parent
    marker = new_marker()
    env = dict(os.environ, **{MARK_ENV: marker})
    proc = subprocess.Popen([str(SUITE), "run", "--profile", "smoke", "--run-root", str(root), "--only",
                             "07_evaluation", "-p", "model.generation_workers=0"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline, workers = time.time() + 300, []
        while time.time() < deadline and not workers:
            assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
            # a generation unit is up: the stage is running (not Ray's prestarted ray::IDLE workers, which appear
            # while ray.init still runs: engine.start's own window, tested below)
            workers = [p for p in marked(marker) if p[1].startswith("ray::_Actor")]
            time.sleep(0.5)
        assert workers, "07 never started an engine worker"
        kinds = {c.split()[0].rsplit("/", 1)[-1] for _, c in marked(marker)}
        assert {"gcs_server", "raylet"} <= kinds, kinds  # the run's own head, started by the runner
        proc.send_signal(signal.SIGTERM)  # the runner alone, as `timeout` does
        assert proc.wait(timeout=120) == 143
        left = marked(marker)
        # raylet and workers notice their parent's end within seconds; the raylet's agents (DashboardAgent,
        # RuntimeEnvAgent) poll for it, which took over 30 s on a loaded 2-core machine
        deadline = time.time() + 90
        while left and time.time() < deadline:
            time.sleep(0.5)
            left = marked(marker)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        kill_marked(marker)  # never a bare `ray stop`: only this run's processes
    out = proc.stdout.read().decode()
    assert not left, f"left running after SIGTERM: {left}"
    assert "engine: Ray at 127.0.0.1:" in out, out[-3000:]  # loopback only
    assert not (run_dir / "results" / "07_evaluation.json").exists()


def test_a_sigterm_while_the_head_starts_ends_with_143_not_rays_15(monkeypatch):
    """ray.init installs a SIGTERM handler that exits with status 15 and holds it until it returns (CI once sent
    the signal in that window): engine.start turns that exit into the runner's 143, without a ray.shutdown of the
    half-started head."""
    from edit_lib import engine
    ray, ended = engine._ray(), []

    def init_stopped_midway(**_):
        signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(signum))  # as ray.init does first
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler runs before this returns
        raise AssertionError("SIGTERM was not delivered")

    previous = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init_stopped_midway)
    monkeypatch.setattr(ray, "shutdown", lambda: ended.append(True))
    monkeypatch.delenv(engine.ADDRESS_ENV, raising=False)
    try:
        with pytest.raises(SystemExit) as stopped:
            engine.start("local")
    finally:
        signal.signal(signal.SIGTERM, previous)
        engine._STARTED.clear()
    assert stopped.value.code == 143 and ended == []
    assert engine.ADDRESS_ENV not in os.environ


def test_ops_cluster_takes_local_auto_or_an_address():
    for ok in ("local", "auto", "10.0.0.5:6379", "head-node:6379", "ray://head:10001"):
        assert OpsConfig(cluster=ok).cluster == ok
    for bad in ("", "everywhere", "head-node", 6379):
        with pytest.raises(ConfigError, match="cluster must be"):
            OpsConfig(cluster=bad)


def test_a_count_of_workers_moves_no_stage_key_and_the_cluster_none():
    from edit_lib.config import load_profile
    from edit_lib.runner.stage import stage_key
    base = load_profile("demo")
    for name in ("01_base_policy", "06_rl", "07_evaluation"):
        for over in (["model.generation_workers=2"], ["model.generation_workers=0", "rl.workers=16"],
                     ["ops.cluster=auto"]):
            assert stage_key(load_profile("demo", over), name) == stage_key(base, name), (name, over)
    assert json.dumps(load_profile("demo").ops.cluster) == '"local"'


@pytest.mark.parametrize("over, sending", [
    ([], {"06"}),  # smoke: RL runs on the engine, the rest in the stage's process
    (["rl.workers=1"], set()),
    (["sft.workers=0"], {"05", "06"}),
    (["model.generation_workers=0"], {"01", "02", "03", "04", "05", "06", "07", "08"}),  # each loads a model
])
def test_a_run_starts_its_engine_only_for_stages_that_send_it_units(over, sending):
    from edit_lib.config import load_profile
    from edit_lib.runner.run import sends_units
    from edit_lib.runner.stage import available_stages
    prof = load_profile("smoke", over)
    assert {n[:2] for n in available_stages() if sends_units(prof, n)} == sending


FOUR_AT_ONCE = '''
import sys, time
from pathlib import Path
from edit_lib import engine

def unit(folder, i):
    """Mark this unit as started, then wait (bounded) until four are: True when they ran at once."""
    Path(folder, str(i)).touch()
    deadline = time.time() + 120
    while len(list(Path(folder).iterdir())) < 4 and time.time() < deadline:
        time.sleep(0.1)
    return len(list(Path(folder).iterdir())) >= 4

ray = engine._ray()  # loopback, before Ray is imported
ray.init(address="local", num_cpus=4, include_dashboard=False, object_store_memory=engine.OBJECT_STORE_BYTES)
assert ray.get_runtime_context().gcs_address.startswith("127.0.0.1:")
width = engine.capacity("rl_run", gpus=False)
task = engine.remote("rl_run", gpus=False)
together = [r for _, r in engine.bounded(lambda i: task.remote("rl_run", (), unit, sys.argv[1], i), range(4), 4)]
print(width, all(together))
engine.stop()
'''


@pytest.mark.slow
def test_a_cluster_of_four_cpus_runs_four_units_at_once(tmp_path):
    """Ray declared with 4 CPUs (on a 2-core machine): the engine's capacity for one-CPU units is 4, and four of
    them are running together (each waits until all four have started)."""
    (tmp_path / "started").mkdir()
    script = tmp_path / "four.py"
    script.write_text(FOUR_AT_ONCE)
    out = subprocess.run([sys.executable, str(script), str(tmp_path / "started")], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-2:] == ["4", "True"], out.stdout[-2000:]
