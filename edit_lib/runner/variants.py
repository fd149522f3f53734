"""Variant runs: a run whose profile values differ from its profile's lives beside the main run, never over it.

``runs/<profile>/`` is the profile's main run. A run whose overrides (``edit-suite run -p``, papermill, a knob of a
notebook's parameters cell) change a value some stage's key hashes goes to ``runs/<profile>/variants/<name>/``
(``VariantPaths``), named by ``--variant`` or from the values it changes (``variant_name``). Worker counts and
``ops`` values make no variant (``NO_VARIANT``: they say where work runs, not what it computes). A variant has its
own results, executed notebooks, figures, logs and book, and shares the main run's key-addressed artifact folders:
a stage whose key equals the key the main run recorded for it is read from the main run (``adopt``: its results,
executed notebook and figures are copied, marked ``adopted_from``), so only what the overrides reach runs.
"""
from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from edit_lib.artifacts import (as_json, DEFAULT_RUN_ROOT, read_jsonl, replace_skipped_records, RunPaths, short_hash,
                                write_json)
from edit_lib.config import ConfigError, Profile, load_profile
from edit_lib.runner.keys import STAGES, at_path, hashed_params, leaf_diff, stage_inputs

VARIANTS = "variants"  # the folder of a main run that holds its variants
# Where work runs, not what it computes: no variant (rl.workers is in 06's key, as `runs_on_engine`)
NO_VARIANT = ("rl.runs_on_engine", "rl.processes", "sft.processes")
MAX_NAME = 80


@dataclass(frozen=True)
class VariantPaths(RunPaths):
    """A variant's folders: its own results, notebooks, figures and logs under ``root``; the artifacts of
    ``main`` (key-addressed, so a variant never writes a folder the main run's keys name)."""

    main: Path = Path()

    @property
    def artifacts(self) -> Path:
        return self.main / "artifacts"

    @property
    def main_paths(self) -> RunPaths:
        return RunPaths(self.main)


def main_root(paths: RunPaths) -> Path:
    """The main run's folder of ``paths`` (itself for a main run)."""
    return paths.main if isinstance(paths, VariantPaths) else paths.root


def name_of(paths: RunPaths) -> str | None:
    """The variant's name, or None for a main run."""
    return paths.root.name if isinstance(paths, VariantPaths) else None


def paths_for(profile: str, run_root: str | Path | None = None, variant: str | None = None) -> RunPaths:
    """The main run's paths (``variant`` None) or the paths of variant ``variant`` of ``profile``."""
    main = Path(run_root or DEFAULT_RUN_ROOT) / profile
    if not variant:
        return RunPaths(main)
    check_name(variant)
    return VariantPaths(main / VARIANTS / variant, main=main)


def check_name(name: str) -> None:
    if not re.fullmatch(r"[A-Za-z0-9_.=,+-]{1,%d}" % MAX_NAME, name) or name in (".", ".."):
        raise ConfigError(f"variant name {name!r}: use 1-{MAX_NAME} letters, digits and _ . = , + -")


def all_params(prof: Profile) -> dict:
    """Every profile value some stage's key hashes, as the keys hash them (``keys.hashed_params``)."""
    sections = list(dict.fromkeys(s for st in STAGES.values() for s in st.sections))
    out: dict = {}
    for dotted, value in hashed_params(prof, sections).items():
        node = out
        *head, last = dotted.split(".")
        for part in head:
            node = node.setdefault(part, {})
        node[last] = value
    return as_json(out)


def changed_values(main: Profile, prof: Profile) -> dict[str, Any]:
    """{dotted path: value under ``prof``} of the keyed values that differ from ``main``, ``NO_VARIANT`` aside."""
    a, b = all_params(main), all_params(prof)
    return {p: at_path(b, p) for p in leaf_diff(a, b) if not p.startswith(NO_VARIANT)}


def variant_name(changed: dict[str, Any]) -> str:
    """A folder name from the changed values: ``selection.shortlist_k=5`` (several joined by ``+``, the shortest
    first, so that a swept scalar stays in sight beside a long list); a long one is cut and ends with a hash of
    the whole."""
    items = sorted((f"{p}={json.dumps(v, separators=(',', ':'))}".replace('"', "") for p, v in changed.items()),
                   key=lambda t: (len(t), t))
    return folder_name("+".join(items))


def folder_name(text: str) -> str:
    """``text`` as a folder name ``check_name`` accepts: other characters as '-'; a long one cut, ending with a hash
    of the whole (so two long names that share their start stay apart)."""
    text = re.sub(r"[^A-Za-z0-9_.=,+-]+", "-", text)
    return f"{text[:MAX_NAME - 13]}-{short_hash(text)}" if len(text) > MAX_NAME else text


def resolve(profile: str | Path, overrides: list[str], run_root: str | Path | None = None,
            variant: str | None = None) -> tuple[Profile, RunPaths, dict[str, Any]]:
    """(profile with the overrides, the run's paths, the values that make it a variant). The main run when the
    overrides change no keyed value (worker counts and ``ops`` aside); otherwise variant ``variant``, or one
    named from the changed values. A ``variant`` name for a run that changes nothing is an error."""
    prof = load_profile(profile, overrides)
    changed = changed_values(load_profile(profile), prof) if overrides else {}
    if not changed:
        if variant:
            raise ConfigError(f"variant {variant!r}: the overrides change no value a stage's key hashes, so this "
                              f"is the main run of {prof.name} (drop the variant's name)")
        return prof, paths_for(prof.name, run_root), changed
    return prof, paths_for(prof.name, run_root, variant or variant_name(changed)), changed


def recorded(paths: RunPaths, stage: str) -> dict | None:
    """The results ``paths`` recorded for ``stage`` with its executed notebook beside them, else None (either
    missing, or results that do not parse)."""
    f = paths.results_file(stage)
    if not f.exists() or not (paths.notebooks / f"{stage}.ipynb").exists():
        return None
    try:
        return json.loads(f.read_text())
    except json.JSONDecodeError:
        return None


def main_key(paths: RunPaths, stage: str, notebook_sha: str) -> str | None:
    """The key the main run of a variant recorded for ``stage`` (with this notebook's source and its executed
    copy present), else None."""
    res = recorded(paths.main_paths, stage) if isinstance(paths, VariantPaths) else None
    if res is None or res.get("reused_stale") or res.get("notebook_sha") != notebook_sha:
        return None
    return res.get("key")


def adopt(paths: RunPaths, stage: str) -> None:
    """Copy the main run's results, executed notebook, figures, log and skipped records of ``stage`` into the
    variant (``paths``), its results marked ``adopted_from`` (the main run's folder)."""
    main = paths.main_paths
    res = json.loads(main.results_file(stage).read_text())
    res["adopted_from"] = str(main.root.resolve())
    write_json(paths.results_file(stage), res)
    for src, dest in [(main.notebooks / f"{stage}.ipynb", paths.notebooks / f"{stage}.ipynb"),
                      (main.log_file(stage), paths.log_file(stage)),
                      *[(f, paths.figures / f.name) for f in sorted(main.figures.glob(f"{stage}__*"))]]:
        if src.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
    replace_skipped_records(paths, stage, None,
                            [r for r in read_jsonl(main.skipped_records) if r.get("stage") == stage])


def adopt_upstream(paths: RunPaths, prof: Profile, name: str, notebook_dir: Path,
                   notebook_sha: Callable[[str], str]) -> list[str]:
    """For a notebook opened by hand in a variant: adopt every upstream stage of ``name`` (transitively) whose key
    equals the main run's and that the variant lacks at that key; returns the stages adopted. ``notebook_sha``:
    a stage's notebook source hash (``runner.stage.notebook_sha``)."""
    if not isinstance(paths, VariantPaths):
        return []
    todo, seen, adopted, memo = list(STAGES[name].upstream), set(), [], {}
    while todo:
        up = todo.pop()
        if up in seen or not (notebook_dir / f"{up}.ipynb").exists():
            continue
        seen.add(up)
        todo += STAGES[up].upstream
        key = stage_inputs(prof, up, notebook_dir, memo)[0]
        have = paths.results_file(up)
        if have.exists() and json.loads(have.read_text()).get("key") == key:
            continue
        if main_key(paths, up, notebook_sha(up)) == key:
            adopt(paths, up)
            adopted.append(up)
    return sorted(adopted)


def variants_of(main: str | Path) -> list[Path]:
    """The variant folders of a main run that hold results, by name."""
    d = Path(main) / VARIANTS
    return sorted(p for p in d.iterdir() if (p / "results").is_dir()) if d.is_dir() else []
