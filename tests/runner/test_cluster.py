"""A cluster on this machine (README, "On a cluster"): two Ray nodes on loopback started by the README's own
commands, 06 re-run on them from a copy of the session's smoke run, the second node's raylet killed at its first RL
task, and the stage still ends with the tables of a run on the local engine; the Slurm script (configs/slurm/) run
through stand-ins for `srun` and `scontrol` on loopback; a unit whose node cannot see the run root, or cannot import
what it runs, stops with one line naming the node and the path. Every process a test starts carries a marker
(tests/processes.py) and is ended by it, never by a bare `ray stop`."""
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edit_lib import engine
from edit_lib.tools.compare import compare_runs
from processes import MARK_ENV, kill_marked, marked, new_marker

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# what a 2-core test machine gives each node: one CPU and a small object store
NODE_OPTIONS = ["--num-cpus", "1", "--object-store-memory", "200000000"]
NODE_NAME = "EDIT_SUITE_TEST_NODE"  # which node a process belongs to, inherited from its `ray start`
# Ray's own settings (read from the environment by its processes): the head declares a node dead after 4 failed
# health checks 0.5 s apart instead of Ray's 5 checks 3 s apart, so a killed node costs the test seconds, not 15-30
FAST_DEATH = {"RAY_health_check_period_ms": "500", "RAY_health_check_failure_threshold": "4"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def readme_cluster_commands() -> tuple[dict, list[str]]:
    """The bash block of the README's "On a cluster" section: what it exports, and its commands (start the head,
    start a worker, run)."""
    text = (REPO / "README.md").read_text()
    section = text[text.index("## On a cluster"):]
    block = re.search(r"^```bash\n(.*?)^```", section, flags=re.S | re.M).group(1)
    block = re.sub(r"\\\n\s*", " ", block)  # a command continued on the next line
    lines = [re.sub(r"\s+#.*$", "", ln).strip() for ln in block.splitlines() if ln.strip()]
    exported = dict(ln.split(" ", 1)[1].split("=", 1) for ln in lines if ln.startswith("export "))
    return exported, [ln for ln in lines if not ln.startswith("export ")]


def _alive_nodes(address: str) -> int:
    code = f"from edit_lib import engine; engine.connect('{address}'); print(engine.live_nodes())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    return int(out.stdout.split()[-1]) if out.returncode == 0 and out.stdout.split() else 0


def _clean_env() -> dict:
    """This process's environment without what an earlier test's Ray set in it: a `ray start` worker refuses to
    join with ``engine.LOCAL_ENV``'s single-node setting, and a run must not find another run's address or mark."""
    drop = {*engine.LOCAL_ENV, engine.ADDRESS_ENV, engine.MARK_ENV}
    return {k: v for k, v in os.environ.items() if k not in drop}


def _wait_for_nodes(address: str, n: int, procs: list) -> None:
    deadline = time.time() + 120
    while time.time() < deadline:
        for p in procs:
            assert p.poll() is None, p.stdout.read().decode()[-3000:]
        if _alive_nodes(address) >= n:
            return
        time.sleep(1)
    raise AssertionError(f"{n} Ray nodes never joined at {address}")


LOCAL_START = "from edit_lib import engine; print(engine.start('local'), engine.cluster_resources()['CPU'])"


@pytest.mark.slow
def test_readme_commands_run_06_on_two_nodes_and_a_killed_node_changes_no_table(smoke_copy, tmp_path):
    """The README's three commands on loopback (head, worker, run on the head), 06 forced on a copy of the session's
    smoke run: once the worker node runs an RL task its raylet is killed (SIGKILL, by PID); Ray retries the task on
    the head and 06 ends with the tables of the smoke run's own 06 on its local engine (`compare`: nothing beyond
    paths and 06's seconds). Beside the cluster, a run's local engine is a Ray of its own, not the cluster that
    `ray start` left its address for."""
    local = smoke_copy()
    cluster_root = tmp_path / "cluster"
    shutil.copytree(local, cluster_root / "smoke")
    run_06 = ["--only", "06_rl", "--force"]  # 06's 7 runs, as the smoke profile has them (rl.workers 0)
    # the README's run line sets rl.workers, sft.workers and model.generation_workers 0 (06's calibration and
    # Figure 3's curves on generation units; no stage key holds a count)
    spread = ["rl.workers=0", "sft.workers=0", "model.generation_workers=0"]
    exported, (head_cmd, worker_cmd, run_cmd) = readme_cluster_commands()
    base = dict(_clean_env(), **exported, **FAST_DEATH)
    port, marker = _free_port(), new_marker()

    def argv(cmd: str) -> list[str]:
        cmd = cmd.replace("10.0.0.1", "127.0.0.1").replace("6379", str(port)).replace(".venv/bin/", f"{BIN}/")
        cmd = cmd.replace("--profile paper-sas", "--profile smoke").replace("/shared/edit-runs", str(cluster_root))
        return shlex.split(cmd)

    def start(cmd: str, node: str) -> subprocess.Popen:
        return subprocess.Popen(argv(cmd) + NODE_OPTIONS + ["--block"], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                env=dict(base, **{MARK_ENV: marker, NODE_NAME: f"{node}-{marker}"}))

    procs = []
    try:
        procs.append(start(head_cmd, "head"))
        _wait_for_nodes(f"127.0.0.1:{port}", 1, procs)  # a worker started before its head's GCS gives up
        procs.append(start(worker_cmd, "worker"))
        _wait_for_nodes(f"127.0.0.1:{port}", 2, procs)
        own = subprocess.run([sys.executable, "-c", LOCAL_START], capture_output=True, text=True, timeout=120,
                             env=dict(base, **{MARK_ENV: marker}))
        assert own.returncode == 0 and own.stdout.split()[-1] == "2.0", own.stdout[-2000:] + own.stderr[-2000:]
        assert f":{port}" not in own.stdout  # `ray start` left its address on the machine; ray.init() would join
        assert all(v in run_cmd for v in spread), run_cmd
        run = subprocess.Popen(argv(run_cmd) + run_06, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT,
                               env=dict(base, **{MARK_ENV: marker}), start_new_session=True)
        deadline, on_worker = time.time() + 400, []
        while time.time() < deadline and not on_worker and run.poll() is None:
            on_worker = [p for p in marked(f"worker-{marker}") if p[1].startswith("ray::in_unit")]
            time.sleep(0.2)
        assert on_worker, "no RL task ran on the worker node" + (run.stdout.read().decode()[-3000:]
                                                                   if run.poll() is not None else "")
        (raylet,) = [pid for pid, c in marked(f"worker-{marker}") if c.split()[0].endswith("/raylet")]
        os.kill(raylet, signal.SIGKILL)
        out, _ = run.communicate(timeout=600)
        out = out.decode()
        assert run.returncode == 0, out[-4000:]
    finally:
        kill_marked(marker)
    assert f"engine: the kernels join the Ray cluster at 127.0.0.1:{port}" in out, out[-3000:]
    c = compare_runs(local, cluster_root / "smoke")  # nothing beyond paths and seconds
    assert c["keys"] == [] and {v["path"] for v in c["values"]} <= {"ops.cluster"}, c
    assert not any(t["only_a"] or t["only_b"] or t["not_keyed"] for t in c["tables"]), c["tables"]
    moved = {(t["stage"], m["column"]) for t in c["tables"] for m in t["moved"]}
    assert all(stage == "06_rl" and "seconds" in column for stage, column in moved), moved
    assert c["compared"]["stages"] == 10


SHIMS = {  # Slurm's commands as this machine's: every "node" is this one
    "scontrol": '#!/usr/bin/env bash\n[ "$1 $2" = "show hostnames" ] && tr "," "\\n" <<< "$3"\n',
    "srun": '#!/usr/bin/env bash\n# drop srun\'s options; the node named by -w marks what it starts\n'
            'while [[ "$1" == -* ]]; do if [ "$1" = -w ]; then export EDIT_SUITE_TEST_NODE="$2-$EDIT_SUITE_TEST_MARK";'
            ' shift 2; else shift; fi; done\nexec "$@"\n',
}


@pytest.mark.slow
def test_the_slurm_script_starts_ray_on_its_nodes_runs_the_profile_and_leaves_nothing(smoke_run, smoke_copy,
                                                                                      tmp_path):
    """configs/slurm/edit_suite.sbatch parses (bash -n), and run on two stand-in nodes (`srun` runs here,
    `scontrol` lists the allocation) it starts a head and a worker on loopback, runs 02 on them (the probe's
    batches on the engine's generation units) with the tables of the smoke run's own 02, and ends every Ray
    process it started."""
    script = REPO / "configs" / "slurm" / "edit_suite.sbatch"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in SHIMS.items():
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    run_dir = smoke_copy("02_probing")
    marker, port = new_marker(), _free_port()
    env = dict(_clean_env(), PATH=f"{bin_dir}:{os.environ['PATH']}", SLURM_JOB_NODELIST="node-a,node-b",
               HEAD_IP="127.0.0.1", RAY_PORT=str(port), RAY_NODE_OPTIONS=" ".join(NODE_OPTIONS),
               EDIT_SUITE_VENV=str(BIN.parent), **{MARK_ENV: marker})
    try:
        out = subprocess.run(["bash", str(script), "smoke", str(run_dir.parent), "--only", "02_probing", "-p",
                              "model.generation_workers=0"], capture_output=True, text=True, env=env, timeout=600,
                             cwd=REPO)
        deadline, left = time.time() + 60, marked(marker)
        while left and time.time() < deadline:  # raylets and workers end within seconds of their `ray start`
            time.sleep(0.5)
            left = marked(marker)
    finally:
        kill_marked(marker)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert f"edit-suite: Ray at 127.0.0.1:{port} with 2 of 2 node(s)" in out.stdout, out.stdout[-3000:]
    assert not left, f"left running by the script: {left}"
    c = compare_runs(smoke_run[0], run_dir)  # 02 again, on the two nodes: nothing beyond its seconds
    assert c["keys"] == [] and not any(t["only_a"] or t["only_b"] for t in c["tables"]), c
    moved = {(t["stage"], m["column"]) for t in c["tables"] for m in t["moved"]}
    assert all("seconds" in column for _, column in moved) and c["compared"]["stages"] == 10, moved


def test_the_slurm_script_without_its_arguments_says_how_to_call_it():
    out = subprocess.run(["bash", str(REPO / "configs" / "slurm" / "edit_suite.sbatch")], capture_output=True,
                         text=True)
    assert out.returncode == 2 and "usage: sbatch configs/slurm/edit_suite.sbatch PROFILE RUN_ROOT" in out.stderr


def test_a_unit_that_cannot_see_the_run_root_names_its_node_and_the_path(tmp_path, monkeypatch):
    """The contract's check (engine.sees_run_root): the mark absent, or another run's, is one line naming the
    node and the run root; the run's own mark passes."""
    root = tmp_path / "runs" / "smoke"
    monkeypatch.delenv(engine.MARK_ENV, raising=False)
    engine.mark_run_root(root)
    token, path = os.environ[engine.MARK_ENV].split("\t")
    assert Path(path) == root.resolve() / engine.MARK_FILE and Path(path).read_text() == token
    engine.sees_run_root("before", (token, path))
    host = socket.gethostname()
    cannot = engine.UnitCannotRun
    with pytest.raises(cannot, match=rf"^engine: node {re.escape(host)} \([^)]*\) cannot see the run "
                                                   rf"root {re.escape(str(tmp_path / 'elsewhere'))} \(.* does not "
                                                   rf"exist there\): every node"):
        engine.sees_run_root("before", (token, str(tmp_path / "elsewhere" / engine.MARK_FILE)))
    with pytest.raises(cannot, match="holds another run's token"):
        engine.sees_run_root("before", ("0" * 32, path))
    engine.sees_run_root("after", ("0" * 32, path))  # checked before a unit only


ELSEWHERE = '''
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])  # only this driver can import `only_here`
import only_here
from edit_lib import engine

ray = engine._ray()
ray.init(address="local", num_cpus=1, include_dashboard=False, object_store_memory=engine.OBJECT_STORE_BYTES)
task = engine.remote("rl_run", gpus=False)
root = Path(sys.argv[2])
engine.mark_run_root(root)  # the run's mark, which the second unit's hook checks against another token
sees = ("edit_lib.engine:sees_run_root", ("0" * 32, sys.argv[3]))
for fn, hooks in ((only_here.unit, ()), (len, (sees,))):
    try:
        list(engine.bounded(lambda _: task.remote("rl_run", hooks, fn, "x"), [0], 1))
    except engine.UnitCannotRun as e:
        print("ONE LINE:", str(e).replace("\\n", " | "))
engine.stop()
'''


@pytest.mark.slow
def test_units_whose_node_cannot_import_or_see_stop_with_one_line(tmp_path):
    """On a real Ray: a unit whose function lives in a module its worker cannot import, and a unit whose node does
    not see the run's mark, each stop the caller with engine.UnitCannotRun, one line naming the node."""
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "only_here.py").write_text("def unit(x):\n    return x\n")
    (tmp_path / "drive.py").write_text(ELSEWHERE)
    out = subprocess.run([sys.executable, str(tmp_path / "drive.py"), str(tmp_path / "mods"), str(tmp_path / "runs"),
                          str(tmp_path / "runs" / engine.MARK_FILE)], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("ONE LINE:")]
    assert len(lines) == 2, out.stdout[-3000:] + out.stderr[-3000:]
    assert re.search(r"engine: node 127\.0\.0\.1 \(pid \d+\) cannot import only_here: every node", lines[0]), lines
    assert re.search(r"engine: node \S+ \(127\.0\.0\.1\) cannot see the run root .* holds another run's token",
                     lines[1]), lines
    assert " | " not in lines[0] + lines[1]
