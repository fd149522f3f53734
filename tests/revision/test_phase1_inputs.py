"""The Phase-1 inputs bundle (edit_lib/revision/phase1.py: ``Phase1Inputs``): ``from_profile`` fills the settings 04
and 05 used to pass by hand, its ``rewrite`` and ``continue_rewrites`` call the generators with exactly the arguments
the repair passes gave them, and Table 6's ablations (``repair_ablations``) reach the rewriter through it
with their own picks and rewriter."""
import pandas as pd

from edit_lib.config import RevisionConfig, load_profile
from edit_lib.revision import phase1 as PI
from edit_lib.revision.generation import REWRITE_COLUMNS, RewriteVariant

ROLL = dict(dataset="d", response_id="r1", rollout_id=0)


def _tables():
    steps = pd.DataFrame([dict(ROLL, k=k, delta_eps=0.1 * k) for k in (1, 2, 3)]
                         + [dict(ROLL, dataset="e", k=1, delta_eps=0.5)])
    t = {n: pd.DataFrame([dict(ROLL, name=n)]) for n in ("rollouts", "checklists", "percentiles", "rewrites",
                                                         "continuations")}
    return steps, t


def test_from_profile_takes_the_settings_from_the_profile():
    P = load_profile("smoke", ["run.seed=7", "selection.tie_margin=0.125"])
    steps, t = _tables()
    role_of = object()
    b = PI.Phase1Inputs.from_profile(P, "policy", {"d": None}, steps=steps, role_of=role_of, **t)
    assert b.settings == P.revision.resolved(P.rollouts) and b.settings.continuation_decoding.max_new_tokens > 0
    assert (b.tie_margin, b.seed, b.step_rule, b.role_of) == (0.125, 7, P.steps.rule, role_of)
    assert b.steps is steps and all(getattr(b, n) is t[n] for n in t) and b.policy == "policy"


def test_rewrite_and_continue_call_the_generators_with_the_bundle(monkeypatch):
    calls = []
    monkeypatch.setattr(PI, "write_rewrites", lambda *a, **kw: calls.append(("rewrite", a, kw)))
    monkeypatch.setattr(PI, "continue_revisions", lambda *a, **kw: calls.append(("continue", a, kw)))
    steps, t = _tables()
    settings, role_of = RevisionConfig(n_continuations=2), object()
    b = PI.Phase1Inputs("policy", {"d": None}, t["rollouts"], steps, t["checklists"], t["percentiles"],
                        t["rewrites"], t["continuations"], settings, 0.05, 7, role_of, "lines")
    units, rw = pd.DataFrame([dict(ROLL, k=2)]), pd.DataFrame([dict(unit_id="u")])
    b.rewrite(units, tag="/x")
    b.continue_rewrites(rw)
    assert calls == [
        ("rewrite", ("policy", {"d": None}, units, t["rollouts"], t["checklists"], t["percentiles"], 0.05, settings),
         dict(seed=7, role_of=role_of, step_rule="lines", tag="/x")),
        ("continue", ("policy", {"d": None}, rw, settings), dict(seed=7))]


def test_each_ablation_rewrites_its_own_picks_of_the_dataset_with_its_own_rewriter(monkeypatch):
    written, cached = [], []

    def fake_rewrites(self, units, variant):
        written.append((units[["dataset", "k"]].values.tolist(), variant))
        return pd.DataFrame([dict(ROLL, k=int(k), unit_id=f"u{k}", gold=2, max_mark=2, target="t", sub_steps=[],
                                  status="rewrite_parse", reasons=["rewrite_parse"], detail="", revised_prefix="",
                                  raw="", n_prompt_tokens=0, n_tokens=0) for k in units["k"]], columns=REWRITE_COLUMNS)

    monkeypatch.setattr(PI.Phase1Inputs, "rewrite", fake_rewrites)
    steps, t = _tables()
    b = PI.Phase1Inputs(None, {}, t["rollouts"], steps, t["checklists"], t["percentiles"], t["rewrites"],
                        t["continuations"], RevisionConfig(n_continuations=2), 0.05, 0)
    selected = pd.DataFrame([dict(ROLL, k=1, rule="edit"), dict(ROLL, k=3, rule="self_audit"),
                             dict(ROLL, dataset="e", k=1, rule="edit")])
    passes = PI.repair_ablations(b, selected, "d", skip=("wo_atomic",),
                                       cached=lambda name, make: cached.append(name) or make())
    assert list(passes) == ["wo_localiser", "wo_checklist"]
    assert written == [([["d", 3]], RewriteVariant(hints=False)), ([["d", 1]], RewriteVariant(checklist=False))]
    assert cached == ["rewrites_wo_localiser", "continuations_wo_localiser", "rewrites_wo_checklist",
                      "continuations_wo_checklist"]
    assert passes["wo_checklist"].outcome["rule"].tolist() == ["wo_checklist"]
    assert passes["wo_checklist"].continuations.empty  # nothing accepted: nothing continued
