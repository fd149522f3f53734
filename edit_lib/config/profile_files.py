"""Reading a profile's YAML file, and the ``extends`` rule by which one profile is another plus its differences.

``extends: demo`` at the top of a profile names its base: ``demo.yaml`` beside the file, else in ``configs/``
(a value ending in ``.yaml`` or holding a ``/`` is a path, relative to the file's folder). The base is read first
(itself extending another, to any depth; a cycle is an error naming every file of it), then the child is merged
over it key by key (``merge``): a mapping merges into the base's mapping, recursively; any other value (a list, a
scalar, null) replaces the base's whole, so ``rl.seeds`` or ``data.datasets`` is restated in full; a mapping tagged
``!replace`` replaces the base's mapping whole too (a ``*_by_dataset`` map for fewer datasets than the base's);
``name`` is never inherited (the child's own, else its file's stem). ``-p`` overrides apply after the merge.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from edit_lib.config.checks import ConfigError

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
