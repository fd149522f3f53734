"""The results page's headline figure (edit_lib/book/headline.py): each comparison's estimate, interval and MDE from
the results JSON, the paper's value only where the paper reports that comparison."""
from pathlib import Path

import pytest

from edit_lib.book.headline import draw, headline_rows
from edit_lib.power import normal_mde


def _results():
    return {
        "07_evaluation": {"tables": {
            "table1": [{"dataset": "sas"}], "table2": [{"dataset": "bio", "paper_subject": "Biology"}],
            "table4": [{"dataset": "bio", "metric": "qwk", "delta": 0.01, "delta_ci_low": -0.02, "delta_ci_high": 0.04,
                        "mde": 0.05}]}},
        "09_significance": {"tables": {"significance": [
            {"dataset": "sas", "scope": "ood_test", "system": "edit_sft", "delta": 0.05, "delta_ci_low": -0.01,
             "delta_ci_high": 0.11, "mde": 0.08, "delta_se": 0.03},
            {"dataset": "bio", "scope": "all held-out", "system": "edit_sft", "delta": 0.2, "delta_ci_low": 0.1,
             "delta_ci_high": 0.3, "mde": 0.1},
            {"dataset": "bio", "scope": "ood_test", "system": "edit_sft", "delta": 9.9}]}},
        "04_counterfactual_selection": {"tables": {"table12_contrasts": [
            {"dataset": "bio", "rival": "random", "delta": 0.03, "delta_ci_low": -0.01, "delta_ci_high": 0.07,
             "delta_se": 0.02},
            {"dataset": "bio", "rival": "belief_shift_only", "delta": 0.0}]}},
    }


def test_rows_take_the_claims_scope_and_the_papers_values():
    t = headline_rows(_results()).set_index(["panel", "dataset"])
    t3 = t.loc["Table 3: QWK vs Base (questions)"]
    assert t3.loc["bio", "estimate"] == 0.2  # 'all held-out' before 'ood_test', as the claims ledger reads it
    assert t3.loc["sas", "paper"] == pytest.approx(0.072) and t3.loc["bio", "paper"] != t3.loc["bio", "paper"]
    # Table 3's MDE at the Holm threshold the ledger judges it by: rank 1 of m = 6 (no p here) -> alpha / 6
    assert t3.loc["sas", "mde"] == pytest.approx(normal_mde(0.03, alpha=0.05 / 6))
    assert t3.loc["sas", "mde"] > normal_mde(0.03)
    t4 = t.loc["Table 4: EDIT-RL − GRPO (seeds)"].loc["bio"]
    assert (t4["estimate"], t4["mde"], t4["paper"]) == (0.01, 0.05, pytest.approx(0.021))  # Private-Biology
    t12 = t.loc["Table 12: Success@N, EDIT − random"].loc["bio"]
    assert t12["mde"] == pytest.approx(normal_mde(0.02)) and t12["paper"] == pytest.approx((33.5 - 30.0) / 100)


def test_figure_is_drawn_and_an_empty_run_has_none(tmp_path):
    assert draw(headline_rows(_results()), tmp_path / "h.png") == tmp_path / "h.png"
    assert Path(tmp_path / "h.png").stat().st_size > 1000
    assert headline_rows({}).empty and draw(headline_rows({}), tmp_path / "none.png") is None
