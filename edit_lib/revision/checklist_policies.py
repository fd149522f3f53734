"""Table 12 (App. F) under each policy for a checklist that fails verification (``revision.checklist_failure``).

The paper uses the rubric checklist as the reviser's context (Sec. 2.2) and says nothing of verifying it, so
what a failed checklist does is the suite's choice: keep it, drop its failing lines, or block the rewrite. 04
repairs one dataset's selections under every policy; a rewrite whose prompt is the same under two policies
(a verified checklist, or a policy that gives the same text) is written once and shared, so the policies differ
only where their checklist context differs.
"""
from __future__ import annotations

import pandas as pd

from edit_lib.config import CHECKLIST_FAILURE_POLICIES
from edit_lib.revision.checklist import checklist_context
from edit_lib.revision.generation import ROLLOUT, per_rule
from edit_lib.revision.phase1_inputs import Phase1Inputs
from edit_lib.revision.pool import OK, outcome_filter, success_at_n


def policy_rewrites(inputs: Phase1Inputs, units: pd.DataFrame, failure_policy: str) -> pd.DataFrame:
    """The rewrites of ``units`` under ``failure_policy``: ``inputs.rewrites`` (written under
    ``inputs.settings.checklist_failure``) where the checklist context is the same, new rewrites (unit ids tagged
    ``/cl-<policy>``) where it differs; one row per (rollout, k)."""
    if failure_policy not in CHECKLIST_FAILURE_POLICIES:
        raise ValueError(f"checklist policy must be one of {CHECKLIST_FAILURE_POLICIES}, got {failure_policy!r}")
    chosen, base_rewrites = inputs.settings.checklist_failure, inputs.rewrites
    cl = {(c.dataset, c.response_id): c for c in inputs.checklists.itertuples()}
    u = units.drop_duplicates([*ROLLOUT, "k"])
    differs = [checklist_context(cl[(d, r)], failure_policy) != checklist_context(cl[(d, r)], chosen)
               for d, r in u[["dataset", "response_id"]].to_numpy()]
    todo = u[pd.Series(differs, index=u.index, dtype=bool)]
    keep = base_rewrites.merge(u[~pd.Series(differs, index=u.index, dtype=bool)][[*ROLLOUT, "k"]], on=[*ROLLOUT, "k"])
    new = inputs.rewrite(todo, checklist_failure=failure_policy, tag=f"/cl-{failure_policy}") \
        if len(todo) else base_rewrites.iloc[:0]
    return pd.concat([keep, new], ignore_index=True)


def table12_by_policy(inputs: Phase1Inputs, selected: pd.DataFrame, *, cached=None,
                      policies=CHECKLIST_FAILURE_POLICIES) -> pd.DataFrame:
    """Success@N per rule (App. F, Table 12) of ``selected`` under each checklist policy in ``policies`` (every
    one by default), with a ``policy`` column; the chosen policy (``inputs.settings.checklist_failure``) reuses
    ``inputs.rewrites`` and ``inputs.continuations``, and ``cached(name, fn)`` (the stage's cache) keeps each other
    policy's new rewrites and continuations."""
    unknown = sorted(set(policies) - set(CHECKLIST_FAILURE_POLICIES))
    if unknown or not len(policies):
        raise ValueError(f"checklist policies must be a non-empty subset of {CHECKLIST_FAILURE_POLICIES}, "
                         f"got {list(policies)}")
    cached = cached or (lambda name, fn: fn())
    base_rewrites, base_continuations = inputs.rewrites, inputs.continuations
    units = selected[[*ROLLOUT, "k"]].drop_duplicates().merge(inputs.steps, on=[*ROLLOUT, "k"])
    out = []
    for name in policies:
        if name == inputs.settings.checklist_failure:
            rw, ct = base_rewrites, base_continuations
        else:
            rw = cached(f"rewrites_checklist_{name}", lambda: policy_rewrites(inputs, units, name))
            fresh = rw[(rw["status"] == OK) & ~rw["unit_id"].isin(base_rewrites["unit_id"])]
            new = cached(f"continuations_checklist_{name}", lambda: inputs.continue_rewrites(fresh) if len(fresh)
                         else base_continuations.iloc[:0])
            ct = pd.concat([base_continuations, new], ignore_index=True)
        rev, cont = per_rule(selected, rw, ct)
        out.append(success_at_n(outcome_filter(rev, cont, inputs.settings.n_continuations)).assign(policy=name))
    t = pd.concat(out, ignore_index=True)
    return t[["policy", *[c for c in t.columns if c != "policy"]]].fillna({c: 0 for c in t.columns
                                                                        if c.startswith("not_rewritten_")})
