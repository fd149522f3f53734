"""The papermill runner and the per-notebook stage context (DESIGN.md §3-4).

Each notebook starts with a ``parameters`` cell (``profile``, ``overrides``, ``run_root``) and calls
``ctx = stage("00_data", profile, overrides, run_root)``; it records tables and figures through ``ctx`` and
ends with ``ctx.save()``, which writes ``runs/<profile>/results/<stage>.json``. The runner executes the
notebooks in order and skips a stage whose recorded key still matches (``--force`` recomputes).
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from .artifacts import MissingArtifactError, RunPaths, read_results, table_rows, write_json
from .config import Profile, load_profile

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"


@dataclass(frozen=True)
class Stage:
    name: str
    sections: tuple[str, ...]  # profile sections whose values the stage's outputs depend on
    upstream: tuple[str, ...]
    title: str


# The whole plan (DESIGN.md §3); a stage is runnable once its notebook exists.
STAGES: dict[str, Stage] = {s.name: s for s in [
    Stage("00_data", ("run.seed", "data"), (), "Data (App. A, Table 6)"),
    Stage("01_base_policy", ("model", "rollouts", "eval"), ("00_data",), "Base policy and rollouts"),
    Stage("02_probing", ("probe",), ("01_base_policy",), "Posterior belief probe (Eq. 1-2)"),
    Stage("03_audit_validation", ("audit",), ("01_base_policy",), "Grounding audit validation (App. E)"),
    Stage("04_counterfactual_selection", ("selection", "revision"), ("02_probing", "03_audit_validation"),
          "Counterfactual step selection (App. F)"),
    Stage("05_edit_sft", ("selection", "revision", "sft"), ("02_probing", "03_audit_validation"), "EDIT-SFT"),
    Stage("06_rl", ("rl",), ("05_edit_sft",), "RL: GRPO, DGPO, EDIT-RL"),
    Stage("07_evaluation", ("eval",), ("06_rl",), "Main results (Tables 1, 2)"),
    Stage("08_rsr_interventions", ("eval",), ("06_rl",), "Rule-sensitivity interventions (App. G)"),
    Stage("09_significance", ("significance",), ("07_evaluation",), "Question-level significance (App. I)"),
]}


def notebook_sha(name: str) -> str:
    """Hash of a notebook's source: an edited notebook is re-executed even when its parameters are unchanged
    (its saved artifacts, keyed by parameters only, are still reused)."""
    import hashlib

    return hashlib.sha256((NOTEBOOK_DIR / f"{name}.ipynb").read_bytes()).hexdigest()[:12]


def available_stages() -> list[str]:
    return [s for s in STAGES if (NOTEBOOK_DIR / f"{s}.ipynb").exists()]


def stage_key(profile: Profile, name: str, _memo: dict | None = None) -> str:
    """Hash of the stage's own sections and its upstream keys (so a changed upstream invalidates it)."""
    memo = {} if _memo is None else _memo
    if name not in memo:
        st = STAGES[name]
        ups = [stage_key(profile, u, memo) for u in st.upstream if u in available_stages()]
        memo[name] = profile.hash_of(*st.sections) + ("-" + "-".join(u[:4] for u in ups) if ups else "")
    return memo[name]


@dataclass
class StageContext:
    """What a notebook needs: its profile, paths, key, and a recorder for tables and figures."""

    name: str
    profile: Profile
    paths: RunPaths
    key: str
    tables: dict[str, list[dict]] = field(default_factory=dict)
    figures: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.time)

    @property
    def artifacts(self) -> Path:
        d = self.paths.stage_dir(self.name, self.key)
        d.mkdir(parents=True, exist_ok=True)
        return d

    def upstream(self, stage: str) -> Path:
        """The artifact folder of an upstream stage, or an error naming the notebook to run."""
        res = read_results(self.paths, stage)
        key = stage_key(self.profile, stage)
        if res.get("key") != key:
            raise MissingArtifactError(
                f"results of {stage} in {self.paths.root} were made with other parameters "
                f"(key {res.get('key')} != {key}): re-run notebook {stage} "
                f"(edit-suite run --profile {self.paths.root.name} --only {stage})")
        d = self.paths.stage_dir(stage, key)
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

    def save(self) -> Path:
        """Write ``results/<stage>.json`` (tables, figures, params, key)."""
        st = STAGES[self.name]
        payload = dict(notebook=self.name, profile=self.profile.name, key=self.key,
                       notebook_sha=notebook_sha(self.name),
                       params={s: self.profile.section(s) for s in st.sections},
                       tables=self.tables, figures=self.figures, extra=self.extra,
                       seconds=round(time.time() - self.started, 1))
        f = self.paths.results_file(self.name)
        write_json(f, payload)
        return f


def stage(name: str, profile: str = "smoke", overrides: list[str] | tuple[str, ...] = (),
          run_root: str | None = None) -> StageContext:
    """Open the context of notebook ``name`` (called from the notebook's first code cell)."""
    if name not in STAGES:
        raise KeyError(f"unknown stage {name!r}; stages: {list(STAGES)}")
    prof = load_profile(profile, list(overrides or ()))
    paths = RunPaths.for_profile(prof.name, run_root)
    import torch  # local: keep `edit-suite --help` fast
    torch.set_num_threads(max(1, prof.model.torch_threads))
    return StageContext(name=name, profile=prof, paths=paths, key=stage_key(prof, name))


# ------------------------------------------------------------------ the runner

class NotebookFailed(RuntimeError):
    """A notebook raised: the message names the notebook and the failing cell."""


def _is_fresh(paths: RunPaths, name: str, key: str) -> bool:
    f = paths.results_file(name)
    if not f.exists() or not (paths.notebooks / f"{name}.ipynb").exists():
        return False
    try:
        res = json.loads(f.read_text())
    except json.JSONDecodeError:
        return False
    return res.get("key") == key and res.get("notebook_sha") == notebook_sha(name)


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


def run(profile: str, only: list[str] | None = None, force: bool = False,
        overrides: list[str] | None = None, run_root: str | None = None, log=print) -> list[dict]:
    """Execute the profile's notebooks in order with papermill; returns one status row per stage."""
    import papermill as pm

    prof = load_profile(profile, overrides or [])
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
    memo: dict = {}
    status = []
    env_kernel = os.environ.get("EDIT_KERNEL", "python3")
    for i, name in enumerate(names, 1):
        key = stage_key(prof, name, memo)
        prefix = f"[{i}/{len(names)}] {name}"
        if not force and _is_fresh(paths, name, key):
            log(f"{prefix}: up to date (key {key}), skipped")
            status.append(dict(stage=name, key=key, status="cached", seconds=0.0))
            continue
        out_nb = paths.notebooks / f"{name}.ipynb"
        if force:  # recompute: drop this key's saved artifacts so nothing is resumed from them
            shutil.rmtree(paths.stage_dir(name, key), ignore_errors=True)
        log(f"{prefix}: running (key {key}) ...")
        t0 = time.time()
        try:
            pm.execute_notebook(str(NOTEBOOK_DIR / f"{name}.ipynb"), str(out_nb), kernel_name=env_kernel,
                                parameters=dict(profile=prof.name, overrides=list(overrides or []),
                                                run_root=str(paths.root.parent)),
                                cwd=str(NOTEBOOK_DIR), progress_bar=False, log_output=False)
        except Exception as e:  # papermill raises PapermillExecutionError with the cell's traceback
            raise NotebookFailed(f"notebook {name} failed at {_failing_cell(out_nb)}\n"
                                 f"executed copy: {out_nb}\n{type(e).__name__}: {str(e)[-2000:]}") from None
        dt = time.time() - t0
        log(f"{prefix}: done in {dt:.1f}s -> {paths.results_file(name)}")
        status.append(dict(stage=name, key=key, status="ran", seconds=round(dt, 1)))
    write_json(paths.root / "run_status.json", dict(profile=prof.name, stages=status,
                                                   python=sys.version.split()[0]))
    return status

