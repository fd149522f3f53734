"""The claims ledger's rules on hand-built intervals (every verdict kind is reachable, every claim reaches the
kinds its table allows, and each rule moves only with what lies inside its sentence's scope), and the book's
cleaning of executed-notebook copies (progress noise out, run root relative, nothing else touched)."""
import copy
import json

import pytest
from scipy.stats import norm

from edit_lib.book import claim_rules, claims
from edit_lib.book.build import clean_notebook, clean_stream
from edit_lib.book.claims import CONTRADICTED, INCONCLUSIVE, NOT_MEANINGFUL, NOT_RUN, PARTLY_RUN, SUPPORTED

S, C, I, P, R = SUPPORTED, CONTRADICTED, INCONCLUSIVE, PARTLY_RUN, NOT_RUN


def res(stage, table, rows, **extra):
    return {stage: {"tables": {table: rows}, "extra": extra}}


def merge(*parts):
    out = {}
    for p in parts:
        for stage, r in p.items():
            out.setdefault(stage, {"tables": {}, "extra": {}})
            for name, rows in r["tables"].items():  # the same table from two parts: rows of both
                out[stage]["tables"][name] = out[stage]["tables"].get(name, []) + rows
            out[stage]["extra"].update(r["extra"])
    return out


def sig_row(d, s, lo, hi, p=0.001, delta=None, few=False, status="run", scope="ood_test", se=0.05):
    """One row of 09's ``significance`` (``p`` both raw and Holm's: the ledger reads each where it needs it)."""
    return dict(dataset=d, scope=scope, system=s, family="paper", status=status,
                delta=(lo + hi) / 2 if delta is None else delta, delta_ci_low=lo, delta_ci_high=hi, p=p, p_holm=p,
                p_shown="too few questions" if few else f"{p:.3g}", n_paired=10.0, mde=0.2, delta_se=se,
                few_questions=few)


def sig(lo, hi, p=0.001, delta=None, few=False, datasets=("synth_sas",), status="run"):
    rows = [sig_row(d, s, lo, hi, p, delta, few, status) for d in datasets for s in ("edit_sft", "edit_sft_edit_rl")]
    return res("09_significance", "significance", rows, ci=0.95)


def pw(dataset, system, versus, lo, hi, kind="pair", scope="ood_test", few=False):
    return dict(dataset=dataset, scope=scope, system=system, versus=versus, kind=kind, delta=(lo + hi) / 2,
                delta_ci_low=lo, delta_ci_high=hi, mde=0.1, n_paired=20, few_questions=few)


def pairwise(*rows):
    return res("09_significance", "pairwise", list(rows), ci=0.95)


def t4_row(d, lo, hi, wins=3, n=3):
    return dict(dataset=d, metric="qwk", delta=(lo + hi) / 2, delta_ci_low=lo, delta_ci_high=hi, n_seeds=n, wins=wins,
                mde=0.05)


def t4(lo, hi, datasets=("synth_bio",), wins=3):
    return res("07_evaluation", "table4", [t4_row(d, lo, hi, wins) for d in datasets])


def t5(edit_rl):
    rows = [dict(dataset="synth_bio", system="edit_sft_grpo", id_qwk=0.5, id_acc=0.5, ood_qwk=0.5, ood_acc=0.5),
            dict(dataset="synth_bio", system="edit_sft_edit_rl", id_qwk=edit_rl, id_acc=0.6, ood_qwk=0.6, ood_acc=0.6)]
    return res("07_evaluation", "table5", rows)


ALL = claim_rules.SYSTEM_COLUMNS


def main_table(table, edit_rl=0.6, metrics=("qwk",), datasets=(("synth_bio", "Biology"), ("synth_phys", "Physics")),
               drop=()):
    rows = [dict(dataset=d, subject="Avg" if table == "table1" else d, split="ood", metric=m, paper_subject=ps,
                 **{s: 0.5 for s in ALL if s not in drop}) | {"edit_sft_edit_rl": edit_rl}
            for d, ps in datasets for m in metrics]
    return res("07_evaluation", table, rows)


def ood(lo, hi, **kw):
    return merge(main_table("table2", **kw), pairwise(*[pw(d, "edit_sft_edit_rl", "base_grpo", lo, hi, "runner-up")
                                                      for d in ("synth_bio", "synth_phys")]))


def subject_avg(lo, hi, metrics=("qwk",), few=False, versus="base_dgpo"):
    """09's ``subject_average``: EDIT-RL's advantage over its runner-up on Table 1's subject mean, per metric."""
    return res("09_significance", "subject_average", [
        dict(metric=m, system="edit_sft_edit_rl", versus=versus, value=0.6, versus_value=0.5, delta=(lo + hi) / 2,
             delta_ci_low=lo, delta_ci_high=hi, mde=0.1, subjects=3, n_questions=37, few_questions=few)
        for m in metrics])


def sas(lo, hi, metrics=("qwk",)):
    return merge(main_table("table1", metrics=metrics, datasets=(("synth_sas", None),)), subject_avg(lo, hi, metrics))


def t6(qwks, intervals=()):
    names = ["edit_sft", "wo_localiser", "wo_checklist", "wo_atomic"]
    return merge(res("07_evaluation", "table6", [dict(dataset="synth_sas", system=n, qwk=q) for n, q in zip(names, qwks)]),
                 pairwise(*[pw("synth_sas", "edit_sft", n, lo, hi) for n, (lo, hi) in zip(names[1:], intervals)]))


def t12(edit, random, n=100, datasets=("synth_sas",), revisions=None):
    """``n`` rewrites per rule (Success@4's denominator, App. F); ``revisions`` (default n) the kept revisions."""
    return res("04_counterfactual_selection", "table12", [
        dict(dataset=d, rule=rule, successes=k, rewrites=n, revisions=n if revisions is None else revisions)
        for d in datasets for rule, k in (("edit", edit), ("random", random))])


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


def mapped(*parts):
    """07's Tables 1 and 2 name synth_sas SAS-like and synth_bio Biology-like."""
    return merge(*parts, res("07_evaluation", "table1", [dict(dataset="synth_sas", subject="Avg", split="ood",
                                                              metric="none")]),
                 res("07_evaluation", "table2", [dict(dataset="synth_bio", subject="synth_bio", split="ood",
                                                      metric="none", paper_subject="Biology")]))


CASES = {
    "edit-rl-significant": {S: sig(0.05, 0.15), C: sig(-0.15, -0.05, p=0.01), I: sig(-0.178, 0.027, p=0.4), R: {}},
    "edit-sft-significant": {S: sig(0.05, 0.15), C: sig(-0.2, 0.0), I: sig(0.02, 0.1, p=0.2), R: t4(0.1, 0.2)},
    "rl-seeds": {S: t4(0.01, 0.03), C: t4(-0.05, -0.01, wins=0), I: t4(-0.007, 0.030), R: sig(0.1, 0.2),
                 P: mapped(t4(0.01, 0.03))},
    "sft-rl-grid": {I: t5(0.7), R: {}},
    "ood-best": {S: ood(0.01, 0.05), C: ood(-0.05, -0.01), I: main_table("table2", edit_rl=0.503),
                 P: ood(0.01, 0.05, drop=("int_sft",)), R: main_table("table2", edit_rl=None)},
    "sas-avg-best": {C: sas(-0.05, -0.01, ("acc", "qwk")), I: sas(-0.01, 0.05, ("acc", "qwk")),
                     S: sas(0.01, 0.05, ("acc", "within1", "mae", "qwk")), R: {}},
    "localiser": {S: t6((0.5, 0.4), [(0.01, 0.2)]), C: t6((0.4, 0.5), [(-0.2, -0.01)]), I: t6((0.5, 0.4)),
                  R: t6((0.5,))},
    "ablations": {S: t6((0.5, 0.4, 0.4, 0.4), [(0.01, 0.2)] * 3), C: t6((0.5, 0.4, 0.6, 0.4), [(0.01, 0.2), (-0.2, -0.1)]),
                  I: t6((0.5, 0.4, 0.5, 0.4), [(0.01, 0.2), (-0.1, 0.2), (0.01, 0.2)]),
                  P: t6((0.5, 0.4), [(0.01, 0.2)]), R: {}},
    "counterfactual": {S: t12(40, 10), C: t12(10, 40), I: t12(12, 10), R: t12(0, 0, n=0), P: mapped(t12(40, 10))},
    "twice-as-close": {I: t10((0.06, 0, 0), (0.02, 0, 0)), R: {}},
    "drift-position": {I: t10((0.06, 0.01, 0.02), (0.03, 0.01, 0.01)), R: {}},
    "audit-separates": {S: t11(0.7, 1e-9), C: t11(-0.2, 0.99), I: t11(0.2, 0.01), R: t11(0.7, 1e-9, ("G_rho",))},
    "rubric-negligible": {S: t11(0.08, 1e-5, ("G_rho",)), C: t11(-0.3, 0.99, ("G_rho",)),
                          I: t11(0.8, 1e-9, ("G_rho",)), R: t11(0.7, 1e-9)},
    "most-rule-responsive": {I: t7(0.3), R: res("08_rsr_interventions", "table7", [
        dict(dataset="synth_bio", system="base", ae_rsr_overall=0.5)])},
    "zero-credit": {S: t13(20, 2), C: t13(2, 20), I: t13(12, 10), R: res("07_evaluation", "table13", [
        dict(dataset="synth_sas", subject="physics", system="edit_sft", marked_zero=1, gold_zero=3)])},
}
CAVEAT = res("01_base_policy", "base_metrics", [{}], caveats=["synth_sas: Base gave mark 10 to 622 of 630 answers"])


def test_every_claim_has_cases_and_every_verdict_kind_is_reached():
    assert {c.id for c in claims.CLAIMS.values()} == set(CASES) == set(claims.CLAIMS)
    assert all({I, R} <= set(cases) for cases in CASES.values())
    assert set().union(*CASES.values()) | {NOT_MEANINGFUL} == set(claims.VERDICTS)
    assert len(claims.CLAIMS) >= 8 and all(name == c.id for name, c in claims.CLAIMS.items())
    with pytest.raises(ValueError, match="claim 'localiser' is registered already"):  # an id names one claim
        claims.CLAIMS.add("localiser", claims.CLAIMS["localiser"])
    with pytest.raises(KeyError, match="did you mean 'localiser'"):
        claims.CLAIMS["localizer"]


def verdict(cid, results):
    return next(v for v in claims.evaluate(results) if v.claim.id == cid)


@pytest.mark.parametrize("cid,kind", [(c, v) for c, cases in CASES.items() for v in cases])
def test_each_verdict_is_reachable(cid, kind):
    v = verdict(cid, CASES[cid][kind])
    assert v.verdict == kind, (cid, v.found)
    assert v.found and v.claim.rule and v.claim.sentence and v.claim.where


@pytest.mark.parametrize("cid", list(CASES))
def test_caveats_of_01_make_every_run_claim_not_meaningful(cid):
    kind = S if S in CASES[cid] else I
    v = verdict(cid, merge(CASES[cid][kind], CAVEAT))
    assert v.verdict == NOT_MEANINGFUL and "622 of 630" in v.found, v.found
    assert verdict(cid, merge(CASES[cid][R], CAVEAT)).verdict in (R, NOT_MEANINGFUL)
    vocab = res("01_base_policy", "vocab_coverage", [{}], vocab_coverage={"asap": dict(
        prompt_unk_share=0.6, answer_unk_share=0.7, over_threshold=True)})
    assert verdict(cid, merge(CASES[cid][kind], vocab)).verdict == NOT_MEANINGFUL


def test_no_verdict_from_a_point_estimate():
    """The two cases of issue 20: a best-of with a 0.003 margin and no paired interval, and EDIT-SFT's
    -0.068 [-0.178, 0.027] against Base, are inconclusive, with what is missing or the MDE beside the paper's."""
    v = verdict("ood-best", main_table("table2", edit_rl=0.503))
    assert v.verdict == INCONCLUSIVE and "no paired interval" in v.found and "runner-up" in v.found
    v = verdict("edit-sft-significant", sig(-0.178, 0.027, p=0.9, delta=-0.068))
    assert v.verdict == INCONCLUSIVE and "-0.068 [-0.178, +0.027]" in v.found
    mde = (norm.ppf(1 - 0.05 / 6 / 2) + norm.ppf(0.8)) * 0.05  # rank 1 of 6 (tied p): Holm's 0.05 / 6
    assert f"MDE {mde:.3f} (80% power, at Holm's threshold 0.05/6 = 0.008333) vs the paper's +0.072" in v.found


def test_significance_needs_holm_and_enough_questions():
    assert verdict("edit-rl-significant", sig(0.05, 0.15, p=0.2)).verdict == INCONCLUSIVE  # interval, not Holm
    v = verdict("edit-rl-significant", sig(0.05, 0.15, few=True))
    assert v.verdict == INCONCLUSIVE and "too few questions" in v.found


def test_interval_ends_decide():
    assert claim_rules.by_interval(0.001, 0.1) == S and claim_rules.by_interval(-0.1, 0.0) == C
    assert claim_rules.by_interval(-0.1, 0.1) == I and claim_rules.by_interval(None, 0.1) == R


def test_claims_use_the_papers_datasets_when_07_names_them():
    """Table 12's claim is on the SAS-History-like and Biology-like datasets; a Physics-like loss does not count."""
    r = t12(40, 10)
    r["04_counterfactual_selection"]["tables"]["table12"] += [
        dict(dataset="synth_phys", rule="edit", successes=0, rewrites=100, revisions=100),
        dict(dataset="synth_phys", rule="random", successes=50, rewrites=100, revisions=100)]
    one = lambda: verdict("counterfactual", r)  # noqa: E731
    assert one().verdict == CONTRADICTED  # without 07 every dataset counts
    row = dict(split="ood", metric="none")
    r["07_evaluation"] = {"tables": {"table1": [dict(row, dataset="synth_sas", subject="Avg")],
                                     "table2": [dict(row, dataset="synth_phys", subject="synth_phys",
                                                     paper_subject="Physics")]}}
    assert one().verdict == PARTLY_RUN and "synth_phys" not in one().found  # no Biology-like dataset
    assert "the run lacks Private-Biology" in one().found


def test_newcombe_interval():
    lo_hi = claim_rules.proportions_verdict("d", "x", (16, 146), (8, 146))[2]
    assert "+0.055 [-0.010, +0.121]" in lo_hi  # Newcombe (1998) hybrid score interval
    assert "MDE" in lo_hi  # inconclusive: the MDE from the interval's SE is shown


# ------------------------------------------------------------------ each rule on its sentence's scope only
# Each pair of fabricated results differs only outside the claim's scope (the verdict must not move) or only inside
# it (it must). The run is laid out as the paper profile: one SAS dataset per subject (sas_h History, sas_g
# Geography, their subject average 'sas_h+sas_g'), Biology- and Physics-like datasets with ID and OOD splits.

def paper_like(*parts):
    t1 = [dict(dataset=d, subject=s, split="ood", metric="none", paper_subject=s)
          for d, s in (("sas_h", "History"), ("sas_g", "Geography"), ("sas_h+sas_g", "Avg"))]
    t2 = [dict(dataset=d, subject=d, split="ood", metric="none", paper_subject=s)
          for d, s in (("synth_bio", "Biology"), ("synth_phys", "Physics"))]
    return merge(*parts, res("07_evaluation", "table1", t1), res("07_evaluation", "table2", t2))


def t3_scopes(pooled=(0.05, 0.15), subject=(0.05, 0.15)):
    """09's pooled SAS scope (09 names it by the sorted subjects) and each subject's own OOD scope."""
    rows = [sig_row("sas_g+sas_h", s, *pooled, scope="all held-out") for s in ("edit_sft", "edit_sft_edit_rl")]
    rows += [sig_row(d, s, *subject) for d in ("sas_h", "sas_g") for s in ("edit_sft", "edit_sft_edit_rl")]
    return paper_like(res("09_significance", "significance", rows, ci=0.95))


@pytest.mark.parametrize("cid", ["edit-rl-significant", "edit-sft-significant"])
def test_table3_is_judged_on_the_pooled_sas_questions_only(cid):
    assert verdict(cid, t3_scopes()).verdict == SUPPORTED
    v = verdict(cid, t3_scopes(subject=(-0.15, -0.05)))  # per-subject rows: shown, not judged (App. H)
    assert v.verdict == SUPPORTED and "`sas_g+sas_h`" in v.found
    assert "per subject, shown, not judged: `sas_g` -0.100 [-0.150, -0.050], `sas_h` -0.100" in v.found
    assert verdict(cid, t3_scopes(pooled=(-0.15, -0.05))).verdict == CONTRADICTED


def test_table3_without_a_pooled_scope_is_not_run():
    v = verdict("edit-rl-significant", paper_like(res("09_significance", "significance", [
        sig_row(d, "edit_sft_edit_rl", 0.05, 0.15) for d in ("sas_h", "sas_g")], ci=0.95)))
    assert v.verdict == NOT_RUN and "no 09 scope pools every SAS-like dataset" in v.found


def test_holm_judged_mde_is_at_the_comparisons_holm_threshold():
    """The MDE beside Table 3's verdict is (z_{1 - a/2} + z_0.8) * SE at a = alpha / (m - rank + 1) (App. G, m = 6),
    computed here by hand; an absent member counts as p = 1 and another scope's p-values do not count."""
    p = dict(base_grpo=0.04, base_dgpo=0.2, int_sft=0.003, int_sft_int_rl=None, edit_sft=0.01, edit_sft_edit_rl=0.5)
    rows = [sig_row("sas", s, 0.01, 0.2, p=1.0 if v is None else v, se=0.04, scope="all held-out") | dict(p=v)
            for s, v in p.items()]
    rows += [sig_row("sas", s, 0.01, 0.2, p=1e-4) for s in p]  # the same systems in another scope
    assert claim_rules.holm_level(rows[4], rows, 0.05) == (pytest.approx(0.05 / 5), 2, 6)  # edit_sft: 2nd smallest
    assert claim_rules.holm_level(rows[3], rows, 0.05)[1:] == (6, 6)  # no p: counts as 1, ranked last
    assert claim_rules.holm_level(rows[5], rows[:1] + rows[2:], 0.05)[1:] == (4, 6)  # a member the table lacks: m = 6
    tie = [r | dict(p=0.003) if r["system"] == "edit_sft" else r for r in rows]
    assert claim_rules.holm_level(tie[4], tie, 0.05)[1] == 1  # tied with int_sft: the best rank, as Holm's p
    mde, level = claim_rules.holm_mde(rows[4], rows, 0.05)
    assert mde == pytest.approx((norm.ppf(1 - 0.01 / 2) + norm.ppf(0.8)) * 0.04)
    assert level == "at Holm's threshold 0.05/5 = 0.01"
    v = verdict("edit-sft-significant", paper_like(res("09_significance", "significance", [
        r | dict(dataset="sas_h+sas_g") for r in rows[:6]], ci=0.95)))
    assert f"MDE {mde:.3f} (80% power, at Holm's threshold 0.05/5 = 0.01)" in v.found
    assert mde > 0.04 * 2.80 and "MDE 0.200" not in v.found  # not the row's unadjusted 5% MDE


def seeds(sas=(0.01, 0.03), bio=(0.01, 0.03), sas_wins=3, bio_wins=3, n=3):
    return paper_like(res("07_evaluation", "table4", [t4_row("sas_h", *sas, sas_wins, n),
                                                      t4_row("synth_bio", *bio, bio_wins, n)]))


def test_rl_seeds_judges_wins_on_both_and_the_ci_on_biology_only():
    assert verdict("rl-seeds", seeds()).verdict == SUPPORTED
    v = verdict("rl-seeds", seeds(sas=(-0.007, 0.030)))  # the paper's own SAS-History CI: shown, not judged
    assert v.verdict == SUPPORTED and "`sas_h wins`: EDIT-RL ahead on 3/3 seeds; CI shown, not judged" in v.found
    assert verdict("rl-seeds", seeds(bio=(-0.007, 0.030))).verdict == INCONCLUSIVE
    assert verdict("rl-seeds", seeds(sas_wins=2)).verdict == CONTRADICTED
    assert verdict("rl-seeds", seeds(bio_wins=2)).verdict == CONTRADICTED
    assert verdict("rl-seeds", seeds(sas_wins=2, bio_wins=2, n=2)).verdict == INCONCLUSIVE  # "three" runs


def ood_scopes(ood=(0.01, 0.05), held=(0.01, 0.05), few=False, responses=None, versus="base_grpo"):
    """09's EDIT-RL-vs-runner-up rows on OOD and on all held-out answers; ``responses``: the response-level
    interval (``response_runner_up``) against ``versus``."""
    pairs = [pw(d, "edit_sft_edit_rl", "base_grpo", *iv, "runner-up", scope, few and scope == "ood_test")
             for d in ("synth_bio", "synth_phys") for scope, iv in (("ood_test", ood), ("all held-out", held))]
    rr = [dict(dataset=d, split="ood_test", system="edit_sft_edit_rl", versus=versus, delta=sum(responses) / 2,
               delta_lo=responses[0], delta_hi=responses[1], mde=0.05, n_questions=2, n_responses=400)
          for d in ("synth_bio", "synth_phys")] if responses else []
    return merge(main_table("table2"), pairwise(*pairs), res("09_significance", "response_runner_up", rr))


def test_ood_best_reads_ood_answers_only():
    assert verdict("ood-best", ood_scopes()).verdict == SUPPORTED
    v = verdict("ood-best", ood_scopes(held=(-0.05, -0.01)))  # ID answers in "all held-out": not read
    assert v.verdict == SUPPORTED and "all held-out" not in v.found and "question-level bootstrap" in v.found
    assert verdict("ood-best", ood_scopes(ood=(-0.05, -0.01))).verdict == CONTRADICTED


def test_ood_best_uses_the_response_level_bootstrap_below_min_questions():
    v = verdict("ood-best", ood_scopes(few=True))
    assert v.verdict == INCONCLUSIVE and "no response-level comparison" in v.found
    v = verdict("ood-best", ood_scopes(few=True, responses=(0.01, 0.05)))
    assert v.verdict == SUPPORTED and "response-level bootstrap" in v.found and "2 questions' 400 responses" in v.found
    assert verdict("ood-best", ood_scopes(few=True, responses=(-0.05, -0.01))).verdict == CONTRADICTED
    assert verdict("ood-best", ood_scopes(few=True, responses=(0.01, 0.05), versus="int_sft")).verdict == INCONCLUSIVE
    assert verdict("ood-best", ood_scopes(responses=(-0.05, -0.01))).verdict == SUPPORTED  # enough questions: App. G


def sas_scopes(avg=(0.01, 0.05), subject=(-0.05, -0.01), pooled=(0.01, 0.05)):
    """Table 1 with two subjects and their average; 09's subject-mean comparison (``avg``), App. G's question-pooled
    one (``pooled``) and each subject's (``subject``)."""
    t1 = [dict(dataset=d, subject=s, split="ood", metric="qwk", paper_subject=s, **{c: 0.5 for c in ALL})
          | {"edit_sft_edit_rl": 0.6 if s == "Avg" else 0.4}
          for d, s in (("sas_h", "History"), ("sas_g", "Geography"), ("sas_h+sas_g", "Avg"))]
    pairs = [pw("sas_g+sas_h", "edit_sft_edit_rl", "base_dgpo", *pooled, "runner-up", "all held-out")]
    pairs += [pw(d, "edit_sft_edit_rl", "base_dgpo", *subject, "runner-up") for d in ("sas_h", "sas_g")]
    return merge(res("07_evaluation", "table1", t1), pairwise(*pairs), subject_avg(*avg, versus="int_sft"))


def test_sas_avg_best_judges_table1s_subject_mean_not_app_gs_pooled_qwk():
    v = verdict("sas-avg-best", sas_scopes())  # EDIT-RL behind on each subject: not judged
    assert v.verdict == SUPPORTED and "sas_h qwk" not in v.found and "subject_average" in v.found
    assert "runner-up int_sft" in v.found  # chosen on the subject mean, as 09 chose it
    assert verdict("sas-avg-best", sas_scopes(subject=(0.01, 0.05))).verdict == SUPPORTED
    assert verdict("sas-avg-best", sas_scopes(avg=(-0.05, -0.01))).verdict == CONTRADICTED
    assert verdict("sas-avg-best", sas_scopes(pooled=(-0.05, -0.01))).verdict == SUPPORTED  # another quantity
    few = merge(main_table("table1", datasets=(("synth_sas", None),)), subject_avg(0.01, 0.05, few=True))
    assert verdict("sas-avg-best", few).verdict == INCONCLUSIVE
    part = subject_avg(0.01, 0.05)
    part["09_significance"]["tables"]["subject_average"][0]["subjects_missing"] = "sas_synth/history"
    v = verdict("sas-avg-best", merge(main_table("table1", datasets=(("synth_sas", None),)), part))
    assert v.verdict == NOT_RUN and "EDIT-RL not graded on sas_synth/history" in v.found


def zeros(physics=(20, 2), history=(20, 2)):
    rows = [dict(dataset="sas_h", subject="History", system=s, marked_zero=k, gold_zero=30)
            for s, k in zip(("edit_sft", "int_sft"), history)]
    rows += [dict(dataset="sas_p", subject="Physics", system=s, marked_zero=k, gold_zero=30)
             for s, k in zip(("edit_sft", "int_sft"), physics)]
    t1 = [dict(dataset=d, subject=s, split="ood", metric="none")
          for d, s in (("sas_h", "History"), ("sas_p", "Physics"))]
    return merge(res("07_evaluation", "table13", rows), res("07_evaluation", "table1", t1))


def test_zero_credit_judges_physics_only():
    v = verdict("zero-credit", zeros(history=(2, 20)))  # History: InT-SFT ahead, as in the paper's own numbers
    assert v.verdict == SUPPORTED and "sas_h" not in v.found and "`sas_p Physics`" in v.found
    assert verdict("zero-credit", zeros(physics=(2, 20))).verdict == CONTRADICTED
    no_physics = zeros()
    no_physics["07_evaluation"]["tables"]["table13"] = no_physics["07_evaluation"]["tables"]["table13"][:2]
    v = verdict("zero-credit", no_physics)
    assert v.verdict == NOT_RUN and "no Physics responses" in v.found


def repairs(history=(40, 10), geography=(40, 10), biology=(40, 10)):
    return paper_like(*[t12(*k, datasets=(d,)) for d, k in (("sas_h", history), ("sas_g", geography),
                                                             ("synth_bio", biology))])


def test_counterfactual_judges_sas_history_and_biology_only():
    assert verdict("counterfactual", repairs()).verdict == SUPPORTED
    v = verdict("counterfactual", repairs(geography=(10, 40)))  # not one of Table 12's datasets
    assert v.verdict == SUPPORTED and "sas_g" not in v.found
    assert verdict("counterfactual", repairs(history=(10, 40))).verdict == CONTRADICTED
    assert verdict("counterfactual", repairs(biology=(10, 40))).verdict == CONTRADICTED
    v = verdict("counterfactual", paper_like(t12(40, 10, datasets=("synth_bio",))))
    assert v.verdict == PARTLY_RUN and "the run lacks SAS-History" in v.found


def test_sas_history_is_the_history_dataset_or_the_one_sas_like_dataset():
    assert claim_rules.sas_history(paper_like()) == {"sas_h"}
    assert claim_rules.sas_history(mapped()) == {"synth_sas"}  # one SAS-like dataset (several subjects or one)
    assert claim_rules.stands_for(paper_like(), "sas_h") == {"SAS", "SAS-History"}
    assert claim_rules.stands_for(paper_like(), "sas_g") == {"SAS"}


def test_table12_fallback_divides_by_rewrites():
    """App. F: Success@4 is the fraction of rewrites; 12/20 vs 5/20 is supported where 12/200 vs 5/200 (the kept
    revisions as denominator) would be inconclusive."""
    v = verdict("counterfactual", t12(12, 5, n=20, revisions=200))
    assert v.verdict == SUPPORTED and "12/20 vs 5/20" in v.found and "/200" not in v.found
    v = verdict("counterfactual", t12(0, 0, n=0, revisions=10))
    assert v.verdict == NOT_RUN and "no rewrites" in v.found


# ------------------------------------------------------------------ cleaning the notebook copies

TQDM = ("/x/.venv/lib/python3.11/site-packages/tqdm/auto.py:21: TqdmWarning: IProgress not found. Please update\n"
        "  from .autonotebook import tqdm as notebook_tqdm\n")


def test_clean_stream_drops_progress_bars_and_keeps_text():
    assert clean_stream("\rgenerate:  50%|#####     | 32/64 [00:01<00:01, 25.2it/s]") == ""
    assert clean_stream("\rLoading weights: 100%|##########| 24/24 [00:00<00:00, 7917.52it/s]") == ""
    assert clean_stream("\rstep:  3%|3   | 1/30 [00:09<04:21, 9.01s/it]\nkept line\n") == "kept line\n"
    # the engine's bar counts units (engine._progress)
    assert clean_stream("\rengine units:  43%|####3     | 3/7 [00:06<00:07,  1.93s/unit]\nx\n") == "x\n"
    assert clean_stream("\rengine units: 100%|##########| 7/7 [00:08<00:00,  2.1unit/s]") == ""
    assert clean_stream(TQDM + "after\n") == "after\n"
    # a Trainer's plain-text bar under the runner carries its last logged values after the rate
    assert clean_stream("\rtrain: 100%|##########| 4/4 [00:02<00:00, 1.9it/s, loss=0.31, kl=0.002]\nx\n") == "x\n"
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


def test_table4_says_what_would_detect_the_papers_effect():
    """The SD bound solves seed_mde(sd, n) = effect; the seed count is the first with seed_mde <= effect (checked
    against the power of the paired t test, power.t_test_power, an independent noncentral-t computation)."""
    from edit_lib.power import seed_mde, t_test_power

    text = claim_rules.seeds_to_see(0.021, 0.02, 3)
    sd_needed = float(text.split("at most ")[1].split(" ")[0])
    assert seed_mde(sd_needed, 3) == pytest.approx(0.021, rel=1e-2)  # the SD is printed to 4 decimals
    n = int(text.split("need ")[1].split(" ")[0])
    assert t_test_power(0.021 / 0.02, n) >= 0.8 - 1e-6 > t_test_power(0.021 / 0.02, n - 1)
    assert "more than 30" in claim_rules.seeds_to_see(0.001, 0.5, 3) and claim_rules.seeds_to_see(None, 0.02, 3) == ""


def test_table12_says_how_often_the_rerank_changed_the_pick():
    r = res("04_counterfactual_selection", "selection_counts", [
        dict(dataset="d", rule="belief_shift_only", rollouts_with_picks=40, same_steps_as_edit=38),
        dict(dataset="d", rule="edit", rollouts_with_picks=40, same_steps_as_edit=40)])
    assert claim_rules.rerank_share(r, "d") == "; the audit's re-rank changed Alg. 1's pick on 2 of 40 rollouts (5%)"
    assert claim_rules.rerank_share(r, "other") == ""


def test_every_verdict_with_a_known_mde_states_it():
    """A supported or contradicted verdict says what the run could have detected too, not only an inconclusive
    one; an unknown MDE is 'n/a' only where the verdict is inconclusive."""
    from edit_lib.book.claim_rules import INCONCLUSIVE, SUPPORTED, interval_text
    assert interval_text("Δ", 0.2, 0.1, 0.3, 0.087, 0.072, SUPPORTED) == \
        "Δ +0.200 [+0.100, +0.300], MDE 0.087 (80% power) vs the paper's +0.072"
    assert interval_text("Δ", 0.2, 0.1, 0.3, None, None, SUPPORTED) == "Δ +0.200 [+0.100, +0.300]"
    assert interval_text("Δ", 0.0, -0.1, 0.1, float("nan"), None, INCONCLUSIVE).endswith("MDE n/a (80% power)")


# ------------------------------------------------------------------ each rule on its sentence's dataset only

def test_tables_5_10_and_6_read_only_the_dataset_their_sentence_names():
    """Under paper-sas the grid runs on SAS-History: the Private-Biology claims of Tables 5 and 10 read 'not run',
    not SAS-History's numbers; Table 6 (SAS-History) reads nothing of a Biology-like dataset."""
    grid = [dict(dataset="synth_sas", system=s, id_qwk=None, id_acc=None, ood_qwk=q, ood_acc=q)
            for s, q in (("edit_sft_grpo", 0.5), ("edit_sft_edit_rl", 0.6))]
    v = verdict("sft-rl-grid", mapped(res("07_evaluation", "table5", grid)))
    assert v.verdict == NOT_RUN and "the run lacks Private-Biology" in v.found and "synth_sas" not in v.found
    assert verdict("sft-rl-grid", mapped(t5(0.7))).verdict == INCONCLUSIVE  # synth_bio stands for Private-Biology
    div = [dict(r, dataset="synth_sas") for r in t10((0.06, 0, 0), (0.02, 0, 0))["06_rl"]["tables"]
           ["table10_divergence"]]
    for cid in ("twice-as-close", "drift-position"):
        v = verdict(cid, mapped(res("06_rl", "table10_divergence", div)))
        assert v.verdict == NOT_RUN and "Private-Biology" in v.found
        assert verdict(cid, mapped(t10((0.06, 0, 0), (0.02, 0, 0)))).verdict == INCONCLUSIVE
    bio = {k: [dict(r, dataset="synth_bio") for r in rows] for k, rows in
           {"t6": t6((0.5, 0.4), [(0.01, 0.2)])["07_evaluation"]["tables"]["table6"],
            "pw": t6((0.5, 0.4), [(0.01, 0.2)])["09_significance"]["tables"]["pairwise"]}.items()}
    on_bio = mapped(res("07_evaluation", "table6", bio["t6"]), pairwise(*bio["pw"]))
    for cid in ("localiser", "ablations"):
        v = verdict(cid, on_bio)
        assert v.verdict == NOT_RUN and "SAS-History" in v.found
    assert verdict("localiser", mapped(t6((0.5, 0.4), [(0.01, 0.2)]))).verdict == SUPPORTED


# ------------------------------------------------------------------ magnitudes: the paper's number against the interval

@pytest.mark.parametrize("interval, size", [((0.01, 0.2), claim_rules.INSIDE), ((0.05, 0.2), claim_rules.ABOVE),
                                            ((0.001, 0.03), claim_rules.BELOW)])
def test_the_localisers_43_points_against_the_interval(interval, size):
    v = verdict("localiser", t6((0.5, 0.4), [interval]))
    assert v.verdict == SUPPORTED and v.magnitude == size
    assert "4.3 points (+0.043)" in v.sized and f"[{interval[0]:+.3f}, {interval[1]:+.3f}]" in v.sized
    assert verdict("localiser", t6((0.5, 0.4))).magnitude == claim_rules.NO_INTERVAL  # no paired interval in 09
    assert verdict("ablations", t6((0.5, 0.4, 0.4, 0.4), [interval] * 3)).magnitude == ""  # no number to size


def gain_ratio(lo, hi, defined=True, systems=("edit_sft", "edit_sft_edit_rl")):
    return res("09_significance", "gain_ratio", [
        dict(dataset="sas_g+sas_h", scope="all held-out", system=s, ratio=(lo + hi) / 2, ratio_ci_low=lo,
             ratio_ci_high=hi, defined=defined, denominator_ci_low=0.01 if defined else -0.02,
             denominator_ci_high=0.05) for s in systems])


@pytest.mark.parametrize("cid", ["edit-rl-significant", "edit-sft-significant"])
def test_two_to_three_times_larger_against_the_ratios_interval(cid):
    def size(*parts):
        v = verdict(cid, merge(t3_scopes(), *parts))
        assert v.verdict == SUPPORTED  # the direction verdict does not move with the size
        return v
    assert size(gain_ratio(1.5, 2.5)).magnitude == claim_rules.INSIDE  # overlaps the range 2-3
    assert size(gain_ratio(3.2, 6.0)).magnitude == claim_rules.ABOVE
    assert size(gain_ratio(0.2, 1.8)).magnitude == claim_rules.BELOW
    v = size(gain_ratio(0.2, 1.8, defined=False))
    assert v.magnitude == claim_rules.NO_INTERVAL and "reaches 0" in v.sized
    assert size().magnitude == claim_rules.NO_INTERVAL  # no `gain_ratio` in 09
    assert "two to three times" in size(gain_ratio(1.5, 2.5)).sized


def test_never_and_64_percent_against_each_systems_recall():
    v = verdict("zero-credit", t13(19, 0))  # 19/30 and 0/30
    assert v.verdict == SUPPORTED and v.magnitude == claim_rules.INSIDE
    assert "int_sft's zero recall 0/30" in v.sized and "never" in v.sized and "64%" in v.sized
    v = verdict("zero-credit", t13(29, 3))  # EDIT-SFT near all of them, InT-SFT not never
    assert v.magnitude == claim_rules.ABOVE and v.sized.count(claim_rules.ABOVE) == 2
    assert verdict("zero-credit", t13(20, 2)).magnitude == "mixed"  # EDIT-SFT as the paper's, InT-SFT above 0


def test_the_ledger_shows_magnitudes_in_its_table_and_summary_line():
    from edit_lib.book.pages import claims_page
    page = claims_page("x", merge(t6((0.5, 0.4), [(0.05, 0.2)]), t13(19, 0)))
    summary = page[page.index("Verdicts here:"):].split("\n")[0]
    assert "1 the interval above it" in summary and "1 the paper's value inside" in summary
    assert "| localiser |" in page and "* **Magnitude:** the interval above it (" in page


def paper_sas_results():
    """Fabricated results shaped as the `paper-sas` profile's: one dataset per SAS subject (Table 1 with their
    average), the SFT x RL grid, Table 10 and Table 6 on `sas_history`, no Private-Science dataset."""
    names = ("sas_history", "sas_geography", "sas_physics")
    t1 = [dict(dataset=d, subject=s, split="ood", metric=m, paper_subject=s, **{c: 0.5 for c in ALL})
          | {"edit_sft_edit_rl": 0.6} for d, s in [*zip(names, ("History", "Geography", "Physics")),
                                                   ("+".join(names), "Avg")] for m in ("acc", "qwk")]
    grid = [dict(r, dataset="sas_history") for r in t5(0.7)["07_evaluation"]["tables"]["table5"]]
    div = [dict(r, dataset="sas_history") for r in t10((0.06, 0, 0), (0.02, 0, 0))["06_rl"]["tables"]
           ["table10_divergence"]]
    abl = [dict(r, dataset="sas_history") for r in t6((0.5, 0.4), [(0.01, 0.2)])["07_evaluation"]["tables"]["table6"]]
    pw_ = [dict(r, dataset="sas_history") for r in t6((0.5, 0.4), [(0.01, 0.2)])["09_significance"]["tables"]
           ["pairwise"]]
    return merge(res("07_evaluation", "table1", t1), res("07_evaluation", "table5", grid),
                 res("06_rl", "table10_divergence", div), res("07_evaluation", "table6", abl), pairwise(*pw_),
                 subject_avg(0.01, 0.05, ("acc", "qwk")))


def test_a_paper_sas_shaped_ledger_reads_each_claim_on_its_sentences_dataset_and_quantity():
    got = {v.claim.id: v for v in claims.evaluate(paper_sas_results())}
    for cid in ("sft-rl-grid", "twice-as-close", "drift-position"):  # Private-Biology's: not SAS-History's numbers
        assert got[cid].verdict == NOT_RUN and "the run lacks Private-Biology" in got[cid].found, cid
    assert got["localiser"].verdict == SUPPORTED and "`sas_history wo_localiser`" in got["localiser"].found
    assert got["localiser"].magnitude == claim_rules.INSIDE  # [+0.010, +0.200] holds the paper's 4.3 points
    avg = got["sas-avg-best"]
    assert avg.verdict == SUPPORTED and "subject average" in avg.found and "subject_average" in avg.found
    assert "`SAS-Avg acc`" in avg.found and "`sas_history qwk`" not in avg.found
