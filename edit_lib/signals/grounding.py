"""Mask-based grounding audit (Eq. 3) and the position residualisation of prefix support (Eq. 4).

For every step s_k of a rollout, l_k = -log p(s_k | context, s_<k) under four context variants:

    full           (q, rho, a, s_<k)          -> l_full
    rubric_masked  (q, [MASK], a, s_<k)       -> G^rho_k = l - l_full
    answer_masked  (q, rho, [MASK], s_<k)     -> G^a_k   = l - l_full
    no_prefix      (q, rho, a, nothing)       -> G^p_k   = l - l_full

Context variants are token ids built by the prompt code (tokenizer-agnostic here). Returns each step's SUM of
token NLLs and its token count, packed (``layout="rows"`` / ``"tree"``) or naive; G under either reduction is
taken from them in one place, ``signals.tables.with_supports``. Eq. 4: G~^p_k = G^p_k - mu_p(u_k), mu_p(u) the
dataset-level mean prefix support at relative position u = k/T (fitted per dataset by the callers).

Departures: book/departures.md, section "Grounding audit (edit_lib/signals/grounding.py)".
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edit_lib.signals.packing import is_ids, plain_logprobs, SegmentTree, token_logprobs


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
    single = is_ids(ctx_full)
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
    single = is_ids(ctx_full)
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


# ---------------------------------------------------------------- Eq. 4: position-residualised prefix support

RESIDUAL_METHODS = ("exact", "kernel", "bins")


def relative_positions(n_steps: int) -> np.ndarray:
    """u_k = k / T for k = 1..T (Eq. 4)."""
    return np.arange(1, n_steps + 1, dtype=np.float64) / max(n_steps, 1)


@dataclass
class PrefixResidualiser:
    """mu_p(u) of ONE dataset (Eq. 4), "the dataset-level mean prefix-support score at relative position u".

    ``exact`` (the paper's definition): mu_p(u) = E[G^p | u], the mean G^p over the dataset's steps at each
    observed u = k/T. Where fewer than ``min_count`` steps share a u (and at any u not seen at fit time) that mean
    is too noisy, so the kernel smoother below, fitted on all of the dataset's steps, is used instead.
    ``kernel``: Nadaraya-Watson everywhere, mu_p(u) = sum_i w_i G_i / sum_i w_i, w_i = exp(-(u - u_i)^2 / 2h^2).
    ``bins``: the mean of equal-width bins on (0, 1] (right-closed, so u = 1 is in the last bin); an empty bin
    borrows the nearest filled one (ties: the lower). ``u_values``, ``counts``, ``means``: the observed u (sorted),
    their step counts and mean G^p, whatever the method; the kernel sums over them (the same sums as over steps).
    """

    method: str
    min_count: int
    n_bins: int
    bandwidth: float
    u_values: np.ndarray
    counts: np.ndarray
    means: np.ndarray
    bin_means: np.ndarray | None = None

    def bin_index(self, u) -> np.ndarray:
        u = np.asarray(u, dtype=np.float64)
        # ceil(u*n)-1 with a tolerance so 3/10 (=0.30000000000000004 * 10) stays in the (0.2, 0.3] bin
        return np.clip(np.ceil(u * self.n_bins - 1e-9).astype(int) - 1, 0, self.n_bins - 1)

    def kernel(self, u) -> np.ndarray:
        """The Nadaraya-Watson smoother of G^p on u (the fallback of ``exact``)."""
        u = np.asarray(u, dtype=np.float64)
        w = np.exp(-0.5 * ((u[..., None] - self.u_values) / self.bandwidth) ** 2)
        return (w @ (self.counts * self.means)) / (w @ self.counts)

    def lookup(self, u) -> tuple[np.ndarray, np.ndarray]:
        """(index into ``u_values``, found): the fitted u equal to each u (within 1e-9, so 1/3 read back from a
        file still matches), or found False."""
        u = np.asarray(u, dtype=np.float64)
        hi = np.clip(np.searchsorted(self.u_values, u), 0, len(self.u_values) - 1)
        lo = np.clip(hi - 1, 0, None)
        i = np.where(np.abs(self.u_values[lo] - u) < np.abs(self.u_values[hi] - u), lo, hi)
        return i, np.abs(self.u_values[i] - u) <= 1e-9

    def uses_mean(self, u) -> np.ndarray:
        """True where ``exact`` reads the conditional mean at u (a fitted u with at least ``min_count`` steps)."""
        i, found = self.lookup(u)
        return found & (self.counts[i] >= self.min_count)

    def mu(self, u) -> np.ndarray:
        """mu_p(u) (Eq. 4)."""
        u = np.asarray(u, dtype=np.float64)
        if self.method == "bins":
            return self.bin_means[self.bin_index(u)]
        out = self.kernel(u)
        if self.method == "exact":
            hit = self.uses_mean(u)
            out[hit] = self.means[self.lookup(u)[0][hit]]
        return out

    def transform(self, G_p, rel_pos) -> np.ndarray:
        """Position-residualised prefix support (Eq. 4): G~^p = G^p - mu_p(u)."""
        return np.asarray(G_p, dtype=np.float64) - self.mu(rel_pos)


def fit_prefix_residualiser(G_p, rel_pos, method: str = "exact", min_count: int = 5, n_bins: int = 10,
                            bandwidth: float = 0.1) -> PrefixResidualiser:
    """Estimate mu_p(u) (Eq. 4) from ONE dataset's G^p values and their relative positions (non-finite ignored)."""
    g = np.asarray(G_p, dtype=np.float64).ravel()
    u = np.asarray(rel_pos, dtype=np.float64).ravel()
    if g.shape != u.shape:
        raise ValueError("G_p and rel_pos must have the same length")
    if method not in RESIDUAL_METHODS:
        raise ValueError(f"unknown method {method!r} (use one of {RESIDUAL_METHODS})")
    if bandwidth <= 0 or n_bins < 1 or min_count < 1:
        raise ValueError("bandwidth must be positive, n_bins and min_count at least 1")
    ok = np.isfinite(g) & np.isfinite(u)
    g, u = g[ok], u[ok]
    if g.size == 0:
        raise ValueError("no finite G_p values to fit mu_p")
    values, inverse, counts = np.unique(u, return_inverse=True, return_counts=True)
    means = np.bincount(inverse, weights=g) / counts
    fit = PrefixResidualiser(method, int(min_count), int(n_bins), float(bandwidth), values, counts, means)
    if method == "bins":
        idx = fit.bin_index(u)
        sums, cnt = np.bincount(idx, weights=g, minlength=n_bins), np.bincount(idx, minlength=n_bins)
        filled = np.flatnonzero(cnt)
        bm = np.empty(n_bins)
        bm[filled] = sums[filled] / cnt[filled]
        for b in np.flatnonzero(cnt == 0):
            bm[b] = bm[filled[np.argmin(np.abs(filled - b))]]
        fit.bin_means = bm
    return fit


def residualise_prefix(G_p, rel_pos=None, **fit_kw):
    """Position-residualised prefix support (Eq. 4) of ONE dataset: fit mu_p on this data, return (G~^p, fit).

    ``G_p`` and ``rel_pos`` are flat arrays over all (example, step) pairs; or pass ``G_p`` as a list of per-rollout
    arrays with ``rel_pos=None`` to use u = k/T_i, and get a list back. ``fit_kw`` go to ``fit_prefix_residualiser``;
    ``fit.transform`` applies mu_p to new data.
    """
    if rel_pos is None:
        per = [np.asarray(g, dtype=np.float64) for g in G_p]
        us = [relative_positions(len(g)) for g in per]
        fit = fit_prefix_residualiser(np.concatenate(per), np.concatenate(us), **fit_kw)
        return [fit.transform(g, u) for g, u in zip(per, us)], fit
    fit = fit_prefix_residualiser(G_p, rel_pos, **fit_kw)
    return fit.transform(G_p, rel_pos), fit
