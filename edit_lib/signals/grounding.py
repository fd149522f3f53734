"""Mask-based grounding audit (Eq. 3) and position residualisation of prefix support (Eq. 4).

For every step s_k of a rollout, l_k = -log p(s_k | context, s_<k) under four context variants:

    full           (q, rho, a, s_<k)          -> l_full
    rubric_masked  (q, [MASK], a, s_<k)       -> G^rho_k = l - l_full
    answer_masked  (q, rho, [MASK], s_<k)     -> G^a_k   = l - l_full
    no_prefix      (q, rho, a, nothing)       -> G^p_k   = l - l_full

The context variants are token ids built by the prompt code (this module is tokenizer-agnostic).

Reduction: the paper writes the NLL of the step, i.e. the SUM of token NLLs (-log of the step's joint
probability); that is the default. ``reduction="mean"`` divides by the step length: the same token set appears in
both terms of every G, so mean only rescales each step's G by 1/n_k, which makes long and short steps comparable
when ranking across steps. Both are kept in ``AuditResult`` (``nll`` sums, ``n_tokens``).

Packed: each of full / rubric_masked / answer_masked is one causal chain ``context + s_1..s_T`` that yields
every step's NLL; no_prefix hangs all steps off ``context`` with a block mask (each step sees the context and
itself, positions continuing from the context end). ``layout="rows"`` (default) batches the four as padded rows
of one forward call; ``layout="tree"`` packs them into ONE row whose context variants share their common prefix:
~30% fewer tokens but a longer dense mask, so it pays off only when the linear layers dominate (real-size
graders); on the tiny CPU grader rows measured faster (eager: 3.1x vs 1.6x over naive). Naive: one plain pass
per step and variant.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .packing import SegmentTree, plain_logprobs, token_logprobs

VARIANTS = ("full", "rubric_masked", "answer_masked", "no_prefix")


@dataclass
class AuditResult:
    """Grounding audit of one rollout with T steps."""

    nll: dict  # variant -> (T,) summed NLL of each step
    n_tokens: np.ndarray  # (T,)
    reduction: str = "sum"

    def step_loss(self, variant: str, reduction: str | None = None) -> np.ndarray:
        """l_k under ``variant`` with ``reduction`` ("sum" or "mean"; default: the result's)."""
        red = reduction or self.reduction
        if red == "sum":
            return self.nll[variant]
        if red == "mean":
            with np.errstate(invalid="ignore", divide="ignore"):
                return self.nll[variant] / self.n_tokens  # empty step -> nan
        raise ValueError(f"unknown reduction {red!r}")

    def support(self, variant: str, reduction: str | None = None) -> np.ndarray:
        """Mask-based support (Eq. 3): l_k(variant) - l_k(full)."""
        return self.step_loss(variant, reduction) - self.step_loss("full", reduction)

    @property
    def G_rho(self) -> np.ndarray:
        return self.support("rubric_masked")

    @property
    def G_a(self) -> np.ndarray:
        return self.support("answer_masked")

    @property
    def G_p(self) -> np.ndarray:
        return self.support("no_prefix")


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
    four rows (bench: 4.9x fewer than the naive passes at T = 5, rows 3.6x) but one long dense-mask row.
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


def audit_rollouts(model, ctx_full, ctx_rubric_masked, ctx_answer_masked, steps_ids, reduction: str = "sum",
                   batch_size: int = 1, layout: str = "rows"):
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
            results.append(AuditResult(nll, n_tok, reduction))
            offset += len(trees)
    return results[0] if single else results


def audit_rollouts_naive(model, ctx_full, ctx_rubric_masked, ctx_answer_masked, steps_ids, reduction: str = "sum",
                         **_):
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
        results.append(AuditResult(nll, np.array([len(s) for s in steps]), reduction))
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


# ---------------------------------------------------------------------------------------------------------------
# Eq. 4: position residualisation of the prefix support

def relative_positions(n_steps: int) -> np.ndarray:
    """u_k = k / T for k = 1..T (Eq. 4)."""
    return np.arange(1, n_steps + 1, dtype=np.float64) / max(n_steps, 1)


@dataclass
class PrefixResidualiser:
    """mu_p(u), the dataset-level mean prefix support at relative position u (Eq. 4), fitted once, reusable.

    ``bins``: equal-width bins on (0, 1] (right-closed, so u = 1 falls in the last bin and k/T never sits on a
    left edge); mu_p is the mean G^p of the bin; a bin empty at fit time borrows the nearest non-empty bin.
    ``kernel``: a local-constant (Nadaraya-Watson) smoother, mu_p(u) = sum_i w_i G_i / sum_i w_i with
    w_i = exp(-(u - u_i)^2 / (2 h^2)), a smooth alternative when few rollouts share a given k/T.
    """

    method: str
    n_bins: int
    bandwidth: float
    bin_means: np.ndarray | None = None
    u_fit: np.ndarray | None = None
    g_fit: np.ndarray | None = None

    def bin_index(self, u) -> np.ndarray:
        u = np.asarray(u, dtype=np.float64)
        # ceil(u*n)-1 with a tolerance so 3/10 (=0.30000000000000004 * 10) stays in the (0.2, 0.3] bin
        return np.clip(np.ceil(u * self.n_bins - 1e-9).astype(int) - 1, 0, self.n_bins - 1)

    def mu(self, u) -> np.ndarray:
        """mu_p(u) (Eq. 4)."""
        u = np.asarray(u, dtype=np.float64)
        if self.method == "bins":
            return self.bin_means[self.bin_index(u)]
        w = np.exp(-0.5 * ((u[..., None] - self.u_fit) / self.bandwidth) ** 2)
        return (w @ self.g_fit) / w.sum(axis=-1)

    def transform(self, G_p, rel_pos) -> np.ndarray:
        """Position-residualised prefix support (Eq. 4): G~^p = G^p - mu_p(u)."""
        return np.asarray(G_p, dtype=np.float64) - self.mu(rel_pos)


def fit_prefix_residualiser(G_p, rel_pos, method: str = "bins", n_bins: int = 10,
                            bandwidth: float = 0.1) -> PrefixResidualiser:
    """Estimate mu_p(u) (Eq. 4) from dataset-wide G^p values and their relative positions (non-finite ignored)."""
    g = np.asarray(G_p, dtype=np.float64).ravel()
    u = np.asarray(rel_pos, dtype=np.float64).ravel()
    if g.shape != u.shape:
        raise ValueError("G_p and rel_pos must have the same length")
    ok = np.isfinite(g) & np.isfinite(u)
    g, u = g[ok], u[ok]
    if g.size == 0:
        raise ValueError("no finite G_p values to fit mu_p")
    fit = PrefixResidualiser(method, int(n_bins), float(bandwidth))
    if method == "bins":
        idx = fit.bin_index(u)
        sums = np.bincount(idx, weights=g, minlength=n_bins)
        counts = np.bincount(idx, minlength=n_bins)
        filled = np.flatnonzero(counts)
        means = np.empty(n_bins)
        means[filled] = sums[filled] / counts[filled]
        for b in np.flatnonzero(counts == 0):  # nearest filled bin (ties: the lower one)
            means[b] = means[filled[np.argmin(np.abs(filled - b))]]
        fit.bin_means = means
    elif method == "kernel":
        if bandwidth <= 0:
            raise ValueError("bandwidth must be positive")
        fit.u_fit, fit.g_fit = u, g
    else:
        raise ValueError(f"unknown method {method!r} (use 'bins' or 'kernel')")
    return fit


def residualise_prefix(G_p, rel_pos=None, method: str = "bins", n_bins: int = 10, bandwidth: float = 0.1):
    """Position-residualised prefix support (Eq. 4): fit mu_p on this data and return (G~^p, fit).

    ``G_p`` and ``rel_pos`` are flat arrays over all (example, step) pairs; or pass ``G_p`` as a list of per-rollout
    arrays with ``rel_pos=None`` to use u = k/T_i, and get a list back. ``fit.transform`` applies mu_p to new data.
    """
    if rel_pos is None:
        per = [np.asarray(g, dtype=np.float64) for g in G_p]
        us = [relative_positions(len(g)) for g in per]
        fit = fit_prefix_residualiser(np.concatenate(per), np.concatenate(us), method, n_bins, bandwidth)
        return [fit.transform(g, u) for g, u in zip(per, us)], fit
    fit = fit_prefix_residualiser(G_p, rel_pos, method, n_bins, bandwidth)
    return fit.transform(G_p, rel_pos), fit
