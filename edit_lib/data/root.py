"""Where real data lives: the data root (``EDIT_SUITE_DATA``), never inside the repository.

Real data sets (ASAP-SAS, SAS-Bench, your own files) are not shipped. A loader's default folder is
``<data root>/<dataset folder>``, with the data root

1. ``$EDIT_SUITE_DATA`` when that environment variable is set, else
2. ``../shared/data`` next to the repository (the layout of this project's own machines; a fallback).

A dataset's ``path`` option always wins; in a path option ``$EDIT_SUITE_DATA`` (or ``${EDIT_SUITE_DATA}``)
stands for the data root, so ``path: $EDIT_SUITE_DATA/asap_sas`` works with or without the variable.
Each real-data card (``data_cards/``) shows the folder tree it expects under the data root.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

DATA_ENV = "EDIT_SUITE_DATA"
REPO_ROOT = Path(__file__).resolve().parents[2]
FALLBACK = REPO_ROOT.parent / "shared" / "data"
_VAR = re.compile(r"\$(?:\{" + DATA_ENV + r"\}|" + DATA_ENV + r"\b)")


def data_root() -> Path:
    """``$EDIT_SUITE_DATA`` if set (and not empty), else ``../shared/data`` beside the repository."""
    env = os.environ.get(DATA_ENV, "").strip()
    return Path(env).expanduser() if env else FALLBACK


def where_hint(folder: str) -> str:
    """One sentence for messages: where ``folder`` is looked for and how to change that."""
    src = f"${DATA_ENV}={os.environ[DATA_ENV]}" if os.environ.get(DATA_ENV, "").strip() else \
        f"{DATA_ENV} is not set, fallback {FALLBACK}"
    return (f"looked for {data_root() / folder} ({src}); set {DATA_ENV} to the folder that holds {folder}/, "
            "or give the dataset a 'path' option")


def resolve_path(p: str | Path) -> Path:
    """A path option: ``$EDIT_SUITE_DATA`` replaced by the data root, ``~`` expanded, relative paths
    taken from the repository root."""
    text = _VAR.sub(lambda _: str(data_root()), str(p))
    path = Path(text).expanduser()
    return path if path.is_absolute() else REPO_ROOT / path
