"""The stage context a notebook opens: ``ctx = stage("00_data", profile, overrides, run_root, variant, knobs=...)``.

Each notebook starts with a ``parameters`` cell (``profile``, ``overrides``, ``run_root``, ``variant`` and its
stage's knobs, ``KNOBS`` below; a run whose values differ goes to a variant folder, ``runner.variants``), reads
the profile through ``ctx.profile`` (a view that refuses values its stage did not declare, ``runner.keys``), records
tables, figures, warnings and skipped records through ``ctx`` and ends with ``ctx.save()``, which writes ``<run root>/
<profile>/results/<stage>.json`` with the inputs of the stage's key. The runner that executes the notebooks is
``runner.run``. Opening a stage also registers the embedded default's providers (``runner.keys``).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import yaml

from edit_lib import engine, systems
from edit_lib.artifacts import (MissingArtifactError, RunPaths, read_jsonl, read_results, replace_skipped_records,
                                skipped_summary, table_rows, write_json)
from edit_lib.config import CONFIG_DIR, ConfigError, Profile, profile_path
from edit_lib.evaluation.caveats import caveats_markdown, run_caveats
from edit_lib.runner import variants
from edit_lib.runner.keys import (STAGES, describe_reason, numerics, ProfileView, register_all, Stage, stage_inputs,
                                  UndeclaredSectionError, why)


__all__ = ["STAGES", "Stage", "StageContext", "UndeclaredSectionError", "available_stages", "stage", "stage_key"]

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
CAVEAT_SOURCES = ("00_data", "01_base_policy")  # stages that run before 01's caveats exist
RUNNER_ENV = "EDIT_SUITE_RUNNER"  # "1" in a kernel the runner started; else the stage was run by hand (``save``)
register_all()  # the notebook's profile values name providers (``edit_lib.providers``)


def notebook_sha(name: str) -> str:
    """Hash of a notebook's source: an edited notebook is re-executed even when its key is unchanged (its
    saved artifacts, kept per key, are still reused)."""
    return hashlib.sha256((NOTEBOOK_DIR / f"{name}.ipynb").read_bytes()).hexdigest()[:12]


def available_stages() -> list[str]:
    return [s for s in STAGES if (NOTEBOOK_DIR / f"{s}.ipynb").exists()]


def selected_stages(only: list[str] | None) -> list[str]:
    """The written notebooks (``available_stages``) a run takes: all, or those of ``only``; KeyError names a stage
    that does not exist or whose notebook is not written yet (`edit-suite run --only`, with or without --dry-run)."""
    names = available_stages()
    if only:
        unknown = [o for o in only if o not in STAGES]
        if unknown:
            raise KeyError(f"unknown notebook(s) {unknown}; available: {names}")
        missing = [o for o in only if o not in names]
        if missing:
            raise KeyError(f"notebook(s) {missing} are not written yet; available: {names}")
        names = [n for n in names if n in only]
    return names


def stage_key(profile: Profile, name: str, _memo: dict | None = None) -> str:
    """The stage's key: a hash of its declared profile values, its upstream stages' full keys, its library
    modules and the model weights it loads (``edit_lib.runner.keys.stage_inputs``)."""
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
                f"re-run notebook {stage} (edit-suite run --profile {self.full_profile.name} --only {stage})")
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

    def tables_from(self, tables: dict[str, pd.DataFrame | list[dict]]) -> dict:
        """Record every table of a ``{name: table}`` mapping (``table``); returns the mapping."""
        for name, df in tables.items():
            self.table(name, df)
        return tables

    def warn(self, message: str | list[str] | tuple[str, ...]) -> None:
        """Say something the reader must not miss (one message or a list of them): printed in the notebook,
        kept in the results JSON (``warnings``) and printed by ``edit-suite run`` after the stage."""
        for m in [message] if isinstance(message, str) else list(message):
            print(f"WARNING: {m}", flush=True)
            self.warnings.append(str(m))

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

    def record_skipped_datasets(self, datasets: dict) -> None:
        """``record_skipped`` for every built dataset (its loader's ``n_records`` and ``skip_report``)."""
        for name, ds in datasets.items():
            self.record_skipped(name, ds.meta["n_records"], ds.meta["skip_report"].skipped)

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
        """Write ``results/<stage>.json`` (tables, figures, warnings, skipped records, key and its inputs, the
        kernels' ``numerics``: ``runner.keys``), after ending the stage's generation pool
        (``model.generation_workers``), whose work is done, and its bar of the engine's units."""
        pools = sys.modules.get("edit_lib.model.parallel")
        if pools is not None:
            pools.close_shared_pools()
        engine.end_progress()
        replace_skipped_records(self.paths, self.name, None, [
            r for r in read_jsonl(self.paths.skipped_records)
            if r.get("stage") == self.name and r.get("dataset") in {s["dataset"] for s in self.skipped}])
        payload = dict(notebook=self.name, profile=self.full_profile.name, key=self.key, artifact_key=self.key,
                       notebook_sha=notebook_sha(self.name), inputs=self.inputs, params=self.inputs["params"],
                       reused_stale=False, tables=self.tables, figures=self.figures, extra=self.extra,
                       warnings=self.warnings, skipped=self.skipped, seconds=round(time.time() - self.started, 1),
                       numerics=numerics(), **provenance(), **gpu_memory(self.full_profile.model.device))
        payload["executed_by"] = "runner" if os.environ.get(RUNNER_ENV) == "1" else "hand"
        f = self.paths.results_file(self.name)
        write_json(f, payload)
        stale = self.paths.notebooks / f"{self.name}.ipynb"
        if payload["executed_by"] == "hand" and stale.exists():  # the runner's copy shows the previous numbers
            stale.unlink()
            print(f"run by hand: {f} now describes this run; the runner's executed copy {stale} showed the previous "
                  "run and was removed (the book shows executed notebooks from `edit-suite run`)")
        return f


def gpu_memory(device: str = "auto") -> dict:
    """``peak_gpu_memory_bytes``: ``torch.cuda.max_memory_allocated`` of the notebook's process (each notebook runs
    in its own kernel, so this is the stage's peak), when the stage ran on CUDA (``model.device``); else nothing
    (a CPU run on a GPU machine, where a library may still initialise CUDA, records none)."""
    torch = sys.modules.get("torch")
    if device == "cpu" or torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return {}
    peak = max(torch.cuda.max_memory_allocated(d) for d in range(torch.cuda.device_count()))
    return dict(peak_gpu_memory_bytes=int(peak), gpu=torch.cuda.get_device_name(0))


def provenance() -> dict:
    """Which code made a results file and when: ``git_commit`` (``git rev-parse HEAD`` of the repository, "unknown"
    outside a git checkout) and ``run_date`` (UTC, ISO 8601); the README's headline and the book name both."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=NOTEBOOK_DIR.parent, capture_output=True, text=True,
                             timeout=10)
        commit = out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    return dict(git_commit=commit, run_date=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))


def stage(name: str, profile: str = "demo", overrides: list[str] | str | None = (), run_root: str | None = None,
          variant: str | None = None, knobs: dict | None = None) -> StageContext:
    """Open the context of notebook ``name`` (called from the notebook's first code cell). ``profile`` is a
    name in ``configs/`` or a path to a YAML file; ``overrides`` a list or a JSON/YAML string of them; ``knobs``
    the notebook's globals, whose knobs (``runner.stage``) other than None join the overrides. A run whose values
    differ from the profile's writes to a variant beside the main run (``runner.variants``: ``variant`` names it),
    reading the upstream stages it shares with the main run from there."""
    if name not in STAGES:
        raise KeyError(f"unknown stage {name!r}; stages: {list(STAGES)}")
    prof, paths, changed = variants.resolve(profile, parse_overrides(overrides) + fold(name, knobs),
                                            run_root, variant)
    if changed:  # the runner adopted the upstream stages already; a kernel opened by hand adopts them here
        adopted = ([] if os.environ.get(RUNNER_ENV) == "1"
                   else variants.adopt_upstream(paths, prof, name, NOTEBOOK_DIR, notebook_sha))
        print(f"variant {paths.root.name} of {paths.main}: {', '.join(f'{k}={v}' for k, v in changed.items())}"
              + (f"; read from the main run: {', '.join(adopted)}" if adopted else ""), flush=True)
    systems.load_baselines(prof.run.baselines)  # the profile's own systems join the table (run.baselines)
    import torch  # local: keep `edit-suite --help` fast
    torch.set_num_threads(max(1, prof.model.torch_threads))
    if prof.ops.cluster != "local":  # a kernel outside `edit-suite run` joins the named cluster (edit_lib/engine.py)
        os.environ.setdefault(engine.ADDRESS_ENV, prof.ops.cluster)
    key, inputs = stage_inputs(prof, name, NOTEBOOK_DIR)
    ctx = StageContext(name=name, profile=ProfileView(prof, name, STAGES[name].sections), paths=paths, key=key,
                       inputs=inputs, full_profile=prof)
    if name not in CAVEAT_SOURCES:  # every later stage shows 01's caveats first
        ctx.carry_caveats()
    return ctx


# ------------------------------------------------------------------ the knobs of each notebook's parameters cell
# The profile values a reader of the stage would turn. A parameters cell lists ``profile``, ``overrides``,
# ``run_root`` and ``variant`` and then its stage's knobs, each ``None`` (the profile's value) with its one-line help
# as a comment (``parameters_cell`` writes the cell; tests/runner/test_variants.py keeps the notebooks, the stages'
# declared sections and this table in step). papermill sets a knob as the rest (``-p shortlist_k 5``); ``stage``
# folds those not None into the overrides (``fold``), so keys, cache, variants and book treat a knob as any override.

MAX_KNOBS = 10  # with profile, overrides, run_root and variant: within the 15-line cell rule
FIXED = {  # every notebook's own parameters, in this order: {name: (default as written, help)}
    "profile": ('"demo"', "a profile name in configs/, or the path of a YAML profile file"),
    "overrides": ("[]", "more profile values: a list of strings as `edit-suite run -p` takes them"),
    "run_root": ("None", "folder that holds <profile>/ runs; None means the suite's runs/ folder"),
    "variant": ("None", "a variant's name; None: the main run, or one named from its changed values"),
}

# {stage: {variable of the parameters cell: dotted profile value}}, each within the stage's declared sections
KNOBS: dict[str, dict[str, str]] = {
    "00_data": dict(seed="run.seed", on_error="data.on_error", max_skipped_fraction="data.max_skipped_fraction"),
    "01_base_policy": dict(
        n_per_response="rollouts.n_per_response", responses_per_dataset="rollouts.responses_per_dataset",
        temperature="rollouts.decoding.temperature", top_p="rollouts.decoding.top_p",
        max_new_tokens="rollouts.decoding.max_new_tokens", eval_greedy="eval.decoding.greedy",
        eval_max_new_tokens="eval.decoding.max_new_tokens", invalid_as="eval.invalid_as",
        step_rule="steps.rule", seed="run.seed"),
    "02_probing": dict(
        temperature="probe.temperature", read="probe.read", max_rollouts="probe.max_rollouts", dtype="probe.dtype",
        tie_margin="selection.tie_margin", step_rule="steps.rule", seed="run.seed"),
    "03_audit_validation": dict(
        nll_reduction="audit.nll_reduction", residual_method="audit.residual_method",
        residual_bins="audit.residual_bins", residual_min_count="audit.residual_min_count",
        residual_bandwidth="audit.residual_bandwidth", max_rollouts="audit.max_rollouts",
        annotator="analysis.step_annotator", seed="run.seed"),
    "04_counterfactual_selection": dict(
        shortlist_k="selection.shortlist_k", budget_n="selection.budget_n", tie_margin="selection.tie_margin",
        percentile="selection.percentile", random_seed="selection.random_seed",
        max_rollouts="selection.max_rollouts", n_continuations="revision.n_continuations",
        max_span="revision.max_span", continuation_temperature="revision.continuation_decoding.temperature",
        n_proposals="int_sft.n_proposals"),
    "05_edit_sft": dict(
        golden_per_revision="sft.golden_per_revision", epochs="sft.epochs", learning_rate="sft.learning_rate",
        lora_r="sft.lora.r", lora_alpha="sft.lora.alpha", lora_dropout="sft.lora.dropout",
        effective_batch_size="sft.effective_batch_size", max_pool="sft.max_pool",
        check_responses="sft.check_responses", skip_systems="run.skip_systems"),
    "06_rl": dict(
        learning_rate="rl.learning_rate", beta_kl="rl.beta_kl", rollouts_per_prompt="rl.rollouts_per_prompt",
        temperature="rl.decoding.temperature", steps="rl.steps", seeds="rl.seeds", beta_drift="rl.shaping.beta_drift",
        gamma="rl.shaping.gamma", calibrate="rl.shaping.calibrate", skip_systems="run.skip_systems"),
    "07_evaluation": dict(
        greedy="eval.decoding.greedy", max_new_tokens="eval.decoding.max_new_tokens", invalid_as="eval.invalid_as",
        forced_read="eval.forced_read", skip_systems="run.skip_systems", seed="run.seed"),
    "08_rsr_interventions": dict(
        rsr_datasets="rsr.datasets", splits="rsr.splits", responses_per_edit="rsr.responses_per_edit",
        systems="rsr.systems"),
    "09_significance": dict(
        n_boot="significance.n_boot", ci="significance.ci", min_questions="significance.min_questions",
        invalid_as="eval.invalid_as"),
}


def yaml_value(value: Any) -> str:
    """A Python value as an override's YAML text: JSON, with a float's exponent written so that YAML 1.1 reads a
    float (``5e-06`` is a string to PyYAML, ``5.0e-06`` a float)."""
    if isinstance(value, float) and math.isfinite(value):
        text = repr(value)
        if "e" in text and "." not in text.split("e")[0]:
            head, exp = text.split("e")
            text = f"{head}.0e{exp if exp[0] in '+-' else '+' + exp}"
        return text
    return json.dumps(value)


def fold(stage: str, namespace: dict | None) -> list[str]:
    """The overrides the knobs of ``stage`` set in ``namespace`` (a notebook's globals): ``path=value`` for every
    knob that is not None, in the table's order."""
    if not namespace:
        return []
    return [f"{path}={yaml_value(namespace[var])}" for var, path in KNOBS.get(stage, {}).items()
            if namespace.get(var) is not None]


def parameters_cell(stage: str, helps: dict[str, str], width: int = 118) -> str:
    """The parameters cell of ``stage``'s notebook: the fixed parameters, then each knob as ``name = None  # help``
    (``helps``: {dotted path: help text}, cut to the line's ``width``); one '=' a line, as papermill's parameter
    inspection (``papermill --help-notebook``) reads it."""
    if len(KNOBS.get(stage, {})) > MAX_KNOBS:
        raise ValueError(f"{stage}: {len(KNOBS[stage])} knobs, more than {MAX_KNOBS} fit the parameters cell")
    lines = ["# Parameters (papermill sets them; a knob left None keeps the profile's value)",
             *(f"{name} = {default}  # {help_}" for name, (default, help_) in FIXED.items())]
    for var, path in KNOBS.get(stage, {}).items():
        head = f"{var} = None  # {path}: "
        # papermill's parameter inspection skips a line with a second '=' (the help says ':' instead)
        text = " ".join(helps.get(path, "").replace(" = ", ": ").replace("=", ": ").split())
        if len(head) + len(text) > width:
            text = text[: width - len(head) - 3].rstrip() + "..."
        lines.append(head + text)
    return "\n".join(lines)
