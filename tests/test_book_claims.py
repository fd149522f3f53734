"""The claims ledger's rules on hand-built results (every verdict of every claim is reachable), and the book's
cleaning of executed-notebook copies (progress noise out, run root relative, nothing else touched)."""
import copy
import json

import pytest

from edit_lib import claims
from edit_lib.book import clean_notebook, clean_stream
from edit_lib.claims import INCONCLUSIVE, NOT_RUN, NOT_SUPPORTED, SUPPORTED

S, N, I, R = SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE, NOT_RUN
SYSTEMS = ["base", "base_grpo", "edit_sft", "edit_sft_edit_rl"]


def res(stage, table, rows, **extra):
    return {stage: {"tables": {table: rows}, "extra": extra}}


def sig(delta, p):
    rows = [dict(dataset="synth_sas", scope="ood_test", system=s, delta=delta, delta_ci_low=delta - 0.1,
                 delta_ci_high=delta + 0.1, p_holm=p, n_paired=10.0) for s in ("edit_sft", "edit_sft_edit_rl")]
    return res("09_significance", "significance", rows, ci=0.95)


def t4(delta, lo):
    return res("07_evaluation", "table4", [dict(dataset="synth_bio", metric="qwk", delta=delta, delta_ci_low=lo,
                                                delta_ci_high=delta + 1, n_seeds=3, wins=2)])


def t5(edit_rl):
    rows = [dict(dataset="synth_bio", system="edit_sft_grpo", id_qwk=0.5, id_acc=0.5, ood_qwk=0.5, ood_acc=0.5),
            dict(dataset="synth_bio", system="edit_sft_edit_rl", id_qwk=edit_rl, id_acc=0.6, ood_qwk=0.6, ood_acc=0.6)]
    return res("07_evaluation", "table5", rows)


def main_table(table, subject, split, edit_rl, metrics=("qwk",)):
    rows = [dict(dataset="synth_x", subject=subject, split=split, metric=m, paper_subject="Biology",
                 **{s: 0.5 for s in SYSTEMS}) | {"edit_sft_edit_rl": edit_rl} for m in metrics]
    return res("07_evaluation", table, rows)


def t6(*qwks):
    names = ["edit_sft", "wo_localiser", "wo_checklist", "wo_atomic"]
    return res("07_evaluation", "table6", [dict(dataset="synth_sas", system=n, qwk=q) for n, q in zip(names, qwks)])


def t12(edit, random, n=100):
    return res("04_counterfactual_selection", "table12", [
        dict(dataset="synth_sas", rule="edit", successes=edit, revisions=n),
        dict(dataset="synth_sas", rule="random", successes=random, revisions=n)])


def t10(grpo, edit_rl):
    """(kl, jsd_early, jsd_late) per arm."""
    return res("06_rl", "table10_divergence", [
        dict(dataset="synth_bio", system=s, kl=v[0], jsd=v[0] / 4, jsd_early=v[1], jsd_late=v[2])
        for s, v in (("edit_sft_grpo", grpo), ("edit_sft_edit_rl", edit_rl))])


def t11(r, p, signals=("G_a", "G_p")):
    rows = [dict(signal=s, level=lv, reduction="sum", r=r, p=p) for s in signals for lv in ("step", "rollout mean")]
    return res("03_audit_validation", "table11", rows, reduction="sum")


def t7(edit_sft, base=0.5):
    return res("08_rsr_interventions", "table7", [dict(dataset="synth_bio", system=s, ae_rsr_overall=v)
                                                  for s, v in (("base", base), ("edit_sft", edit_sft))])


def t13(edit, intsft, n=30):
    return res("07_evaluation", "table13", [
        dict(dataset="synth_sas", subject="physics", system="edit_sft", marked_zero=edit, gold_zero=n),
        dict(dataset="synth_sas", subject="physics", system="int_sft", marked_zero=intsft, gold_zero=n)])


CASES = {
    "edit-rl-significant": {S: sig(0.1, 0.001), N: sig(-0.05, 0.2), I: sig(0.1, 0.3), R: {}},
    "edit-sft-significant": {S: sig(0.1, 0.001), N: sig(0.0, 1.0), I: sig(0.02, 0.06), R: t4(0.1, 0.05)},
    "rl-seeds": {S: t4(0.02, 0.01), N: t4(-0.01, -0.05), I: t4(0.02, -0.01), R: sig(0.1, 0.01)},
    "sft-rl-grid": {S: t5(0.7), N: t5(0.4), I: t5(0.5), R: {}},
    "ood-best": {S: main_table("table2", "synth_x", "ood", 0.7), N: main_table("table2", "synth_x", "ood", 0.4),
                 I: main_table("table2", "synth_x", "ood", 0.5), R: main_table("table2", "synth_x", "ood", None)},
    "sas-avg-best": {S: main_table("table1", "Avg", "ood", 0.9, ("acc", "qwk")),
                     N: main_table("table1", "Avg", "ood", 0.9, ("acc", "mae")),  # higher MAE is worse
                     I: main_table("table1", "Avg", "ood", 0.5, ("acc",)), R: {}},
    "localiser": {S: t6(0.5, 0.4), N: t6(0.4, 0.5), I: t6(0.5, 0.495), R: t6(0.5)},
    "ablations": {S: t6(0.5, 0.4, 0.4, 0.4), N: t6(0.5, 0.4, 0.6, 0.4), I: t6(0.5, 0.4, 0.5, 0.4), R: {}},
    "counterfactual": {S: t12(40, 10), N: t12(10, 12), I: t12(12, 10), R: t12(0, 0, n=0)},
    "twice-as-close": {S: t10((0.06, 0, 0), (0.02, 0, 0)), N: t10((0.06, 0, 0), (0.05, 0, 0)),
                       I: t10((1e-6, 0, 0), (1e-6, 0, 0)), R: {}},
    "drift-position": {S: t10((0.06, 0.01, 0.02), (0.03, 0.01, 0.01)), N: t10((0.06, 0.04, 0.01), (0.03, 0, 0)),
                       I: t10((1e-6, 0, 1e-6), (1e-6, 0, 0)), R: {}},
    "audit-separates": {S: t11(0.7, 1e-9), N: t11(-0.2, 0.9), I: t11(0.2, 0.01), R: t11(0.7, 1e-9, ("G_rho",))},
    "rubric-negligible": {S: t11(0.08, 1e-5, ("G_rho",)), N: t11(0.8, 1e-9, ("G_rho",)),
                          I: t11(0.2, 0.01, ("G_rho",)), R: t11(0.7, 1e-9)},
    "most-rule-responsive": {S: t7(0.3), N: t7(0.6), I: t7(0.5), R: res("08_rsr_interventions", "table7", [
        dict(dataset="synth_bio", system="base", ae_rsr_overall=0.5)])},
    "zero-credit": {S: t13(20, 2), N: t13(2, 20), I: t13(12, 10), R: res("07_evaluation", "table13", [
        dict(dataset="synth_sas", subject="physics", system="edit_sft", marked_zero=1, gold_zero=3)])},
}


def test_every_claim_has_a_case_for_every_verdict():
    assert {c.id for c in claims.CLAIMS} == set(CASES)
    assert all(set(cases) == set(claims.VERDICTS) for cases in CASES.values())
    assert len(claims.CLAIMS) >= 8 and len({c.id for c in claims.CLAIMS}) == len(claims.CLAIMS)


@pytest.mark.parametrize("cid,verdict", [(c, v) for c, cases in CASES.items() for v in cases])
def test_each_verdict_is_reachable(cid, verdict):
    v = next(v for v in claims.evaluate(CASES[cid][verdict]) if v.claim.id == cid)
    assert v.verdict == verdict, (cid, v.found)
    assert v.found and v.claim.rule and v.claim.sentence and v.claim.where


def test_claims_use_the_papers_datasets_when_07_names_them():
    """Table 12's claim is on the SAS-like and Biology-like datasets; a Physics-like loss does not count."""
    r = t12(40, 10)
    r["04_counterfactual_selection"]["tables"]["table12"] += [
        dict(dataset="synth_phys", rule="edit", successes=0, revisions=100),
        dict(dataset="synth_phys", rule="random", successes=50, revisions=100)]
    verdict = lambda: next(v for v in claims.evaluate(r) if v.claim.id == "counterfactual")  # noqa: E731
    assert verdict().verdict == NOT_SUPPORTED  # without 07 every dataset counts
    row = dict(split="ood", metric="none")
    r["07_evaluation"] = {"tables": {"table1": [dict(row, dataset="synth_sas", subject="Avg")],
                                     "table2": [dict(row, dataset="synth_phys", subject="synth_phys",
                                                     paper_subject="Physics")]}}
    assert verdict().verdict == SUPPORTED and "synth_phys" not in verdict().found


def test_newcombe_interval():
    lo_hi = claims._props("d", "x", (16, 146), (8, 146))[2]
    assert "0.055 [-0.010, 0.121]" in lo_hi  # Newcombe (1998) hybrid score interval


# ------------------------------------------------------------------ cleaning the notebook copies

TQDM = ("/x/.venv/lib/python3.11/site-packages/tqdm/auto.py:21: TqdmWarning: IProgress not found. Please update\n"
        "  from .autonotebook import tqdm as notebook_tqdm\n")


def test_clean_stream_drops_progress_bars_and_keeps_text():
    assert clean_stream("\rgenerate:  50%|#####     | 32/64 [00:01<00:01, 25.2it/s]") == ""
    assert clean_stream("\rLoading weights: 100%|##########| 24/24 [00:00<00:00, 7917.52it/s]") == ""
    assert clean_stream("\rstep:  3%|3   | 1/30 [00:09<04:21, 9.01s/it]\nkept line\n") == "kept line\n"
    assert clean_stream(TQDM + "after\n") == "after\n"
    assert clean_stream("done 100% | of it\nWARNING: x\n") == "done 100% | of it\nWARNING: x\n"


def test_clean_notebook_only_touches_copies():
    nb = {"cells": [
        {"cell_type": "markdown", "source": "# 00 · Data\n", "metadata": {}},
        {"cell_type": "code", "metadata": {"tags": ["injected-parameters"]}, "outputs": [],
         "source": 'profile = "smoke"\nrun_root = "/tmp/r/runs0"\n'},
        {"cell_type": "code", "metadata": {}, "source": "x", "outputs": [
            {"output_type": "stream", "name": "stderr", "text": ["\rgen:  0%|  | 0/4 [00:00<?, ?it/s]"]},
            {"output_type": "stream", "name": "stderr", "text": "\n"},
            {"output_type": "stream", "name": "stdout", "text": "/tmp/r/runs0/smoke/results/00_data.json\n"},
            {"output_type": "display_data", "metadata": {},
             "data": {"text/html": "<td>/tmp/r/runs0/smoke/a</td>", "text/plain": "/tmp/r/runs01 stays"}}]}]}
    before = copy.deepcopy(nb)
    out = clean_notebook(nb, ["/tmp/r/runs0"], label="*Run `smoke`*")
    assert nb == before
    text = json.dumps(out)
    assert "/tmp/r/runs0/" not in text and "it/s]" not in text and 'run_root = \\"runs\\"' in text
    assert "/tmp/r/runs01 stays" in text  # another folder that merely starts with the same name
    assert [c["cell_type"] for c in out["cells"]] == ["markdown", "markdown", "code", "code"]
    assert out["cells"][1]["source"] == "*Run `smoke`*"
    kept = out["cells"][3]["outputs"]
    assert [o["output_type"] for o in kept] == ["stream", "display_data"]
    assert kept[0]["text"] == "runs/smoke/results/00_data.json\n"
    assert kept[1]["data"]["text/html"] == "<td>runs/smoke/a</td>"


def test_audit_claims_without_labelled_steps_are_not_run():
    """03 on a run without an annotator (cpu-real) has table 11 rows with no test (r and p None): not run."""
    for cid in ("audit-separates", "rubric-negligible"):
        v = next(v for v in claims.evaluate(t11(None, None, ("G_a", "G_p", "G_rho"))) if v.claim.id == cid)
        assert v.verdict == claims.NOT_RUN and "no test (no labelled steps)" in v.found, (cid, v.found)
