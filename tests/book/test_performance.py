"""The book's performance page (edit_lib/book/build.py): wall time per stage, the `--time-split`
breakdown where stages were timed, and the benchmarks' JSON next to the run."""
import json

from edit_lib.book.build import performance_page, split_table


def _timing(wall, forward, generation, training, workers=0.0):
    return dict(wall_seconds=wall, forward_seconds=forward, generation_seconds=generation,
                training_seconds=training, other_seconds=round(wall - forward - generation - training, 3),
                worker_process_seconds=workers)


def test_the_page_shows_each_timed_stage_split_and_its_shares(tmp_path):
    results = {"00_data": dict(key="a", seconds=5.0), "06_rl": dict(key="b", seconds=200.0)}
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "generation.json").write_text(json.dumps(dict(speedup=1.4)))
    page = performance_page("smoke", results, tmp_path / "bench",
                            {"06_rl": _timing(200.0, 50.0, 30.0, 100.0, workers=320.0)})
    assert "## Where the time goes (`edit-suite run --time-split`)" in page and "### `generation`" in page
    head = next(ln for ln in page.splitlines() if ln.startswith("| stage ") and "forward" in ln)
    assert [c.strip() for c in head.strip("|").split("|")] == [
        "stage", "seconds", "forward", "generate", "train", "other", "workers", "forward %", "generate %",
        "train %", "other %"]
    row = next(ln for ln in page.splitlines() if ln.startswith("| 06_rl") and "320" in ln)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert [float(c) for c in cells[1:]] == [200, 50, 30, 100, 20, 320, 25, 15, 50, 10]
    assert "workers: pool workers' process-seconds" in page


def test_no_timed_stage_no_section(tmp_path):
    assert split_table({}).empty
    page = performance_page("smoke", {"00_data": dict(key="a", seconds=5.0)}, tmp_path / "bench", {})
    assert "Where the time goes" not in page and "## Wall time per stage" in page
