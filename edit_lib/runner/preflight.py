"""Checks a run passes before any notebook starts (runner layer; `edit-suite run` and `--dry-run` share them).

* every ``-p`` override names a key of the profile schema (a typo is reported as the override's, not as an
  unknown key of the profile file);
* the profile loads (``config.load_profile``: YAML syntax, types, ``*_by_dataset`` keys); every dataset names a
  known source (``data.registry.SOURCES``); its cross-references hold:
  ``sft.ablation_dataset``, ``rl.datasets`` (``seed_datasets``, ``grid_datasets``) and ``rsr.datasets`` name
  datasets of the profile,
  ``run.baselines`` names files that each register a baseline, ``run.skip_systems`` names systems; every provider-valued key (``model.name_or_path`` aside, which may be a
  folder or hub name) names ``none`` or a registered provider, and a step-labels file exists;
* ``model.name_or_path`` names a Base, a folder or a hub id; a ``cuda`` device exists for a run; each dataset's
  SFT effective batch splits into whole per-device batches (App. B);
* every file or folder a dataset is read from exists (``data.registry.input_paths``). The dry run lists a
  missing one as a note (it builds nothing, and the paper profile's files live on the user's machine); a run
  stops on it before 00_data starts.
"""
from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

from edit_lib import providers
from edit_lib.config import ConfigError, Profile, load_profile
from edit_lib.config.loading import moved
from edit_lib.runner.keys import register_all
from edit_lib.signals.step_labels import is_labels_file


def check_override_keys(overrides) -> None:
    """Each ``section.key=value`` override must name a field of the profile schema; list elements (datasets) and
    free mappings (``options``, ``*_by_dataset``) are not looked into. ConfigError names the override."""
    for ov in overrides or ():
        path = ov.split("=", 1)[0].strip()
        cls, seen = Profile, []
        for part in path.split("."):
            if cls is None:
                break
            fields = {f.name: f for f in dataclasses.fields(cls)}
            if part not in fields:
                where = ".".join(seen) or "the profile"
                message = moved(cls, [part], where)
                if message:
                    raise ConfigError(f"override {ov!r}: {message}")
                raise ConfigError(f"override {ov!r}: {where} has no key {part!r}; valid keys: {sorted(fields)}")
            seen.append(part)
            tp = typing.get_type_hints(cls)[part]
            cls = tp if dataclasses.is_dataclass(tp) else None


def check_sources(prof) -> None:
    """Every dataset names a data source of ``data.registry.SOURCES``; ConfigError names the dataset and lists the
    known sources (else the run stops inside 00_data, after its kernel started)."""
    from edit_lib.data.registry import SOURCES

    for spec in prof.data.datasets:
        if spec.source not in SOURCES:
            raise ConfigError(f"{prof.name}: {SOURCES.unknown(spec.source, f'data.datasets.{spec.name}.source')}")


def check_cross_references(prof) -> None:
    """Every dataset or system a section names exists in the profile; ConfigError names the key and the valid
    names (today a typo surfaces only when the stage that reads it runs, minutes in)."""
    from edit_lib.systems import SYSTEMS, check_baselines, not_run

    names = [d.name for d in prof.data.datasets]
    refs = [("sft.ablation_dataset", [prof.sft.ablation_dataset] if prof.sft.ablation_dataset else []),
            ("rl.datasets", list(prof.rl.datasets)), ("rl.seed_datasets", list(prof.rl.seed_datasets)),
            ("rl.grid_datasets", list(prof.rl.grid_datasets)), ("rsr.datasets", list(prof.rsr.datasets))]
    for key, used in refs:
        unknown = [n for n in used if n not in names]
        if unknown:
            raise ConfigError(f"{prof.name}: {key} names {unknown}, not a dataset of this profile; its datasets "
                              f"are {names}")
    try:
        known = check_baselines(prof.run.baselines)
        systems = [s.name for s in SYSTEMS] + known
        unknown = [n for n in prof.rsr.systems if n not in systems]
        if unknown:
            raise ValueError(f"rsr.systems names {unknown}, not a system of edit_lib/systems.py or of run.baselines; "
                             f"known: {systems}")
        not_run(dataclasses.replace(prof, run=dataclasses.replace(
            prof.run, skip_systems=[n for n in prof.run.skip_systems if n not in known])))
        prof.rl.subset_in("seed_datasets", names), prof.rl.subset_in("grid_datasets", names)
    except (ValueError, OSError) as e:
        raise ConfigError(f"{prof.name}: {e}") from None
    check_providers(prof)


def check_providers(prof) -> None:
    """``analysis.step_annotator``, ``analysis.behaviour`` and ``analysis.error_analysis`` name ``none``, a
    registered provider (``runner.keys``) or, for the annotator, an existing labels file."""
    register_all()
    for kind, key in providers.KINDS.items():
        if kind == "base":
            continue
        section, field = key.split(".")
        value = getattr(getattr(prof, section), field)
        if kind == "annotator" and is_labels_file(value):
            if not Path(value).expanduser().is_file():
                raise ConfigError(f"{prof.name}: {key} = {value!r}: no such labels file")
            continue
        try:
            providers.lookup(kind, value)
        except providers.ProviderError as e:
            raise ConfigError(f"{prof.name}: {e}") from None


def check_model(prof, on_this_machine: bool = True) -> None:
    """``model.name_or_path`` names a registered Base, an existing folder or a hub id transformers accepts
    ('org/name'): a path to a folder that does not exist is refused here, not by transformers inside a notebook;
    ``on_this_machine`` (a run, not a dry run): a ``cuda`` ``model.device`` needs CUDA on this machine, where
    the stage's own process loads its policy."""
    register_all()
    name = prof.model.name_or_path
    if providers.find("base", name) is None and not Path(name).expanduser().exists():
        from huggingface_hub.utils import HFValidationError, validate_repo_id
        try:
            validate_repo_id(name)
        except HFValidationError:
            raise ConfigError(f"{prof.name}: model.name_or_path = {name!r}: no such folder, and not a hub model id "
                              f"('org/name'); named Bases: {sorted(providers.names('base'))}") from None
    if on_this_machine and prof.model.device.startswith("cuda"):
        import torch
        if not torch.cuda.is_available():
            raise ConfigError(f"{prof.name}: model.device = {prof.model.device!r}, but this machine has no CUDA "
                              f"device; set model.device to 'cpu' or 'auto'")


def check_sft_batch(prof) -> None:
    """Each dataset's SFT effective batch (App. B: ``sft.effective_batch_size`` or its ``_by_dataset`` value) splits
    into whole ``sft.per_device_batch_size`` batches on the devices one of 05's runs trains on
    (``train.sft.batch_split``): ``sft.processes``, or the GPUs the stage's process sees, else one."""
    import torch

    from edit_lib.train.sft import batch_split
    sft, gpus = prof.sft, (torch.cuda.device_count() if torch.cuda.is_available() else 0)
    devices = sft.processes if sft.processes > 1 else 1 if prof.model.device == "cpu" or sft.workers != 1 \
        else max(1, gpus)
    for spec in prof.data.datasets:
        try:
            batch_split(sft.effective_batch_for(spec.name), sft.per_device_batch_size, devices)
        except ValueError as e:
            raise ConfigError(f"{prof.name}: dataset {spec.name}: {e} (sft.effective_batch_size, "
                              f"sft.per_device_batch_size, sft.processes)") from None


def missing_inputs(prof) -> list[str]:
    """One line per dataset input (file or folder) that does not exist, naming the dataset and the path."""
    from edit_lib.data.registry import input_paths

    return [f"data.datasets.{spec.name} ({spec.source}): {p} does not exist" for spec in prof.data.datasets
            for p in input_paths(spec) if not Path(p).exists()]


def preflight(profile: str, overrides=(), *, need_data: bool = True, dry_run: bool = False):
    """The loaded profile after every check above; ConfigError (exit 2 in the CLI) on the first failure. With
    ``need_data`` a missing input is an error, else it is returned as a note: (profile, notes); a ``dry_run``
    plans a GPU profile on any machine (no device check)."""
    check_override_keys(overrides)
    prof = load_profile(profile, overrides)
    if not prof.data.datasets:
        raise ConfigError(f"{prof.name}: the profile names no dataset (data.datasets); begin it with `extends: "
                          f"demo` to set only what differs, or list its datasets (`edit-suite profile --keys`)")
    check_sources(prof)
    check_cross_references(prof)
    check_model(prof, on_this_machine=not dry_run)
    check_sft_batch(prof)
    missing = missing_inputs(prof)
    if missing and need_data:
        raise ConfigError("input data missing, nothing was run:\n  " + "\n  ".join(missing))
    return prof, missing
