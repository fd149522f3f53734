"""Fingerprints of library code: which ``edit_lib`` files a notebook or a module depends on, hashed.

The one rule of a stage key's code (``runner.keys``): a stage depends on every ``edit_lib`` module its notebook
imports, followed transitively through the imports of those modules (relative and function-level imports
included, with the ``__init__.py`` of every package on the way), **except the runner layer and those above
it** (``RUNNER_LAYER``), which record, schedule, measure or show results but compute none of them (after
changing them, ``edit-suite run --force`` recomputes). Providers a profile value selects (a step annotator, the
embedded grader) are added by the runner through ``code_fingerprint``.
"""
from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

from edit_lib.artifacts import short_hash

REPO_ROOT = Path(__file__).resolve().parents[1]  # edit_lib/ lives here; tests point it at a copy
# the runner layer and the layers above it (ARCHITECTURE.md): no stage key covers them
RUNNER_LAYER = ("edit_lib.runner", "edit_lib.tools", "edit_lib.book", "edit_lib.cli")


def in_runner_layer(module: str) -> bool:
    """Whether ``module`` (a dotted name) belongs to the runner layer or one above it, which no key covers."""
    return any(module == p or module.startswith(p + ".") for p in RUNNER_LAYER)


def _module_file(mod: str) -> Path | None:
    base = REPO_ROOT.joinpath(*mod.split("."))
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def imported_names(tree: ast.AST, package: str) -> set[str]:
    """Every ``edit_lib`` module a parsed file may import (``from x import y`` also yields ``x.y``, which is
    kept only when it is a module); ``package`` resolves relative imports."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            out.add(base)
            out |= {f"{base}.{a.name}" for a in node.names}
    return {m for m in out if m == "edit_lib" or m.startswith("edit_lib.")}


def notebook_source(nb_path: Path) -> str:
    """The code cells of a notebook as Python (IPython magics and shell lines blanked)."""
    nb = json.loads(Path(nb_path).read_text())
    lines = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            src = "".join(cell.get("source", ""))
            lines += ["" if ln.lstrip().startswith(("%", "!")) else ln for ln in src.splitlines()]
    return "\n".join(lines)


def closure(todo: set[str]) -> list[str]:
    """Files (relative to the repository) of the modules in ``todo`` and of everything they import, the runner
    layer left out (module docstring)."""
    todo = set(todo)
    seen: set[str] = set()
    files: set[Path] = set()
    while todo:
        mod = todo.pop()
        if mod in seen or in_runner_layer(mod):
            continue
        seen.add(mod)
        f = _module_file(mod)
        if f is None:
            continue  # `from edit_lib.x import name` also proposes `edit_lib.x.name`
        files.add(f)
        parts = mod.split(".")
        todo |= {".".join(parts[:i]) for i in range(1, len(parts))}
        package = mod if f.name == "__init__.py" else ".".join(parts[:-1])
        todo |= _file_imports(f, package)
    return sorted(str(f.relative_to(REPO_ROOT)) for f in files)


_IMPORTS: dict[tuple[str, str], frozenset[str]] = {}  # (package, source text) -> what the file imports


def _file_imports(f: Path, package: str) -> frozenset[str]:
    """``imported_names`` of one file, parsed once per process for each text it has (an edited file is parsed
    again): every stage key walks the same closures, and parsing them is most of a key's cost."""
    text = f.read_text()
    if (package, text) not in _IMPORTS:
        _IMPORTS[package, text] = frozenset(imported_names(ast.parse(text, str(f)), package))
    return _IMPORTS[package, text]


def module_closure(nb_path: Path, extra: set[str] = frozenset()) -> list[str]:
    """``closure`` of the modules a notebook's code cells import, plus the dotted modules ``extra`` (the
    providers a profile selects)."""
    return closure(imported_names(ast.parse(notebook_source(nb_path)), "") | set(extra))


def file_hashes(files: list[str]) -> dict[str, str]:
    """{file: the first 12 hex digits of the SHA-256 of its bytes}."""
    return {rel: hashlib.sha256((REPO_ROOT / rel).read_bytes()).hexdigest()[:12] for rel in files}


def code_fingerprint(*modules: str) -> str:
    """One hash of the files of ``modules`` (dotted names) and of every library module they import: the code
    a cached result computed by those modules depends on (e.g. 07's predictions)."""
    return short_hash(file_hashes(closure(set(modules))))
