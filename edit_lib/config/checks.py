"""The pieces every profile section is built from: the field helper with help text, the error a bad profile
raises, and the checks a section runs on its own values in ``__post_init__``."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import field
from typing import Any, Callable


def help_field(default: Any = dataclasses.MISSING, help: str = "", *, factory: Callable[[], Any] | None = None,
               **kw: Any) -> Any:
    """A dataclass field with help text: the one field helper of the library (profiles, sampling, the synthetic
    world, the embedded recipe). List/dict defaults are copied per instance; ``factory`` builds the default
    (a nested dataclass); neither makes the field required."""
    if factory is not None:
        return field(default_factory=factory, metadata={"help": help}, **kw)
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: json.loads(json.dumps(d)), metadata={"help": help}, **kw)
    return field(default=default, metadata={"help": help}, **kw)


class ConfigError(ValueError):
    """A profile that cannot be loaded: unknown key, wrong type, missing file, a value a section rejects."""


def to_dict(obj: Any) -> Any:
    return dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else obj


def _at_least(obj, low: float, *names: str) -> None:
    for n in names:
        v = getattr(obj, n)
        if v < low:
            raise ConfigError(f"{n} must be >= {low}, got {v!r}")


def _positive(obj, *names: str) -> None:
    for n in names:
        v = getattr(obj, n)
        if not v > 0:
            raise ConfigError(f"{n} must be > 0, got {v!r}")


def _fraction(obj, *names: str, open_low: bool = False, open_high: bool = False) -> None:
    for n in names:
        v = getattr(obj, n)
        if not ((v > 0 if open_low else v >= 0) and (v < 1 if open_high else v <= 1)):
            raise ConfigError(f"{n} must be in {'(' if open_low else '['}0, 1{')' if open_high else ']'}, got {v!r}")


def _one_of(obj, name: str, choices) -> None:
    v = getattr(obj, name)
    if v not in choices:
        raise ConfigError(f"{name} must be one of {tuple(choices)}, got {v!r}")
