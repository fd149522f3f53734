"""What 04's rubric checklists (Sec. 2.2) mean for a run's repairs under its checklist policy, for the
real-model chapter's limits list (``real_model._limits``)."""
from __future__ import annotations

import pandas as pd

POLICY_EFFECT = {"keep": "the reviser sees a failed checklist as written",
                 "drop_lines": "the reviser sees only a failed checklist's lines that verify alone",
                 "block": "a failed checklist blocks the repair (status `checklist_<reason>`)"}


def checklist_limits(counts: pd.DataFrame, policy: str) -> list[str]:
    """What 04's ``checklist_counts`` (Sec. 2.2) means under ``revision.checklist_failure`` = ``policy``: free-text
    checklists checked by the span rule, failed checklists and what the policy does with them, and responses with
    no rubric text (no checklist: blocked under 'block', no checklist context otherwise)."""
    if counts.empty:
        return []
    out = []
    free = counts[counts["rubric"] == "free_text"]
    if len(free):
        out.append(f"{int(free['written'].sum())} rubric checklists were written against a free-text rubric and "
                   f"checked by the span rule (book/departures.md); {int(free['verified'].sum())} verified.")
    failed = int(counts["failed"].sum())
    if failed:
        out.append(f"{failed} of {int(counts['written'].sum())} checklists failed verification: under "
                   f"`revision.checklist_failure = {policy}` {POLICY_EFFECT.get(policy, policy)}.")
    none = int(counts.get("no_points", pd.Series(dtype=int)).fillna(0).sum())
    if none:
        what = ("their repairs are blocked (`checklist_no_points`)" if policy == "block"
                else "their rewrites get no checklist")
        out.append(f"{none} of {int(counts['responses'].sum())} responses have no rubric text, so no checklist is "
                   f"written and {what}.")
    return out
