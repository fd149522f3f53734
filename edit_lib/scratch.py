"""Scratch folders beside a cache entry that a killed process does not leave behind.

A warm-up Base (``train.warmup``) is written into a temporary sibling folder and renamed into place when complete,
so a reader sees a whole folder or none. ``try/finally`` removes that folder when the writer fails, but not when it
is killed (SIGTERM from a stopped run, SIGKILL), which left empty folders in the suite's cache. So each scratch
folder names its owner (pid and host) in ``OWNER``, and the next writer with the same prefix removes the folders
of owners on this host that are no longer alive. Folders without an owner file (written before this module) are
left alone: whether their writer still runs cannot be told.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import tempfile
from pathlib import Path

OWNER = ".owner.json"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def stale_scratch(parent: Path, prefix: str) -> list[Path]:
    """Scratch folders ``prefix*`` in ``parent`` whose owner ran on this host and is no longer alive."""
    out = []
    for d in sorted(Path(parent).glob(f"{prefix}*")):
        try:
            owner = json.loads((d / OWNER).read_text())
        except (OSError, ValueError):
            continue  # no owner recorded (or being written): not ours to judge
        pid = owner.get("pid") if isinstance(owner, dict) else None
        if isinstance(pid, int) and pid > 0 and owner.get("host") == socket.gethostname() and not _alive(pid):
            out.append(d)
    return out


@contextlib.contextmanager
def scratch_dir(parent: str | Path, prefix: str):
    """A fresh folder ``prefix*`` in ``parent`` owned by this process, removed on exit; first removes the stale
    scratch folders of dead owners with the same prefix (``stale_scratch``)."""
    parent = Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    for d in stale_scratch(parent, prefix):
        shutil.rmtree(d, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        (tmp / OWNER).write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}))
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
