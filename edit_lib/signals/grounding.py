"""Mask-based grounding audit (Eq. 3); position residualisation of prefix support (Eq. 4) is in ``residual``.

For every step s_k of a rollout, l_k = -log p(s_k | context, s_<k) under four context variants:

    full           (q, rho, a, s_<k)          -> l_full
    rubric_masked  (q, [MASK], a, s_<k)       -> G^rho_k = l - l_full
    answer_masked  (q, rho, [MASK], s_<k)     -> G^a_k   = l - l_full
    no_prefix      (q, rho, a, nothing)       -> G^p_k   = l - l_full

Context variants are token ids built by the prompt code (tokenizer-agnostic here). Returns each step's SUM of
token NLLs and its token count, packed (``layout="rows"`` / ``"tree"``) or naive; G under either reduction
(sum, per token) is taken from them in one place, ``signals.tables.with_supports``.

Departures from the paper and from public code:
book/departures.md, section "Grounding audit (edit_lib/signals/grounding.py)".
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edit_lib.signals.packing import SegmentTree, plain_logprobs, token_logprobs

VARIANTS = ("full", "rubric_masked", "answer_masked", "no_prefix")


@dataclass
class AuditResult:
    """Grounding audit of one rollout with T steps."""

    nll: dict  # variant -> (T,) summed NLL of each step
    n_tokens: np.ndarray  # (T,)


def _check(contexts, steps):
    if any(len(c) == 0 for c in contexts):
        raise ValueError("contexts must be non-empty (the first step token needs a predictor)")
    return [[int(t) for t in c] for c in contexts], [[int(t) for t in s] for s in steps]


def _add_steps(tree, queries, parent, steps, chained: bool):
    """Add steps under ``parent`` (a chain s_1 -> s_2 ... or, unchained, each step directly under ``parent``);
    append their (predictor index, token) queries and return one slice of ``queries`` per step."""
    slots, node = [], parent
    for s in steps:
        node = tree.add(s, node if chained else parent)
        queries.extend(zip(tree.pred_indices(node), s))
        slots.append(slice(len(queries) - len(s), len(queries)))
    return slots


def build_audit_rows(ctx_full, ctx_rubric_masked, ctx_answer_masked, steps):
    """Grounding audit (Eq. 3), packed as 4 rows: a causal chain per context variant; no_prefix hangs every step
    off the full context (block mask). Returns (trees, queries per tree, {variant: [(tree, slice)] per step})."""
    trees, queries, slots = [], [], {}
    for t, (variant, ctx) in enumerate(zip(VARIANTS, (ctx_full, ctx_rubric_masked, ctx_answer_masked, ctx_full))):
        tree, q = SegmentTree(), []
        sl = _add_steps(tree, q, tree.add(ctx), steps, chained=variant != "no_prefix")
        trees.append(tree)
        queries.append(q)
        slots[variant] = [(t, x) for x in sl]
    return trees, queries, slots


def _lcp(a, b) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def build_audit_tree(ctx_full, ctx_rubric_masked, ctx_answer_masked, steps):
    """Grounding audit (Eq. 3), packed as ONE tree: the context variants share their common prefix.

    The full context is the spine; each masked context branches off where it first differs from it (the prompt
    before the masked section is computed once), each variant chains s_1..s_T, and no_prefix hangs s_2..s_T
    off the full context (its s_1 is the full chain's s_1: same context, same positions). Fewer tokens than
    four rows but one long dense-mask row.
    """
    tree, q = SegmentTree(), []
    masked = (ctx_rubric_masked, ctx_answer_masked)
    cuts = sorted({_lcp(ctx_full, c) for c in masked} | {len(ctx_full)})
    spine, parent, prev = {}, -1, 0
    for cut in cuts:  # split the full context at every branch point (a cut at 0 is an empty, transparent root)
        parent = spine[cut] = tree.add(ctx_full[prev:cut], parent)
        prev = cut
    full_ctx = spine[len(ctx_full)]
    slots = {"full": _add_steps(tree, q, full_ctx, steps, chained=True)}
    for variant, ctx in zip(("rubric_masked", "answer_masked"), masked):
        cut = _lcp(ctx_full, ctx)
        slots[variant] = _add_steps(tree, q, tree.add(ctx[cut:], spine[cut]), steps, chained=True)
    slots["no_prefix"] = slots["full"][:1] + _add_steps(tree, q, full_ctx, steps[1:], chained=False)
    return [tree], [q], {v: [(0, x) for x in sl] for v, sl in slots.items()}


LAYOUTS = {"tree": build_audit_tree, "rows": build_audit_rows}


def audit_rollouts(model, ctx_full, ctx_rubric_masked, ctx_answer_masked, steps_ids, batch_size: int = 1,
                   layout: str = "rows"):
    """Mask-based grounding audit (Eq. 3), packed: one forward call per ``batch_size`` rollouts.

    ``layout="rows"`` (default): four padded rows per rollout (``build_audit_rows``); ``"tree"``: one row per
    rollout with shared context prefixes (``build_audit_tree``). Pass token ids for one rollout, or lists
    (one entry per rollout). Returns an ``AuditResult`` (or a list).
    """
    build = LAYOUTS[layout]
    single = _flat(ctx_full)
    rows = _rows(single, ctx_full, ctx_rubric_masked, ctx_answer_masked, steps_ids)
    results = []
    bs = max(1, int(batch_size))
    for i in range(0, len(rows), bs):
        built = [build(*r) for r in rows[i:i + bs]]
        lps = token_logprobs(model, [t for b in built for t in b[0]], [q for b in built for q in b[1]])
        offset = 0
        for trees, _, slots in built:
            nll = {v: np.array([-lps[offset + t][x].sum() for t, x in slots[v]]) for v in VARIANTS}
            n_tok = np.array([x.stop - x.start for _, x in slots["full"]])
            results.append(AuditResult(nll, n_tok))
            offset += len(trees)
    return results[0] if single else results


def audit_rollouts_naive(model, ctx_full, ctx_rubric_masked, ctx_answer_masked, steps_ids, **_):
    """Mask-based grounding audit (Eq. 3), reference: one plain forward pass per step and per variant."""
    single = _flat(ctx_full)
    rows = _rows(single, ctx_full, ctx_rubric_masked, ctx_answer_masked, steps_ids)
    results = []
    for c_full, c_rho, c_a, steps in rows:
        nll = {v: np.zeros(len(steps)) for v in VARIANTS}
        for v, ctx in zip(VARIANTS, (c_full, c_rho, c_a, c_full)):
            for k, s in enumerate(steps):
                if not s:
                    continue
                prefix = [] if v == "no_prefix" else [t for st in steps[:k] for t in st]
                lp = plain_logprobs(model, ctx + prefix + s)
                nll[v][k] = -float(lp[-len(s):].sum())
        results.append(AuditResult(nll, np.array([len(s) for s in steps])))
    return results[0] if single else results


def _flat(x) -> bool:
    if hasattr(x, "ndim"):
        return x.ndim == 1
    return len(x) == 0 or isinstance(x[0], (int, np.integer))


def _rows(single, c_full, c_rho, c_a, steps):
    if single:
        c_full, c_rho, c_a, steps = [c_full], [c_rho], [c_a], [steps]
    if not (len(c_full) == len(c_rho) == len(c_a) == len(steps)):
        raise ValueError("one context triple and one step list per rollout")
    out = []
    for cf, cr, ca, st in zip(c_full, c_rho, c_a, steps):
        (cf, cr, ca), st = _check((cf, cr, ca), st)
        out.append((cf, cr, ca, st))
    return out
