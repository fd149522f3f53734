"""`edit-suite compare` (edit_lib.tools.compare) and its book page (edit_lib.book.conclusions).

Unit tests on fabricated run folders: one profile value and table numbers that differ, within and beyond their
interval; a run against itself; rows, tables and stages in one run only; a table whose rows cannot be keyed; a
folder that is not a run. One slow test on the session's smoke run: a copy with 09 re-run under another
``significance.ci`` lists that value, 09's tables and nothing else, and the book staging shows the page.
"""
import json
from pathlib import Path

import pytest

from edit_lib.book.conclusions import compare_page, compare_pages
from edit_lib.cli import main
from edit_lib.tools.compare import (ABSENT, NotARunFolder, book_json_path, compare_cli, compare_runs,
                                     format_comparison, interval, read_run)
from edit_lib.tools.golden import ROW_KEYS, key_columns


def _sig_rows(qwk_b: float = 0.60, delta_b: float = 0.10) -> list[dict]:
    """09's significance table: qwk with a bare ci_low/ci_high, delta with delta_ci_low/delta_ci_high."""
    return [dict(system="base", dataset="d", scope="ood", qwk=0.50, ci_low=0.40, ci_high=0.60, delta=None,
                 delta_ci_low=None, delta_ci_high=None, p_shown="--"),
            dict(system="edit_sft", dataset="d", scope="ood", qwk=qwk_b, ci_low=0.45, ci_high=0.75, delta=delta_b,
                 delta_ci_low=-0.05, delta_ci_high=0.25, p_shown="0.2")]


def _write(run: Path, stage: str, tables: dict, params: dict, key: str | None = None, upstream=None) -> None:
    f = run / "results" / f"{stage}.json"
    f.parent.mkdir(parents=True, exist_ok=True)
    inputs = dict(params=params, upstream=upstream or {}, modules={"edit_lib/x.py": "m1"}, weights=None)
    f.write_text(json.dumps(dict(notebook=stage, profile="smoke", key=key or f"k-{stage}", inputs=inputs,
                                 params=params, tables=tables, extra={"path": str(run)})))


def _make_run(run: Path, ci: float = 0.95, qwk_b: float = 0.60, delta_b: float = 0.10) -> Path:
    _write(run, "07_evaluation", {
        "metrics": [dict(system="base", dataset="d", split="ood", n=10, qwk=0.5),
                    dict(system="edit_sft", dataset="d", split="ood", n=10, qwk=0.6)],
        "examples": [dict(text="a", n=1), dict(text="a", n=2)],  # rows that no key column tells apart
    }, {"eval": {"batch_size": 4}, "run.seed": 0})
    _write(run, "09_significance", {"significance": _sig_rows(qwk_b, delta_b)},
           {"significance": {"ci": ci, "n_boot": 200}, "run.seed": 0}, key=f"k09-{ci}",
           upstream={"07_evaluation": "k-07_evaluation"})
    return run


@pytest.fixture()
def runs(tmp_path):
    return _make_run(tmp_path / "a" / "smoke"), tmp_path / "b" / "smoke"


def test_a_run_against_itself_lists_nothing(runs, capsys):
    a, _ = runs
    c = compare_runs(a, a)
    assert c["differences"] == 0 and c["values"] == [] and c["keys"] == [] and c["tables"] == []
    assert c["compared"] == dict(stages=2, tables=3, tables_compared_whole=1)  # 07: metrics, examples (unkeyed, equal
    # as a whole); 09: significance
    assert compare_cli(str(a), str(a)) == 0
    assert "no differences (2 stages, 3 tables compared)" in capsys.readouterr().out


def test_one_value_and_numbers_within_and_beyond_their_interval(runs, capsys):
    a, b = runs
    _make_run(b, ci=0.9, qwk_b=0.70, delta_b=0.40)  # qwk inside A's [0.45, 0.75]; delta outside A's [-0.05, 0.25]
    c = compare_runs(a, b)
    assert c["values"] == [dict(path="significance.ci", a=0.95, b=0.9, stages=["09_significance"])]
    assert [(k["stage"], k["why"]) for k in c["keys"]] == [("09_significance", ["parameters changed: significance.ci"])]
    [t] = c["tables"]  # 07 is the same, so only 09's table is listed
    assert (t["stage"], t["table"], t["key_columns"]) == ("09_significance", "significance", ["system", "dataset",
                                                                                             "scope"])
    moved = {m["column"]: m for m in t["moved"]}
    assert set(moved) == {"qwk", "delta"} and all(m["row"] == "edit_sft/d/ood" for m in moved.values())
    assert moved["qwk"]["interval_a"] == [0.45, 0.75] and moved["qwk"]["beyond"] is False
    assert moved["delta"]["interval_a"] == [-0.05, 0.25] and moved["delta"]["beyond"] is True
    assert moved["delta"]["move"] == pytest.approx(0.30)
    assert c["differences"] == 4
    assert compare_cli(str(a), str(b)) == 1
    out = capsys.readouterr().out
    assert "significance.ci: 0.95 -> 0.9" in out and "B's value lies outside A's interval" in out
    assert [ln.split()[-1] for ln in out.splitlines() if ln.strip().startswith("edit_sft/d/ood")] == ["no", "yes"]
    assert "4 difference(s)" in out


def _sft_runs(run: Path, key: str, seconds: float, adapter: str | None = None, loss: float = 0.25) -> None:
    """05's SFT table as the stage writes it: the adapter's path inside the run's folder under the stage key."""
    path = adapter or str(run.resolve() / "artifacts" / "05_edit_sft" / key / "adapters" / "edit_sft" / "d")
    _write(run, "05_edit_sft", {"sft_runs": [dict(system="edit_sft", dataset="d", adapter=path, seconds=seconds,
                                                  seconds_per_step=seconds / 10, loss=loss)]}, {"run.seed": 0})


def test_timings_and_paths_inside_each_run_are_counted_apart(runs, capsys):
    """A table's seconds and an adapter path that differs only by the run's folder and the stage key in it are
    not differences (counted apart and said so); a path that differs below that, or a loss, is one."""
    a, b = runs
    _make_run(b)
    _sft_runs(a, "0123456789ab", 13.9)
    _sft_runs(b, "ba9876543210", 21.4)
    c = compare_runs(a, b)
    assert c["differences"] == 0 and c["run_specific"] == 3 and c["tables"] == []
    assert compare_cli(str(a), str(b)) == 0
    assert "Not counted: 3 value(s) that are timings and paths inside each run's own folder" in capsys.readouterr().out
    assert "Not counted: 3 value(s)" in compare_page(c)
    _sft_runs(b, "ba9876543210", 21.4, loss=0.26)
    [t] = compare_runs(a, b)["tables"]
    assert [m["column"] for m in t["moved"]] == ["loss"] and t["run_specific"] == 3
    _sft_runs(b, "ba9876543210", 21.4, adapter=str(b.resolve() / "artifacts" / "05_edit_sft" / "ba9876543210" /
                                                    "adapters" / "int_sft" / "d"))
    [t] = compare_runs(a, b)["tables"]
    assert [m["column"] for m in t["moved"]] == ["adapter"]  # another adapter, not the same one elsewhere


def test_tolerance_absorbs_small_float_moves(runs):
    a, b = runs
    _make_run(b, qwk_b=0.60 + 1e-9)
    assert compare_runs(a, b)["differences"] == 1 and compare_runs(a, b, tol=1e-6)["differences"] == 0


def _set_numerics(run: Path, **fields) -> None:
    for f in (run / "results").glob("*.json"):
        res = json.loads(f.read_text())
        res["numerics"] = dict(dict(torch="2.13.0", cpu_capability="AVX512", torch_threads=2, isa_env={}), **fields)
        f.write_text(json.dumps(res))


def test_numerics_that_differ_are_a_note_not_a_difference(runs, capsys):
    """Two runs whose kernels differ (``runner.keys``): named per field with the stages, counted nowhere in
    ``differences``; a results file written before the record existed is not called different."""
    a, b = runs
    _make_run(b)
    _set_numerics(a)
    _set_numerics(b, cpu_capability="AVX2", isa_env={"ATEN_CPU_CAPABILITY": "avx2"})
    c = compare_runs(a, b)
    assert c["differences"] == 0
    assert {(e["stage"], e["field"], json.dumps(e["a"]), json.dumps(e["b"])) for e in c["numerics"]} == {
        (s, "cpu_capability", '"AVX512"', '"AVX2"') for s in ("07_evaluation", "09_significance")} | {
        (s, "isa_env", "{}", '{"ATEN_CPU_CAPABILITY": "avx2"}') for s in ("07_evaluation", "09_significance")}
    assert compare_cli(str(a), str(b)) == 0
    out = capsys.readouterr().out
    assert "  cpu_capability: AVX512 -> AVX2   (07_evaluation, 09_significance)" in out
    assert "no differences" in out
    assert "* cpu_capability: AVX512 -> AVX2   (07_evaluation, 09_significance)" in compare_page(c)
    res = json.loads((b / "results" / "09_significance.json").read_text())
    del res["numerics"]
    (b / "results" / "09_significance.json").write_text(json.dumps(res))
    assert {e["stage"] for e in compare_runs(a, b)["numerics"]} == {"07_evaluation"}


def test_intervals_the_results_hold():
    row = dict(qwk=0.5, ci_low=0.4, ci_high=0.6, delta=0.1, delta_ci_low=0.0, delta_ci_high=0.2, mde=0.3,
               rsr=0.7, rsr_lo=0.6, rsr_hi=0.8, share=0.2, lo=0.0, hi=0.1, acc=0.5, acc_lo=None, acc_hi=0.9)
    assert interval(row, "qwk") == [0.4, 0.6]  # a bare ci_low / ci_high is 09's interval of qwk
    assert interval(row, "delta") == [0.0, 0.2] and interval(row, "rsr") == [0.6, 0.8]
    assert interval(row, "mde") is None and interval(row, "share") is None  # bare lo / hi are bin edges
    assert interval(row, "acc") is None  # an interval with a missing bound is none
    assert interval(dict(mae=1.0, ci_low=0.0, ci_high=2.0), "mae") is None  # the bare pair is qwk's alone


def test_rows_tables_and_stages_in_one_run_only_and_an_unkeyed_table(runs, capsys):
    a, b = runs
    _make_run(b)
    res = json.loads((b / "results" / "07_evaluation.json").read_text())
    res["tables"]["metrics"].append(dict(system="int_sft", dataset="d", split="ood", n=10, qwk=0.4))
    res["tables"]["examples"][1]["n"] = 3
    res["tables"]["new_table"] = [dict(dataset="d", x=1)]
    (b / "results" / "07_evaluation.json").write_text(json.dumps(res))
    (b / "results" / "09_significance.json").unlink()
    c = compare_runs(a, b)
    by_name = {t["table"]: t for t in c["tables"]}
    assert by_name["metrics"]["only_b"] == ["int_sft/d/ood"] and by_name["metrics"]["moved"] == []
    assert by_name["examples"]["not_keyed"].startswith("not compared: rows not keyed")
    assert by_name["new_table"]["only_in"] == "B"
    assert c["stages_only_a"] == ["09_significance"] and c["differences"] == 4
    out = format_comparison(c)
    assert "07_evaluation / examples: not compared: rows not keyed" in out
    assert "1 row(s) only in B: int_sft/d/ood" in out and "Stages only in A: 09_significance" in out


def test_a_column_in_one_run_only_is_a_moved_value(runs):
    a, b = runs
    _make_run(b)
    res = json.loads((b / "results" / "07_evaluation.json").read_text())
    res["tables"]["metrics"][0]["acc"] = 0.3
    (b / "results" / "07_evaluation.json").write_text(json.dumps(res))
    [t] = compare_runs(a, b)["tables"]
    assert [(m["row"], m["column"], m["a"], m["b"], m["beyond"]) for m in t["moved"]] == [
        ("base/d/ood", "acc", ABSENT, 0.3, None)]


def test_key_columns_add_more_row_keys_only_where_row_keys_leave_rows_alike():
    assert key_columns([dict(system="s", dataset="d", n=1), dict(system="s", dataset="e", n=1)]) == ROW_KEYS
    by_status = [dict(dataset="d", status="ok", n=3), dict(dataset="d", status="failed", n=1)]
    assert key_columns(by_status) == (*ROW_KEYS, "status")
    # keyed jointly: a second run that needs the step as well keys both runs by it
    assert key_columns(by_status, [dict(dataset="d", status="ok", step=1), dict(dataset="d", status="ok", step=2)]) \
        == (*ROW_KEYS, "status", "step")
    assert key_columns([dict(text="a"), dict(text="a")]) is None and key_columns([[1, 2]]) is None


def test_profile_values_address_named_items_and_dotted_keys(tmp_path):
    ds = [dict(name="bio", options=dict(n_questions=2)), dict(name="sas", options=dict(n_questions=8))]
    for side, n, seed in (("a", 2, 0), ("b", 4, 1)):
        params = {"data": {"datasets": [dict(ds[0], options=dict(n_questions=n)), ds[1]]}, "run.seed": seed}
        _write(tmp_path / side, "00_data", {}, params)
    vals = compare_runs(tmp_path / "a", tmp_path / "b")["values"]
    assert [(v["path"], v["a"], v["b"]) for v in vals] == [("data.datasets.bio.options.n_questions", 2, 4),
                                                            ("run.seed", 0, 1)]


def test_a_folder_that_is_not_a_run_gives_exit_2_naming_what_is_missing(runs, tmp_path, capsys):
    a, _ = runs
    (tmp_path / "empty").mkdir()
    assert main(["compare", str(a), str(tmp_path / "empty")]) == 2
    assert main(["compare", "--conclusions", str(a), str(tmp_path / "empty")]) == 2
    assert f"edit-suite compare: {tmp_path / 'empty'} is not a run folder: no {tmp_path / 'empty' / 'results'}/<stage>.json" in \
        capsys.readouterr().err
    assert main(["compare", str(a.parent), str(a)]) == 2  # the run root, not the run: the message names the run
    assert "it holds run folders: smoke" in capsys.readouterr().err
    assert main(["compare", str(tmp_path / "none"), str(a)]) == 2
    assert "no such folder" in capsys.readouterr().err
    (a / "results" / "bad.json").write_text("{")
    with pytest.raises(NotARunFolder, match="bad.json is not a results file: not JSON"):
        read_run(a)
    with pytest.raises(SystemExit) as e:  # argparse's usage error
        main(["compare", str(a)])
    assert e.value.code == 2


def test_cli_writes_the_json_and_keeps_it_for_the_book(runs, tmp_path):
    a, b = runs
    _make_run(b, ci=0.9)
    out = tmp_path / "c.json"
    assert main(["compare", str(a), str(b), "--json", str(out), "--book"]) == 1
    kept = book_json_path(a, b)
    assert kept == a / "compare" / "b-smoke.json" and json.loads(kept.read_text()) == json.loads(out.read_text())
    assert json.loads(out.read_text())["values"][0]["path"] == "significance.ci"


def test_book_page_renders_the_comparison(runs):
    a, b = runs
    _make_run(b, ci=0.9, qwk_b=0.70, delta_b=0.40)
    assert compare_cli(str(a), str(b), book=True) == 1
    [(name, page)] = compare_pages(a).items()
    assert name == "compare_b-smoke"
    lines = page.splitlines()
    assert lines[0] == f"# Compared with `{b.resolve()}`"
    heads = [ln for ln in lines if ln.startswith("#")]  # consecutive levels: MyST warns on a jump
    assert heads[1:] == ["## Profile values that differ", "## Stage keys that differ", "## Tables that differ",
                         "### `09_significance` / `significance`"]
    assert "| significance.ci | 0.95 | 0.9 | 09_significance |" in lines
    assert "| edit_sft/d/ood | delta | 0.1 | 0.4 | +0.3 | [-0.05, 0.25] | [-0.05, 0.25] | yes |" in lines
    assert "1 beyond A's interval" in page
    same = compare_runs(a, a)
    assert "The two runs do not differ (2 stages, 3 tables compared)." in compare_page(same)
    (a / "compare" / "junk.json").write_text("{}")
    with pytest.raises(ValueError, match="junk.json: not a comparison"):
        compare_pages(a)
