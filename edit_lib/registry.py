"""One registry type for the suite's named things: the data sources a profile names, the Base policies and
analyses it selects (``providers.py``), the systems and a profile's baselines and the RL trainers (``systems.py``),
the metrics (``metrics.py``), the rubric edits, the benchmarks of ``edit-suite bench``, the claims ledger's claims
(``book/claims.py``).

A `Registry` maps names to entries in registration order. An entry is registered with ``add`` or the
``register`` decorator, or as a `Lazy` ``"module:attr"`` reference that is imported on first use, so that a low
layer (or the CLI's parser, which must not load torch) can name code of a higher one. Looking up an unknown name
raises `UnknownName`, whose message says what was looked for, where it was named, the nearest known name and every
known one.
"""
from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

__all__ = ["Lazy", "Registry", "UnknownName"]

T = TypeVar("T")


class UnknownName(KeyError, ValueError):
    """A name no entry of a registry has (a KeyError as a mapping's, and a ValueError for callers that validate
    input); its message reads as written, without KeyError's quotes."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class Lazy:
    """A ``"package.module:attr"`` reference, resolved (imported) when its entry is first looked up."""
    target: str

    def __post_init__(self):
        module, sep, attr = self.target.partition(":")
        if not (module and sep and attr):
            raise ValueError(f"a lazy registry entry is 'package.module:attr', got {self.target!r}")

    def resolve(self) -> Any:
        module, _, attr = self.target.partition(":")
        obj = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj


class Registry(MutableMapping, Generic[T]):
    """Named entries of one kind (``what``: 'data source'), named by ``where`` (the profile key or option that
    names them, for messages). A mapping: ``registry[name]`` resolves a `Lazy` entry once and raises `UnknownName`
    for an unknown name; ``registry[name] = entry`` sets or replaces; ``add`` and ``register`` refuse a name that
    is taken."""

    def __init__(self, what: str, where: str = "", error: type[LookupError] = UnknownName):
        self.what, self.where, self.error = what, where, error
        self._entries: dict[str, T | Lazy] = {}

    def add(self, name: str, entry: T | Lazy) -> None:
        if name in self._entries:
            raise ValueError(f"{self.what} {name!r} is registered already")
        self._entries[name] = entry

    def register(self, name: str) -> Callable[[T], T]:
        """A decorator registering the object it decorates under ``name``."""
        def decorate(obj: T) -> T:
            self.add(name, obj)
            return obj
        return decorate

    def unknown(self, name: Any, where: str | None = None) -> str:
        """The message for an unknown ``name``: where it was named (``where``, default the registry's), the nearest
        known name, every known one."""
        near = difflib.get_close_matches(str(name), list(self._entries), n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        where = where or self.where
        where = f"{where} = " if where else ""
        return f"{where}{name!r} names no {self.what}{hint}; known: {', '.join(map(repr, self._entries)) or 'none'}"

    def __getitem__(self, name: str) -> T:
        try:
            entry = self._entries[name]
        except (KeyError, TypeError):
            raise self.error(self.unknown(name)) from None
        if isinstance(entry, Lazy):
            entry = self._entries[name] = entry.resolve()
        return entry

    def get(self, name: str, default: Any = None) -> T | Any:
        """The entry of ``name`` (resolved), or ``default`` when there is none (whatever ``error`` the registry
        raises for an unknown name)."""
        return self[name] if name in self._entries else default

    def __setitem__(self, name: str, entry: T | Lazy) -> None:
        self._entries[name] = entry

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def snapshot(self) -> dict:
        """The entries as they are now, for ``restore`` (a check that registers and must leave no trace)."""
        return dict(self._entries)

    def restore(self, snapshot: dict) -> None:
        """Back to the entries of ``snapshot``: what was registered since is gone."""
        self._entries.clear()
        self._entries.update(snapshot)

    def __repr__(self) -> str:
        return f"Registry({self.what!r}: {list(self._entries)})"
