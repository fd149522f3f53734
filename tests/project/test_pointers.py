"""Every pointer a reader may follow resolves: the `edit_lib` modules, names and repository files that docstrings,
comments, the Markdown pages and the notebooks' Markdown cells name exist (as the departures-pointer test in
tests/project/test_architecture.py does for the headings of book/departures.md).

Read (nothing is imported but `edit_lib.config`, for the profile's keys): the docstrings and comments of every
module of edit_lib/ and tests/, README.md, edit_lib/ARCHITECTURE.md, book/*.md, data_cards/*.md and the notebooks'
Markdown cells. Not read: CHANGELOG.md and book/records/*.md, the dated record of what ran at a commit, whose
paths are the paths of then.

Checked, backticked or not:
* paths: `edit_lib/...`, `notebooks/...`, `configs/...`, `book/...`, `tests/...`, `data_cards/...`, and
  `<room>/<file>` for a room (sub-package) of edit_lib; `<...>` and `*` are wildcards that must match a file;
* dotted names: `edit_lib.x.y` must be a module and the names in it; `x.y` whose first part names a module or a
  package of edit_lib (anywhere: `stage.StageContext`, `runner.stage`), or a retired module (RETIRED), must be a
  module and names in it (a class's attributes included), or else a key of the profile (`model.warmup.steps`);
* `<page>.md, section "<title>"` and `README, "<title>"`: the title is a heading of the page.
"""
from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from functools import lru_cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LIB = REPO / "edit_lib"
PATH_ROOTS = ("edit_lib", "notebooks", "configs", "book", "tests", "data_cards")
# modules renamed or merged by the move to rooms (issue 31): a pointer to one is stale, whatever follows it
RETIRED = {"pipeline", "models", "eval_tables", "eval_plots", "evaluate", "int_prompt", "warmup_base",
           "readme_results", "book_pages", "book_scale", "book_real", "int_run", "int_sft", "rl_calibration",
           "calibrate",
           # folded into the module they served (issue 57)
           "checklist_report", "cost", "validation", "rsr_runs", "bench_decoding", "sft_pools", "records",
           "checklist_limits", "beside", "checklist_plan",
           "profile_files", "shared_prompt", "acceptance", "warmup_schedule", "warmup_curve", "bench_merge",
           "bench_prefix", "bench_rollouts", "bench_shaping", "response_bootstrap"}  # and the data root and knobs modules, words too common to retire
FILE_SUFFIXES = {"py", "md", "json", "jsonl", "csv", "tsv", "parquet", "yaml", "yml", "toml", "txt", "log", "zip",
                 "ipynb", "png", "cfg", "gguf", "html", "pt", "bin", "safetensors"}


# ---------------------------------------------------------------- what is read

def _python_texts(path: Path):
    """(line, text, the documented function's arguments) of the docstrings and the comments of one Python file."""
    src = path.read_text()
    tree = ast.parse(src)
    for node in [tree, *(n for n in ast.walk(tree)
                         if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))]:
        if node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) \
                and isinstance(node.body[0].value.value, str):
            args = getattr(node, "args", None)
            local = {a.arg for a in (args.posonlyargs + args.args + args.kwonlyargs)} if args else set()
            yield node.body[0].lineno, node.body[0].value.value, local
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string, set()


def texts(repo: Path = REPO):
    """(file, first line, text, names local to it) of everything the test reads."""
    for p in sorted((repo / "edit_lib").rglob("*.py")) + sorted((repo / "tests").rglob("*.py")):
        if not {"assets", "fixtures", "runs"} & set(p.relative_to(repo).parts):
            yield from ((str(p.relative_to(repo)), n, t, local) for n, t, local in _python_texts(p))
    pages = [repo / "README.md", repo / "edit_lib" / "ARCHITECTURE.md", *sorted((repo / "book").glob("*.md")),
             *sorted((repo / "data_cards").glob("*.md"))]
    for p in pages:
        if p.exists():
            yield str(p.relative_to(repo)), 1, p.read_text(), set()
    for nb in sorted((repo / "notebooks").glob("*.ipynb")):
        for i, c in enumerate(json.loads(nb.read_text())["cells"]):
            if c["cell_type"] == "markdown":
                yield f"{nb.relative_to(repo)} cell {i}", 1, "".join(c["source"]), set()


# ---------------------------------------------------------------- the library, read statically

def _module_files(lib: Path) -> dict[str, Path]:
    out = {}
    for p in sorted(lib.rglob("*.py")):
        rel = p.relative_to(lib.parent).with_suffix("")
        if {"assets", "runs"} & set(rel.parts):
            continue
        parts = list(rel.parts)[:-1] if rel.name == "__init__" else list(rel.parts)
        out[".".join(parts)] = p
    return out


def _target_names(t: ast.AST) -> set[str]:
    if isinstance(t, ast.Name):
        return {t.id}
    if isinstance(t, (ast.Tuple, ast.List)):
        return set().union(*(_target_names(e) for e in t.elts))
    return set()


def _names_in(body: list[ast.stmt]) -> dict[str, ast.AST]:
    """The names a block binds (recursing into if / try / with), each with its defining node."""
    out: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = node
        elif isinstance(node, ast.Assign):
            out.update({n: node for t in node.targets for n in _target_names(t)})
        elif isinstance(node, ast.AnnAssign):
            out.update({n: node for n in _target_names(node.target)})
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update({(a.asname or a.name).split(".")[0]: node for a in node.names})
        for block in ("body", "orelse", "finalbody", "handlers"):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                for sub in getattr(node, block, []) or []:
                    out.update(_names_in(sub.body if isinstance(sub, ast.ExceptHandler) else [sub]))
    return out


def _class_attributes(cls: ast.ClassDef) -> set[str]:
    """A class's body names, plus the ``self.x`` its methods assign."""
    out = set(_names_in(cls.body))
    for node in ast.walk(cls):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    out.add(t.attr)
    return out


class Library:
    """Modules of edit_lib and the names each defines, from the source (nothing imported)."""

    def __init__(self, lib: Path):
        self.lib = lib
        self.files = _module_files(lib)
        for d in {p.parent for p in self.files.values()}:  # a folder without __init__ (embedded/) is a package too
            self.files.setdefault(".".join(d.relative_to(lib.parent).parts), d)
        self.basenames = {m.rsplit(".", 1)[-1] for m in self.files if m != lib.name}
        # dotted strings the code uses as values (stream names, keys): `revision.rewrites` names one of those
        self.code_strings = {n.value for f in self.files.values() if f.is_file()
                             for n in ast.walk(ast.parse(f.read_text())) if isinstance(n, ast.Constant)
                             and isinstance(n.value, str) and DOTTED.fullmatch(n.value)}

    def defines_anywhere(self, name: str) -> bool:
        return any(name in self.names(m) for m, f in self.files.items() if f.is_file())

    @lru_cache(maxsize=None)
    def names(self, module: str) -> dict[str, ast.AST]:
        f = self.files[module]
        return _names_in(ast.parse(f.read_text()).body) if f.is_file() else {}

    def resolves_in(self, module: str, attrs: list[str]) -> bool:
        """``attrs`` (a.b.c) names something in ``module``: a top-level name, a class's attribute, a name
        imported from another module of the library (followed there), or an attribute of any class of it."""
        if not attrs:
            return True
        names = self.names(module)
        node = names.get(attrs[0])
        if node is None:
            return attrs[0] in set().union(*(_class_attributes(n) for n in names.values()
                                             if isinstance(n, ast.ClassDef))) and len(attrs) == 1
        if isinstance(node, ast.ClassDef):
            return len(attrs) == 1 or attrs[1] in _class_attributes(node)
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith(self.lib.name):
            src = node.module
            name = next(a.name for a in node.names if (a.asname or a.name) == attrs[0])
            if f"{src}.{name}" in self.files:
                return self.resolves_in(f"{src}.{name}", attrs[1:])
            return src in self.files and self.resolves_in(src, [name, *attrs[1:]])
        return True  # a function, a constant: its attributes are not followed

    def resolves(self, dotted: str, anywhere: bool) -> bool:
        """``dotted`` is ``edit_lib.<module>[.<name>...]`` (``anywhere``: or ``<suffix of a module>[.<name>...]``)."""
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            head = ".".join(parts[:i])
            modules = [m for m in self.files if m == head or (anywhere and m.endswith("." + head))]
            if any(self.resolves_in(m, parts[i:]) for m in modules):
                return True
        return False


@lru_cache(maxsize=None)
def _default_profile():
    from edit_lib.config import Profile

    return Profile()


def is_profile_key(name: str) -> bool:
    """``name`` is a key of the profile (`model.warmup.steps`), a section's method (`sft.effective_batch_for`) or
    a key inside a list- or dict-valued one (`data.datasets.synth_sas.options`)."""
    node = _default_profile()
    for part in name.split("."):
        if isinstance(node, (dict, list)):  # keyed by dataset: `data.datasets.<name>`, `rl.shaping_by_dataset`
            return True
        if not hasattr(node, part):
            return False
        node = getattr(node, part)
    return True


# ---------------------------------------------------------------- the pointers

PATH = re.compile(r"(?<![\w./$<>~-])((?:[A-Za-z_][\w-]*/)+[\w.*<>…-]*)")
DOTTED = re.compile(r"(?<![\w./$-])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?![\w/-])")
BARE = re.compile(r"``?([a-z_]\w*)``?")
SECTION = re.compile(r"\b([\w./-]+\.md|README),\s+(?:section\s+)?\"([^\"]+)\"")
PLACEHOLDERS = {"x", "y", "X", "foo"}  # `edit_lib.x.y`, `configs/X.yaml`: a form, not a pointer
NOT_POINTERS = {  # dotted names that read like a module's but name something else
    "inputs.params": "the profile values a results JSON records (runner/compare.py, tools/compare.py)",
    "warmup.pairs.matcher": "a key of 01's results JSON (model/warmup.py writes it)",
}


def _strip(p: str) -> str:
    return p.rstrip(".,:;)…")


def broken_paths(text: str, repo: Path, rooms: set[str]) -> list[tuple[int, str]]:
    bad = []
    for m in PATH.finditer(text):
        p = _strip(m.group(1))
        root, stem = p.split("/")[0], p.rstrip("/").rsplit("/", 1)[-1].split(".")[0]
        in_room = root in rooms and root not in PATH_ROOTS
        if root not in PATH_ROOTS and not in_room or stem in PLACEHOLDERS:
            continue
        if in_room and not (p.endswith("/") or p.rsplit(".", 1)[-1] in FILE_SUFFIXES):
            continue  # `train/ood_test`: a split, not a file of the room
        pattern = re.sub(r"<[^>]*>|…", "*", p).rstrip("/")
        bases = [repo] + ([repo / "edit_lib"] if root in rooms else [])
        ok = any(any(b.glob(pattern)) if "*" in pattern else (b / pattern).exists() for b in bases)
        if not ok:
            bad.append((m.start(), p))
    return bad


def broken_names(text: str, lib: Library, local: set[str] = frozenset()) -> list[tuple[int, str]]:
    bad = []
    for m in DOTTED.finditer(text):
        name = m.group(1)
        first, *rest = name.split(".")
        if name in NOT_POINTERS or first in local or PLACEHOLDERS & set(rest) or name in lib.code_strings:
            continue
        if rest[-1] in FILE_SUFFIXES:  # a file name: `runner/stage.py` is a path; `stage.py` a module's file
            if rest[-1] == "py" and (first in RETIRED or (len(rest) == 1 and first in lib.basenames)) \
                    and not lib.resolves(first, anywhere=True):
                bad.append((m.start(), name))
        elif first == lib.lib.name:
            if not lib.resolves(name, anywhere=False):
                bad.append((m.start(), name))
        elif first in lib.basenames or first in RETIRED:
            if not (lib.resolves(name, anywhere=True) or is_profile_key(name)):
                bad.append((m.start(), name))
    for m in BARE.finditer(text):  # a retired module named on its own, without a name after it
        if m.group(1) in RETIRED and not lib.resolves(m.group(1), anywhere=True) \
                and not lib.defines_anywhere(m.group(1)) and not is_profile_key(m.group(1)):
            bad.append((m.start(), m.group(1)))
    return bad


def broken_sections(text: str, repo: Path) -> list[tuple[int, str]]:
    bad = []
    for m in SECTION.finditer(text):
        page, title = m.group(1), " ".join(m.group(2).split())
        if title.startswith("<"):
            continue  # `book/departures.md, section "<title>"`: the form
        path = repo / "README.md" if page == "README" else next(
            (p for p in (repo / page, repo / "book" / page) if p.is_file()), None)
        if path is None:
            bad.append((m.start(), f'{page}, "{title}" (no such page)'))
            continue
        headings = {ln.lstrip("#").strip() for ln in path.read_text().splitlines() if ln.startswith("#")}
        if title not in headings:
            bad.append((m.start(), f'{page}, section "{title}"'))
    return bad


def broken_pointers(repo: Path = REPO) -> list[str]:
    lib = Library(repo / "edit_lib")
    rooms = {p.name for p in (repo / "edit_lib").iterdir() if p.is_dir() and any(p.glob("*.py"))}
    out = []
    for where, line, text, local in texts(repo):
        for at, what in sorted(broken_paths(text, repo, rooms) + broken_names(text, lib, local)
                               + broken_sections(text, repo)):
            where_ = where if " cell " in where else f"{where}:{line + text.count(chr(10), 0, at)}"
            out.append(f"{where_}: {what}")
    return out


# ---------------------------------------------------------------- the rule

def test_every_pointer_resolves():
    bad = broken_pointers()
    assert not bad, "pointers to modules, names, files or sections that do not exist:\n" + "\n".join(bad)


# ---------------------------------------------------------------- the checker itself

@pytest.fixture()
def fake_repo(tmp_path):
    """A repository of one room (``runner``), one notebook, a README and a config, all of whose pointers resolve."""
    files = {
        "edit_lib/__init__.py": "",
        "edit_lib/runner/__init__.py": "",
        "edit_lib/runner/stage.py": '"""Opens a stage (`runner/stage.py`, configs/demo.yaml)."""\n'
                                    "from edit_lib.runner.keys import why\n\n\n"
                                    "class StageContext:\n    def save(self):\n        self.paths = 1\n",
        "edit_lib/runner/keys.py": "def why():\n    pass  # see `stage.StageContext.save`, model.warmup.steps\n",
        "README.md": "# Suite\n\n## Tests\n\nSee `edit_lib.runner.stage.why` and `tests/`, `configs/<name>.yaml`.\n",
        "configs/demo.yaml": "",
        "tests/conftest.py": '"""Tiers (README, "Tests")."""\n',
        "notebooks/00.ipynb": json.dumps({"cells": [{"cell_type": "markdown", "source": ["`runner.stage`"]}]}),
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_checker_accepts_resolving_pointers(fake_repo):
    assert broken_pointers(fake_repo) == []


@pytest.mark.parametrize("where, broken, found", [
    ("README.md", "See `edit_lib/config.py`.", "README.md:1: edit_lib/config.py"),
    ("README.md", "See edit_lib.runner.stage.StageContext.load.",
     "README.md:1: edit_lib.runner.stage.StageContext.load"),
    ("README.md", "See `runner/dry_run.py`.", "README.md:1: runner/dry_run.py"),
    ("README.md", "The runner's `pipeline.decide`.", "README.md:1: pipeline.decide"),
    ("README.md", "See `stage.StageContext.open`.", "README.md:1: stage.StageContext.open"),
    ("README.md", "See `keys.how` and `tests/test_gone.py`.", "README.md:1: keys.how"),
    ("tests/conftest.py", '"""Tiers (README, "Tiers")."""\n', 'tests/conftest.py:1: README, section "Tiers"'),
    ("notebooks/00.ipynb", json.dumps({"cells": [{"cell_type": "markdown", "source": ["see `configs/gone.yaml`"]}]}),
     "notebooks/00.ipynb cell 0: configs/gone.yaml"),
])
def test_checker_finds_a_broken_pointer(fake_repo, where, broken, found):
    (fake_repo / where).write_text(broken)
    assert found in broken_pointers(fake_repo)


TRACKER = re.compile(r"\b[Ii]ssues?\s+#?\d+")


def tracker_numbers() -> list[str]:
    """'file:line' of every tracker number ('issue 40', 'issues 36 and 39') in the library, the notebooks and the
    book's pages and records: a reader of the repository cannot follow one (CHANGELOG.md, the dated log, may)."""
    files = [*LIB.rglob("*.py"), *LIB.rglob("*.md"), *(REPO / "notebooks").glob("*.ipynb"),
             *(REPO / "book").rglob("*.md"), REPO / "README.md"]
    out = []
    for f in sorted(files):
        text = f.read_text(encoding="utf-8")
        out += [f"{f.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}" for m in TRACKER.finditer(text)]
    return out


def test_no_tracker_numbers_in_the_library_notebooks_or_book():
    assert tracker_numbers() == []
    assert TRACKER.search("Not within issue\n40's goal") and not TRACKER.search("the power issue's rule")
