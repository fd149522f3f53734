"""Build the Jupyter Book (1.x, offline) from the executed notebooks of one run (DESIGN.md §4)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from .artifacts import RunPaths
from .pipeline import STAGES

BOOK_DIR = Path(__file__).resolve().parents[1] / "book"


def stage_executed_notebooks(profile: str, run_root: str | None = None) -> list[str]:
    """Copy ``runs/<profile>/notebooks/*.ipynb`` into ``book/executed/`` with an index page."""
    paths = RunPaths.for_profile(profile, run_root)
    nbs = sorted(p for p in paths.notebooks.glob("*.ipynb") if p.stem in STAGES)
    if not nbs:
        raise FileNotFoundError(f"no executed notebooks in {paths.notebooks}: "
                                f"run `edit-suite run --profile {profile}` first")
    dest = BOOK_DIR / "executed"
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for nb in nbs:
        shutil.copy2(nb, dest / nb.name)
    figs = paths.figures
    lines = [f"# Run `{profile}`", "",
             f"These notebooks were executed by papermill with the `{profile}` profile; "
             f"their numbers are in `runs/{profile}/results/`.", ""]
    lines += [f"* `{nb.stem}` — {STAGES[nb.stem].title}" for nb in nbs]
    if figs.exists():
        lines += ["", f"Figures are also saved as PNG files in `runs/{profile}/figures/`."]
    (dest / "index.md").write_text("\n".join(lines) + "\n")
    return [nb.stem for nb in nbs]


def build_book(profile: str, run_root: str | None = None) -> Path:
    """Render ``book/_build/html`` with jupyter-book 1.x; never re-executes a notebook."""
    stage_executed_notebooks(profile, run_root)
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", str(BOOK_DIR), "--keep-going"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"jupyter-book build failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                           f"{proc.stderr[-3000:]}")
    index = BOOK_DIR / "_build" / "html" / "index.html"
    if not index.exists():
        raise RuntimeError(f"jupyter-book finished but {index} is missing:\n{proc.stdout[-2000:]}")
    return index
