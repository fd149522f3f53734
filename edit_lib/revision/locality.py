"""The locality constraint of atomic revision (Sec. 2.2, App. J / Figure 6 "Atomicity + locality").

A rewrite block (``prompts.rewrite.RewriteBlock``, parsed from ``<rewrite location="i" span="n">``) is local when

1. ``location == target``: it replaces exactly the selected step s_k (Alg. 1 picked k) and no other;
2. it holds 1-3 sub-steps (``revision.max_span``);
3. the sub-steps serve the same local role as the target (``role_of(step) -> str | None`` labels steps);
4. nothing else of the chain changed: the revised chain's first k-1 steps equal the original prefix s_1..s_{k-1}
   (the suffix is dropped; it regenerates after the rewrite).

``check_locality`` returns ``(ok, reason)``, reason one of ``REASONS`` (the first rule broken) or "" when ok.

Rule 3 in full (roles, synthesis targets) and departures from the paper and from public code:
book/departures.md, section "Locality constraint (edit_lib/revision/locality.py)".
"""
from __future__ import annotations

from typing import Callable, Sequence

from edit_lib.prompts.rewrite import RewriteBlock
from edit_lib.revision.text import norm

SYNTHESIS = "synthesis"
REASONS = ("target_out_of_range", "location_mismatch", "span_count", "prefix_changed", "role_unknown",
           "role_changed")

RoleOf = Callable[[str], "str | None"]


def check_locality(original: Sequence[str], block: RewriteBlock, target: int, role_of: RoleOf | None = None,
                   revised: Sequence[str] | None = None, max_span: int = 3) -> tuple[bool, str]:
    """Locality constraint (Sec. 2.2, App. J / Figure 6) of ``block`` rewriting step ``target`` (1-based) of
    the reasoning steps ``original``. ``revised`` is the revised chain the caller built (prefix + sub-steps);
    by default ``original[:target-1] + block.steps``. ``max_span``: the most
    sub-steps (``revision.max_span``; Sec. 2.2: 1-3)."""
    if not 1 <= target <= len(original):
        return False, "target_out_of_range"
    if block.location != target:
        return False, "location_mismatch"
    subs = list(block.steps)
    if not 1 <= len(subs) <= max_span or block.span != len(subs):
        return False, "span_count"
    if revised is not None:
        prefix = list(original[:target - 1])
        if len(revised) != len(prefix) + len(subs) or \
                [norm(s) for s in revised[:target - 1]] != [norm(s) for s in prefix] or \
                [norm(s) for s in revised[target - 1:]] != [norm(s) for s in subs]:
            return False, "prefix_changed"
    want = role_of(original[target - 1]) if role_of is not None else None
    if want is None:
        return True, ""
    roles = [role_of(s) for s in subs]
    if any(r is None for r in roles):
        return False, "role_unknown"
    if roles[-1] != want or (want != SYNTHESIS and any(r != want for r in roles)):
        return False, "role_changed"
    return True, ""
