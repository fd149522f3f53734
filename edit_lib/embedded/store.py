"""Where the embedded graders live: the shipped weights and the cache of built micro graders."""
from __future__ import annotations

from pathlib import Path

from edit_lib.artifacts import cache_dir
from edit_lib.embedded.recipe import GraderRecipe, embedded_recipe, micro_recipe, recipe_hash

ASSETS_DIR = Path(__file__).resolve().parent / "assets" / "grader"


def micro_cache_dir(recipe: GraderRecipe | None = None) -> Path:
    """Folder of a built grader in the suite's cache (``artifacts.cache_dir``: $EDIT_SUITE_CACHE, default
    ~/.cache/edit-suite, outside the repository), keyed by the recipe hash."""
    recipe = recipe or micro_recipe()
    return cache_dir() / f"grader-{recipe.name}-{recipe_hash(recipe)}"


def ensure_micro_grader() -> Path:
    """Build the micro grader into its cache folder unless it is there already."""
    path = micro_cache_dir()
    if not (path / "recipe_hash.txt").exists():
        from edit_lib.embedded.build import build_grader
        build_grader(micro_recipe(), path, accept=False, progress=False)
    return path



def shipped_grader_is_current(path: str | Path | None = None) -> tuple[bool, str, str | None]:
    """(current?, expected hash of the `embedded` recipe, hash written next to the shipped weights)."""
    path = Path(path) if path is not None else ASSETS_DIR
    expected = recipe_hash(embedded_recipe())
    f = path / "recipe_hash.txt"
    shipped = f.read_text().strip() if f.exists() else None
    ok = shipped == expected and (path / "model.safetensors").exists()
    return ok, expected, shipped


