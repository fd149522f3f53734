"""The per-notebook stage context and the papermill runner.

Each notebook starts with a ``parameters`` cell (``profile``, ``overrides``, ``run_root``) and calls
``ctx = stage("00_data", profile, overrides, run_root)``; it reads the profile through ``ctx.profile`` (a view
that refuses values its stage did not declare, ``edit_lib.keys``), records tables, figures, warnings and
skipped records through ``ctx`` and ends with ``ctx.save()``, which writes ``<run root>/<profile>/results/
<stage>.json`` with the inputs of the stage's key. The runner executes the notebooks in order, says why each
one runs, and skips a stage whose recorded inputs still match (``--force`` recomputes).

Longer than 300 lines because the notebook side (``stage``, ``StageContext``) and the runner (``decide``,
``run``) must agree on keys, results files and the notebook folder; keeping them in one module keeps one
``NOTEBOOK_DIR`` and no import cycle.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import yaml

from .artifacts import (MissingArtifactError, RunPaths, read_results, replace_skipped_records, skipped_summary,
                        table_rows, write_json)
from .caveats import caveats_markdown, run_caveats
from .config import CONFIG_DIR, ConfigError, Profile, load_profile, profile_path
from .keys import STAGES, ProfileView, Stage, UndeclaredSectionError, describe_reason, stage_inputs, why

__all__ = ["STAGES", "Stage", "StageContext", "UndeclaredSectionError", "NotebookFailed", "TooManySkipped",
           "available_stages", "run", "stage", "stage_key"]

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
CAVEAT_SOURCES = ("00_data", "01_base_policy")  # stages that run before 01's caveats exist


def notebook_sha(name: str) -> str:
    """Hash of a notebook's source: an edited notebook is re-executed even when its key is unchanged (its
    saved artifacts, kept per key, are still reused)."""
    return hashlib.sha256((NOTEBOOK_DIR / f"{name}.ipynb").read_bytes()).hexdigest()[:12]


def available_stages() -> list[str]:
    return [s for s in STAGES if (NOTEBOOK_DIR / f"{s}.ipynb").exists()]


def stage_key(profile: Profile, name: str, _memo: dict | None = None) -> str:
    """The stage's key: a hash of its declared profile values, its upstream stages' full keys, its library
    modules and the model weights it loads (``edit_lib.keys.stage_inputs``)."""
    return stage_inputs(profile, name, NOTEBOOK_DIR, _memo)[0]


def parse_overrides(overrides: Any) -> list[str]:
    """Overrides as a list of ``section.key=value`` strings; papermill's ``-p overrides '["a=1"]'`` passes a
    string, which is read as JSON/YAML (a single ``a=1`` string is one override)."""
    if overrides is None or overrides == "":
        return []
    if isinstance(overrides, str):
        value = yaml.safe_load(overrides)
        overrides = [overrides] if isinstance(value, str) else value
    if not isinstance(overrides, (list, tuple)) or not all(isinstance(o, str) for o in overrides):
        raise ConfigError(f"overrides must be a list of 'section.key=value' strings, got {overrides!r}")
    return list(overrides)


def profile_argument(profile: str | Path) -> str:
    """What the runner passes to a notebook: a profile's name if it is one of ``configs/``, otherwise the
    absolute path of its YAML file (so the notebook loads the same file from any working directory)."""
    path = profile_path(profile)
    if Path(str(profile)).suffix == "" and path.resolve().parent == CONFIG_DIR.resolve():
        return str(profile)
    return str(path.resolve())


@dataclass
class StageContext:
    """What a notebook needs: its profile (a view of the declared values), paths, key, and a recorder for
    tables, figures, warnings and skipped records."""

    name: str
    profile: ProfileView
    paths: RunPaths
    key: str
    inputs: dict
    full_profile: Profile
    tables: dict[str, list[dict]] = field(default_factory=dict)
    figures: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    started: float = field(default_factory=time.time)

    @property
    def artifacts(self) -> Path:
        d = self.paths.stage_dir(self.name, self.key)
        d.mkdir(parents=True, exist_ok=True)
        return d

    def upstream(self, stage: str) -> Path:
        """The artifact folder of an upstream stage, or an error saying why its results do not fit."""
        res = read_results(self.paths, stage)
        key, inputs = stage_inputs(self.full_profile, stage, NOTEBOOK_DIR)
        if res.get("key") != key:
            reasons = "; ".join(describe_reason(*r) for r in why(res, inputs)) or "key changed"
            raise MissingArtifactError(
                f"results of {stage} in {self.paths.root} are stale ({reasons}; key {res.get('key')} != {key}): "
                f"re-run notebook {stage} (edit-suite run --profile {self.paths.root.name} --only {stage})")
        if res.get("reused_stale"):
            self.warn(f"upstream {stage} reuses results computed with older library code (--reuse-stale; "
                      f"changed since: {', '.join(res.get('stale_modules', []))})")
        d = self.paths.stage_dir(stage, res.get("artifact_key") or key)
        if not d.exists():
            raise MissingArtifactError(f"{d} is missing: run notebook {stage} first")
        return d

    def cached(self, name: str, make: Callable[[], pd.DataFrame]) -> pd.DataFrame:
        """Load ``<artifacts>/<name>.parquet`` if a previous run of this key saved it, else make and save it
        (long stages resume from saved artifacts; a changed key gets a fresh folder)."""
        path = self.artifacts / f"{name}.parquet"
        if path.exists():
            return pd.read_parquet(path)
        df = make()
        tmp = path.with_suffix(".tmp")
        df.to_parquet(tmp, index=False)
        tmp.replace(path)
        return df

    def table(self, name: str, df: pd.DataFrame | list[dict]) -> pd.DataFrame | list[dict]:
        """Record a table for the results JSON; returns it so a notebook can display it."""
        self.tables[name] = table_rows(df)
        return df

    def figure(self, name: str, fig: Any, data: pd.DataFrame | list[dict] | None = None) -> Path:
        """Save a matplotlib figure to ``figures/`` and record its path (and optionally its data)."""
        self.paths.figures.mkdir(parents=True, exist_ok=True)
        path = self.paths.figures / f"{self.name}__{name}.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        self.figures[name] = str(path.relative_to(self.paths.root))
        if data is not None:
            self.tables[f"figure:{name}"] = table_rows(data)
        return path

    def warn(self, message: str) -> None:
        """Say something the reader must not miss: printed in the notebook, kept in the results JSON
        (``warnings``) and printed by ``edit-suite run`` after the stage."""
        print(f"WARNING: {message}", flush=True)
        self.warnings.append(str(message))

    def carry_caveats(self, source: str = "01_base_policy") -> list[str]:
        """Show the caveats ``source`` recorded for this run (``caveats.run_caveats``: a Base that cannot read
        the data or gives degenerate marks) first, in bold, and keep them in this stage's results
        (``extra["caveats"]``, ``extra["caveats_from"]``); [] when there are none or ``source`` has not run."""
        f = self.paths.results_file(source)
        found = run_caveats(json.loads(f.read_text())) if f.exists() else []
        if found:
            self.extra.update(caveats=found, caveats_from=source)
            text = caveats_markdown(found, source)
            try:
                from IPython import get_ipython
                from IPython.display import Markdown, display
                shell = get_ipython()
            except ImportError:
                shell = None
            if shell is not None:
                display(Markdown(text))
            else:
                print(text, flush=True)
        return found

    def record_skipped(self, dataset: str, n_records: int, skipped: list) -> dict:
        """Record what a loader dropped from ``dataset`` (``n_records`` read, skipped ones included;
        ``skipped``: ``DataError`` objects): a summary in the results JSON and every record in
        ``skipped_records.jsonl`` of the run. ``edit-suite run`` prints it and fails when the share is above
        ``data.max_skipped_fraction``."""
        entry = skipped_summary(dataset, n_records, skipped)
        self.skipped = [s for s in self.skipped if s["dataset"] != dataset] + [entry]
        rows = [dict(stage=self.name, dataset=dataset, path=getattr(e, "path", None), line=getattr(e, "line", None),
                     field=getattr(e, "field", None), reason=getattr(e, "reason", None), message=str(e))
                for e in skipped]
        replace_skipped_records(self.paths, self.name, {dataset}, rows)
        if skipped:
            print(f"{dataset}: skipped {len(skipped)} of {n_records} records "
                  f"(every one in {self.paths.skipped_records})", flush=True)
        return entry

    def save(self) -> Path:
        """Write ``results/<stage>.json`` (tables, figures, warnings, skipped records, key and its inputs)."""
        replace_skipped_records(self.paths, self.name, None, [
            r for r in _read_jsonl(self.paths.skipped_records)
            if r.get("stage") == self.name and r.get("dataset") in {s["dataset"] for s in self.skipped}])
        payload = dict(notebook=self.name, profile=self.full_profile.name, key=self.key, artifact_key=self.key,
                       notebook_sha=notebook_sha(self.name), inputs=self.inputs, params=self.inputs["params"],
                       reused_stale=False, tables=self.tables, figures=self.figures, extra=self.extra,
                       warnings=self.warnings, skipped=self.skipped, seconds=round(time.time() - self.started, 1),
                       **provenance())
        f = self.paths.results_file(self.name)
        write_json(f, payload)
        return f


def provenance() -> dict:
    """Which code made a results file and when: ``git_commit`` (``git rev-parse HEAD`` of the repository, "unknown"
    outside a git checkout) and ``run_date`` (UTC, ISO 8601); the README's results section names both."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=NOTEBOOK_DIR.parent, capture_output=True, text=True,
                             timeout=10)
        commit = out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    return dict(git_commit=commit, run_date=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))


def _read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def stage(name: str, profile: str = "smoke", overrides: list[str] | str | None = (),
          run_root: str | None = None) -> StageContext:
    """Open the context of notebook ``name`` (called from the notebook's first code cell). ``profile`` is a
    name in ``configs/`` or a path to a YAML file; ``overrides`` a list or a JSON/YAML string of them."""
    if name not in STAGES:
        raise KeyError(f"unknown stage {name!r}; stages: {list(STAGES)}")
    prof = load_profile(profile, parse_overrides(overrides))
    paths = RunPaths.for_profile(prof.name, run_root)
    import torch  # local: keep `edit-suite --help` fast
    torch.set_num_threads(max(1, prof.model.torch_threads))
    key, inputs = stage_inputs(prof, name, NOTEBOOK_DIR)
    ctx = StageContext(name=name, profile=ProfileView(prof, name, STAGES[name].sections), paths=paths, key=key,
                       inputs=inputs, full_profile=prof)
    if name not in CAVEAT_SOURCES:  # every later stage shows 01's caveats first
        ctx.carry_caveats()
    return ctx


# ------------------------------------------------------------------ the runner

class NotebookFailed(RuntimeError):
    """A notebook raised: the message names the notebook and the failing cell."""


class TooManySkipped(RuntimeError):
    """A dataset dropped more records than ``data.max_skipped_fraction`` allows."""


def _recorded(paths: RunPaths, name: str) -> dict | None:
    f = paths.results_file(name)
    if not f.exists() or not (paths.notebooks / f"{name}.ipynb").exists():
        return None
    try:
        return json.loads(f.read_text())
    except json.JSONDecodeError:
        return None


def mismatched_upstream(paths: RunPaths) -> dict[str, list[str]]:
    """Stages whose recorded results were computed from other results of an upstream stage than the ones now
    recorded (e.g. after ``--only 00_data`` with other parameters): {stage: [upstream, ...]}."""
    recs = {n: _recorded(paths, n) for n in STAGES}
    out = {}
    for name, res in recs.items():
        if not res or res.get("reused_stale"):  # reused results are flagged as stale already
            continue
        ups = (res.get("inputs") or {}).get("upstream", {})
        bad = [u for u, k in ups.items() if recs.get(u) and recs[u].get("key") != k]
        if bad:
            out[name] = bad
    return out


@dataclass
class Decision:
    """What the runner does with one stage and why."""

    stage: str
    key: str
    inputs: dict
    action: str  # "run" | "cached" | "reuse" (--reuse-stale: library changed only)
    reasons: list[tuple[str, Any]]

    @property
    def why(self) -> str:
        return "; ".join(describe_reason(*r) for r in self.reasons)


def decide(prof: Profile, paths: RunPaths, names: list[str], force: bool = False, reuse_stale: bool = False,
           memo: dict | None = None) -> list[Decision]:
    """The runner's plan for ``names`` (in order), without executing anything. A stage runs when it is new,
    forced, or its recorded inputs differ from today's (parameters, upstream keys, library files, weights) or
    its notebook was edited. With ``reuse_stale`` a stage whose only changes are library files (or upstream
    stages reused that way) keeps its results, marked stale."""
    memo = {} if memo is None else memo
    out: dict[str, Decision] = {}
    for name in names:
        key, inputs = stage_inputs(prof, name, NOTEBOOK_DIR, memo)
        res = _recorded(paths, name)
        reasons = why(res, inputs)
        if res is not None and res.get("notebook_sha") != notebook_sha(name):
            reasons.append(("notebook edited", None))
        if res is not None and not reasons and res.get("key") != key:
            reasons.append(("recorded", f"recorded key {res.get('key')} differs"))
        if force:
            action, reasons = "run", [("forced", None)]
        elif not reasons:
            action = "cached"
        elif reuse_stale and all(k == "library" or (k == "upstream" and d in out and out[d].action == "reuse")
                                 for k, d in reasons):
            action = "reuse"
        else:
            action = "run"
        out[name] = Decision(name, key, inputs, action, reasons)
    return list(out.values())


def _mark_reused(paths: RunPaths, d: Decision) -> None:
    """Keep a stage's results under its new key, flagged ``reused_stale`` with the changed library files; its
    recorded inputs stay those it was computed with, so a later run without --reuse-stale recomputes it."""
    res = json.loads(paths.results_file(d.stage).read_text())
    mods = [f for k, det in d.reasons if k == "library" for f in det]
    ups = [det for k, det in d.reasons if k == "upstream"]
    res.update(key=d.key, artifact_key=res.get("artifact_key") or res.get("key"), reused_stale=True,
               stale_modules=mods, stale_upstream=ups)
    write_json(paths.results_file(d.stage), res)


def _failing_cell(nb_path: Path) -> str:
    try:
        nb = json.loads(nb_path.read_text())
    except Exception:  # noqa: BLE001 - best effort only; the original error is raised anyway
        return "unknown cell"
    for i, cell in enumerate(nb.get("cells", [])):
        for out in cell.get("outputs", []) or []:
            if out.get("output_type") == "error":
                src = "".join(cell.get("source", ""))[:200]
                return f"cell {i} ({out.get('ename')}: {out.get('evalue')})\n--- cell source ---\n{src}"
    return "unknown cell"


def _report(prof: Profile, paths: RunPaths, name: str, log) -> None:
    """Print a stage's warnings and skipped records; fail when a dataset dropped too large a share."""
    res = json.loads(paths.results_file(name).read_text())
    for w in res.get("warnings", []):
        log(f"    WARNING ({name}): {w}")
    limit = prof.data.max_skipped_fraction
    for s in res.get("skipped", []):
        if not s.get("n_skipped"):
            continue
        share = s["n_skipped"] / s["n_records"] if s.get("n_records") else 1.0
        reasons = ", ".join(f"{r} ({n})" for r, n in s.get("by_reason", {}).items())
        log(f"    {name}: {s['dataset']} skipped {s['n_skipped']} of {s['n_records']} records ({share:.1%}): {reasons}")
        for line in s.get("first", []):
            log(f"      - {line}")
        log(f"      every skipped record: {paths.skipped_records}")
        if share > limit:
            raise TooManySkipped(
                f"{name}: dataset {s['dataset']} dropped {s['n_skipped']} of {s['n_records']} records ({share:.1%}), "
                f"more than data.max_skipped_fraction = {limit:g}. Fix the records listed in "
                f"{paths.skipped_records}, or accept the loss deliberately with "
                f"-p data.max_skipped_fraction={min(1.0, share + 0.005):.2f}")


def run(profile: str, only: list[str] | None = None, force: bool = False, overrides: list[str] | None = None,
        run_root: str | None = None, log=print, reuse_stale: bool = False) -> list[dict]:
    """Execute the profile's notebooks in order with papermill, saying why each runs; returns one status row
    per stage. ``profile`` is a name in ``configs/`` or a YAML path (runs go to ``<run_root>/<its name>``)."""
    import papermill as pm

    overrides = parse_overrides(overrides)
    prof = load_profile(profile, overrides)
    if prof.model.generation_backend == "vllm":  # fail before any notebook runs, not inside 01
        from .vllm_engine import VLLMUnavailable, check_available
        try:
            check_available()
        except VLLMUnavailable as e:
            raise ConfigError(f"{prof.name}: {e}") from e
    paths = RunPaths.for_profile(prof.name, run_root)
    names = available_stages()
    if only:
        unknown = [o for o in only if o not in STAGES]
        if unknown:
            raise KeyError(f"unknown notebook(s) {unknown}; available: {names}")
        missing = [o for o in only if o not in names]
        if missing:
            raise KeyError(f"notebook(s) {missing} are not written yet; available: {names}")
        names = [n for n in names if n in only]
    paths.notebooks.mkdir(parents=True, exist_ok=True)
    status = []
    for i, d in enumerate(decide(prof, paths, names, force=force, reuse_stale=reuse_stale), 1):
        name, prefix = d.stage, f"[{i}/{len(names)}] {d.stage}"
        row = dict(stage=name, key=d.key, reasons=d.why, seconds=0.0)
        if d.action == "cached":
            log(f"{prefix}: up to date (key {d.key}), skipped")
        elif d.action == "reuse":
            _mark_reused(paths, d)
            log(f"{prefix}: STALE, reused because of --reuse-stale ({d.why}); recorded as reused_stale "
                f"in {paths.results_file(name)}")
        else:
            out_nb = paths.notebooks / f"{name}.ipynb"
            if force:  # recompute: drop this key's saved artifacts so nothing is resumed from them
                shutil.rmtree(paths.stage_dir(name, d.key), ignore_errors=True)
            log(f"{prefix}: running ({d.why}; key {d.key}) ...")
            t0 = time.time()
            try:
                pm.execute_notebook(str(NOTEBOOK_DIR / f"{name}.ipynb"), str(out_nb),
                                    kernel_name=os.environ.get("EDIT_KERNEL", "python3"),
                                    parameters=dict(profile=profile_argument(profile), overrides=overrides,
                                                    run_root=str(paths.root.parent.resolve())),
                                    cwd=str(NOTEBOOK_DIR), progress_bar=False, log_output=False,
                                    # the kernel process's own log (e.g. ipykernel's TCP-transport notice) is
                                    # not the notebook's output: keep it out of the runner's terminal
                                    extra_arguments=["--IPKernelApp.log_level=ERROR"])
            except Exception as e:  # papermill raises PapermillExecutionError with the cell's traceback
                raise NotebookFailed(f"notebook {name} failed at {_failing_cell(out_nb)}\n"
                                     f"executed copy: {out_nb}\n{type(e).__name__}: {str(e)[-2000:]}") from None
            f = paths.results_file(name)
            if not f.exists() or f.stat().st_mtime < t0:
                raise NotebookFailed(f"notebook {name} ran but did not write {f}: it must end with ctx.save()")
            res = json.loads(f.read_text())
            if res.get("key") != d.key:  # e.g. a relative model path that resolves elsewhere from notebooks/
                diff = "; ".join(describe_reason(*r) for r in why(res, d.inputs))
                raise NotebookFailed(f"notebook {name} computed key {res.get('key')} but the runner {d.key} "
                                     f"({diff or 'same inputs'}): use absolute paths in the profile")
            res["notebook_sha"] = notebook_sha(name)  # the notebook the runner executed
            row["seconds"] = round(time.time() - t0, 1)
            res["runner_seconds"] = row["seconds"]  # wall time with the kernel's start (edit-suite bench suite)
            write_json(paths.results_file(name), res)
            log(f"{prefix}: done in {row['seconds']:.1f}s -> {paths.results_file(name)}")
        row["status"] = {"cached": "cached", "reuse": "reused_stale", "run": "ran"}[d.action]
        status.append(row)
        _report(prof, paths, name, log)
    for name, ups in mismatched_upstream(paths).items():
        log(f"WARNING: the results of {name} in {paths.root} were computed from other results of "
            f"{', '.join(ups)} than those recorded now: run it again (--only {name}) before reading them together")
    write_json(paths.root / "run_status.json", dict(profile=prof.name, stages=status, python=sys.version.split()[0]))
    return status
