"""The processes of one test's run, found by a marker in their environment, which every child inherits (the runner,
its kernels, a Ray head, raylets, workers), so that a test stops its own and nothing else on the machine: never a
bare `ray stop`, which would end a demo's Ray beside the tests."""
import os
import signal
import uuid
from pathlib import Path

MARK_ENV = "EDIT_SUITE_TEST_MARK"


def new_marker() -> str:
    """A value for ``MARK_ENV`` no other process holds."""
    return uuid.uuid4().hex


def marked(marker: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live process whose environment holds ``marker``."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if marker.encode() in (d / "environ").read_bytes():
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                if cmd and (d / "stat").read_text().split(")")[-1].split()[0] != "Z":
                    out.append((int(d.name), cmd))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return out


def kill_marked(marker: str) -> None:
    """SIGKILL every live process holding ``marker``."""
    for pid, _ in marked(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
