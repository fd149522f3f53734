"""Where a Base policy's weights come from: a named Base (``providers``: 'embedded', 'micro', the packaged GGUF
model) or a local folder or hub name, and what identifies those weights in a stage key."""
from __future__ import annotations

from pathlib import Path

from edit_lib import providers
from edit_lib.artifacts import folder_digest


def resolve_base_path(name_or_path: str) -> str:
    """The weights folder or hub name a Base policy loads from: a named Base's folder (``providers``: 'embedded',
    'micro', the packaged GGUF model; built or converted on first use), else ``name_or_path`` itself.
    ``load_policy`` and the vLLM engine both load from it."""
    named = providers.find("base", name_or_path)
    return str(named.obj.path()) if named is not None else name_or_path


def weights_id(name_or_path: str, hub_commit: str = "") -> str:
    """What identifies a Base policy's weights: a named Base's own id, a local folder's file contents, or a hub
    model's name (with ``@commit`` when ``model.hub_commit`` pins one)."""
    named = providers.find("base", name_or_path)
    if named is not None:
        return named.obj.weights_id()
    p = Path(name_or_path).expanduser()
    if p.is_dir():
        return "dir:" + folder_digest(p)
    return "hub:" + name_or_path + (f"@{hub_commit}" if hub_commit else "")
