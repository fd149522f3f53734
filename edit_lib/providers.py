"""Named providers a profile value selects, and the registry that holds them.

A profile names some parts of a run rather than giving their code: the Base policy (``model.name_or_path``:
``embedded``, ``micro``, the packaged GGUF model, or else a local folder or hub name), the step annotator of the
audit validation and the locality check (``analysis.step_annotator``), 01's behaviour analysis
(``analysis.behaviour``) and App. H's error analysis (``analysis.error_analysis``). The library below the
runner looks a name up here and never imports the package that provides it; the runner fills the registry
(``runner.keys``), so the synthetic world's code is reached through profile values only. Where a Base policy's
weights come from, and what identifies them in a stage key, is read here too (``resolve_base_path``,
``weights_id``).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from edit_lib.registry import Registry

KINDS = {
    "base": "model.name_or_path",
    "annotator": "analysis.step_annotator",
    "behaviour": "analysis.behaviour",
    "error_analysis": "analysis.error_analysis",
}
NONE = "none"  # a profile value that switches an optional provider off


class ProviderError(LookupError):
    """A profile value names no registered provider."""


@dataclass(frozen=True)
class NamedBase:
    """A Base policy known by name: ``path()`` gives the local folder it loads from (built or converted on first
    use), ``weights_id()`` what identifies its weights without building them, ``built()`` the folder if it is
    there already (None: not built yet; a dry run never builds); ``plain_text``: a grader that reads plain text
    (prompt + separator + completion) rather than a chat template."""
    path: Callable[[], Path]
    weights_id: Callable[[], str]
    built: Callable[[], Path | None]
    plain_text: bool


@dataclass(frozen=True)
class Provider:
    kind: str
    name: str
    obj: Any
    module: str  # the module whose code computes with it (stage keys hash its closure)


# one registry per kind, named by its profile key (registry.Registry; the runner fills them)
REGISTRIES: dict[str, Registry[Provider]] = {kind: Registry(f"registered {kind} provider", key, ProviderError)
                                             for kind, key in KINDS.items()}


def _registry(kind: str) -> Registry[Provider]:
    if kind not in REGISTRIES:
        raise ValueError(f"unknown provider kind {kind!r}; known: {sorted(KINDS)}")
    return REGISTRIES[kind]


def register(kind: str, name: str, obj: Any, module: str) -> None:
    """Register ``obj`` under ``name`` for profile values of ``kind`` (``KINDS``); a later registration of the
    same name replaces it (a generation worker registers the Base its parent named)."""
    _registry(kind)[name] = Provider(kind, name, obj, module)


def names(kind: str) -> list[str]:
    return sorted(_registry(kind))


def find(kind: str, name: str) -> Provider | None:
    """The provider registered under ``name``, or None."""
    return _registry(kind).get(name)


def lookup(kind: str, name: str) -> Any:
    """The registered object for a profile value; None for ``'none'``; a ``ProviderError`` naming the profile key
    and the registered names otherwise."""
    if name == NONE:
        return None
    reg = _registry(kind)
    if name not in reg:
        hint = "" if any(REGISTRIES.values()) else (" (nothing is registered: call "
                                                    "edit_lib.runner.keys.register_all(), which opening a stage "
                                                    "does)")
        raise ProviderError(f"{reg.unknown(name)} (or {NONE!r}){hint}")
    return reg[name].obj


def resolve_base_path(name_or_path: str) -> str:
    """The weights folder or hub name a Base policy loads from: a named Base's folder ('embedded', 'micro', the
    packaged GGUF model; built or converted on first use), else ``name_or_path`` itself. ``load_policy`` and the
    vLLM engine both load from it."""
    named = find("base", name_or_path)
    return str(named.obj.path()) if named is not None else name_or_path


def weights_id(name_or_path: str, hub_commit: str = "") -> str:
    """What identifies a Base policy's weights: a named Base's own id, a local folder's file contents, or a hub
    model's name (with ``@commit`` when ``model.hub_commit`` pins one)."""
    from edit_lib.artifacts import folder_digest
    named = find("base", name_or_path)
    if named is not None:
        return named.obj.weights_id()
    p = Path(name_or_path).expanduser()
    if p.is_dir():
        return "dir:" + folder_digest(p)
    return "hub:" + name_or_path + (f"@{hub_commit}" if hub_commit else "")
