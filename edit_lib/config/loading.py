"""Loading a profile: ``configs/<profile>.yaml`` (or a YAML path anywhere) into ``schema.Profile``, with ``-p
section.key=value`` overrides (values parsed as YAML, so ``-p rollouts.n_per_response=4`` gives an int), every key
and type checked (an unknown key is an error that lists the valid ones), and each section's own checks
(``__post_init__``) reported with the file and section they failed in; a file that is not valid YAML is a
ConfigError naming ``file:line:column`` and the problem. A profile may ``extends`` another (``read_profile_file``,
below: the base is read first, then the child merged over it, then the overrides)."""
from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path
from typing import Any

import yaml

from edit_lib.config.checks import ConfigError, Decoding
from edit_lib.config.data_model import DatasetSpec
from edit_lib.config.schema import Profile


CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"
_EXPONENT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+")


def _check_type(value: Any, tp: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp is float and isinstance(value, str) and _EXPONENT.fullmatch(value.strip()):
        return float(value)  # YAML 1.1 reads 3e-4 (no dot) as a string; it is the number the user wrote
    if tp in (int, float, str, bool):
        if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
            raise ConfigError(f"{where}: expected {tp.__name__}, got {type(value).__name__} ({value!r})")
        return value
    if origin is tuple and isinstance(value, list):
        return tuple(value)
    if origin in (list,) or tp is list:
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__}")
        return value
    if origin in (dict,) or tp is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
        args = typing.get_args(tp)
        if not args:
            return value
        key_tp, val_tp = args  # typed mapping (e.g. dict[str, ShapingValues]): check every entry
        return {_check_type(k, key_tp, f"{where} key"): (
                    from_dict(val_tp, v, f"{where}.{k}") if dataclasses.is_dataclass(val_tp)
                    else _check_type(v, val_tp, f"{where}.{k}"))
                for k, v in value.items()}
    return value


# Keys that moved into a section's ``decoding`` (the one decoding spec): {(section class, old key): new key}, so
# that a profile written before says where its value goes instead of "unknown key".
MOVED = {
    **{("RolloutConfig", k): f"decoding.{k}" for k in ("temperature", "top_p", "max_new_tokens")},
    **{("EvalConfig", k): f"decoding.{k}" for k in ("greedy", "max_new_tokens")},
    ("RLConfig", "temperature"): "decoding.temperature",
    ("RLConfig", "max_completion_tokens"): "decoding.max_new_tokens",
    **{("IntConfig", k): f"decoding.{k}" for k in ("temperature", "top_p", "max_new_tokens")},
    ("BeliefCheckConfig", "temperature"): "decoding.temperature",
    ("RevisionConfig", "checklist_temperature"): "checklist_decoding (greedy: true, or temperature)",
    ("RevisionConfig", "rewrite_temperature"): "rewrite_decoding (greedy: true, or temperature)",
    ("RevisionConfig", "continuation_temperature"): "continuation_decoding.temperature",
    ("RevisionConfig", "max_new_tokens"): "rewrite_decoding.max_new_tokens",
    ("RevisionConfig", "checklist_max_new_tokens"): "checklist_decoding.max_new_tokens",
    ("RevisionConfig", "continuation_max_new_tokens"): "continuation_decoding.max_new_tokens",
}


def moved(cls: type, keys, where: str) -> str:
    """The message for ``keys`` of section ``cls`` (named ``where``) that moved (``MOVED``); '' when none did."""
    found = [f"{where}.{k} is now {where}.{MOVED[(cls.__name__, k)]}" for k in keys if (cls.__name__, k) in MOVED]
    return "; ".join(found) + " (one decoding spec per section: edit_lib/config/checks.py, Decoding)" if found else ""


def from_dict(cls: type, data: dict | None, where: str = "profile") -> Any:
    """Build dataclass ``cls`` from a mapping; unknown keys are an error listing the valid ones."""
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    message = moved(cls, unknown, where.rsplit(".", 1)[-1])
    if message:
        raise ConfigError(f"{where}: {message}")
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; valid keys: {sorted(fields)}")
    missing = sorted(n for n, f in fields.items() if n not in data and f.init and f.default is dataclasses.MISSING
                     and f.default_factory is dataclasses.MISSING)
    if missing:
        raise ConfigError(f"{where}: missing key(s) {missing}")
    kwargs = {}
    for name, value in data.items():
        tp = hints[name]
        if dataclasses.is_dataclass(tp):
            # a nested section given in part keeps the rest of its field's default (a section's Decoding has the
            # section's own values: eval's greedy, the InT proposals' T = 0.7), not the nested type's
            default = fields[name].default_factory
            if isinstance(value, dict) and default is not dataclasses.MISSING:
                value = {**dataclasses.asdict(default()), **value}
            kwargs[name] = from_dict(tp, value, f"{where}.{name}")
        else:
            kwargs[name] = _check_type(value, tp, f"{where}.{name}")
    try:
        return cls(**kwargs)
    except ConfigError as e:  # a section's own check (__post_init__): say where it failed
        raise ConfigError(f"{where}: {e}") from None


def apply_override(raw: dict, assignment: str) -> None:
    """Apply ``a.b.c=value`` to a raw profile mapping. List elements are addressed by index or by
    their ``name`` (``data.datasets.synth_sas.options.n_questions=8``)."""
    if "=" not in assignment:
        raise ConfigError(f"override {assignment!r} is not of the form section.key=value")
    path, text = assignment.split("=", 1)
    try:
        value = yaml.safe_load(text) if text != "" else ""
    except yaml.YAMLError as e:
        raise ConfigError(f"override {assignment!r}: its value is not valid YAML: {yaml_problem(e)}") from None
    parts = path.strip().split(".")
    node: Any = raw
    for i, part in enumerate(parts[:-1]):
        node = _child(node, part, ".".join(parts[: i + 1]), create=True)
    last = parts[-1]
    if isinstance(node, list):
        idx = _list_index(node, last, path)
        node[idx] = value
    else:
        node[last] = value


def _list_index(node: list, part: str, where: str) -> int:
    if part.isdigit() and int(part) < len(node):
        return int(part)
    for i, item in enumerate(node):
        if isinstance(item, dict) and item.get("name") == part:
            return i
    names = [item.get("name") for item in node if isinstance(item, dict)]
    raise ConfigError(f"override {where!r}: no list element {part!r}; names: {names}")


def _child(node: Any, part: str, where: str, create: bool) -> Any:
    if isinstance(node, list):
        return node[_list_index(node, part, where)]
    if not isinstance(node, dict):
        raise ConfigError(f"override {where!r}: cannot descend into a {type(node).__name__}")
    if part not in node:
        if not create:
            raise ConfigError(f"override {where!r}: no key {part!r}")
        node[part] = {}
    return node[part]


def profile_path(name_or_path: str | Path) -> Path:
    """A profile is a name in ``configs/`` or the path of a YAML file anywhere (its stem is then its name)."""
    p = Path(name_or_path).expanduser()
    if p.suffix in (".yaml", ".yml") or len(p.parts) > 1:
        if not p.is_file():
            raise ConfigError(f"profile file {str(name_or_path)!r} does not exist (resolved to {p.resolve()})")
        return p
    cand = CONFIG_DIR / f"{name_or_path}.yaml"
    if not cand.exists():
        known = sorted(x.stem for x in CONFIG_DIR.glob("*.yaml"))
        raise ConfigError(f"no profile {name_or_path!r}: expected {cand}; known profiles: {known}")
    return cand


def load_profile(name_or_path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Profile:
    """Load ``configs/<name>.yaml`` (or a YAML path) over the profiles it ``extends`` (``read_profile_file``), apply
    ``overrides`` and validate every key."""
    path = profile_path(name_or_path)
    raw, files = read_profile_file(path, CONFIG_DIR)
    raw.setdefault("name", path.stem)
    for ov in overrides:
        apply_override(raw, ov)
    try:
        prof = from_dict(Profile, raw, where=str(path.name))
        prof.data.datasets = [from_dict(DatasetSpec, d, f"{path.name}.data.datasets[{i}]")
                              for i, d in enumerate(prof.data.datasets)]
        names = [d.name for d in prof.data.datasets]
        if len(set(names)) != len(names) or "" in names:
            raise ConfigError(f"{path.name}: dataset names must be unique and non-empty, got {names}")
        check_dataset_keys(prof, path.name)
    except ConfigError as e:  # the value may come from a base: name the files it was merged from
        if len(files) == 1:
            raise
        raise ConfigError(f"{e} ({' extends '.join(p.name for p in files)})") from None
    return prof


def lineage(name_or_path: str | Path) -> list[Path]:
    """The files a profile is read from: its own first, then each profile it ``extends``."""
    return read_profile_file(profile_path(name_or_path), CONFIG_DIR)[1]


def _by_dataset(node: Any, prefix: str = "") -> list[tuple[str, dict]]:
    """Every ``*_by_dataset`` mapping of a profile, with its dotted key."""
    out = []
    for f in dataclasses.fields(node):
        val = getattr(node, f.name)
        if dataclasses.is_dataclass(val):
            out += _by_dataset(val, f"{prefix}{f.name}.")
        elif f.name.endswith("_by_dataset"):
            out.append((f"{prefix}{f.name}", val))
    return out


def check_dataset_keys(prof: Profile, where: str = "profile") -> None:
    """Keys of every ``*_by_dataset`` mapping must be dataset names of the profile: a typo is an error, never a
    setting that silently does nothing."""
    names = [d.name for d in prof.data.datasets]
    for dotted, mapping in _by_dataset(prof):
        unknown = sorted(set(mapping) - set(names))
        if unknown:
            raise ConfigError(f"{where}: {dotted} names unknown dataset(s) {unknown}; "
                              f"the profile's datasets are {names}")


def describe(cls: type = Profile, prefix: str = "", inst: Any = None, within: str = "") -> list[tuple[str, Any, str]]:
    """(dotted key, default, help) for every field: the documentation of a profile. A nested section's defaults are
    its field's (``eval.decoding.greedy`` is true), not its type's; a leaf of the one decoding spec
    (``checks.Decoding``) carries its section's help too (``within``), which says the section's paper values."""
    out = []
    inst = cls() if inst is None else inst
    for f in dataclasses.fields(cls):
        val, help_ = getattr(inst, f.name), f.metadata.get("help", "")
        if dataclasses.is_dataclass(val):
            out += describe(type(val), f"{prefix}{f.name}.", val, help_ if isinstance(val, Decoding) else "")
        else:
            out.append((f"{prefix}{f.name}", val,
                        f"{help_.rstrip('.')}; {within[:1].lower()}{within[1:]}" if within else help_))
    return out


# ------------------------------------------------------------------ reading a YAML file, and ``extends``
# ``extends: demo`` at the top of a profile names its base: ``demo.yaml`` beside the file, else in ``configs/`` (a
# value ending in ``.yaml`` or holding a ``/`` is a path, relative to the file's folder). The base is read first
# (itself extending another, to any depth; a cycle is an error naming every file of it), then the child is merged
# over it key by key (``merge``): a mapping merges into the base's mapping, recursively; any other value (a list, a
# scalar, null) replaces the base's whole, so ``rl.seeds`` or ``data.datasets`` is restated in full; a mapping
# tagged ``!replace`` replaces the base's mapping whole too (a ``*_by_dataset`` map for fewer datasets than the
# base's); ``name`` is never inherited (the child's own, else its file's stem). ``-p`` overrides apply after.

EXTENDS = "extends"
REPLACE = "!replace"


class Replace(dict):
    """A mapping tagged ``!replace`` in a profile file: `merge` puts it in place of the base's, not into it."""


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader plus the ``!replace`` tag."""


_Loader.add_constructor(REPLACE, lambda loader, node: Replace(loader.construct_mapping(node, deep=True)))


def plain(value: Any) -> Any:
    """``value`` with every `Replace` made a plain dict (what the profile's dataclasses receive)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def yaml_problem(e: yaml.YAMLError) -> str:
    """PyYAML's problem on one line, with where the construct it was reading began (its marks are 0-based)."""
    problem = getattr(e, "problem", None)
    if not problem:  # an error PyYAML gives no problem text for
        return " ".join(str(e).split())
    ctx, mark = getattr(e, "context", None), getattr(e, "context_mark", None)
    if ctx and mark is not None:
        problem += f" ({ctx} at line {mark.line + 1}, column {mark.column + 1})"
    if "'\\t'" in problem:
        problem += "; indent with spaces, not tabs"
    return problem


def read_yaml(path: Path) -> Any:
    """A profile file's YAML; a syntax error is a ConfigError naming ``file:line:column`` (1-based, as editors
    count) and the problem, on one line, instead of PyYAML's multi-line traceback."""
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)  # SafeLoader and !replace
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start}: {e.reason})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        raise ConfigError(f"{where}: invalid YAML: {yaml_problem(e)}") from None


def merge(base: dict, child: dict) -> dict:
    """``child`` over ``base``, key by key: where both hold a mapping the two merge (recursively), anything else
    in ``child`` (a list, a scalar, null, a mapping tagged ``!replace``) replaces the base's value whole. Neither
    input is changed; the result holds plain dicts only."""
    out = dict(base)
    for key, value in child.items():
        if isinstance(value, dict) and not isinstance(value, Replace) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = plain(value)
    return out


def base_path(ref: Any, child: Path, config_dir: Path) -> Path:
    """The file ``extends: ref`` in ``child`` names: a name is ``<name>.yaml`` beside ``child``, else in
    ``config_dir``; a path (ending in .yaml / .yml or holding a folder) is relative to ``child``'s folder."""
    if not isinstance(ref, str) or not ref.strip():
        raise ConfigError(f"{child}: {EXTENDS} must name one profile (a name or a YAML path), got {ref!r}")
    p = Path(ref).expanduser()
    if p.suffix in (".yaml", ".yml") or len(p.parts) > 1:
        p = p if p.is_absolute() else child.parent / p
        if not p.is_file():
            raise ConfigError(f"{child}: {EXTENDS} {ref!r}, but {p} does not exist")
        return p
    tried = [child.parent / f"{ref}.yaml", config_dir / f"{ref}.yaml"]
    for cand in tried:
        if cand.is_file():
            return cand
    known = sorted({x.stem for d in (child.parent, config_dir) for x in d.glob("*.yaml")} - {child.stem})
    raise ConfigError(f"{child}: {EXTENDS} {ref!r}, but there is no profile of that name (looked for "
                      f"{' and '.join(str(t) for t in dict.fromkeys(tried))}); known profiles: {known}")


def read_profile_file(path: Path, config_dir: Path, _chain: tuple[Path, ...] = ()) -> tuple[dict, list[Path]]:
    """(raw mapping, lineage) of the profile file ``path`` with its bases merged in (``merge``); the lineage is
    the files read, ``path`` first and each base after the profile that extends it."""
    raw = read_yaml(path)
    if raw is None:  # nothing but comments, or nothing at all: every value would be a default, with no data
        raise ConfigError(f"{path}: the profile file is empty; begin it with `extends: demo` (or another profile) "
                          f"and set what differs")
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    chain = (*_chain, path)
    if EXTENDS not in raw:
        return plain(raw), [path]
    parent = base_path(raw.pop(EXTENDS), path, config_dir)
    if any(parent.resolve() == p.resolve() for p in chain):
        raise ConfigError(f"{path}: {EXTENDS} makes a cycle: " + " -> ".join(str(p) for p in (*chain, parent)))
    base, lineage = read_profile_file(parent, config_dir, chain)
    base.pop("name", None)  # a profile's name is its own
    return merge(base, raw), [path, *lineage]
