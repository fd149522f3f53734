"""pyproject.toml, requirements.txt, environment.yml and the Makefile agree: every declared dependency is locked
at a version its range admits (torch at the Makefile's pin, the same in environment.yml), the extras left out of
the lock are the ones the Makefile installs on demand, and every third-party import of the library and the tests
is declared. Then LICENSE and CITATION.cff match pyproject.toml.

The checks are functions of a repository folder, so a test also runs them on a broken copy and sees them fail."""
from __future__ import annotations

import ast
import importlib.metadata as metadata
import re
import shutil
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
LOCKED_EXTRAS = ("docs", "test")  # in requirements.txt, so `make test` has them
ON_DEMAND_EXTRAS = ("lab", "gpu")  # not in the lock: `make lab` installs lab, the GPU machine gpu
OPTIONAL_IMPORTS = {"vllm"}  # pins its own torch: a documented step on the GPU machine, never a dependency
TORCH_PIN = re.compile(r"\btorch==([0-9][^\s#\"']*)")


def _project(root: Path) -> dict:
    return tomllib.loads((root / "pyproject.toml").read_text())["project"]


def _lock(root: Path) -> dict[str, Version]:
    """requirements.txt as {name: version}; every line must be an exact pin (it is a lock)."""
    pins = {}
    for n, line in enumerate((root / "requirements.txt").read_text().splitlines(), 1):
        line = line.split("#")[0].strip()
        if not line:
            continue
        req = Requirement(line)
        spec = list(req.specifier)
        assert len(spec) == 1 and spec[0].operator == "==", f"requirements.txt line {n}: {line!r} is not an exact pin"
        pins[canonicalize_name(req.name)] = Version(spec[0].version)
    return pins


def _torch_pins(root: Path) -> dict[str, set[str]]:
    return {name: set(TORCH_PIN.findall((root / name).read_text())) for name in ("Makefile", "environment.yml")}


def _declared(root: Path, extras=("",) + LOCKED_EXTRAS) -> list[Requirement]:
    project = _project(root)
    reqs = project["dependencies"] if "" in extras else []
    reqs = reqs + [r for e in extras if e for r in project["optional-dependencies"][e]]
    own = canonicalize_name(project["name"])  # `test` names `edit-suite[docs]`: the docs extra, already listed
    return [Requirement(r) for r in reqs if canonicalize_name(Requirement(r).name) != own]


def lock_problems(root: Path) -> list[str]:
    """Each declared dependency (core and the locked extras) against the version the set-up installs."""
    lock, problems = _lock(root), []
    torch = _torch_pins(root)
    if "torch" in lock:
        problems.append("requirements.txt pins torch: the Makefile installs it first, from TORCH_INDEX")
    if len(torch["Makefile"]) != 1 or torch["Makefile"] != torch["environment.yml"]:
        problems.append(f"torch pins differ or are missing: {torch}")
    for req in _declared(root):
        name = canonicalize_name(req.name)
        pinned = Version(next(iter(torch["Makefile"]))) if name == "torch" and torch["Makefile"] else lock.get(name)
        if pinned is None:
            problems.append(f"{req} is declared in pyproject.toml but not pinned in requirements.txt")
        elif not req.specifier.contains(pinned, prereleases=True):
            problems.append(f"{req} in pyproject.toml excludes the pinned {name}=={pinned}")
    return problems


def test_every_declared_dependency_is_locked_within_its_range():
    assert lock_problems(ROOT) == []


def test_a_range_that_excludes_the_lock_is_caught(tmp_path):
    for name in ("pyproject.toml", "requirements.txt", "environment.yml", "Makefile"):
        shutil.copy(ROOT / name, tmp_path / name)
    text = (tmp_path / "pyproject.toml").read_text()
    peft = next(r for r in _project(tmp_path)["dependencies"] if r.startswith("peft"))
    (tmp_path / "pyproject.toml").write_text(text.replace(f'"{peft}"', '"peft>=9"'))
    env = (tmp_path / "environment.yml").read_text()
    (tmp_path / "environment.yml").write_text(re.sub(TORCH_PIN, "torch==0.1", env))
    problems = lock_problems(tmp_path)
    assert any(p.startswith("peft>=9") for p in problems) and any("torch pins differ" in p for p in problems)


def test_the_lock_and_environment_yml_install_the_same_set():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "-r requirements.txt" in pip and any(TORCH_PIN.fullmatch(x) for x in pip)
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python="))
    assert SpecifierSet(_project(ROOT)["requires-python"]).contains(python.removeprefix("python=") + ".0"), python
    assert env["name"] == _project(ROOT)["name"]


def test_the_on_demand_extras_are_what_the_makefile_installs():
    lock, project = _lock(ROOT), _project(ROOT)
    assert set(project["optional-dependencies"]) == set(LOCKED_EXTRAS) | set(ON_DEMAND_EXTRAS)
    for extra in ON_DEMAND_EXTRAS:
        assert not [r for r in _declared(ROOT, (extra,)) if canonicalize_name(r.name) in lock], extra
    lab_line = next(line for line in (ROOT / "Makefile").read_text().splitlines() if "pip install" in line
                    and "jupyterlab" in line)
    installs = lab_line.split("pip install", 1)[1]
    assert sorted(re.findall(r'"([^"]+)"', installs)) == sorted(project["optional-dependencies"]["lab"])


def _third_party_imports(folder: Path) -> set[str]:
    names = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    local = {p.stem for p in folder.rglob("*.py")} | {"edit_lib"}  # the tests' helper modules and fixtures
    return {n for n in names if n not in sys.stdlib_module_names and n not in local}


@pytest.mark.parametrize("folder, extras", [("edit_lib", ("",)), ("tests", ("",) + LOCKED_EXTRAS)])
def test_every_third_party_import_is_declared(folder, extras):
    """The library's imports are core dependencies; the tests' are core or the `test` extra's."""
    declared = {canonicalize_name(r.name) for r in _declared(ROOT, extras)}
    owners = metadata.packages_distributions()
    missing = {}
    for name in sorted(_third_party_imports(ROOT / folder) - OPTIONAL_IMPORTS):
        dists = {canonicalize_name(d) for d in owners.get(name, [name])}
        if not dists & declared:
            missing[name] = sorted(dists)
    assert missing == {}, f"imported in {folder}/ but not declared in pyproject.toml: {missing}"


def test_license_and_citation_match_pyproject():
    project = _project(ROOT)
    assert project["license"] == {"text": "Apache-2.0"}
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert cff["version"] == project["version"] and cff["license"] == "Apache-2.0"
    paper = cff["preferred-citation"]
    assert paper["type"] == "article" and paper["title"] and paper["authors"]
    assert "journal" not in paper and "conference" not in paper  # the paper names no venue


def _tex_title(tex: str) -> str:
    """The \\title's text: line breaks as spaces, \\thanks dropped, \\textsc{Edit} and the like as their text."""
    m = re.search(r"\\title\{((?:[^{}]|\{[^{}]*\})*)\}", tex)
    if not m:
        return ""
    title = re.sub(r"\\\\|\\thanks\{[^{}]*\}", " ", m.group(1))
    return " ".join(re.sub(r"\\[a-zA-Z]+\{([^{}]*)\}", r"\1", title).split())


def test_citation_title_is_the_papers():
    """Where the paper's source sits beside the repository (../shared/paper), its title is the citation's."""
    tex = ROOT.parent / "shared" / "paper" / "edit_paper.tex"
    if not tex.is_file():
        pytest.skip(f"the paper's source is not at {tex}: the title cannot be compared here")
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["preferred-citation"]["title"] == _tex_title(tex.read_text())
