"""App. G's Holm family is always the six comparisons against Base (an absent system is "not run" and never
shrinks m), too few question clusters show "too few questions" instead of a p, each paired difference carries
its bootstrap SE and MDE, and the pairwise comparisons the claims ledger needs."""
import numpy as np
import pandas as pd
import pytest

from edit_lib.evaluation import significance as sg
from edit_lib.power import normal_mde


def pq(systems, n_q=12, shift=None, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.3, 0.8, n_q)
    shift = shift or {}
    return pd.DataFrame([dict(dataset="sas", system=s, question_id=f"q{i}",
                              qwk=float(base[i] + shift.get(s, 0.0) + rng.normal(0, 0.05)))
                         for s in systems for i in range(n_q)])


def test_holm_uses_m_six_when_systems_are_absent():
    sig = sg.significance_table(pq(["base", "edit_sft", "edit_sft_edit_rl"], shift={"edit_sft": 0.1}),
                                n_boot=500, seed=0)
    paper = sig[sig["family"] == "paper"].set_index("system")
    assert list(paper.index) == list(sg.PAPER_FAMILY)  # all six rows, in the paper's order
    absent = [s for s in sg.PAPER_FAMILY if s not in ("edit_sft", "edit_sft_edit_rl")]
    assert (paper.loc[absent, "status"] == "not run").all() and paper.loc[absent, "p"].isna().all()
    assert paper.loc[absent, "p_holm"].isna().all() and (paper.loc[absent, "p_shown"] == "not run").all()
    p = paper.loc[["edit_sft", "edit_sft_edit_rl"], "p"].to_numpy()
    want = sg.holm(np.r_[p, np.ones(4)])[:2]  # the absent four count as p = 1: m stays 6
    np.testing.assert_allclose(paper.loc[["edit_sft", "edit_sft_edit_rl"], "p_holm"], want)
    assert paper.loc["edit_sft", "p_holm"] == pytest.approx(min(1.0, 6 * paper.loc["edit_sft", "p"]))
    # the old behaviour (m = systems present) would have been 2 * p: strictly smaller here
    assert paper.loc["edit_sft", "p_holm"] > 2 * paper.loc["edit_sft", "p"]


def test_too_few_questions_shows_the_interval_and_text_not_a_p():
    sig = sg.significance_table(pq(["base", "edit_sft"], n_q=4, shift={"edit_sft": 0.1}), n_boot=300,
                                min_questions=10)
    row = sig[sig["system"] == "edit_sft"].iloc[0]
    assert row["few_questions"] and row["p_shown"] == sg.TOO_FEW and not np.isnan(row["p_holm"])  # raw kept
    t3 = sg.format_table3(sig, {"base": "Base"}).set_index("Method")
    cell = t3.loc["edit_sft", "Δ vs Base (Holm p)"]
    assert cell.endswith("(too few questions)") and "p=" not in cell
    assert t3.loc["edit_sft", "Δ [95% CI]"].startswith("[")
    assert t3.loc["base_grpo", "Δ vs Base (Holm p)"] == "not run"


def test_delta_se_and_mde_come_from_the_bootstrap():
    res = sg.cluster_bootstrap(pq(["base", "edit_sft"], n_q=30), ["base", "edit_sft"], n_boot=2000, seed=3)
    row = res["table"].set_index("system").loc["edit_sft"]
    db = res["delta_boot"][1]
    assert row["delta_se"] == pytest.approx(np.nanstd(db, ddof=1))
    assert row["mde"] == pytest.approx(normal_mde(row["delta_se"]))
    assert np.isnan(res["table"].set_index("system").loc["base", "mde"])
    t3 = sg.format_table3(sg.significance_table(pq(["base", "edit_sft"], n_q=30), n_boot=500), {})
    assert t3["MDE (80% power)"].str.match(r"^\d\.\d{3}$").sum() == 1


def test_pairwise_runner_up_and_ablation_pairs():
    systems = ["base", "base_grpo", "edit_sft", "edit_sft_edit_rl", "wo_localiser"]
    data = pq(systems, n_q=20, shift={"base_grpo": 0.05, "edit_sft": 0.1, "edit_sft_edit_rl": 0.12,
                                      "wo_localiser": 0.0})
    pw = sg.pairwise_table(data, n_boot=500, seed=0).set_index("kind")
    ru = pw.loc["runner-up"]
    assert ru["system"] == "edit_sft_edit_rl" and ru["versus"] == "edit_sft"  # the best rival by pooled QWK
    mean = lambda s: data.loc[data["system"] == s, "qwk"].mean()  # noqa: E731
    assert ru["delta"] == pytest.approx(mean("edit_sft_edit_rl") - mean("edit_sft"))
    assert ru["delta_ci_low"] < ru["delta"] < ru["delta_ci_high"] and ru["mde"] > 0
    pair = pw.loc["pair"]
    assert pair["system"] == "edit_sft" and pair["versus"] == "wo_localiser" and pair["delta_ci_low"] > 0
