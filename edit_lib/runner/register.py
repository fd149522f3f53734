"""Fills the provider registry (``edit_lib.providers``) with what the suite ships: the embedded graders, the
packaged GGUF model and the synthetic world's analyses. Opening a stage (``runner.stage``), the CLI and the
multi-process launcher call ``register_all``; the runner is the one layer that may import ``embedded``.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from edit_lib import providers
from edit_lib.artifacts import folder_digest
from edit_lib.embedded import analyses, behaviour, build, recipe, store
from edit_lib.model import gguf_model


def _shipped_grader():
    if not (store.ASSETS_DIR / "config.json").exists():
        raise FileNotFoundError(f"no shipped grader in {store.ASSETS_DIR}; run `edit-suite build-grader`")
    return store.ASSETS_DIR


def _if_built(folder: Path, marker: str) -> Path | None:
    return folder if (folder / marker).exists() else None


def register_all() -> None:
    """Register every shipped provider (idempotent)."""
    providers.register("base", "embedded", providers.NamedBase(
        path=_shipped_grader, weights_id=lambda: "embedded:" + folder_digest(store.ASSETS_DIR),
        built=lambda: _if_built(store.ASSETS_DIR, "config.json"), plain_text=True),
        module=store.__name__)
    # built deterministically from the recipe by code that the stage key covers through this provider's module
    providers.register("base", "micro", providers.NamedBase(
        path=build.ensure_micro_grader,
        weights_id=lambda: "micro:" + hashlib.sha256(open(recipe.__file__, "rb").read()).hexdigest()[:12],
        built=lambda: _if_built(store.micro_cache_dir(), "recipe_hash.txt"), plain_text=True), module=build.__name__)
    providers.register("base", gguf_model.NAME, providers.NamedBase(
        path=gguf_model.ensure_checkpoint, weights_id=lambda: "gguf:" + gguf_model.checkpoint_dir().name,
        built=lambda: _if_built(gguf_model.checkpoint_dir(), "config.json"), plain_text=False), module=gguf_model.__name__)
    providers.register("annotator", "synthetic", analyses.synthetic_annotator, module=analyses.__name__)
    providers.register("behaviour", "synthetic", behaviour.behaviour_tables, module=behaviour.__name__)
    providers.register("error_analysis", "synthetic", analyses.app_h_tables, module=analyses.__name__)


def selected_modules(profile, sections: tuple[str, ...]) -> list[str]:
    """Modules of the providers ``profile`` selects through the profile values ``sections`` declare (a stage's
    declarations): their code is part of that stage's key (``fingerprints``)."""
    register_all()
    out = []
    for kind, key in providers.KINDS.items():
        section = key.split(".")[0]
        if not any(s == section or s == key for s in sections):
            continue
        obj = profile
        for part in key.split("."):
            obj = getattr(obj, part)
        p = providers.find(kind, obj)
        if p is not None:
            out.append(p.module)
    return out
