"""The README's results section (issue 20, item 11): rendered from a small committed results fixture
(tests/fixtures/results_small, the pipeline's results JSON format), n/a for what a run lacks, only the marked
block replaced, `edit-suite readme --check` detecting drift, and the missing-marker error naming the file."""
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from edit_lib.book import claims
from edit_lib.cli import main
from edit_lib.runner.stage import provenance, stage
from edit_lib.book.readme import BEGIN, END, MarkersMissing, load_results, render, update_readme

FIXTURE = Path(__file__).parent / "fixtures" / "results_small"
REPO = Path(__file__).resolve().parents[1]


def _run_root(tmp_path: Path, drop: tuple[str, ...] = ()) -> Path:
    """A copy of the fixture as ``<tmp>/runs/demo/results`` (without the stages in ``drop``); returns the run root."""
    results = tmp_path / "runs" / "demo" / "results"
    shutil.copytree(FIXTURE, results)
    for stage in drop:
        (results / f"{stage}.json").unlink()
    return tmp_path / "runs"


def _readme(tmp_path: Path) -> Path:
    """A copy of the repository's README whose results section (between the markers) is stale."""
    text = (REPO / "README.md").read_text()
    if BEGIN in text:  # the repository's README has its own block: cut it out, keep everything around it
        text = text[:text.index(BEGIN)] + text[text.index(END) + len(END):]
    first, rest = text.split("\n", 1)
    f = tmp_path / "README.md"
    f.write_text(f"{first}\n\n{BEGIN}\nold numbers typed by hand: QWK 0.999\n{END}\n{rest}")
    return f


def test_render_shows_the_fixtures_numbers():
    """Every figure of the block is the fixture's number, rounded to 3 decimals, beside the paper's."""
    text = render(FIXTURE)
    # header: profile, date range and commit, as the results JSON recorded them
    assert "profile `demo`" in text and "2026-11-20 to 2026-11-22" in text and "`0123456789ab`" in text
    # 01: Base QWK per split (0.62714 rounded) and the incorrect share of sampled rollouts
    assert "| synth_sas | 0.275 | 0.627 | 0.750 |" in text
    # 04: Table 12 beside the paper's SAS-History EDIT values (22.0 S@4, 23.6 retention)
    assert "| synth_sas | edit | 9 | 4 | 0.444 | 18 | 5 | 0.278 | SAS-History | 22.0 | 23.6 |" in text
    assert "| synth_bio | edit | 6 | 3 | 0.500 | 20 | 4 | 0.200 | Private-Biology | 33.5 | 37.2 |" in text
    assert "| fallback | synth_sas | edit | 9 | 0.444 | 1 |" in text and "Truncated continuations: 3" in text
    # 05: pool beside its SFT run; InT status counts
    assert "| edit_sft | synth_sas | 4 | 8 | 12 | 12 | 2.000 | 0.250 | 12 | 2 | 6 |" in text
    assert "| synth_sas | int | 5 | 2 | 7 |" in text
    # 06: Table 9 lower block with its flags column, the paper horizon
    assert "| edit_sft | synth_sas | 0.300 | 0.050 | 0.300 | 0.050 | calibrated | gamma_at_cap |" in text
    assert "| edit_sft_edit_rl | synth_sas | 0 | trained | 4 | 400 | 4 |" in text
    # 07: QWK per system (0.41234 rounded), the systems under their labels
    assert "| table1 | synth_sas | History | ood | 0.412 |" in text and "| EDIT-RL |" in text
    # 09: the ledger's own verdicts, counted (whatever its vocabulary)
    counts = Counter(v.verdict for v in claims.evaluate(load_results(FIXTURE)))
    for verdict, n in counts.items():
        assert f"| {verdict} | {n} |" in text
    assert f"{sum(counts.values())} claims in all." in text
    assert render(FIXTURE) == text  # deterministic: --check compares renders


def test_missing_stages_tables_and_columns_render_na(tmp_path):
    """A stage, table, key or column the run lacks (or an unreadable file) renders 'n/a (...)', never an error."""
    results = _run_root(tmp_path, drop=("06_rl", "07_evaluation")) / "demo" / "results"
    f = results / "04_counterfactual_selection.json"
    res = json.loads(f.read_text())
    del res["tables"]["table12_by_checklist_policy"], res["extra"]["truncated_continuations"]
    del res["tables"]["table12"][0]["retention"]
    f.write_text(json.dumps(res))
    (results / "05_edit_sft.json").write_text("{not json")  # an unreadable file counts as not run
    text = render(results)
    assert "n/a (stage 06_rl not run)" in text and "n/a (stage 07_evaluation not run)" in text
    assert "n/a (stage 05_edit_sft not run)" in text
    assert "By checklist policy: n/a (04_counterfactual_selection has no `table12_by_checklist_policy` table)" in text
    assert "Truncated continuations: n/a" in text
    assert "| synth_sas | edit | 9 | 4 | 0.444 | 18 | 5 | n/a | n/a | n/a | n/a |" in text  # no retention, no 07
    assert "paper row n/a" in text and "07 not run" in text
    empty = render(tmp_path / "nowhere")
    assert "no results JSON" in empty and "n/a (stage 01_base_policy not run)" in empty


def test_update_readme_replaces_only_the_marked_block(tmp_path):
    """Only the text between the markers changes; a second update changes nothing."""
    readme = _readme(tmp_path)
    before = readme.read_text()
    assert update_readme(readme, FIXTURE) is True
    after = readme.read_text()
    head, tail = before.split(BEGIN)[0], before.split(END)[1]
    assert after.startswith(head + BEGIN + "\n") and after.endswith("\n" + END + tail)
    assert after[len(head + BEGIN) + 1: -len("\n" + END + tail)] == render(FIXTURE)
    assert "0.999" not in after
    assert update_readme(readme, FIXTURE) is False and readme.read_text() == after  # idempotent


def test_missing_markers_error_names_the_file(tmp_path, capsys):
    """A README without both markers: MarkersMissing naming it; the CLI exits 2 and writes nothing."""
    readme = tmp_path / "NOTES.md"
    readme.write_text(f"# no section here\n{END}\n")
    with pytest.raises(MarkersMissing, match=re.escape(str(readme))):
        update_readme(readme, FIXTURE)
    root = _run_root(tmp_path)
    assert main(["readme", "--profile", "demo", "--run-root", str(root), "--readme", str(readme)]) == 2
    assert str(readme) in capsys.readouterr().err and readme.read_text() == f"# no section here\n{END}\n"


def test_cli_check_detects_drift(tmp_path, capsys):
    """`--check` exits 1 on a stale section without writing, 0 once written; a changed result drifts again."""
    root, readme = _run_root(tmp_path), _readme(tmp_path)
    args = ["readme", "--profile", "demo", "--run-root", str(root), "--readme", str(readme)]
    stale = readme.read_text()
    assert main(args + ["--check"]) == 1 and readme.read_text() == stale  # --check never writes
    assert "differs" in capsys.readouterr().err
    assert main(args) == 0 and main(args + ["--check"]) == 0
    f = root / "demo" / "results" / "01_base_policy.json"
    res = json.loads(f.read_text())
    res["tables"]["base_metrics"][1]["qwk"] = 0.5  # a new run: the README's 0.627 drifts
    f.write_text(json.dumps(res))
    assert main(args + ["--check"]) == 1
    assert main(args) == 0 and "| synth_sas | 0.275 | 0.500 | 0.750 |" in readme.read_text()
    assert main(["readme", "--profile", "demo", "--run-root", str(tmp_path / "none"), "--readme", str(readme)]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_save_records_commit_and_date(tmp_path):
    """`StageContext.save` records the git commit (or 'unknown') and the UTC date through `provenance`."""
    p = provenance()
    assert p["git_commit"] == "unknown" or re.fullmatch(r"[0-9a-f]{40}", p["git_commit"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", p["run_date"])
    ctx = stage("00_data", "smoke", [], str(tmp_path / "runs"))
    res = json.loads(ctx.save().read_text())
    assert res["git_commit"] == p["git_commit"] and re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:]{8}Z", res["run_date"])
    assert f"`{p['git_commit'][:12]}`" in render(ctx.paths.results)


def test_only_the_cli_imports_the_renderer():
    """readme_results is runner layer: no module of edit_lib but cli.py imports it."""
    users = sorted(str(f.relative_to(REPO)) for f in (REPO / "edit_lib").rglob("*.py")
                   if f.name not in ("cli.py", "readme_results.py") and "readme_results" in f.read_text())
    assert not users, f"runner-layer module readme_results is imported only by cli.py, not by {users}"


def test_render_shows_table4_with_its_mde_and_marks_absent_tables():
    """Table 4's seed-wise difference is shown with its interval and noncentral-t MDE; a table the run lacks
    (the fixture has no 08 or 09) says which stage is missing."""
    text = render(FIXTURE)
    assert "| synth_bio | ood_test | 3 | 0.704 | 0.138 | 0.676 | 0.147 | -0.028 | -0.049 | -0.005 | 0.009 | 0.030 |" in text
    assert "n/a (stage 08_rsr_interventions not run)" in text and "n/a (stage 09_significance not run)" in text
