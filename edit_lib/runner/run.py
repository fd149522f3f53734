"""The papermill runner: executes a profile's notebooks in order, says why each one runs, and skips a stage
whose recorded inputs still match (``--force`` recomputes; ``--reuse-stale`` keeps a stale result, marked).
A running stage's output goes to ``runs/<profile>/logs/<stage>.log`` and, unless quiet, to the terminal, its
progress bars throttled (``stage_log``); its kernel draws console bars (``stage_log.install``) and, with
``--time-split``, times its forward passes, generation and training (``time_split``)."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edit_lib.artifacts import RunPaths, write_json
from edit_lib.config import ConfigError, Profile
from edit_lib.runner.keys import STAGES, describe_reason, stage_inputs, why
from edit_lib.runner import stage as stage_context  # NOTEBOOK_DIR read at call time (tests point it elsewhere)
from edit_lib.runner import time_split as timing
from edit_lib.runner import variants
from edit_lib.runner.stage_log import KERNEL_ARGUMENT, StageLog
from edit_lib.runner.stage import notebook_sha, parse_overrides, profile_argument, selected_stages

__all__ = ["NotebookFailed", "StageStopped", "STOPS", "TooManySkipped", "Decision", "decide", "mismatched_upstream",
           "run", "sends_units"]


class NotebookFailed(RuntimeError):
    """A notebook raised: the message names the notebook and the failing cell."""


class StageStopped(NotebookFailed):
    """A notebook ended on purpose with one of ``STOPS`` (a check that says the run should go no further): the
    message is one line, the check's own, without the notebook's traceback."""


#: Exceptions a notebook raises to stop the run on purpose (``model.warmup.WarmupGuardStop``): the runner
#: reports their message alone (``StageStopped``), not a failing cell's traceback.
STOPS = ("WarmupGuardStop",)


class TooManySkipped(RuntimeError):
    """A dataset dropped more records than ``data.max_skipped_fraction`` allows."""


def mismatched_upstream(paths: RunPaths) -> dict[str, list[str]]:
    """Stages whose recorded results were computed from other results of an upstream stage than the ones now
    recorded (e.g. after ``--only 00_data`` with other parameters): {stage: [upstream, ...]}."""
    recs = {n: variants.recorded(paths, n) for n in STAGES}
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
    action: str  # "run" | "cached" | "reuse" (--reuse-stale: library changed only) | "main" (a variant adopts it)
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
        key, inputs = stage_inputs(prof, name, stage_context.NOTEBOOK_DIR, memo)
        res, sha = variants.recorded(paths, name), notebook_sha(name)
        reasons = why(res, inputs)
        if res is not None and res.get("notebook_sha") != sha:
            reasons.append(("notebook edited", None))
        if res is not None and not reasons and res.get("key") != key:
            reasons.append(("recorded", f"recorded key {res.get('key')} differs"))
        recorded_here = res is not None and res.get("key") == key and not res.get("reused_stale")
        if variants.main_key(paths, name, sha) == key and (force or not recorded_here):
            action = "main"  # a variant never recomputes a key of its main run: --force that one instead
            reasons = [("same key, read from there", None)]  # not the variant's own record ('new' there)
        elif force:
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


def _error_output(nb_path: Path) -> tuple[int, dict, str] | None:
    """(cell index, error output, cell source) of an executed notebook's first error output, or None."""
    try:
        nb = json.loads(nb_path.read_text())
    except Exception:  # noqa: BLE001 - best effort only; the original error is raised anyway
        return None
    for i, cell in enumerate(nb.get("cells", [])):
        for out in cell.get("outputs", []) or []:
            if out.get("output_type") == "error":
                return i, out, "".join(cell.get("source", ""))
    return None


def _failed(name: str, nb_path: Path, log_path: Path, e: Exception) -> NotebookFailed:
    """What the runner raises for a notebook that raised: ``StageStopped`` (one line) for one of ``STOPS``, else
    ``NotebookFailed`` naming the failing cell, the executed copy, the stage log and the traceback's end."""
    err = _error_output(nb_path)
    if err is not None and err[1].get("ename") in STOPS:
        return StageStopped(f"{name} stopped: {err[1].get('evalue')} (stage log: {log_path})")
    where = "unknown cell" if err is None else \
        f"cell {err[0]} ({err[1].get('ename')}: {err[1].get('evalue')})\n--- cell source ---\n{err[2][:200]}"
    return NotebookFailed(f"notebook {name} failed at {where}\nexecuted copy: {nb_path}\nstage log: {log_path}\n"
                          f"{type(e).__name__}: {str(e)[-2000:]}")


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
        run_root: str | None = None, log=print, reuse_stale: bool = False, quiet: bool = False,
        time_split: bool = False, variant: str | None = None) -> list[dict]:
    """Execute the profile's notebooks in order with papermill, saying why each runs; returns one status row
    per stage. ``profile`` is a name in ``configs/`` or a YAML path (runs go to ``<run_root>/<its name>``; a run
    whose overrides change a keyed value to ``<run_root>/<its name>/variants/<variant>``, ``runner.variants``).
    ``log`` gets the runner's lines and, unless ``quiet``, each running stage's output as ``stage_log`` throttles
    it; that output goes to ``RunPaths.log_file`` either way. ``time_split``: each stage that runs writes
    ``<run>/timing/<stage>.json`` (``time_split``); a stage run without it loses its last one."""
    overrides = parse_overrides(overrides)
    prof, paths, changed = variants.resolve(profile, overrides, run_root, variant)
    if prof.model.generation_backend == "vllm":  # fail before any notebook runs, not inside 01
        from edit_lib.model.vllm_engine import VLLMUnavailable, check_available
        try:
            check_available()
        except VLLMUnavailable as e:
            raise ConfigError(f"{prof.name}: {e}") from e
    if changed:
        log(f"variant {paths.root.name} of {paths.main} ({', '.join(f'{k}={v}' for k, v in changed.items())}): "
            f"writes to {paths.root}; the stages whose keys equal the main run's are read from it")
    names = selected_stages(only)
    paths.notebooks.mkdir(parents=True, exist_ok=True)
    plan = decide(prof, paths, names, force=force, reuse_stale=reuse_stale)
    with _engine_for(prof, paths, [d.stage for d in plan if d.action == "run" and sends_units(prof, d.stage)], log):
        status = _run_stages(prof, paths, names, plan, profile, overrides, force, log, quiet, time_split)
    for name, ups in mismatched_upstream(paths).items():
        log(f"WARNING: the results of {name} in {paths.root} were computed from other results of "
            f"{', '.join(ups)} than those recorded now: run it again (--only {name}) before reading them together")
    write_json(paths.root / "run_status.json", dict(profile=prof.name, stages=status, python=sys.version.split()[0]))
    return status


def sends_units(prof: Profile, name: str) -> bool:
    """Whether stage ``name`` sends units to the engine under ``prof``: its policy's generation and reads with
    ``model.generation_workers`` other than 1 (a stage that loads a model), 05's SFT runs with ``sft.workers``
    and 06's RL runs with ``rl.workers`` other than 1."""
    return ((STAGES[name].loads_model and prof.model.generation_workers != 1)
            or (name == "05_edit_sft" and prof.sft.workers != 1) or (name == "06_rl" and prof.rl.workers != 1))


@contextlib.contextmanager
def _engine_for(prof: Profile, paths, to_run: list, log):
    """The run's engine (``engine.start``: a local Ray with every core and GPU, or ``ops.cluster``'s) while
    stages execute, when one of ``to_run`` sends units to it (``sends_units``); the kernels join it, and their
    units check that they see ``paths.root`` (``engine.mark_run_root``).
    Stopped afterwards, also on an error, Ctrl-C or SIGTERM (``cli``)."""
    if not to_run:
        yield
        return
    import signal

    from edit_lib import engine
    on_sigterm = signal.getsignal(signal.SIGTERM)
    address = engine.start(prof.ops.cluster)
    signal.signal(signal.SIGTERM, on_sigterm)  # ray.init's own handler would exit with status 15, not 143
    engine.mark_run_root(paths.root)
    if engine.connected():
        res = engine.cluster_resources()
        log(f"engine: Ray at {address} with {res.get('CPU', 0):g} CPU(s), {res.get('GPU', 0):g} GPU(s)")
    else:
        log(f"engine: the kernels join the Ray cluster at {address}")
    try:
        yield
    finally:
        engine.stop()
        os.environ.pop(engine.MARK_ENV, None)


def _run_stages(prof, paths, names, plan, profile, overrides, force, log, quiet, time_split) -> list[dict]:
    """Each stage of ``plan`` (``decide``) in order: skipped, reused stale, or run with papermill (``run``)."""
    import papermill as pm

    status = []
    for i, d in enumerate(plan, 1):
        name, prefix = d.stage, f"[{i}/{len(names)}] {d.stage}"
        row = dict(stage=name, key=d.key, reasons=d.why, seconds=0.0)
        if d.action == "cached":
            log(f"{prefix}: up to date (key {d.key}), skipped")
        elif d.action == "main":
            variants.adopt(paths, name)
            log(f"{prefix}: the main run's (key {d.key}), read from {paths.main}")
        elif d.action == "reuse":
            _mark_reused(paths, d)
            log(f"{prefix}: STALE, reused because of --reuse-stale ({d.why}); recorded as reused_stale "
                f"in {paths.results_file(name)}")
        else:
            out_nb = paths.notebooks / f"{name}.ipynb"
            # a variant run with --only: the upstream stages it shares with the main run, not in the plan
            adopted = variants.adopt_upstream(paths, prof, name, stage_context.NOTEBOOK_DIR, notebook_sha)
            if adopted:
                log(f"{prefix}: the main run's {', '.join(adopted)} read from {paths.main}")
            if force:  # recompute: drop this key's saved artifacts so nothing is resumed from them
                shutil.rmtree(paths.stage_dir(name, d.key), ignore_errors=True)
            log(f"{prefix}: running ({d.why}; key {d.key}) ...")
            t0 = time.time()
            stage_log = StageLog(paths.log_file(name), terminal=None if quiet else log)
            stage_log.note(f"{prefix}: running ({d.why}; key {d.key})")
            os.environ[stage_context.RUNNER_ENV] = "1"  # the kernel inherits it: its save() knows the runner ran it
            timed = timing.start(paths.root, name, time_split)
            os.environ.update(timed)
            try:
                pm.execute_notebook(str(stage_context.NOTEBOOK_DIR / f"{name}.ipynb"), str(out_nb),
                                    kernel_name=os.environ.get("EDIT_KERNEL", "python3"),
                                    parameters=dict(profile=profile_argument(profile), overrides=overrides,
                                                    run_root=str(variants.main_root(paths).resolve().parent),
                                                    variant=variants.name_of(paths)),
                                    cwd=str(stage_context.NOTEBOOK_DIR), progress_bar=False, log_output=False,
                                    stdout_file=stage_log.stdout, stderr_file=stage_log.stderr,
                                    # the kernel process's own log (e.g. ipykernel's TCP-transport notice) is
                                    # not the notebook's output: keep it out of the runner's terminal
                                    extra_arguments=["--IPKernelApp.log_level=ERROR", KERNEL_ARGUMENT,
                                                     *([timing.KERNEL_ARGUMENT] if timed else [])])
            except Exception as e:  # papermill raises PapermillExecutionError with the cell's traceback
                failed = _failed(name, out_nb, stage_log.path, e)
                stage_log.close(f"FAILED: {failed}")
                raise failed from None
            else:
                stage_log.close(f"notebook finished in {time.time() - t0:.1f}s")
            finally:
                os.environ.pop(stage_context.RUNNER_ENV, None)
                os.environ.pop(timing.TIMING_ENV, None)
                stage_log.close("stopped before the notebook finished")  # e.g. Ctrl-C; no-op once closed
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
            if timed and timing.finish(paths.root, name, d.key, row["seconds"]) is None:
                log(f"    WARNING ({name}): --time-split: its kernel wrote no {timing.timing_file(paths.root, name)}")
        row["status"] = {"cached": "cached", "reuse": "reused_stale", "run": "ran", "main": "main_run"}[d.action]
        status.append(row)
        _report(prof, paths, name, log)
    return status
