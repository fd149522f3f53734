"""A separate reviser (``model.warmup.role_model: separate``; edit_lib/model/warmup.py, edit_lib/train/warmup.py,
``model.policy.reviser_for``): the Base is the grading-only warm-up of the same values, the reviser a second warm-up
of the Phase-1 roles under its own key, 04-05 prompt it for the checklist, rewrites and InT proposals while the
policy continues every revision; the shared default changes nothing."""
import json

import pandas as pd
import pytest
import torch

from edit_lib.config import ConfigError, WarmupConfig, load_profile
from edit_lib.data.registry import build_all
from edit_lib.model import warmup as WB
from edit_lib.model.policy import load_policy_from_profile, reviser_for
from edit_lib.revision import phase1
from edit_lib.train import warmup as W

SMALL = ["model.warmup.steps=2", "model.warmup.batch_size=2", "model.warmup.responses_per_question=2",
         "model.warmup.lora_r=4", "model.warmup.role_responses_per_question=2", "model.warmup.role_batch_size=2"]
ROLES = "model.warmup.roles=[grading, checklist, rewrite, intervention]"


def _profile(*more):
    return load_profile("smoke", [*SMALL, *more])


def test_role_model_is_checked():
    with pytest.raises(ConfigError, match="role_model: 'shared' or 'separate'"):
        WarmupConfig(role_model="both")
    for roles in (["grading", "continuation"], ["checklist", "rewrite"]):  # no reviser role, or nothing to grade
        with pytest.raises(ConfigError, match="needs grading and at least one of them"):
            WarmupConfig(role_model="separate", roles=roles)
    with pytest.raises(ConfigError, match="role_steps"):
        WarmupConfig(role_steps=0)


def test_the_separate_base_is_the_grading_only_warmup_and_the_reviser_has_its_own_key(fresh_cache):
    sep = _profile(ROLES, "model.warmup.role_model=separate")
    grading = _profile("model.warmup.roles=[grading]")
    assert WB.warmup_key(sep) == WB.warmup_key(grading)  # one cache folder for both
    first = _profile(ROLES, "model.warmup.role_model=separate", "model.warmup.role_phase=first")
    assert WB.warmup_key(first) == WB.warmup_key(grading)  # no role batch left to order
    assert WB.warmup_key(_profile(ROLES)) != WB.warmup_key(grading)  # shared: the roles train with the Base
    rev = WB.reviser_warmup(sep.model.warmup)
    assert rev.roles == ["checklist", "rewrite", "intervention"] and rev.steps == sep.model.warmup.role_steps
    assert rev.curve_every == 0 and rev.guard == "off" and rev.role_model == "shared"
    assert WB.reviser_dir(sep) not in (None, WB.warmup_dir(sep))
    longer = _profile(ROLES, "model.warmup.role_model=separate", "model.warmup.role_steps=3")
    assert WB.reviser_dir(longer) != WB.reviser_dir(sep) and WB.warmup_dir(longer) == WB.warmup_dir(sep)
    assert WB.reviser_dir(grading) is None and WB.reviser_dir(load_profile("smoke")) is None
    first = WB.reviser_warmup(_profile(ROLES, "model.warmup.role_model=separate", "model.warmup.role_phase=first")
                              .model.warmup)
    assert first.role_phase == "mixed"  # the reviser has no grading batches to put the roles before
    assert WB.reviser_report(sep) is None  # not trained yet
    # under shared, role_steps is read by nothing, so it moves no key
    assert WB.warmup_key(_profile(ROLES, "model.warmup.role_steps=3")) == WB.warmup_key(_profile(ROLES))


def test_reviser_for_is_the_policy_unless_separate_and_names_01_when_untrained(fresh_cache):
    sentinel = object()
    assert reviser_for(_profile(ROLES), sentinel) is sentinel
    assert reviser_for(load_profile("smoke"), sentinel) is sentinel
    with pytest.raises(FileNotFoundError, match="01_base_policy trains it"):
        reviser_for(_profile(ROLES, "model.warmup.role_model=separate"), sentinel)


def test_the_bundle_rewrites_with_the_reviser_and_continues_with_the_policy(monkeypatch):
    seen = {}
    monkeypatch.setattr(phase1, "write_rewrites", lambda who, *a, **k: seen.setdefault("rewrite", who))
    monkeypatch.setattr(phase1, "continue_revisions", lambda who, *a, **k: seen.setdefault("continue", who))
    empty = pd.DataFrame()
    make = lambda reviser: phase1.Phase1Inputs.from_profile(  # noqa: E731
        load_profile("smoke"), "policy", {}, rollouts=empty, steps=empty, checklists=empty, percentiles=empty,
        rewrites=empty, continuations=empty, reviser=reviser)
    b = make("reviser")
    b.rewrite(empty), b.continue_rewrites(empty)
    assert seen == {"rewrite": "reviser", "continue": "policy"}
    seen.clear()
    b = make(None)  # no reviser: the policy plays both, as in the paper
    b.rewrite(empty), b.continue_rewrites(empty)
    assert seen == {"rewrite": "policy", "continue": "policy"}


@pytest.mark.slow
def test_01_trains_the_base_then_the_reviser_and_04_loads_each(fresh_cache):
    prof = _profile(ROLES, "model.warmup.role_model=separate", "model.warmup.role_steps=2")
    msg = W.prepare_base(prof, build_all(prof))
    base, rev = WB.warmup_dir(prof), WB.reviser_dir(prof)
    assert base.name in msg and rev.name in msg and (rev / "config.json").exists()
    assert set(WB.warmup_summary(prof)["pairs"]["roles"]) == {"grading"}  # the Base learnt no Phase-1 role
    rev_pairs = json.loads((rev / "warmup_summary.json").read_text())["pairs"]
    assert set(rev_pairs["roles"]) == {"checklist", "rewrite", "intervention"} and "grading" not in rev_pairs["roles"]
    assert WB.reviser_report(prof)["steps"] == 2 and WB.reviser_report(prof)["pairs"] == rev_pairs
    policy = load_policy_from_profile(prof)
    reviser = reviser_for(prof, policy)
    assert reviser is not policy and reviser.name.endswith("+reviser")
    assert any(not torch.equal(a, b) for a, b in zip(policy.model.state_dict().values(),
                                                     reviser.model.state_dict().values()))
