"""A stage kernel's start-up: the notebooks that run no model (00's data, 09's significance) import neither torch
nor transformers, which cost a kernel about two seconds (the stage keys' providers import the embedded grader's
recipe and tokenizer, so those keep torch and transformers inside the functions that train and build)."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

from edit_lib.fingerprints import notebook_source

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def _imports(notebook: str) -> list[str]:
    """The notebook's own top-level import statements, in order."""
    tree = ast.parse(notebook_source(NOTEBOOKS / notebook))
    return [ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]


@pytest.mark.parametrize("notebook", ["00_data.ipynb", "09_significance.ipynb"])
def test_a_stage_without_a_model_starts_without_torch(notebook):
    imports = _imports(notebook)
    assert any("edit_lib.runner.stage" in line for line in imports), imports  # the runner's side is imported too
    code = "\n".join([*imports, "import sys", "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[-2] == "[]", f"{notebook}'s imports load {out.stdout.strip()}"
