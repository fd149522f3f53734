"""Build the datasets a profile names (``data.datasets``), validating each source's options.

Sources: ``synthetic`` (options = ``WorldConfig`` fields), ``asap`` (``load_asap`` keywords plus ``path``),
``sasbench`` (``load_sasbench`` keywords plus ``path``), ``jsonl`` (``questions``, ``responses``).
Relative paths are resolved against the project root. An unknown option is an error listing the valid ones.
"""
from __future__ import annotations

import inspect
from pathlib import Path
from typing import Callable

from ..config import ConfigError, DatasetSpec, Profile, from_dict
from .schema import Dataset

ROOT = Path(__file__).resolve().parents[2]


def _resolve(p: str) -> Path:
    path = Path(p).expanduser()
    return path if path.is_absolute() else ROOT / path


def _check_kwargs(fn: Callable, options: dict, where: str, reserved: tuple[str, ...] = ()) -> None:
    params = [n for n, p in inspect.signature(fn).parameters.items()
              if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and n not in reserved]
    valid = sorted(set(params) | {"path"})
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ConfigError(f"{where}: unknown option(s) {unknown}; valid options: {valid}")


def _synthetic(spec: DatasetSpec, seed: int, on_error: str) -> Dataset:
    from .synthetic import WorldConfig, generate_world

    opts = dict(spec.options)
    opts.setdefault("seed", seed)
    cfg = from_dict(WorldConfig, opts, where=f"data.datasets.{spec.name}.options")
    ds = generate_world(cfg)
    ds.name = spec.name
    return ds


def _asap(spec: DatasetSpec, seed: int, on_error: str) -> Dataset:
    from .asap import load_asap

    opts = dict(spec.options)
    _check_kwargs(load_asap, opts, f"data.datasets.{spec.name}.options", reserved=("root", "name"))
    path = _resolve(opts.pop("path", "../shared/data/asap_sas"))
    opts.setdefault("seed", seed)
    return load_asap(path, name=spec.name, **opts)


def _sasbench(spec: DatasetSpec, seed: int, on_error: str) -> Dataset:
    from .sasbench import load_sasbench

    opts = dict(spec.options)
    _check_kwargs(load_sasbench, opts, f"data.datasets.{spec.name}.options", reserved=("name",))
    if "path" not in opts:
        raise ConfigError(f"data.datasets.{spec.name}.options: 'path' (a labelled SAS-Bench .jsonl) is required")
    path = _resolve(opts.pop("path"))
    opts.setdefault("seed", seed)
    params = inspect.signature(load_sasbench).parameters
    if "on_error" in params:
        opts.setdefault("on_error", on_error)
    return load_sasbench(path, name=spec.name, **opts)


def _jsonl(spec: DatasetSpec, seed: int, on_error: str) -> Dataset:
    from .jsonl import load_dataset

    opts = dict(spec.options)
    unknown = sorted(set(opts) - {"questions", "responses"})
    if unknown or not {"questions", "responses"} <= set(opts):
        raise ConfigError(f"data.datasets.{spec.name}.options: need exactly 'questions' and 'responses' "
                          f"paths (got {sorted(opts)})")
    return load_dataset(_resolve(opts["questions"]), _resolve(opts["responses"]), name=spec.name,
                        on_error=on_error)


SOURCES: dict[str, Callable[[DatasetSpec, int, str], Dataset]] = {
    "synthetic": _synthetic, "asap": _asap, "sasbench": _sasbench, "jsonl": _jsonl}


def build_dataset(spec: DatasetSpec, seed: int = 0, on_error: str = "raise") -> Dataset:
    """One dataset from its spec (App. A)."""
    if spec.source not in SOURCES:
        raise ConfigError(f"data.datasets.{spec.name}.source: unknown source {spec.source!r}; "
                          f"valid: {sorted(SOURCES)}")
    ds = SOURCES[spec.source](spec, seed, on_error)
    ds.validate()
    return ds


def build_all(profile: Profile, out_dir: Path | None = None) -> dict[str, Dataset]:
    """Every dataset of the profile; written in the native format under ``out_dir/<name>/``."""
    from .jsonl import write_dataset

    out: dict[str, Dataset] = {}
    for spec in profile.data.datasets:
        ds = build_dataset(spec, seed=profile.run.seed, on_error=profile.data.on_error)
        rep = ds.meta.get("skip_report")
        if rep is not None:
            ds.meta["skipped_report"] = rep.summary()
        if out_dir is not None:
            write_dataset(ds, Path(out_dir) / spec.name)
        out[spec.name] = ds
    return out


def load_built(stage_dir: Path, names: list[str] | None = None) -> dict[str, Dataset]:
    """Read back the datasets 00_data wrote into its artifact folder (all of them, by name, unless ``names``)."""
    from ..artifacts import MissingArtifactError
    from .jsonl import load_dataset

    by_name = {p.name: p for p in sorted(Path(stage_dir).iterdir()) if (p / "questions.jsonl").exists()}
    missing = [n for n in (names or []) if n not in by_name]
    if missing:
        raise MissingArtifactError(f"datasets {missing} are not in {stage_dir}: re-run notebook 00_data")
    return {n: load_dataset(by_name[n] / "questions.jsonl", by_name[n] / "responses.jsonl", name=n)
            for n in (names or list(by_name))}
