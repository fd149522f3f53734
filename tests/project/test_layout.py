"""tests/ mirrors the library's rooms (edit_lib/ARCHITECTURE.md): a test of ``edit_lib/<room>/<module>.py`` lives in
``tests/<room>/``, a test of a top-level module ``edit_lib/<module>.py`` in ``tests/`` itself, the executed
notebooks in ``tests/notebooks/`` and the repository-wide checks (architecture, packaging, pointers, dead code) in
``tests/project/``. Shared test helpers are plain modules in ``tests/`` (on pytest's ``pythonpath``)."""
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
LIB = TESTS.parent / "edit_lib"
NOT_ROOMS = {"notebooks", "project", "fixtures", "golden"}  # folders of tests/ that mirror no edit_lib room


def misplaced(tests: Path, lib: Path) -> list[str]:
    """Where ``tests`` departs from the layout: a folder that is neither a room of ``lib`` nor one of
    ``NOT_ROOMS``, a test file at the top named for no top-level module, or a test file deeper than one folder."""
    rooms = {p.name for p in lib.iterdir() if (p / "__init__.py").exists() or p.is_dir() and any(p.glob("*.py"))}
    top_modules = {p.stem for p in lib.glob("*.py")}
    found = []
    for d in sorted(p for p in tests.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))):
        if d.name not in rooms | NOT_ROOMS:
            found.append(f"tests/{d.name}/: no room edit_lib/{d.name}/")
    for f in sorted(tests.glob("test_*.py")):
        if f.stem.removeprefix("test_") not in top_modules:
            found.append(f"tests/{f.name}: no top-level module edit_lib/{f.stem.removeprefix('test_')}.py")
    for f in sorted(tests.glob("*/*/**/test_*.py")):
        if not {"fixtures", "golden"} & set(f.relative_to(tests).parts):
            found.append(f"{f.relative_to(tests.parent)}: deeper than tests/<room>/")
    return found


def test_tests_mirror_the_rooms():
    assert misplaced(TESTS, LIB) == []


def test_a_misplaced_test_is_named(tmp_path):
    lib, tests = tmp_path / "edit_lib", tmp_path / "tests"
    (lib / "model").mkdir(parents=True)
    (lib / "model" / "__init__.py").write_text("")
    (lib / "metrics.py").write_text("")
    for rel in ("model/test_generate.py", "test_metrics.py", "project/test_packaging.py",  # where they belong
                "models/test_hf.py", "test_workflow.py", "model/deep/test_x.py"):  # three that are not
        (tests / rel).parent.mkdir(parents=True, exist_ok=True)
        (tests / rel).write_text("")
    assert misplaced(tests, lib) == ["tests/models/: no room edit_lib/models/",
                                     "tests/test_workflow.py: no top-level module edit_lib/workflow.py",
                                     "tests/model/deep/test_x.py: deeper than tests/<room>/"]
