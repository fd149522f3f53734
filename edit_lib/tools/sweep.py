"""`edit-suite sweep --profile demo -p selection.shortlist_k=1,3,5 [--until STAGE]`: one run per value, side by side.

Each value is a run of the profile with that override (and the fixed ``-p`` values): the main run where it equals
the profile's value, otherwise a variant (``runner.variants``), so only the stages the value reaches run and the
rest is read from the main run. ``--until`` stops at the last stage a metric needs (Table 12 comes from 04). The
runs go one after another by default; ``--jobs N`` runs N at once, each as its own ``edit-suite run`` process,
after the first value's run has made the stages they share. ``<main run>/sweeps/<name>.json`` keeps the values,
their run folders, ``--until``, machine and commit; the main run's book reads each run's
results and draws each metric against the value (``book.variants_page.sweep_metrics``).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from edit_lib.config import ConfigError
from edit_lib.runner.keys import STAGES

SWEEPS = "sweeps"  # the folder of a main run that holds its sweeps


def _top_level_split(text: str) -> list[str]:
    """``text`` split at its commas outside brackets and braces."""
    values, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch in "[{") - (ch in "]}")
        if ch == "," and depth == 0:
            values.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [*values, cur.strip()]


def is_swept(assignment: str) -> bool:
    """Whether a ``-p`` value lists several values (``key=v1,v2``; ``key=[a,b]`` is one list value)."""
    return "=" in assignment and len(_top_level_split(assignment.split("=", 1)[1])) > 1


def split_values(assignment: str) -> tuple[str, list[str]]:
    """``path=v1,v2,...`` as (path, [v1, v2, ...]); commas inside brackets or braces belong to one value."""
    if "=" not in assignment:
        raise ConfigError(f"sweep -p {assignment!r}: not of the form section.key=v1,v2,...")
    path, text = (x.strip() for x in assignment.split("=", 1))
    values = _top_level_split(text)
    if len(values) < 2 or any(v == "" for v in values):
        raise ConfigError(f"sweep -p {assignment!r}: give two or more values, comma-separated")
    return path, values


def until_stages(until: str | None) -> list[str] | None:
    """Every stage up to ``until`` (None: all)."""
    if until is None:
        return None
    if until not in STAGES:
        raise ConfigError(f"--until {until!r}: not a stage; stages: {', '.join(STAGES)}")
    names = list(STAGES)
    return names[: names.index(until) + 1]


def _machine() -> str:
    """The machine as its runs' ``numerics`` name it: processor, kernels' instruction set, cores."""
    from edit_lib.runner.keys import numerics

    n = numerics()
    return f"{n['processor']} ({n['cpu_capability']} kernels), {os.cpu_count()} cores"


def _run_one(profile: str, overrides: list[str], only: list[str] | None, run_root: str | None, log,
             subprocess_run: bool) -> None:
    if not subprocess_run:
        from edit_lib.runner.run import run
        run(profile, only=only, overrides=overrides, run_root=run_root, log=log, quiet=True)
        return
    cmd = [sys.executable, "-m", "edit_lib.cli", "run", "--profile", profile, "--quiet",
           *sum((["-p", o] for o in overrides), []), *(["--run-root", run_root] if run_root else []),
           *(["--only", *only] if only else [])]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"sweep: {' '.join(overrides)} failed (exit {out.returncode}):\n{out.stderr[-3000:]}")


def sweep(profile: str, assignment: str, fixed: list[str] = (), until: str | None = None,
          run_root: str | None = None, jobs: int = 1, log=print) -> Path:
    """Run every value of ``assignment`` (``path=v1,v2,...``) with the ``fixed`` overrides up to ``until``; write
    and return ``<main run>/sweeps/<name>.json``."""
    from edit_lib.runner.stage import parse_overrides, provenance
    from edit_lib.runner.variants import folder_name, main_root, resolve
    from edit_lib.tools.compare import read_run

    path, values = split_values(assignment)
    fixed = parse_overrides(list(fixed))
    only = until_stages(until)
    plans = [(v, [*fixed, f"{path}={v}"]) for v in values]
    paths = [resolve(profile, ov, run_root)[1] for _, ov in plans]  # checks every value before any run
    folders, main = [p.root for p in paths], main_root(paths[0])
    log(f"sweep {path} over {', '.join(values)}: " + "; ".join(
        f"{v} -> {'the main run' if f == main else f.relative_to(main)}" for (v, _), f in zip(plans, folders)))
    _run_one(profile, plans[0][1], only, run_root, log, subprocess_run=False)  # makes what the others share
    if jobs > 1:  # each its own process (a run starts its engine and signal handlers in its main thread)
        with ThreadPoolExecutor(jobs) as pool:
            list(pool.map(lambda p: _run_one(profile, p[1], only, run_root, log, subprocess_run=True), plans[1:]))
    for _, overrides in plans[1:] if jobs <= 1 else ():
        _run_one(profile, overrides, only, run_root, log, subprocess_run=False)
    runs = []
    for (value, _), folder in zip(plans, folders):
        read_run(folder)  # a run folder with results, or NotARunFolder
        runs.append(dict(value=yaml.safe_load(value), text=value, folder=str(folder.relative_to(main)) or "."))
    record: dict[str, Any] = dict(profile=main.name, parameter=path, values=[r["value"] for r in runs],
                                  fixed=fixed, until=until, machine=_machine(), runs=runs, **provenance())
    out = main / SWEEPS / f"{folder_name('+'.join([path, *fixed]))}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1, default=str) + "\n")
    log(f"sweep: {len(runs)} runs -> {out} (`edit-suite book --profile {main.name}` draws it)")
    return out
