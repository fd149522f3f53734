"""The chapter of a pretrained-model run (edit_lib/book/real_model.py): written from the results JSON, with the
departures, both reads, the systems not run, the pools and the stage times; the embedded run beside it."""
from edit_lib.book.real_model import LIMITS, real_model_page
from edit_lib.config import load_profile


def _metrics(system, qwk, **extra):
    return [dict(system=system, seed=None, dataset="asap", split=s, subject="all", qwk=qwk, acc=0.5, mae=1.0, n=8,
                 n_invalid=2, **extra) for s in ("id_test", "ood_test")]


def _results(pool_size=5, golden=5):
    reads = [dict(system="Base zero-shot", read=r, dataset="asap", split="id_test", n=8, n_invalid=8 if r == "parsed"
                  else 0, n_forced=0 if r == "parsed" else 8, qwk=0.0123 if r == "parsed" else 0.4567, acc=0.1,
                  mae=2.0) for r in ("parsed", "parsed+forced")]
    pools = [dict(system="edit_sft", dataset="asap", golden_rollouts=golden, incorrect_rollouts=3, revisions_tried=3,
                  accepted=pool_size - golden, pool_size=pool_size)]
    return {
        "00_data": {"extra": {"datasets": {"asap": {}}}, "seconds": 2.0},
        "01_base_policy": {"tables": {"base_reads": reads,
                                      "base_metrics": [dict(system="Base", split="id_test", n=10, n_invalid=3)],
                                      "step_counts": [dict(dataset="asap", mean_steps=2.99, single_step_share=0.1)],
                                      "warmup_heldout_curve": [dict(step=0, qwk=0.0, acc=0.1, n=24, n_invalid=24),
                                                               dict(step=60, qwk=0.4321, acc=0.5, n=24, n_invalid=1)]},
                           "extra": {"warmup": {"build_seconds": 1234.0, "seconds": 900.0, "steps": 60,
                                                "pairs": {"matcher": {"asap-05": {"pairs": 120, "agree": 54}},
                                                          "roles": {"grading": {"kept": 768, "too_long": 0},
                                                                    "rewrite": {"kept": 61, "too_long": 3,
                                                                                "matcher_disagrees": 17}},
                                                          "trained": {"grading": [768, 48], "rewrite": [58, 15]}},
                                                "thresholds": {"asap-05": {"threshold": 0.2,
                                                                           "balanced_agreement": 0.476}}}},
                           "seconds": 600.0},
        "04_counterfactual_selection": {"tables": {"checklist_counts": [
            dict(dataset="asap", rubric="free_text", responses=3, written=3, verified=1, failed=2, truncated=0,
                 point_not_verbatim=2, clause_share=0.4)],
            "int_proposal_status": [dict(dataset="asap", status="ok", proposals=3),
                                    dict(dataset="asap", status="no_intervention_block", proposals=9)]},
            "seconds": 0.0},
        "09_significance": {"tables": {"response_bootstrap": [
            dict(dataset="asap", split="id_test", system="edit_sft", n_questions=2, n_responses=32, qwk=0.2,
                 qwk_lo=0.05, qwk_hi=0.35, delta=0.111, delta_lo=-0.02, delta_hi=0.25, delta_se=0.07, mde=0.196)]},
            "seconds": 0.0},
        "05_edit_sft": {"tables": {"pool_bookkeeping": pools}, "seconds": 120.0},
        "07_evaluation": {"tables": {"metrics": _metrics("base", 0.111) + _metrics("edit_sft", 0.222),
                                     "metrics_forced_read": _metrics("base", 0.333, n_forced=2)},
                          "extra": {"systems_not_run": ["base_dgpo", "wo_atomic"]}, "seconds": 300.0},
    }


def test_page_reads_every_number_from_the_results():
    prof = load_profile("cpu-real")
    page = real_model_page("cpu-real", _results(), prof, ("demo", {"07_evaluation": {"tables": {
        "metrics": _metrics("base", 0.999)}}}))
    assert page.startswith("# A real model on real data, on a CPU (run `cpu-real`)")
    assert "Warm-up as Base" in page and "Forced read" in page                 # the profile's departures
    assert "Key elements as a count-to-band scheme" in page and "mark-balanced" in page
    assert "0.012" in page and "0.457" in page                                  # both reads of 01
    assert "| asap | id_test | 0.111 | 0.222 |" in page                         # parse-only QWK per system
    assert "cannot rank the systems" not in page                                # QWK is not 0 everywhere
    assert "| asap | id_test | 0.333 |" in page                                 # with the forced read
    assert "run `demo`" in page and "0.999" in page                             # the embedded run, labelled
    assert "DGPO (`base_dgpo`), w/o Atomic (`wo_atomic`)" in page               # listed as not run
    assert "pool holds golden rollouts only: no repair" in page                                 # no accepted repair
    assert f"`05_edit_sft`: {LIMITS['05_edit_sft']}" in page and "08_rsr" not in page  # only stages that ran
    assert "3 rubric checklists were written against a free-text rubric" in page and "1 verified" in page
    assert "2 of 3 checklists failed verification: under `revision.checklist_failure = keep` the reviser sees" \
        in page                                                                  # no policy in extra: keep
    assert "Built in 20.6 min" in page and "| asap-05 | 120 | 54 | 0.450 |" in page  # the warm-up and matcher
    assert "| 60 | 0.432 |" in page                                             # its held-out curve
    assert "| rewrite | 61 | 3 | 17 | 0 | 58 | 15 |" in page                     # the warm-up's roles
    assert "Phase-1 roles in the warm-up" in page and "The warm-up teaches grading, checklist" in page
    assert "+0.111 [-0.020, +0.250]" in page and "0.196" in page                # response-level interval, MDE
    assert "| grading (Base, greedy) | 10 | 7 | 0.700 |" in page and "| InT proposal | 12 | 3 | 0.250 |" in page
    assert "Total 17.0 min" in page                                             # 2 + 600 + 120 + 300 s
    assert "(Table 1, QWK;" in page and "| History | ood |" in page             # the paper, labelled


def test_page_without_an_embedded_run_or_accepted_repairs_says_so():
    prof = load_profile("cpu-real")
    page = real_model_page("cpu-real", _results(pool_size=7, golden=5), prof, None)
    assert "pool holds golden rollouts only: no repair" not in page and "Beside the embedded world" not in page
    empty = real_model_page("cpu-real", _results(pool_size=0, golden=0), prof, None)
    assert "The EDIT-SFT pool is empty: no repair was accepted." in empty
    assert "pool holds golden rollouts only: no repair" not in empty
    # accepted repairs that no continuation carried to the gold mark: the outcome filter, with 04's cut count
    unkept = _results(pool_size=0, golden=0)
    unkept["05_edit_sft"]["tables"]["pool_bookkeeping"][0].update(accepted=10, kept=0)
    unkept["04_counterfactual_selection"]["extra"] = {"truncated_continuations": 18}
    unkept["04_counterfactual_selection"]["tables"]["continuations_by_step"] = [
        dict(dataset="asap", k=1, rewrites=5, continuations=10, parsed=4, reach_gold=0),
        dict(dataset="asap", k=3, rewrites=9, continuations=18, parsed=18, reach_gold=5)]
    page = real_model_page("cpu-real", unkept, prof, None)
    assert ("The EDIT-SFT pool is empty: 10 repairs were accepted, but no continuation of any reached the gold "
            "mark (kept 0); in 04, 18 continuations used their whole token budget without a final line.") in page
    assert "| edit_sft | asap | 0 | 3 | 3 | 10 | 0 | 0 |" in page
    assert "| continuation after a revised prefix | 28 | 22 | 0.786 |" in page   # 4 + 18 of 10 + 18
    assert "| asap | 1 | 5 | 10 | 4 | 0 |" in page and "by the step k it ends at" in page
    flat = _results()
    for r in flat["07_evaluation"]["tables"]["metrics"]:
        r["qwk"] = 0.0
    assert "this run cannot rank the systems" in real_model_page("cpu-real", flat, prof, None)
    bare = real_model_page("x", {}, load_profile("smoke"), None)
    assert "`07_evaluation` has not run." in bare and "Departures" not in bare


def test_checklist_limits_are_true_under_each_policy():
    import pandas as pd
    from edit_lib.book.real_model import checklist_limits
    counts = pd.DataFrame([dict(dataset="sas", rubric="free_text", responses=5, written=4, verified=1, failed=3,
                                truncated=1, point_not_verbatim=3, clause_share=0.5),
                           dict(dataset="sas", rubric="none", responses=2, written=0, verified=0, failed=0,
                                truncated=0, no_points=2, clause_share=float("nan"))])
    keep, drop, block = (" ".join(checklist_limits(counts, p)) for p in ("keep", "drop_lines", "block"))
    assert "4 rubric checklists were written against a free-text rubric" in keep and "1 verified" in keep
    assert "sees a failed checklist as written" in keep and "their rewrites get no checklist" in keep
    assert "lines that verify alone" in drop and "their rewrites get no checklist" in drop
    assert "blocks the repair" in block and "repairs are blocked (`checklist_no_points`)" in block
    assert "2 of 7 responses have no rubric text" in block
    assert checklist_limits(counts.iloc[:0], "keep") == []
    points = counts.iloc[:1].assign(rubric="points", failed=0, verified=4)
    assert checklist_limits(points, "block") == []  # listed points, every checklist verified: nothing to say


def test_a_separate_reviser_is_a_departure_with_its_own_role_examples():
    prof = load_profile("cpu-real", ["model.warmup.role_model=separate", "model.warmup.role_steps=48"])
    res = _results()
    res["01_base_policy"]["extra"]["warmup"]["pairs"]["roles"] = {"grading": {"kept": 768, "too_long": 0}}
    res["01_base_policy"]["extra"]["reviser"] = {"steps": 48, "seconds": 330.0, "pairs": {
        "roles": {"checklist": {"kept": 64, "too_long": 0, "matcher_disagrees": 9}},
        "trained": {"checklist": [64, 16]}}}
    page = real_model_page("cpu-real", res, prof, None)
    assert "**A separate reviser** (`role_model: separate`) learns checklist, rewrite, intervention" in page
    assert "(48 steps)" in page and "The separate reviser (`model.warmup.role_model: separate`): 48 steps in 5.5 min" in page
    assert "Examples per role in the reviser" in page and "| checklist | 64 | 0 | 9 | 0 | 64 | 16 |" in page
    assert "Examples per role in the warm-up" not in page  # the Base learnt grading only
    assert "The checklist, rewrite and InT proposal are the separate reviser's." in page
    shared = load_profile("cpu-real", ["model.warmup.role_model=shared"])
    assert "separate reviser" not in real_model_page("cpu-real", _results(), shared, None)
