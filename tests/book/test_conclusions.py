"""`edit-suite compare --conclusions` (edit_lib.book.conclusions): the same conclusions whatever the digits.

Unit tests on fabricated run folders: a run against itself; an estimate moved inside and beyond the other run's
interval (both ways); a count of inputs that differs; an estimate without an interval listed, not judged; a folder
that is not a run; and on the book tests' results fixture, a copy whose Table 4 difference is pushed far above 0
changes a verdict the real claims rules compute, and its book page shows it.
"""
import json
import shutil
from pathlib import Path

import pytest

from edit_lib.book.claims import evaluate
from edit_lib.book.conclusions import compare_pages
from edit_lib.cli import main
from edit_lib.tools.compare import read_run
from edit_lib.book.conclusions import conclusions, counts, estimates, format_conclusions


FIXTURE = Path(__file__).parents[1] / "fixtures" / "results_small"


def _sig(edit_rl_qwk: float, lo: float = 0.50, hi: float = 0.80) -> list[dict]:
    base = dict(dataset="d", scope="all held-out", n_questions=6, delta=None, delta_ci_low=None, delta_ci_high=None)
    return [dict(base, system="base", qwk=0.55, ci_low=0.40, ci_high=0.70),
            dict(base, system="edit_sft_edit_rl", qwk=edit_rl_qwk, ci_low=lo, ci_high=hi)]


def _make(run: Path, edit_rl_qwk: float = 0.65, lo: float = 0.50, hi: float = 0.80, responses: int = 30) -> Path:
    tables = {"00_data": {"table8": [dict(dataset="d", split="train", questions=6, responses=responses)]},
              "07_evaluation": {"graded_policies": [dict(system="base", dataset="d", seed=None),
                                                    dict(system="edit_sft_edit_rl", dataset="d", seed=None)],
                                "metrics": [dict(system="base", dataset="d", split="ood_test", subject="all",
                                                 seed=None, n=12)]},
              "09_significance": {"significance": _sig(edit_rl_qwk, lo, hi)}}
    for stage, t in tables.items():
        f = run / "results" / f"{stage}.json"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(dict(notebook=stage, profile="demo", tables=t)))
    return run


def test_a_run_against_itself(tmp_path, capsys):
    a = _make(tmp_path / "a" / "demo")
    c = conclusions(a, a)
    assert c["same"] and not (c["verdicts"] or c["estimates"] or c["count_differences"])
    assert c["estimates_judged"] == 2 and c["claims"] == len(evaluate(read_run(a)))
    assert main(["compare", "--conclusions", str(a), str(a)]) == 0
    assert capsys.readouterr().out.rstrip().endswith("the same conclusions")


@pytest.mark.parametrize("qwk, lo, hi, same", [
    (0.70, 0.55, 0.85, True),    # moved, each estimate inside the other's interval
    (0.82, 0.60, 0.95, False),   # B's estimate above A's interval, A's inside B's
    (0.79, 0.78, 0.80, False),   # B's inside A's interval, but A's 0.65 outside B's narrow one
])
def test_an_estimate_inside_or_beyond_the_other_runs_interval(tmp_path, capsys, qwk, lo, hi, same):
    a, b = _make(tmp_path / "a" / "demo"), _make(tmp_path / "b" / "demo", qwk, lo, hi)
    c = conclusions(a, b)
    assert c["same"] is same and c["count_differences"] == [] and c["verdicts"] == []
    assert main(["compare", "--conclusions", str(a), str(b)]) == (0 if same else 1)
    out = capsys.readouterr().out
    if not same:
        (e,) = c["estimates"]
        assert e["name"] == "QWK EDIT-RL on d (all held-out)" and "NOT the same conclusions" in out
        assert (e["b_inside_a"], e["a_inside_b"]) == ((False, True) if qwk == 0.82 else (True, False))


def test_a_count_of_inputs_that_differs(tmp_path):
    a, b = _make(tmp_path / "a" / "demo"), _make(tmp_path / "b" / "demo", responses=29)
    c = conclusions(a, b)
    assert not c["same"] and c["count_differences"] == [dict(what="00 responses: d train", a=30, b=29)]
    assert counts(read_run(a))["07 graded systems"] == ["base/d/seed None", "edit_sft_edit_rl/d/seed None"]
    assert "00 responses: d train: 30 -> 29" in format_conclusions(c)


def test_an_estimate_without_an_interval_is_listed_not_judged(tmp_path):
    a = _make(tmp_path / "a" / "demo")
    f = a / "results" / "09_significance.json"
    res = json.loads(f.read_text())
    res["tables"]["significance"][1].update(ci_low=None, ci_high=None)
    f.write_text(json.dumps(res))
    b = _make(tmp_path / "b" / "demo", 0.95, 0.9, 0.99)
    c = conclusions(a, b)
    assert c["same"] and [n["name"] for n in c["not_judged"]] == ["QWK EDIT-RL on d (all held-out)"]
    assert c["estimates_judged"] == 1 and "not judged: QWK EDIT-RL" in format_conclusions(c)


def test_not_a_run_folder_exits_2(tmp_path, capsys):
    a = _make(tmp_path / "a" / "demo")
    assert main(["compare", "--conclusions", str(a), str(tmp_path / "nothing")]) == 2
    assert "not a run folder" in capsys.readouterr().err


def test_table_4_pushed_up_changes_the_ledgers_verdict(tmp_path, capsys):
    """The claims rules themselves judge both runs (the book tests' results fixture): Table 4's EDIT-RL minus GRPO
    moved far above 0 with its interval turns `rl-seeds` from contradicted, and the estimate lies beyond the
    other run's interval; `--book` keeps the report, and the book shows it as a page."""
    a, b = tmp_path / "a" / "demo", tmp_path / "b" / "demo"
    for d in (a, b):
        shutil.copytree(FIXTURE, d / "results")
    f = b / "results" / "07_evaluation.json"
    res = json.loads(f.read_text())
    for r in res["tables"]["table4"]:
        r.update(delta=r["delta"] + 1, delta_ci_low=r["delta_ci_low"] + 1, delta_ci_high=r["delta_ci_high"] + 1,
                 wins=r["n_seeds"])  # ahead on every seed
    f.write_text(json.dumps(res))
    before = {v.claim.id: v.verdict for v in evaluate(read_run(a))}
    after = {v.claim.id: v.verdict for v in evaluate(read_run(b))}
    assert before["rl-seeds"] == "contradicted" != after["rl-seeds"]
    c = conclusions(a, b)
    assert [v["claim"] for v in c["verdicts"]] == [k for k in before if before[k] != after[k]]
    assert any(e["name"].startswith("Table 4") for e in c["estimates"]) and c["count_differences"] == []
    assert main(["compare", "--conclusions", "--book", str(a), str(b)]) == 1
    assert "rl-seeds: contradicted -> " in capsys.readouterr().out
    (page,) = [p for name, p in compare_pages(a).items() if name.startswith("compare_conclusions-")]
    assert "**not** the same conclusions" in page and "rl-seeds" in page
