"""The contract of a cluster (README, "On a cluster"), as the engine's units check it: every node runs the same
environment (the suite importable) and sees the run root at the same path on shared storage.

``mark_run_root`` (``edit-suite run``) leaves a fresh token in the run root; each unit of the run checks it before
it runs (``sees_run_root``, put first in the engine's ``run_hooks`` by ``check_hooks``). A unit whose node cannot
see it, or cannot import a module the unit needs, stops the stage with one line naming the node and the path
(``UnitCannotRun``, from ``explain``), before the stage writes its result.
"""
from __future__ import annotations

import os
import re
import socket
import sys
import uuid
from pathlib import Path

MARK_ENV = "EDIT_SUITE_RUN_MARK"  # "<token>\t<path>": the run root's mark every unit of the run must see
MARK_FILE = "logs/engine_mark"  # under the run root
_SEES = f"{__name__}:sees_run_root"


class UnitCannotRun(RuntimeError):
    """A unit's node breaks the contract of a cluster (it cannot see the run root or import the suite)."""


def mark_run_root(root) -> None:
    """For ``edit-suite run``: a fresh token in ``root``'s ``MARK_FILE``, named in ``MARK_ENV`` for the kernels,
    whose units check it before they run (``sees_run_root``)."""
    mark = Path(root).resolve() / MARK_FILE
    mark.parent.mkdir(parents=True, exist_ok=True)
    token = uuid.uuid4().hex
    mark.write_text(token)
    os.environ[MARK_ENV] = f"{token}\t{mark}"


def check_hooks(run_hooks: list) -> None:
    """Each unit of this process checks the run's mark first (``MARK_ENV``, where a run set it)."""
    if os.environ.get(MARK_ENV) and not any(name == _SEES for name, _ in run_hooks):
        run_hooks.insert(0, (_SEES, tuple(os.environ[MARK_ENV].split("\t", 1))))


def sees_run_root(when: str, mark: tuple[str, str]) -> None:
    """A ``run_hooks`` hook: before a unit runs, its node must see the run's mark ``(token, path)``."""
    if when != "before":
        return
    token, path = mark
    f = Path(path)
    if not (f.is_file() and f.read_text().strip() == token):
        state = "holds another run's token" if f.is_file() else "does not exist there"
        raise UnitCannotRun(f"engine: node {_node()} cannot see the run root {f.parent.parent} ({f} {state}): "
                            f"every node of a cluster must see the run root on shared storage (README, On a cluster)")


def auth_token_at_hand() -> bool:
    """A Ray authentication token is at hand ($RAY_AUTH_TOKEN, $RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token): a
    cluster started with `ray start` asks its clients for it (README, On a cluster)."""
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    return bool(os.environ.get("RAY_AUTH_TOKEN")) or Path(path or Path.home() / ".ray" / "auth_token").is_file()


def _node() -> str:
    try:
        ip = sys.modules["ray"].util.get_node_ip_address()
    except Exception:  # outside a Ray worker
        ip = "?"
    return f"{socket.gethostname()} ({ip})"


def explain(error: Exception, system_error: type) -> UnitCannotRun | None:
    """The broken contract behind a unit's ``RayTaskError``, as one line: the unit's own ``UnitCannotRun``, or a
    module its worker cannot import (ImportError in the unit; ``system_error``, Ray's RaySystemError, where Ray
    unpickles the unit's inputs); None for any other error."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, UnitCannotRun):
        return UnitCannotRun(str(cause.args[0]))
    missing = re.search(r"No module named '([^']+)'", str(cause)) if isinstance(
        cause, (ImportError, system_error)) else None
    if not missing:
        return None
    where = re.search(r"\(pid=(\d+), ip=([^)\s]+)\)", str(error))  # Ray's error keeps no ip attribute
    pid, ip = where.groups() if where else ("?", "?")
    return UnitCannotRun(f"engine: node {ip} (pid {pid}) cannot import {missing.group(1)}: every node of a cluster "
                         f"must run the same environment, with the suite installed (README, On a cluster)")


__all__ = ["MARK_ENV", "MARK_FILE", "UnitCannotRun", "auth_token_at_hand", "check_hooks", "explain", "mark_run_root",
           "sees_run_root"]
