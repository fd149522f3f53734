"""Run directories, artifact keys and the results JSON of each notebook (book/reproduce.md, 'Running parts of the
suite').

``runs/<profile>/`` holds ``artifacts/<stage>/<key>/`` (tables, datasets, adapters), ``results/<stage>.json``
(every number a table or figure shows), ``figures/``, the executed ``notebooks/``, ``logs/<stage>.log`` (what
a stage printed, ``runner.stage_log``), ``skipped_records.jsonl`` (every record a loader dropped) and ``book/``.
A stage's key (``edit_lib.runner.keys``) hashes the profile values it reads, its upstream keys, its library code
and the model weights, so an unchanged stage is not recomputed. A cache entry is written in a scratch folder
beside it (``scratch_dir``) that names its owner, so one a killed writer left is removed by the next.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd


DEFAULT_RUN_ROOT = Path(os.environ.get("EDIT_RUN_ROOT", Path(__file__).resolve().parents[1] / "runs"))
CACHE_ENV = "EDIT_SUITE_CACHE"


def cache_dir() -> Path:
    """The suite's one cache folder (built micro graders, file digests, grader builds): ``$EDIT_SUITE_CACHE``,
    else ``$XDG_CACHE_HOME/edit-suite``, else ``~/.cache/edit-suite``; never inside the repository."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "edit-suite"


class MissingArtifactError(FileNotFoundError):
    """An upstream artifact is absent: the message names the notebook that makes it."""


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @classmethod
    def for_profile(cls, profile: str, run_root: str | Path | None = None) -> "RunPaths":
        return cls(Path(run_root or DEFAULT_RUN_ROOT) / profile)

    @property
    def artifacts(self) -> Path:
        return self.root / "artifacts"

    @property
    def results(self) -> Path:
        return self.root / "results"

    @property
    def figures(self) -> Path:
        return self.root / "figures"

    @property
    def notebooks(self) -> Path:
        return self.root / "notebooks"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def log_file(self, stage: str) -> Path:
        return self.logs / f"{stage}.log"

    def stage_dir(self, stage: str, key: str) -> Path:
        return self.artifacts / stage / key

    def results_file(self, stage: str) -> Path:
        return self.results / f"{stage}.json"

    @property
    def skipped_records(self) -> Path:
        return self.root / "skipped_records.jsonl"


def jsonable(x: Any) -> Any:
    """``x`` with what JSON cannot hold made plain: keys as strings, tuples as lists, numpy scalars as Python
    numbers, NaN and infinities as None, paths as strings."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        f = float(x)
        return None if math.isnan(f) or math.isinf(f) else f
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, Path):
        return str(x)
    return x


def as_json(x: Any) -> Any:
    """``x`` as JSON reads it back (tuples as lists, keys as strings, anything else JSON lacks as its str): how a
    stage's key hashes a value and its results JSON records it."""
    return json.loads(json.dumps(x, default=str))


def read_jsonl(path: Path) -> list[dict]:
    """The objects of a JSON-lines file, one a non-blank line; none when the file does not exist."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def table_rows(df: pd.DataFrame | list[dict]) -> list[dict]:
    """Rows of a table as plain JSON objects (NaN -> null)."""
    rows = df.to_dict(orient="records") if isinstance(df, pd.DataFrame) else list(df)
    return jsonable(rows)


def write_json(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(jsonable(payload), indent=2, sort_keys=True, ensure_ascii=False))
    tmp.replace(path)  # atomic: a crashed run never leaves half a results file


def read_results(paths: RunPaths, stage: str) -> dict:
    f = paths.results_file(stage)
    if not f.exists():
        main = getattr(paths, "main", None)  # a variant's folder is named by its values, not by its profile
        how = (f"with the variant's -p values (its main run: {main})" if main else
               f"(edit-suite run --profile {paths.root.name} --only {stage})")
        raise MissingArtifactError(f"{f} is missing: run notebook {stage} first {how}")
    return json.loads(f.read_text())


def recorded_stage_dir(paths: RunPaths, stage: str) -> Path:
    """The artifact folder a finished run recorded for ``stage``, without checking its key against the current
    code (benchmarks and checks that read a run as it is; notebooks use ``StageContext.upstream``)."""
    res = read_results(paths, stage)
    if not res.get("key"):
        raise MissingArtifactError(f"{paths.results_file(stage)} records no key: run notebook {stage} first "
                                   f"(edit-suite run --profile {paths.root.name})")
    return paths.stage_dir(stage, res.get("artifact_key") or res["key"])


def skipped_summary(dataset: str, n_records: int, skipped: list) -> dict:
    """What a loader dropped from one dataset: counts per reason and the first five messages. ``skipped``
    holds ``edit_lib.data.schema.DataError`` objects (path, line, field, reason)."""
    by_reason: dict[str, int] = {}
    for e in skipped:
        r = str(getattr(e, "reason", None) or e)
        by_reason[r] = by_reason.get(r, 0) + 1
    return dict(dataset=dataset, n_records=int(n_records), n_skipped=len(skipped),
                by_reason=dict(sorted(by_reason.items(), key=lambda kv: -kv[1])),
                first=[str(e) for e in skipped[:5]])


def replace_skipped_records(paths: RunPaths, stage: str, datasets: set[str] | None, rows: list[dict]) -> Path:
    """Rewrite ``skipped_records.jsonl``: drop the lines of ``stage`` (only those of ``datasets`` unless
    None), then add ``rows`` (one JSON object per skipped record)."""
    f = paths.skipped_records
    if not f.exists() and not rows:
        return f
    kept = []
    if f.exists():
        for line in f.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if row.get("stage") != stage or (datasets is not None and row.get("dataset") not in datasets):
                kept.append(row)
    f.parent.mkdir(parents=True, exist_ok=True)
    tmp = f.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(jsonable(r), ensure_ascii=False) + "\n" for r in kept + rows))
    tmp.replace(f)
    return f

# ------------------------------------------------------------------ content digests (stage keys, caches)

def short_hash(payload: Any) -> str:
    """12 hex digits of the SHA-256 of ``payload`` (a string, or JSON with sorted keys)."""
    text = payload if isinstance(payload, str) else json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _file_digest(path: Path, memo: dict) -> str:
    st = path.stat()
    tag = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    if tag not in memo:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        memo[tag] = h.hexdigest()
    return memo[tag]


def folder_digest(folder: Path) -> str:
    """Hash of every file's relative path and contents. Digests of files are memoised on disk (by path, size
    and mtime) in the cache folder, so multi-GB checkpoints are read once."""
    files = sorted(p for p in Path(folder).rglob("*") if p.is_file())
    with _digest_memo() as memo:
        return short_hash({str(p.relative_to(folder)): _file_digest(p, memo) for p in files})


def file_digest(path: Path) -> str:
    """SHA-256 of one file's contents, memoised on disk like ``folder_digest`` (a 100 MB model file is read
    once, not at every key computation or model load)."""
    with _digest_memo() as memo:
        return _file_digest(Path(path), memo)


def path_digest(p: Path) -> str:
    """``folder_digest`` of a folder, ``file_digest`` of a file, or a marker naming a missing path."""
    p = Path(p)
    return folder_digest(p) if p.is_dir() else file_digest(p) if p.is_file() else f"missing:{p}"


class _digest_memo:
    """The on-disk memo of file digests (by path, size and mtime) in the cache folder; written back on exit
    when it grew."""

    def __enter__(self) -> dict:
        self.file = cache_dir() / "file_digests.json"
        try:
            self.memo = json.loads(self.file.read_text())
        except (OSError, json.JSONDecodeError):
            self.memo = {}
        self.n0 = len(self.memo)
        return self.memo

    def __exit__(self, *exc) -> None:
        if len(self.memo) > self.n0:
            try:
                self.file.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.file.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps(self.memo))
                tmp.replace(self.file)
            except OSError:
                pass  # a read-only cache only costs re-hashing next time


# ---------------------------------------------------------------- scratch folders a killed process does not leave
# A warm-up Base (``train.warmup``) is written into a temporary sibling folder and renamed into place when complete,
# so a reader sees a whole folder or none. ``try/finally`` removes that folder when the writer fails, but not when
# it is killed (SIGTERM, SIGKILL): each scratch folder names its owner (pid and host) in ``OWNER``, and the next
# writer with the same prefix removes those of owners on this host no longer alive (no owner file: left alone).
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
