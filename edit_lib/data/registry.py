"""Build the datasets a profile names (``data.datasets``), validating each source's options.

Sources: ``synthetic`` (options = ``WorldConfig`` fields), ``asap`` (``load_asap`` keywords plus ``path``),
``sasbench`` (``load_sasbench`` keywords plus ``path``), ``jsonl`` (``questions``, ``responses``,
``mark_scale``); every real-data source takes ``max_per_question`` (``records.py``). Relative paths are
resolved against the project root; real-data sources default to ``<data root>/<folder>`` (``data_root``:
``$EDIT_SUITE_DATA``, else ``../shared/data``). An unknown option is an error listing the valid ones.

Every built dataset passes ``Dataset.validate`` and ``Dataset.check_splits`` (a train split and an
evaluation split) - the same checks ``edit-suite data validate`` makes - and carries
``meta["n_records"]`` (records read) and ``meta["skip_report"]`` (a ``SkipReport``, empty unless
``data.on_error: skip`` dropped records).
"""
from __future__ import annotations

import inspect
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from edit_lib.config import ConfigError, DatasetSpec, Profile, from_dict
from edit_lib.data.schema import DataFileNotFound, Dataset, SkipReport
from edit_lib.data.records import check_mark_scale, cap_per_question
from edit_lib.registry import Registry


def _check_kwargs(fn: Callable, options: dict, where: str, reserved: tuple[str, ...] = ()) -> None:
    params = [n for n, p in inspect.signature(fn).parameters.items()
              if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and n not in reserved]
    valid = sorted(set(params) | {"path"})
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ConfigError(f"{where}: unknown option(s) {unknown}; valid options: {valid}")


def _real_path(opts: dict, source: str, name: str) -> Path:
    """The ``path`` option, else the data root's default folder for ``source``; a missing default
    folder is an error naming ``EDIT_SUITE_DATA``."""
    if "path" in opts:
        return resolve_path(opts.pop("path"))
    folder = SOURCES[source].folder
    path = data_root() / folder
    if not path.exists():
        raise DataFileNotFound(f"data.datasets.{name}: {where_hint(folder)}")
    return path


def _synthetic(spec: DatasetSpec, seed: int, on_error: str) -> Dataset:
    from edit_lib.data.synthetic import WorldConfig, generate_world

    opts = dict(spec.options)
    opts.setdefault("seed", seed)
    cfg = from_dict(WorldConfig, opts, where=f"data.datasets.{spec.name}.options")
    ds = generate_world(cfg)
    ds.name = spec.name
    ds.meta.setdefault("n_records", len(ds.questions) + len(ds.responses))
    return ds


def _asap(spec: DatasetSpec, seed: int, on_error: str) -> Dataset:
    from edit_lib.data.asap import load_asap

    opts = dict(spec.options)
    _check_kwargs(load_asap, opts, f"data.datasets.{spec.name}.options", reserved=("root", "name"))
    path = _real_path(opts, "asap", spec.name)
    opts.setdefault("seed", seed)
    opts.setdefault("on_error", on_error)
    return load_asap(path, name=spec.name, **opts)


def _sasbench(spec: DatasetSpec, seed: int, on_error: str) -> Dataset:
    from edit_lib.data.sasbench import load_sasbench

    opts = dict(spec.options)
    cap = _cap(opts, spec.name)
    _check_kwargs(load_sasbench, opts, f"data.datasets.{spec.name}.options", reserved=("name",))
    path = _real_path(opts, "sasbench", spec.name)
    opts.setdefault("seed", seed)
    opts.setdefault("on_error", on_error)
    return cap_per_question(load_sasbench(path, name=spec.name, **opts), cap, opts["seed"])


def _cap(opts: dict, name: str) -> int | None:
    """Pop the ``max_per_question`` option (``records.cap_per_question``; None = every answer)."""
    cap = opts.pop("max_per_question", None)
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
        raise ConfigError(f"data.datasets.{name}.options.max_per_question: a whole number >= 1 or null, got {cap!r}")
    return cap


def _jsonl(spec: DatasetSpec, seed: int, on_error: str) -> Dataset:
    from edit_lib.data.jsonl import load_dataset

    opts = dict(spec.options)
    unknown = sorted(set(opts) - {"questions", "responses", "mark_scale", "max_per_question"})
    if unknown or not {"questions", "responses"} <= set(opts):
        raise ConfigError(f"data.datasets.{spec.name}.options: need 'questions' and 'responses' paths and "
                          f"optionally 'mark_scale' and 'max_per_question' (got {sorted(opts)})")
    cap = _cap(opts, spec.name)
    try:
        scale = check_mark_scale(opts.get("mark_scale", 1))
    except ValueError as e:
        raise ConfigError(f"data.datasets.{spec.name}.options: {e}") from None
    ds = load_dataset(resolve_path(opts["questions"]), resolve_path(opts["responses"]), name=spec.name,
                      on_error=on_error, mark_scale=scale)
    return cap_per_question(ds, cap, seed)


@dataclass(frozen=True)
class Source:
    """A data source a profile names (``data.datasets[].source``): how it builds a dataset, its default folder
    under the data root (``data_root``; real-data sources read from it unless a ``path`` option is given), and which
    files or folders it reads (``inputs``, resolved as its loader resolves them; default: its folder, none for the
    synthetic world)."""
    build: Callable[[DatasetSpec, int, str], Dataset]
    folder: str | None = None
    inputs: Callable[[dict], list[Path]] | None = None

    def paths(self, opts: dict) -> list[Path]:
        if self.inputs is not None:
            return self.inputs(opts)
        if self.folder is None:
            return []
        return [resolve_path(opts["path"])] if "path" in opts else [data_root() / self.folder]


# the one table of data sources: adding one is an entry here (its loader, folder and inputs)
SOURCES: Registry[Source] = Registry("data source", "data.datasets[].source")
SOURCES.update({
    "synthetic": Source(_synthetic),
    "asap": Source(_asap, folder="asap_sas"),
    "sasbench": Source(_sasbench, folder="sas_bench"),
    "jsonl": Source(_jsonl, inputs=lambda opts: [resolve_path(opts[k]) for k in ("questions", "responses")
                                                 if k in opts]),
})


def input_paths(spec: DatasetSpec) -> list[Path]:
    """The files or folders a dataset is read from (``Source.paths``); a missing one is still listed (the
    loader names it when it is read); none for an unknown source (``build_dataset`` names it)."""
    src = SOURCES.get(spec.source)
    return src.paths(dict(spec.options)) if src else []


def build_dataset(spec: DatasetSpec, seed: int = 0, on_error: str = "raise") -> Dataset:
    """One dataset from its spec (App. A), checked as the pipeline needs it (module docstring)."""
    if spec.source not in SOURCES:
        raise ConfigError(SOURCES.unknown(spec.source, f"data.datasets.{spec.name}.source"))
    ds = SOURCES[spec.source].build(spec, seed, on_error)
    ds.validate()
    ds.check_splits()
    ds.meta.setdefault("skip_report", SkipReport(n_records=ds.meta.get("n_records", 0)))
    ds.meta.setdefault("n_records", ds.meta["skip_report"].n_records)
    return ds


def build_all(profile: Profile, out_dir: Path | None = None) -> dict[str, Dataset]:
    """Every dataset of the profile; written in the native format under ``out_dir/<name>/`` only once
    all of them have been built and checked (a bad dataset leaves nothing behind)."""
    from edit_lib.data.jsonl import write_dataset

    out: dict[str, Dataset] = {}
    for spec in profile.data.datasets:
        ds = build_dataset(spec, seed=profile.run.seed, on_error=profile.data.on_error)
        ds.meta["skipped_report"] = ds.meta["skip_report"].summary()
        out[spec.name] = ds
    if out_dir is not None:
        for name, ds in out.items():
            write_dataset(ds, Path(out_dir) / name)
    return out


def load_built(stage_dir: Path, names: list[str] | None = None) -> dict[str, Dataset]:
    """Read back the datasets 00_data wrote into its artifact folder (all of them, by name, unless ``names``)."""
    from edit_lib.artifacts import MissingArtifactError
    from edit_lib.data.jsonl import load_dataset

    by_name = {p.name: p for p in sorted(Path(stage_dir).iterdir())
               if not p.name.startswith(".") and (p / "questions.jsonl").exists()}
    missing = [n for n in (names or []) if n not in by_name]
    if missing:
        raise MissingArtifactError(f"datasets {missing} are not in {stage_dir}: re-run notebook 00_data")
    return {n: load_dataset(by_name[n] / "questions.jsonl", by_name[n] / "responses.jsonl", name=n)
            for n in (names or list(by_name))}


# ------------------------------------------------------------------ the data root: where real data lives
# Real data sets (ASAP-SAS, SAS-Bench, your own files) are not shipped. A loader's default folder is
# ``<data root>/<dataset folder>``, the data root being ``$EDIT_SUITE_DATA`` when set, else ``../shared/data`` next
# to the repository (this project's machines). A ``path`` option always wins; in it ``$EDIT_SUITE_DATA`` (or
# ``${EDIT_SUITE_DATA}``) stands for the data root. Each real-data card (``data_cards/``) shows the tree it expects.

DATA_ENV = "EDIT_SUITE_DATA"
REPO_ROOT = Path(__file__).resolve().parents[2]
FALLBACK = REPO_ROOT.parent / "shared" / "data"
_VAR = re.compile(r"\$(?:\{" + DATA_ENV + r"\}|" + DATA_ENV + r"\b)")


def data_root() -> Path:
    """``$EDIT_SUITE_DATA`` if set (and not empty), else ``../shared/data`` beside the repository."""
    env = os.environ.get(DATA_ENV, "").strip()
    return Path(env).expanduser() if env else FALLBACK


def where_hint(folder: str) -> str:
    """One sentence for messages: where ``folder`` is looked for and how to change that."""
    src = f"${DATA_ENV}={os.environ[DATA_ENV]}" if os.environ.get(DATA_ENV, "").strip() else \
        f"{DATA_ENV} is not set, fallback {FALLBACK}"
    return (f"looked for {data_root() / folder} ({src}); set {DATA_ENV} to the folder that holds {folder}/, "
            "or give the dataset a 'path' option")


def resolve_path(p: str | Path) -> Path:
    """A path option: ``$EDIT_SUITE_DATA`` replaced by the data root, ``~`` expanded, relative paths
    taken from the repository root."""
    text = _VAR.sub(lambda _: str(data_root()), str(p))
    path = Path(text).expanduser()
    return path if path.is_absolute() else REPO_ROOT / path
