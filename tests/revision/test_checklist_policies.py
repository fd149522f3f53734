"""04's Table 12 tables (App. F): by checklist policy (edit_lib/revision/phase1.py), a subset of the
policies (`revision.compare_checklist_policies = false`) repairs under the chosen policy only, from the stage's own
rewrites and continuations and with no generation, and an unknown or empty subset is refused; the continuations
by the step their revised prefix ends at (edit_lib/revision/pool.py), counted against a hand count."""
import pandas as pd
import pytest

from edit_lib.config import RevisionConfig
from edit_lib.revision.generation import per_rule
from edit_lib.revision.phase1 import Phase1Inputs, table12_by_policy
from edit_lib.revision.pool import outcome_filter, success_at_n

ROLL = dict(dataset="d", response_id="r1", rollout_id=0)


def _frames():
    selected = pd.DataFrame([dict(ROLL, k=1, rule="edit"), dict(ROLL, k=2, rule="random"),
                             dict(ROLL, k=1, rule="belief_shift_only")])
    steps = pd.DataFrame([dict(ROLL, k=1), dict(ROLL, k=2)])
    rewrites = pd.DataFrame([dict(ROLL, k=k, unit_id=f"u{k}", gold=2, status="ok", reasons="", target="t",
                                  sub_steps="s", revised_prefix="p") for k in (1, 2)])
    # unit u1's second continuation reaches gold 2; every continuation of u2 misses it
    marks = {("u1", 0): 1, ("u1", 1): 2, ("u2", 0): 0, ("u2", 1): 1}
    continuations = pd.DataFrame([dict(unit_id=u, continuation=c, mark=m) for (u, c), m in marks.items()])
    return selected, steps, rewrites, continuations


def _inputs(steps, rewrites, continuations, settings):
    """The Phase-1 bundle of these tables; policy=None: any generation would fail."""
    return Phase1Inputs(None, {}, pd.DataFrame(), steps, pd.DataFrame(), pd.DataFrame(), rewrites, continuations,
                        settings, 0.0, 0)


def test_chosen_policy_only_uses_the_stage_rewrites_and_generates_nothing():
    selected, steps, rewrites, continuations = _frames()
    settings = RevisionConfig(n_continuations=2, checklist_failure="keep")

    def no_cache(name, fn):
        raise AssertionError(f"policy 'keep' alone must not write new rewrites ({name})")

    # policy=None: any generation would fail; the chosen policy reuses the stage's rewrites
    t = table12_by_policy(_inputs(steps, rewrites, continuations, settings), selected, cached=no_cache,
                          policies=("keep",))
    assert t["policy"].unique().tolist() == ["keep"]
    rev, cont = per_rule(selected, rewrites, continuations)
    expected = success_at_n(outcome_filter(rev, cont, 2))
    got = t.drop(columns="policy").set_index("rule").sort_index()
    assert got["success_at_n"].to_dict() == expected.set_index("rule")["success_at_n"].to_dict()
    assert got.loc["edit", "success_at_n"] == 1.0 and got.loc["random", "success_at_n"] == 0.0


@pytest.mark.parametrize("policies", [(), ("keep", "ignore")])
def test_unknown_or_empty_policy_subset_is_refused(policies):
    selected, steps, rewrites, continuations = _frames()
    with pytest.raises(ValueError, match="checklist policies must be a non-empty subset"):
        table12_by_policy(_inputs(steps, rewrites, continuations, RevisionConfig(n_continuations=2)), selected,
                          policies=policies)


def test_the_switch_defaults_on_and_cpu_real_turns_it_off():
    from edit_lib.config import load_profile
    assert RevisionConfig().compare_checklist_policies is True
    assert load_profile("cpu-real").revision.compare_checklist_policies is False
    assert load_profile("smoke", ["revision.compare_checklist_policies=false"]).revision.compare_checklist_policies \
        is False


def test_continuations_by_step_counts_each_depth_by_hand():
    from edit_lib.revision.pool import continuations_by_step
    _, _, rewrites, continuations = _frames()
    rejected = dict(ROLL, k=3, unit_id="u3", gold=2, status="rewrite_parse", reasons="", target="t", sub_steps="s",
                    revised_prefix="p")
    rw = pd.concat([rewrites, pd.DataFrame([rejected])], ignore_index=True)
    unparsed = pd.DataFrame([dict(unit_id="u2", continuation=2, mark=None)])
    t = continuations_by_step(rw, pd.concat([continuations, unparsed], ignore_index=True))
    # u1 (k=1): marks 1, 2 -> 2 parsed, 1 reaches gold 2; u2 (k=2): 0, 1 and an unparsed one; u3 was rejected
    assert t.to_dict("records") == [dict(dataset="d", k=1, rewrites=1, continuations=2, parsed=2, reach_gold=1),
                                    dict(dataset="d", k=2, rewrites=1, continuations=3, parsed=2, reach_gold=0)]
    assert continuations_by_step(rw, continuations.iloc[:0]).empty


def test_kept_revisions_are_counted_per_rule_and_step_by_hand():
    from edit_lib.revision.pool import kept_by_rule_and_step
    rows = [("edit", 1, "ok", True), ("edit", 1, "ok", False), ("edit", 3, "locality", False),
            ("random", 1, "ok", True), ("random", 2, "checklist_failed", False), ("random", 2, "ok", True)]
    outcome = pd.DataFrame([dict(dataset="d", rule=r, k=k, status=st, kept=kept) for r, k, st, kept in rows])
    t = kept_by_rule_and_step(outcome)  # a checklist-blocked target was never rewritten: not counted
    assert t.to_dict("records") == [dict(dataset="d", rule="edit", k=1, rewritten=2, accepted=2, kept=1),
                                    dict(dataset="d", rule="edit", k=3, rewritten=1, accepted=0, kept=0),
                                    dict(dataset="d", rule="random", k=1, rewritten=1, accepted=1, kept=1),
                                    dict(dataset="d", rule="random", k=2, rewritten=1, accepted=1, kept=1)]
    assert kept_by_rule_and_step(outcome.iloc[:0]).empty
