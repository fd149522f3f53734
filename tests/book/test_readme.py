"""The README's headline block and figure (`edit-suite readme`): rendered from a small committed results fixture
(tests/fixtures/results_small, the pipeline's results JSON format), n/a for what a run lacks, only the marked
block replaced, the figure written with its numbers beside it, `--check` detecting drift of either, and the
missing-marker error naming the file. Everything renders into tmp paths: no test writes the repository."""
import ast
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from edit_lib.book import claims
from edit_lib.book.readme import (BEGIN, END, MarkersMissing, figure_data, load_results, render,
                                  update_readme)
from edit_lib.cli import HEADLINE_IMAGE, main
from edit_lib.runner.stage import provenance, stage

FIXTURE = Path(__file__).parents[1] / "fixtures" / "results_small"
REPO = Path(__file__).resolve().parents[2]


def _run_root(tmp_path: Path, drop: tuple[str, ...] = ()) -> Path:
    """A copy of the fixture as ``<tmp>/runs/demo/results`` (without the stages in ``drop``); returns the run root."""
    results = tmp_path / "runs" / "demo" / "results"
    shutil.copytree(FIXTURE, results)
    for s in drop:
        (results / f"{s}.json").unlink()
    return tmp_path / "runs"


def _readme(tmp_path: Path) -> Path:
    """A copy of the repository's README in ``tmp_path/site`` whose block (between the markers) is stale."""
    text = (REPO / "README.md").read_text()
    if BEGIN in text:  # the repository's README has its own block: cut it out, keep everything around it
        text = text[:text.index(BEGIN)] + text[text.index(END) + len(END):]
    first, rest = text.split("\n", 1)
    f = tmp_path / "site" / "README.md"
    f.parent.mkdir()
    f.write_text(f"{first}\n\n{BEGIN}\nold numbers typed by hand: QWK 0.999\n{END}\n{rest}")
    return f


def test_render_shows_the_fixtures_numbers():
    """The header, the figure's link and every number of the block are the fixture's, beside their intervals."""
    text = render(FIXTURE, "img/h.png")
    # header: profile, date range and commit, as the results JSON recorded them, in one line
    assert "profile `demo`; run date (UTC) 2026-11-20 to 2026-11-22; git commit `0123456789ab`." in text
    assert "![Held-out QWK per system with its 95% interval](img/h.png)" in text
    # 09: Base / EDIT-SFT / EDIT-RL QWK with intervals; EDIT-RL - Base paired (0.65449 and 0.14549 rounded)
    assert ("| synth_sas (ood_test, 20) | 0.509 [0.338, 0.657] | 0.582 [0.421, 0.719] | 0.654 [0.491, 0.775] "
            "| +0.145 [+0.010, +0.287] |") in text
    # synth_bio has an 'all held-out' scope: that one, not its ood_test rows; no EDIT-RL there -> n/a
    assert "| synth_bio (all held-out, 6) | 0.527 [0.373, 0.666] | 0.804 [0.705, 0.897] | n/a | n/a |" in text
    assert "0.843" not in text
    # the claims ledger's own verdicts, counted (whatever its vocabulary); Table 7's AE-RSR
    counts = Counter(v.verdict for v in claims.evaluate(load_results(FIXTURE)))
    assert all(f"{n} {v}" in text for v, n in counts.items()) and f"(of {sum(counts.values())} claims)" in text
    assert "synth_bio: Base 0.566, EDIT-SFT n/a, EDIT-RL 0.552." in text
    assert render(FIXTURE, "img/h.png") == text  # deterministic: --check compares renders


def test_figure_data_is_the_main_systems_per_dataset():
    """One panel per dataset at its widest held-out scope; the paper's main systems in Table 1's order (an
    ablation left out), QWK and interval rounded to 4 decimals."""
    panels = figure_data(load_results(FIXTURE))
    assert [(p["dataset"], p["scope"], p["n_questions"]) for p in panels] == [
        ("synth_sas", "ood_test", 20), ("synth_bio", "all held-out", 6)]
    assert [s["label"] for s in panels[0]["systems"]] == ["Base", "GRPO", "EDIT-SFT", "EDIT-RL"]
    assert panels[0]["systems"][0] == dict(system="base", label="Base", qwk=0.5091, ci_low=0.338, ci_high=0.657)


def test_missing_stages_and_tables_render_na(tmp_path):
    """A stage or table the run lacks (or an unreadable file) renders 'n/a (...)' and no figure, never an error."""
    results = _run_root(tmp_path, drop=("08_rsr_interventions",)) / "demo" / "results"
    (results / "09_significance.json").write_text("{not json")  # an unreadable file counts as not run
    text = render(results, "img/h.png")
    assert "Figure: n/a (stage 09_significance not run)" in text and "](img/h.png)" not in text
    assert "AE-RSR, Table 7 (lower is more rule-faithful; 08 gives no interval): n/a (stage 08_rsr_interventions " \
           "not run)." in text
    assert figure_data(load_results(results)) == []
    (results / "09_significance.json").write_text(json.dumps({"tables": {"significance": []}}))
    assert "n/a (09_significance has no `significance` rows with a QWK)" in render(results, "img/h.png")
    empty = render(tmp_path / "nowhere", "img/h.png")
    assert "no results JSON" in empty and "Claims ledger (verdicts decided by intervals): n/a (no stage run)" in empty


def test_update_readme_replaces_only_the_block_and_writes_the_figure(tmp_path):
    """Only the text between the markers changes; the PNG and its numbers are written; the link is relative to
    the README; a second update changes nothing."""
    readme, image = _readme(tmp_path), tmp_path / "site" / "pics" / "h.png"
    before = readme.read_text()
    assert update_readme(readme, FIXTURE, image) == ["text", "figure"]
    after = readme.read_text()
    head, tail = before.split(BEGIN)[0], before.split(END)[1]
    assert after.startswith(head + BEGIN + "\n") and after.endswith("\n" + END + tail)
    assert after[len(head + BEGIN) + 1: -len("\n" + END + tail)] == render(FIXTURE, "pics/h.png")
    assert "0.999" not in after
    assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads(image.with_suffix(".json").read_text()) == figure_data(load_results(FIXTURE))
    png = image.read_bytes()
    assert update_readme(readme, FIXTURE, image) == [] and readme.read_text() == after  # idempotent
    assert image.read_bytes() == png


def test_missing_markers_error_names_the_file(tmp_path, capsys):
    """A README without both markers: MarkersMissing naming it; the CLI exits 2 and writes nothing."""
    readme = tmp_path / "NOTES.md"
    readme.write_text(f"# no section here\n{END}\n")
    with pytest.raises(MarkersMissing, match=re.escape(str(readme))):
        update_readme(readme, FIXTURE, tmp_path / "h.png")
    root = _run_root(tmp_path)
    assert main(["readme", "--profile", "demo", "--run-root", str(root), "--readme", str(readme)]) == 2
    assert str(readme) in capsys.readouterr().err and readme.read_text() == f"# no section here\n{END}\n"
    assert not (tmp_path / HEADLINE_IMAGE).exists()


def test_cli_check_detects_drift_of_the_block_and_of_the_figure(tmp_path, capsys):
    """`--check` exits 1 on a stale block or figure without writing, 0 once written; a changed result, changed
    figure numbers or a missing PNG drift again. The image defaults to book/images/ beside the given README."""
    root, readme = _run_root(tmp_path), _readme(tmp_path)
    image = readme.parent / HEADLINE_IMAGE
    args = ["readme", "--profile", "demo", "--run-root", str(root), "--readme", str(readme)]
    stale = readme.read_text()
    assert main(args + ["--check"]) == 1 and readme.read_text() == stale and not image.exists()  # never writes
    assert "differ" in capsys.readouterr().err
    assert main(args) == 0 and image.exists() and main(args + ["--check"]) == 0
    assert f"]({HEADLINE_IMAGE})" in readme.read_text()
    f = root / "demo" / "results" / "09_significance.json"
    res = json.loads(f.read_text())
    res["tables"]["significance"][3]["qwk"] = 0.7  # a new run: EDIT-RL's 0.654 drifts, in the block and figure
    f.write_text(json.dumps(res))
    assert main(args + ["--check"]) == 1
    err = capsys.readouterr().err
    assert "the block between" in err and "the figure's numbers" in err
    assert main(args) == 0 and "| 0.700 [0.491, 0.775] |" in readme.read_text()
    assert json.loads(image.with_suffix(".json").read_text())[0]["systems"][3]["qwk"] == 0.7
    image.unlink()  # the PNG is part of what --check asks for
    assert main(args + ["--check"]) == 1 and "the figure's numbers" in capsys.readouterr().err
    assert main(["readme", "--profile", "demo", "--run-root", str(tmp_path / "none"), "--readme", str(readme)]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_the_repository_readme_shows_the_committed_figure():
    """The README has one block, whose image is the file `edit-suite readme` writes by default, committed with
    its numbers; those numbers are the ones the block's table shows."""
    text = (REPO / "README.md").read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    block = text.split(BEGIN)[1].split(END)[0]
    assert f"]({HEADLINE_IMAGE})" in block
    image = REPO / HEADLINE_IMAGE
    assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for panel in json.loads(image.with_suffix(".json").read_text()):  # Base's cell: the figure's 4 decimals
        base = panel["systems"][0]
        row = re.search(rf"^\| {re.escape(panel['dataset'])} \(.*?\| ([\d.]+) \[([\d.]+), ([\d.]+)\] \|", block,
                        flags=re.M)
        assert base["system"] == "base" and row, panel["dataset"]
        assert [float(x) for x in row.groups()] == pytest.approx([base["qwk"], base["ci_low"], base["ci_high"]],
                                                                 abs=6e-4)


def test_save_records_commit_and_date(tmp_path):
    """`StageContext.save` records the git commit (or 'unknown') and the UTC date through `provenance`."""
    p = provenance()
    assert p["git_commit"] == "unknown" or re.fullmatch(r"[0-9a-f]{40}", p["git_commit"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", p["run_date"])
    ctx = stage("00_data", "smoke", [], str(tmp_path / "runs"))
    res = json.loads(ctx.save().read_text())
    assert res["git_commit"] == p["git_commit"] and re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:]{8}Z", res["run_date"])
    assert f"`{p['git_commit'][:12]}`" in render(ctx.paths.results)


RENDERER = "edit_lib.book.readme"  # the README's renderer (`edit-suite readme`)


def importers_of(target: str, lib: Path) -> set[str]:
    """The modules of ``lib`` (a folder named edit_lib) that import ``target`` or a name from it, at module level or
    in a function, absolutely (``import edit_lib.book.readme``, ``from edit_lib.book import readme``) or
    relatively (``from . import readme``, ``from .readme import render``); read with ``ast``."""
    out = set()
    for f in lib.rglob("*.py"):
        parts = list(f.relative_to(lib.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        module = ".".join(parts[:-1] if is_pkg else parts)
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = module.split(".")[: len(module.split(".")) + is_pkg - node.level] if node.level else []
                src = ".".join(base + ([node.module] if node.module else []))
                names = [src] + [f"{src}.{a.name}" for a in node.names]
            else:
                continue
            if module != target and any(n == target or n.startswith(target + ".") for n in names):
                out.add(module)
    return out


def test_only_the_cli_imports_the_renderer():
    """The renderer is the CLI's (`edit-suite readme`): of edit_lib, cli.py (the handler of `readme`)
    imports it and no other module does."""
    assert (REPO / "edit_lib" / "book" / "readme.py").is_file(), f"{RENDERER} moved: update RENDERER"
    assert importers_of(RENDERER, REPO / "edit_lib") == {"edit_lib.cli"}


@pytest.mark.parametrize("line", ["from edit_lib.book.readme import render", "import edit_lib.book.readme",
                                  "from edit_lib.book import headline, readme", "from . import readme",
                                  "from .readme import render", "def f():\n    from .readme import render"])
def test_the_importer_check_fails_on_a_second_importer(tmp_path, line):
    """On a copy of edit_lib's tree in which book/pages.py also imports the renderer (each way an import can be
    written), the check finds both importers, so the test above fails."""
    lib = tmp_path / "edit_lib"
    for f in (REPO / "edit_lib").rglob("*.py"):
        dest = lib / f.relative_to(REPO / "edit_lib")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(f.read_text())
    assert importers_of(RENDERER, lib) == {"edit_lib.cli"}  # the copy as it is
    pages = lib / "book" / "pages.py"
    pages.write_text(pages.read_text() + "\n" + line + "\n")
    assert importers_of(RENDERER, lib) == {"edit_lib.cli", "edit_lib.book.pages"}
