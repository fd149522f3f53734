"""Position-residualised prefix support (Eq. 4): G~^p_k = G^p_k - mu_p(u_k), with mu_p(u) the dataset-level mean
prefix-support score at relative position u = k/T (fitted per dataset by the callers)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Eq. 4: position residualisation of the prefix support

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
