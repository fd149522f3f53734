"""Scratch folders of killed writers are removed by the next writer (edit_lib/artifacts.py)."""
import os
import signal
import subprocess
import sys
import textwrap

from edit_lib.artifacts import OWNER, scratch_dir, stale_scratch

# a writer that opens a scratch folder, says where, and waits to be killed (as a stopped run's warm-up is)
_WRITER = textwrap.dedent("""
    import sys, time
    from edit_lib.artifacts import scratch_dir
    with scratch_dir(sys.argv[1], "warmup-") as tmp:
        print(tmp, flush=True)
        time.sleep(600)
""")


def _killed_writer(parent):
    p = subprocess.Popen([sys.executable, "-c", _WRITER, str(parent)], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    folder = p.stdout.readline().strip()
    assert stale_scratch(parent, "warmup-") == []  # its owner is alive: not stale
    p.send_signal(signal.SIGKILL)
    p.wait()
    return folder


def test_killed_writer_folder_is_removed_by_the_next(tmp_path):
    folder = _killed_writer(tmp_path)
    assert os.path.isdir(folder), "SIGKILL skips the finally: the folder stays until the next writer"
    assert [str(d) for d in stale_scratch(tmp_path, "warmup-")] == [folder]
    legacy = tmp_path / "warmup-legacy"  # written before owners were recorded: left alone
    legacy.mkdir()
    other = tmp_path / "other-x"  # another prefix: left alone
    other.mkdir()
    with scratch_dir(tmp_path, "warmup-") as tmp:
        assert (tmp / OWNER).exists()
        assert not os.path.exists(folder)
        assert legacy.is_dir() and other.is_dir()
        assert stale_scratch(tmp_path, "warmup-") == []  # our own folder: owner alive
    assert not tmp.exists()  # removed on a normal exit


def test_scratch_removed_when_the_writer_fails(tmp_path):
    try:
        with scratch_dir(tmp_path, "warmup-") as tmp:
            raise RuntimeError("training failed")
    except RuntimeError:
        pass
    assert not tmp.exists()
