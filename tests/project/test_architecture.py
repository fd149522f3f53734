"""The library's layout rules (edit_lib/ARCHITECTURE.md): layers, no import cycles, the embedded package kept
apart, small modules.

Imports are read with `ast` from every module of edit_lib (nothing is imported to check them). An edge is any
`import edit_lib...`, `from . import x` or `from .x import y` (to `.x.y` when that is a module, else to `.x`),
plus the package `__init__` that importing a submodule from outside its package runs.

Lazy imports: an import inside a function runs only when the function is called, so it cannot make a
circular-import error, but two modules that import each other (inside a room too) are one idea in two files.
So lazy imports count everywhere: in the no-cycle check (all imports form a DAG), in the layers, and in the rule
that only the runner layer and those above it import the embedded package. Notebooks' imports are checked too.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[2] / "edit_lib"
MAX_LINES = 400  # one concern per file at the length it needs; 300 split concerns into satellites
REASON = "longer than 400 lines because"
EMBEDDED = "embedded"
EMBEDDED_MAY_IMPORT_UP_TO = "signals"  # ARCHITECTURE.md: "It may import any layer up to `signals`"
RUNNER_LAYER = "runner"  # ARCHITECTURE.md: "only the runner layer and those above it import `embedded`"
NOTEBOOKS = LIB.parent / "notebooks"
NOTEBOOK_RUNNER_IMPORTS = {"edit_lib.runner.stage"}  # "of the runner layer, only `runner.stage`"


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    lazy: bool
    line: int
    implicit: bool = False  # a package __init__ that the import runs (matters for cycles only)

    def __str__(self) -> str:
        return f"{self.src} -> {self.dst} ({'lazy' if self.lazy else 'module-level'}, line {self.line})"


def module_files() -> dict[str, Path]:
    out = {}
    for p in sorted(LIB.rglob("*.py")):
        rel = p.relative_to(LIB.parent).with_suffix("")
        if {"assets", "runs"} & set(rel.parts):
            continue
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _resolve(module: str, is_pkg: bool, level: int, name: str | None) -> str:
    if level == 0:
        return name or ""
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _packages_run(src: str, dst: str) -> list[str]:
    """Package __init__ modules that importing ``dst`` from ``src`` executes (not the root, not src's own)."""
    parts = dst.split(".")
    return [p for p in (".".join(parts[:i]) for i in range(2, len(parts)))
            if not (src == p or src.startswith(p + "."))]


def import_edges() -> list[Edge]:
    mods = module_files()
    edges = []
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        in_function = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                       for n in ast.walk(f) if n is not f}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(mod, path.name == "__init__.py", node.level, node.module)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            for t in targets:
                if t == "edit_lib" or not t.startswith("edit_lib."):
                    continue
                if t not in mods:  # `import edit_lib.x.y` of a name inside a module
                    t = next((m for m in sorted(mods, key=len, reverse=True) if t.startswith(m + ".")), t)
                lazy = id(node) in in_function
                edges += [Edge(mod, p, lazy, node.lineno, implicit=True) for p in _packages_run(mod, t) if p != mod]
                if t != mod:
                    edges.append(Edge(mod, t, lazy, node.lineno))
    return edges


def layers() -> dict[str, tuple[int, str]]:
    """module or package name -> (rank, layer) from the diagram in ARCHITECTURE.md (lowest layer: rank 0)."""
    text = (LIB / "ARCHITECTURE.md").read_text()
    block = re.search(r"```\n(.*?)```", text, re.S).group(1)
    rows = []
    for line in block.splitlines():
        line = re.split(r"[(\[]", line)[0].strip()
        if not line or line.startswith("|"):
            continue
        layer, *names = line.split()
        rows.append((layer, names))
    out = {}
    for rank, (layer, names) in enumerate(reversed(rows)):
        for n in names:
            out[n.rstrip("/")] = (rank, layer)
    return out


def layer_of(module: str, table: dict[str, tuple[int, str]]) -> tuple[int, str] | None:
    top = module.split(".")[1] if module.count(".") >= 1 else ""
    if top == EMBEDDED:
        return (-1, EMBEDDED)
    return table.get(top)


def find_cycle(edges: list[Edge]) -> list[str] | None:
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.src, set()).add(e.dst)
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state and (c := visit(m)):
                return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (c := visit(n)):
            return c
    return None


# ---------------------------------------------------------------- the rules

def test_module_level_imports_have_no_cycle():
    cycle = find_cycle([e for e in import_edges() if not e.lazy])
    assert cycle is None, "module-level import cycle: " + " -> ".join(cycle)


def test_imports_have_no_cycle_lazy_ones_included():
    """No modules import each other in a loop, at module level or inside a function (model.policy <->
    model.vllm_engine and embedded.build <-> embedded.recipe did, lazily, until issue 37)."""
    edges = import_edges()
    cycle = find_cycle(edges)
    lines = [str(e) for a, b in zip(cycle or [], (cycle or [])[1:]) for e in edges if (e.src, e.dst) == (a, b)]
    assert cycle is None, "import cycle (lazy imports included):\n" + "\n".join(lines)


def test_every_module_is_in_a_layer_of_architecture_md():
    table = layers()
    missing = sorted(m for m in module_files() if m != "edit_lib" and layer_of(m, table) is None)
    assert not missing, f"add these to the layer diagram of edit_lib/ARCHITECTURE.md: {missing}"


def test_imports_respect_the_layers():
    """A module imports from its own layer or a lower one; embedded/ may import layers up to signals."""
    table = layers()
    up_to = next(r for r, layer in table.values() if layer == EMBEDDED_MAY_IMPORT_UP_TO)
    bad = []
    for e in import_edges():
        if e.implicit:
            continue
        src, dst = layer_of(e.src, table), layer_of(e.dst, table)
        if src is None or dst is None or dst[1] == EMBEDDED:
            continue  # unlisted modules fail the test above; imports of embedded/ are the next test's
        limit = up_to if src[1] == EMBEDDED else src[0]
        if dst[0] > limit:
            bad.append(f"{e} : layer {src[1]} may not import layer {dst[1]}")
    assert not bad, "imports against the layering of ARCHITECTURE.md:\n" + "\n".join(bad)


def runner_and_above(table: dict[str, tuple[int, str]]) -> set[str]:
    """The layers from the runner up (runner, tools, book, cli): they may import embedded/, no stage key covers
    them, and of them a notebook opens only the stage context."""
    runner_rank = next(r for r, layer in table.values() if layer == RUNNER_LAYER)
    return {layer for r, layer in table.values() if r >= runner_rank}


def test_only_the_runner_layer_and_above_import_the_embedded_package():
    pkg = f"edit_lib.{EMBEDDED}"
    table = layers()
    allowed = runner_and_above(table)
    bad = sorted({str(e) for e in import_edges()
                  if not e.implicit and e.dst.startswith(pkg) and not e.src.startswith(pkg)
                  and (layer_of(e.src, table) or (None, None))[1] not in allowed})
    assert not bad, f"only the layers {sorted(allowed)} may import edit_lib.embedded:\n" + "\n".join(bad)


def test_no_stage_key_covers_the_runner_layer_and_above():
    """``fingerprints.RUNNER_LAYER`` (left out of every stage key) is exactly the rooms of the runner layer and
    those above it in ARCHITECTURE.md: a room added there (``tools/``) is never hashed, and no room below is
    left out of a key."""
    from edit_lib.fingerprints import RUNNER_LAYER as NOT_HASHED

    table = layers()
    above = runner_and_above(table)
    assert set(NOT_HASHED) == {f"edit_lib.{name}" for name, (_, layer) in table.items() if layer in above}


def notebook_imports(nb_path: Path) -> set[str]:
    """The edit_lib modules (or names in them) a notebook's code cells import."""
    import json

    src = "\n".join("".join(c["source"]) for c in json.loads(nb_path.read_text())["cells"]
                    if c["cell_type"] == "code")
    out = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return {m for m in out if m.startswith("edit_lib.")}


def test_notebooks_import_below_the_runner_and_never_embedded():
    """Notebooks reach the synthetic world through profile values only, and of the runner layer and those above
    it (tools, book, cli) open the stage context only (a stage key covers what they import, never those)."""
    table = layers()
    bad = []
    for nb in sorted(NOTEBOOKS.glob("*.ipynb")):
        for m in sorted(notebook_imports(nb)):
            layer = layer_of(m, table)
            if layer is None:
                continue
            if layer[1] == EMBEDDED or (layer[1] in runner_and_above(table) and not any(
                    m == r or m.startswith(r + ".") for r in NOTEBOOK_RUNNER_IMPORTS)):
                bad.append(f"{nb.name}: {m}")
    assert not bad, "notebook imports against ARCHITECTURE.md:\n" + "\n".join(bad)


def test_long_modules_say_why_at_the_top():
    bad = []
    for mod, path in module_files().items():
        lines = path.read_text().splitlines()
        if len(lines) > MAX_LINES and REASON not in "\n".join(lines[:15]).lower():
            bad.append(f"{path.relative_to(LIB.parent)} ({len(lines)} lines)")
    assert not bad, (f"modules above {MAX_LINES} lines without 'Longer than 400 lines because ...' in their first "
                     f"lines: {bad}")


# ---------------------------------------------------------------- the checker itself

@pytest.fixture()
def fake_lib(tmp_path, monkeypatch):
    pkg = tmp_path / "edit_lib"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "from .b import x\n\ndef f():\n    from . import c\n",
        "b.py": "import edit_lib.sub.d\nx = 1\n",
        "c.py": "from .a import f\n",
        "sub/__init__.py": "from .d import y\n",
        "sub/d.py": "y = 2\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    monkeypatch.setitem(globals(), "LIB", pkg)  # the checker's functions read the module-level LIB
    return pkg


def test_checker_reads_edges_lazy_flags_and_package_inits(fake_lib):
    edges = {(e.src, e.dst, e.lazy) for e in import_edges()}
    assert {(e.src, e.dst) for e in import_edges() if e.implicit} == {("edit_lib.b", "edit_lib.sub")}
    assert edges == {("edit_lib.a", "edit_lib.b", False), ("edit_lib.a", "edit_lib.c", True),
                     ("edit_lib.b", "edit_lib.sub", False), ("edit_lib.b", "edit_lib.sub.d", False),
                     ("edit_lib.c", "edit_lib.a", False), ("edit_lib.sub", "edit_lib.sub.d", False)}
    # a -> c is lazy, so the a <-> c loop is not a module-level cycle; made module-level, it is one
    assert find_cycle([e for e in import_edges() if not e.lazy]) is None
    assert find_cycle(import_edges()) == ["edit_lib.a", "edit_lib.c", "edit_lib.a"]


MAX_CELL_LINES = 15  # ARCHITECTURE.md / issue 21: a notebook reads as the paper's experiment


def test_notebook_cells_are_short_and_hold_no_logic():
    """Notebooks only orchestrate and display: every code cell has at most MAX_CELL_LINES lines of code (blank and
    comment lines aside) and no loop, try or function/class definition (comprehensions are expressions and
    allowed); anything that computes a number is a tested library function."""
    import json

    bad = []
    for nb in sorted(NOTEBOOKS.glob("*.ipynb")):
        cells = [c for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code"]
        for i, c in enumerate(cells):
            src = "".join(c["source"])
            n = sum(1 for ln in src.splitlines() if ln.strip() and not ln.strip().startswith("#"))
            if n > MAX_CELL_LINES:
                bad.append(f"{nb.name} code cell {i}: {n} lines")
            stmts = {type(s).__name__ for s in ast.walk(ast.parse(src))
                     if isinstance(s, (ast.For, ast.While, ast.Try, ast.FunctionDef, ast.ClassDef))}
            if stmts:
                bad.append(f"{nb.name} code cell {i}: {sorted(stmts)}")
    assert not bad, "notebook cells that hold logic (move it into edit_lib):\n" + "\n".join(bad)


MAX_DOCSTRING_LINES = 16  # "about 15": the text plus its closing quotes; design memos go to book/departures.md


def test_module_docstrings_are_short():
    """A module docstring says what the module is and cites the paper; the reasoning behind a choice lives in
    book/departures.md, which the docstring points to."""
    bad = []
    for mod, path in module_files().items():
        body = ast.parse(path.read_text()).body
        if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
            n = body[0].end_lineno - body[0].lineno + 1
            if n > MAX_DOCSTRING_LINES:
                bad.append(f"{path.relative_to(LIB.parent)} ({n} lines)")
    assert not bad, f"module docstrings over {MAX_DOCSTRING_LINES} lines: {bad}"


def test_departure_pointers_name_sections_of_the_page():
    """Every `book/departures.md, section "<title>"` a module names is a heading of that page."""
    page = (LIB.parent / "book" / "departures.md").read_text()
    headings = {ln.lstrip("#").strip() for ln in page.splitlines() if ln.startswith("#")}
    bad = []
    for mod, path in module_files().items():
        text = " ".join(path.read_text().split())
        for title in re.findall(r'departures\.md, section "([^"]+)"', text):
            if title not in headings:
                bad.append(f"{mod}: {title!r}")
    assert not bad, "pointers to sections book/departures.md does not have:\n" + "\n".join(bad)
