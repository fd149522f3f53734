"""Where the embedded graders live: the shipped weights and the cache of built micro graders (built by
``build.ensure_micro_grader``)."""
from __future__ import annotations

from pathlib import Path

from edit_lib.artifacts import cache_dir
from edit_lib.embedded.recipe import GraderRecipe, micro_recipe, recipe_hash

ASSETS_DIR = Path(__file__).resolve().parent / "assets" / "grader"


def micro_cache_dir(recipe: GraderRecipe | None = None) -> Path:
    """Folder of a built grader in the suite's cache (``artifacts.cache_dir``: $EDIT_SUITE_CACHE, default
    ~/.cache/edit-suite, outside the repository), keyed by the recipe hash."""
    recipe = recipe or micro_recipe()
    return cache_dir() / f"grader-{recipe.name}-{recipe_hash(recipe)}"
