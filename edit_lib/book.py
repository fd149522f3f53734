"""Build the Jupyter Book (1.x, offline) from the executed notebooks of one run.

The book's sources (``book/``) are copied into a build folder (``--out``, default ``<run root>/<profile>/book``)
with the run's executed notebooks and a status page, and built there: nothing is written into the repository.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from .artifacts import RunPaths
from .config import load_profile
from .keys import STAGES
from .pipeline import mismatched_upstream

BOOK_DIR = Path(__file__).resolve().parents[1] / "book"
_GENERATED = ("_build", "executed")  # what a build folder holds besides copies of book/


def _status_lines(paths: RunPaths, stage: str, mismatched: dict[str, list[str]]) -> list[str]:
    """What a reader must know about one stage's results: stale reuse, results computed from other upstream
    results than those shown, warnings, skipped records."""
    f = paths.results_file(stage)
    if not f.exists():
        return []
    res = json.loads(f.read_text())
    lines = [f"  * key `{res.get('key')}`, {res.get('seconds', 0)} s"]
    if stage in mismatched:
        lines.append(f"  * **INCONSISTENT**: computed from other results of {', '.join(mismatched[stage])} than "
                     f"the ones shown here; run `edit-suite run --only {stage}` again")
    if res.get("reused_stale"):
        mods = ", ".join(f"`{m}`" for m in res.get("stale_modules", [])) or "none of its own"
        ups = ", ".join(res.get("stale_upstream", []))
        lines.append(f"  * **STALE: reused with `--reuse-stale`**: computed before these library files changed: {mods}"
                     + (f"; upstream reused stale: {ups}" if ups else ""))
    lines += [f"  * **WARNING**: {w}" for w in res.get("warnings", [])]
    for s in res.get("skipped", []):
        if s.get("n_skipped"):
            lines.append(f"  * **{s['n_skipped']} of {s['n_records']} records of `{s['dataset']}` skipped**: "
                         + ", ".join(f"{r} ({n})" for r, n in s.get("by_reason", {}).items()))
    return lines


def stage_executed_notebooks(profile: str, run_root: str | None = None, out: str | Path | None = None) -> Path:
    """Copy the book sources and ``<run root>/<profile>/notebooks/*.ipynb`` (into ``executed/``, with a status
    page) into the build folder; returns it."""
    name = load_profile(profile).name
    paths = RunPaths.for_profile(name, run_root)
    nbs = sorted(p for p in paths.notebooks.glob("*.ipynb") if p.stem in STAGES)
    if not nbs:
        raise FileNotFoundError(f"no executed notebooks in {paths.notebooks}: "
                                f"run `edit-suite run --profile {profile}` first")
    dest = Path(out) if out is not None else paths.root / "book"
    if dest.resolve() == BOOK_DIR.resolve() or BOOK_DIR.resolve() in dest.resolve().parents:
        raise FileNotFoundError(f"--out {dest} is the book's source folder; choose a folder outside it")
    if dest.exists() and any(dest.iterdir()) and not (dest / "_toc.yml").exists():
        raise FileNotFoundError(f"--out {dest} exists and is not a book build folder; choose a new folder")
    for item in BOOK_DIR.iterdir():
        if item.name in _GENERATED:
            continue
        target = dest / item.name
        if item.is_dir():
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(item, target)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(item, target)
    for gen in _GENERATED:
        shutil.rmtree(dest / gen, ignore_errors=True)
    executed = dest / "executed"
    executed.mkdir(parents=True)
    for nb in nbs:
        shutil.copy2(nb, executed / nb.name)
    lines = [f"# Run `{name}`", "",
             f"These notebooks were executed by papermill with the `{name}` profile; "
             f"their numbers are in `{paths.results}`.", ""]
    mismatched = mismatched_upstream(paths)
    for nb in nbs:
        lines += [f"* `{nb.stem}` — {STAGES[nb.stem].title}", *_status_lines(paths, nb.stem, mismatched)]
    if paths.skipped_records.exists():
        lines += ["", f"Every skipped record is listed in `{paths.skipped_records}`."]
    if paths.figures.exists():
        lines += ["", f"Figures are also saved as PNG files in `{paths.figures}`."]
    (executed / "index.md").write_text("\n".join(lines) + "\n")
    return dest


def build_book(profile: str, run_root: str | None = None, out: str | Path | None = None) -> Path:
    """Render ``<out>/_build/html`` with jupyter-book 1.x; never re-executes a notebook. Returns index.html."""
    dest = stage_executed_notebooks(profile, run_root, out)
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", str(dest), "--keep-going"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"jupyter-book build failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                           f"{proc.stderr[-3000:]}")
    index = dest / "_build" / "html" / "index.html"
    if not index.exists():
        raise RuntimeError(f"jupyter-book finished but {index} is missing:\n{proc.stdout[-2000:]}")
    return index
