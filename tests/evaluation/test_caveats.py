"""Caveats that travel: degenerate Base marks are found (edit_lib.evaluation.caveats), recorded by 01, shown first by every
later stage and kept in its results (edit_lib.runner.stage), and read by the claims ledger."""
import json

import pandas as pd
import pytest

from edit_lib.evaluation import caveats


def preds(marks: dict[str, list]) -> pd.DataFrame:
    return pd.DataFrame([dict(dataset=d, split="ood_test", mark=m) for d, ms in marks.items() for m in ms])


def test_one_mark_on_nine_tenths_is_a_caveat():
    real = preds({"asap": [10] * 622 + [8] * 5 + [None] * 3, "ok": [0, 1, 2, 3] * 10})
    real["mark"] = real["mark"].astype("Int64")
    dist, msgs = caveats.mark_caveats(real)
    assert len(msgs) == 1 and msgs[0].startswith("asap: Base gave mark 10 to 622 of 630 answers (99%")
    row = dist[(dist["dataset"] == "asap") & (dist["mark"] == "unparsed")].iloc[0]
    assert row["n"] == 3 and row["share"] == pytest.approx(3 / 630)
    assert dist.groupby("dataset")["share"].sum().tolist() == pytest.approx([1.0, 1.0])


def test_threshold_is_inclusive_and_unparsed_counts():
    _, msgs = caveats.mark_caveats(preds({"d": [1] * 9 + [2]}))
    assert len(msgs) == 1  # exactly 90%
    _, msgs = caveats.mark_caveats(preds({"d": [1] * 8 + [2] * 2}))
    assert msgs == []
    _, msgs = caveats.mark_caveats(preds({"d": [None] * 10}))
    assert "mark unparsed to 10 of 10" in msgs[0]


def test_missing_columns_are_named():
    with pytest.raises(ValueError, match="mark"):
        caveats.mark_distribution(pd.DataFrame({"dataset": ["a"]}))


def test_run_caveats_reads_caveats_and_vocab_coverage():
    res = {"extra": {"caveats": ["asap: degenerate"],
                     "vocab_coverage": {"asap2": dict(prompt_unk_share=0.4, answer_unk_share=0.5, over_threshold=True),
                                        "fine": dict(prompt_unk_share=0.0, answer_unk_share=0.0,
                                                     over_threshold=False)}}}
    got = caveats.run_caveats(res)
    assert got[0] == "asap: degenerate" and got[1].startswith("asap2: 40.0%") and len(got) == 2
    assert caveats.run_caveats(None) == [] and caveats.run_caveats({"extra": {}}) == []


def test_later_stages_show_and_keep_01s_caveats(tmp_path, capsys):
    import edit_lib.runner.stage as pl
    runs = str(tmp_path / "runs")
    first = pl.stage("01_base_policy", "smoke", [], runs)
    assert "caveats" not in first.extra
    first.extra["caveats"] = ["synth_sas: Base gave mark 2 to 95 of 100 answers"]
    first.save()
    capsys.readouterr()
    later = pl.stage("07_evaluation", "smoke", [], runs)
    shown = capsys.readouterr().out  # no IPython shell here: printed; in a notebook the same text as Markdown
    assert "**Caveats recorded by 01_base_policy" in shown and "**synth_sas: Base gave mark 2" in shown
    later.save()
    saved = json.loads(later.paths.results_file("07_evaluation").read_text())["extra"]
    assert saved["caveats"] == first.extra["caveats"] and saved["caveats_from"] == "01_base_policy"
    assert "caveats" not in pl.stage("00_data", "smoke", [], runs).extra


def test_no_01_results_no_caveats(tmp_path):
    import edit_lib.runner.stage as pl
    assert "caveats" not in pl.stage("09_significance", "smoke", [], str(tmp_path / "runs")).extra
