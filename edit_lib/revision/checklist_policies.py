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
from edit_lib.revision.generation import ROLLOUT, continue_revisions, per_rule, write_rewrites
from edit_lib.revision.pool import OK, outcome_filter, success_at_n


def policy_rewrites(policy, datasets, units: pd.DataFrame, rollouts: pd.DataFrame, checklists: pd.DataFrame,
                    percentiles: pd.DataFrame, tie_margin: float, settings, base_rewrites: pd.DataFrame,
                    failure_policy: str, *, seed: int, **rewrite_kw) -> pd.DataFrame:
    """The rewrites of ``units`` under ``failure_policy``: ``base_rewrites`` (written under
    ``settings.checklist_failure``) where the checklist context is the same, new rewrites (unit ids tagged
    ``/cl-<policy>``) where it differs; one row per (rollout, k)."""
    if failure_policy not in CHECKLIST_FAILURE_POLICIES:
        raise ValueError(f"checklist policy must be one of {CHECKLIST_FAILURE_POLICIES}, got {failure_policy!r}")
    cl = {(c.dataset, c.response_id): c for c in checklists.itertuples()}
    u = units.drop_duplicates([*ROLLOUT, "k"])
    differs = [checklist_context(cl[(d, r)], failure_policy) != checklist_context(cl[(d, r)], settings.checklist_failure)
               for d, r in u[["dataset", "response_id"]].to_numpy()]
    todo = u[pd.Series(differs, index=u.index, dtype=bool)]
    keep = base_rewrites.merge(u[~pd.Series(differs, index=u.index, dtype=bool)][[*ROLLOUT, "k"]], on=[*ROLLOUT, "k"])
    new = write_rewrites(policy, datasets, todo, rollouts, checklists, percentiles, tie_margin, settings, seed=seed,
                         checklist_failure=failure_policy, tag=f"/cl-{failure_policy}", **rewrite_kw) \
        if len(todo) else base_rewrites.iloc[:0]
    return pd.concat([keep, new], ignore_index=True)


def table12_by_policy(policy, datasets, selected: pd.DataFrame, steps: pd.DataFrame, rollouts: pd.DataFrame,
                      checklists: pd.DataFrame, percentiles: pd.DataFrame, tie_margin: float, settings,
                      base_rewrites: pd.DataFrame, base_continuations: pd.DataFrame, *, seed: int, cached=None,
                      policies=CHECKLIST_FAILURE_POLICIES, **rewrite_kw) -> pd.DataFrame:
    """Success@N per rule (App. F, Table 12) of ``selected`` under each checklist policy in ``policies`` (every
    one by default), with a ``policy`` column; ``cached(name, fn)`` (the stage's cache) keeps each policy's new
    rewrites and continuations."""
    unknown = sorted(set(policies) - set(CHECKLIST_FAILURE_POLICIES))
    if unknown or not len(policies):
        raise ValueError(f"checklist policies must be a non-empty subset of {CHECKLIST_FAILURE_POLICIES}, "
                         f"got {list(policies)}")
    cached = cached or (lambda name, fn: fn())
    units = selected[[*ROLLOUT, "k"]].drop_duplicates().merge(steps, on=[*ROLLOUT, "k"])
    out = []
    for name in policies:
        if name == settings.checklist_failure:
            rw, ct = base_rewrites, base_continuations
        else:
            rw = cached(f"rewrites_checklist_{name}", lambda: policy_rewrites(
                policy, datasets, units, rollouts, checklists, percentiles, tie_margin, settings, base_rewrites, name,
                seed=seed, **rewrite_kw))
            fresh = rw[(rw["status"] == OK) & ~rw["unit_id"].isin(base_rewrites["unit_id"])]
            ct = pd.concat([base_continuations, cached(f"continuations_checklist_{name}", lambda: continue_revisions(
                policy, datasets, fresh, settings, seed=seed) if len(fresh) else base_continuations.iloc[:0])], ignore_index=True)
        rev, cont = per_rule(selected, rw, ct)
        out.append(success_at_n(outcome_filter(rev, cont, settings.n_continuations)).assign(policy=name))
    t = pd.concat(out, ignore_index=True)
    return t[["policy", *[c for c in t.columns if c != "policy"]]].fillna({c: 0 for c in t.columns
                                                                        if c.startswith("not_rewritten_")})
