"""Mask-based grounding audit (Eq. 3) and position residualisation (Eq. 4)."""
import numpy as np
import pandas as pd
import pytest
import torch

from edit_lib.signals import (VARIANTS, audit_rollouts, audit_rollouts_naive, fit_prefix_residualiser,
                              relative_positions, residualise_prefix)
from edit_lib.signals.grounding import build_audit_rows, build_audit_tree
from edit_lib.signals.tables import with_supports

from toy_models import toy_model

torch.set_num_threads(1)
VOCAB, MASK = 48, 2


@pytest.fixture(scope="module", params=[("qwen3", "sdpa"), ("qwen3", "eager"), ("llama", "sdpa"), ("llama", "eager")],
                ids=lambda p: "-".join(p))
def model(request):
    arch, attn = request.param
    return toy_model(arch, vocab_size=VOCAB, attn=attn, seed=5, init_range=0.2)


def _rollouts(seed=0):
    rng = np.random.default_rng(seed)
    ids = lambda n: rng.integers(3, VOCAB, n).tolist()  # noqa: E731
    ctx = [ids(20), ids(13)]
    ctx_rho = [c[:4] + [MASK] + c[10:] for c in ctx]  # rubric span replaced by one [MASK]
    ctx_a = [c[:11] + [MASK] for c in ctx]  # answer span (the tail) replaced
    steps = [[ids(5), ids(1), ids(7), ids(3)], [ids(2), ids(6)]]
    return ctx, ctx_rho, ctx_a, steps


@pytest.mark.parametrize("layout", ["tree", "rows"])
def test_packed_matches_naive(model, layout):
    ctx, ctx_rho, ctx_a, steps = _rollouts()
    packed = audit_rollouts(model, ctx, ctx_rho, ctx_a, steps, batch_size=2, layout=layout)
    naive = audit_rollouts_naive(model, ctx, ctx_rho, ctx_a, steps)
    for p, n, st in zip(packed, naive, steps):
        np.testing.assert_array_equal(p.n_tokens, [len(s) for s in st])
        for v in VARIANTS:
            assert p.nll[v].shape == (len(st),)
            np.testing.assert_allclose(p.nll[v], n.nll[v], atol=1e-4, rtol=0)
        # every masked source changes some step's likelihood (the packing really sees different contexts)
        for v in ("rubric_masked", "answer_masked", "no_prefix"):
            assert np.abs(p.nll[v] - p.nll["full"]).max() > 1e-3


def test_full_nll_from_one_plain_pass(model):
    """l_full of every step from a single ordinary causal pass over context + s_1..s_T (independent of packing)."""
    ctx, ctx_rho, ctx_a, steps = _rollouts(seed=1)
    res = audit_rollouts(model, ctx[0], ctx_rho[0], ctx_a[0], steps[0])
    seq = ctx[0] + [t for s in steps[0] for t in s]
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=torch.tensor([seq])).logits[0].double(), -1)
    tok_nll = -lp[:-1].gather(-1, torch.tensor(seq[1:])[:, None])[:, 0].numpy()
    start = len(ctx[0])
    for k, s in enumerate(steps[0]):
        assert res.nll["full"][k] == pytest.approx(tok_nll[start - 1:start - 1 + len(s)].sum(), abs=1e-4)
        start += len(s)


def test_support_formulas_and_reduction(model):
    """G (Eq. 3) as the pipeline takes it (``signals.tables.with_supports``) from one rollout's audit, against
    the step NLLs computed here: sum reduction l - l_full; mean reduction both terms per token."""
    ctx, ctx_rho, ctx_a, steps = _rollouts(seed=2)
    res = audit_rollouts(model, ctx[1], ctx_rho[1], ctx_a[1], steps[1])
    table = pd.DataFrame({"n_tokens": res.n_tokens, **{f"nll_{v}": res.nll[v] for v in VARIANTS}})
    total, per_token = with_supports(table, "sum"), with_supports(table, "mean")
    for col, v in (("G_rho", "rubric_masked"), ("G_a", "answer_masked"), ("G_p", "no_prefix")):
        np.testing.assert_allclose(total[col], res.nll[v] - res.nll["full"])
        np.testing.assert_allclose(per_token[col], res.nll[v] / res.n_tokens - res.nll["full"] / res.n_tokens)
    # the first step has no prefix, so no_prefix == full there
    assert total["G_p"].iloc[0] == pytest.approx(0.0, abs=1e-4)


def test_no_prefix_layout():
    ctx, steps = [5] * 6, [[7] * 3, [8] * 2, [9] * 4]
    trees, queries, _ = build_audit_rows(ctx, ctx[:3], ctx[:2], steps)
    nop = trees[VARIANTS.index("no_prefix")]
    # every step starts at position len(ctx) and is predicted from the context's last token
    assert [nop.positions[nop.start[s]] for s in (1, 2, 3)] == [6, 6, 6]
    assert [q[0] for q in queries[3]] == [5, 6, 7, 5, 9, 5, 11, 12, 13]
    allowed = nop.allowed()
    assert allowed[9, :6].all() and not allowed[9, 6:9].any() and allowed[9, 9]
    assert len(trees[1]) == 3 + 9 and trees[1].positions[-1] == 11


def test_tree_layout_shares_context_prefixes():
    ctx = list(range(3, 23))
    rho, ans = ctx[:4] + [MASK] + ctx[10:], ctx[:11] + [MASK]
    steps = [[30] * 5, [31] * 2, [32] * 3]
    (tree,), (queries,), slots = build_audit_tree(ctx, rho, ans, steps)
    # full ctx once + masked suffixes ([MASK]+ctx[10:], [MASK]) + 3 step chains + no_prefix s_2, s_3
    # (the no_prefix s_1 is the full chain's s_1)
    assert len(tree) == 20 + 11 + 1 + 3 * 10 + 5
    assert slots["no_prefix"][0] == slots["full"][0]
    # the rubric-masked branch starts at position 4 and sees only ctx[:4] of the spine
    br = next(s for s in range(len(tree.parent)) if tree.tokens[tree.start[s]:tree.stop[s]] == rho[4:])
    i = tree.start[br]
    assert tree.positions[i] == 4
    allowed = tree.allowed()
    assert allowed[i, :4].all() and not allowed[i, 4:20].any()


def test_tree_layout_edge_branches():
    """A masked context differing at its first token (branch at the root) or a prefix of the full one."""
    model = toy_model("qwen3", vocab_size=VOCAB, seed=8, init_range=0.2)
    ctx = list(range(3, 15))
    steps = [[20, 21, 22], [23], [24, 25]]
    for rho, ans in (([MASK] + ctx[3:], ctx[:5]), (ctx + [MASK], [MASK])):
        packed = audit_rollouts(model, ctx, rho, ans, steps)
        naive = audit_rollouts_naive(model, ctx, rho, ans, steps)
        for v in VARIANTS:
            np.testing.assert_allclose(packed.nll[v], naive.nll[v], atol=1e-4, rtol=0)


def test_batching_equals_one_at_a_time(model):
    ctx, ctx_rho, ctx_a, steps = _rollouts(seed=3)
    both = audit_rollouts(model, ctx, ctx_rho, ctx_a, steps, batch_size=2)
    for i in range(2):
        one = audit_rollouts(model, ctx[i], ctx_rho[i], ctx_a[i], steps[i])
        for v in VARIANTS:
            np.testing.assert_allclose(both[i].nll[v], one.nll[v], atol=1e-5, rtol=0)


def _naive_kernel(u0, u, g, h):
    w = np.array([np.exp(-0.5 * ((u0 - ui) / h) ** 2) for ui in u])
    return float((w * g).sum() / w.sum())


def _steps_table():
    """G^p of a few rollouts of T = 2, 3, 4, 6 steps; u = 1/2 (from T = 2, 4 and 6) pools fractions."""
    rng = np.random.default_rng(3)
    Ts = [2] * 4 + [3] * 2 + [4] * 3 + [6]
    rows = [(k / T, 1.5 * k / T + rng.normal(0, 0.2)) for T in Ts for k in range(1, T + 1)]
    return pd.DataFrame(rows, columns=["u", "G_p"])


@pytest.mark.parametrize("min_count", [1, 3, 4])
def test_mu_p_exact_is_conditional_mean_with_kernel_fallback(min_count):
    df = _steps_table()
    g_t, fit = residualise_prefix(df["G_p"].to_numpy(), df["u"].to_numpy(), method="exact", min_count=min_count,
                                  bandwidth=0.15)
    # independent: pandas groupby over the exact fractions k/T, and a naive kernel loop over every step
    grp = df.groupby("u")["G_p"].agg(["mean", "size"])
    expected = [grp.loc[u, "mean"] if grp.loc[u, "size"] >= min_count
                else _naive_kernel(u, df["u"].to_numpy(), df["G_p"].to_numpy(), 0.15) for u in df["u"]]
    np.testing.assert_allclose(g_t, df["G_p"] - np.array(expected), atol=1e-12)
    assert grp.loc[0.5, "size"] == 4 + 3 + 1  # 1/2, 2/4 and 3/6 are one u
    n_fallback = int((grp["size"] < min_count).sum())
    assert (~fit.uses_mean(grp.index.to_numpy())).sum() == n_fallback
    if min_count == 1:  # every observed u has its own mean: residuals average to zero at each u
        np.testing.assert_allclose(pd.Series(g_t).groupby(df["u"]).mean(), 0.0, atol=1e-12)
    else:
        assert n_fallback > 0
    # an unseen u always uses the kernel; a u read back with float noise still finds its mean
    assert fit.mu([0.2])[0] == pytest.approx(_naive_kernel(0.2, df["u"].to_numpy(), df["G_p"].to_numpy(), 0.15))
    assert fit.mu([2 / 3 + 1e-12])[0] == pytest.approx(grp.loc[2 / 3, "mean"] if grp.loc[2 / 3, "size"] >= min_count
                                                       else fit.kernel([2 / 3])[0])


def test_mu_p_ignores_non_finite_and_rejects_bad_input():
    g = np.array([1.0, np.nan, 3.0, 5.0])
    u = np.array([0.5, 0.5, 0.5, 1.0])
    fit = fit_prefix_residualiser(g, u, min_count=2)
    assert fit.counts.tolist() == [2, 1] and fit.means.tolist() == [2.0, 5.0]
    assert np.isnan(fit.transform(g, u)[1])
    with pytest.raises(ValueError, match="method"):
        fit_prefix_residualiser(g, u, method="spline")
    with pytest.raises(ValueError, match="finite"):
        fit_prefix_residualiser([np.nan], [0.5])


def _direct_bins(g, u, n_bins):
    edges = np.linspace(0, 1, n_bins + 1)
    means = np.full(n_bins, np.nan)
    for b in range(n_bins):
        sel = (u > edges[b] + 1e-12) & (u <= edges[b + 1] + 1e-12) if b else (u <= edges[1] + 1e-12)
        if sel.any():
            means[b] = g[sel].mean()
    return means


def test_residualise_bins_against_numpy():
    rng = np.random.default_rng(0)
    Ts = rng.integers(1, 13, 40)
    u = np.concatenate([np.arange(1, T + 1) / T for T in Ts])
    g = 2.0 * u + rng.normal(0, 0.3, u.size)
    g_t, fit = residualise_prefix(g, u, method="bins", n_bins=10)
    means = _direct_bins(g, u, 10)
    assert not np.isnan(means).any()
    idx = [next(b for b in range(10) if ui <= (b + 1) / 10 + 1e-12) for ui in u]
    np.testing.assert_allclose(g_t, g - means[idx], atol=1e-12)
    np.testing.assert_allclose(fit.bin_means, means, atol=1e-12)
    assert fit.bin_index([0.3, 0.2, 1.0, 0.05, 0.31])[:5].tolist() == [2, 1, 9, 0, 3]
    # residualised values have (near) zero mean within each bin and no trend in u
    assert abs(np.polyfit(u, g_t, 1)[0]) < 0.2 < abs(np.polyfit(u, g, 1)[0])
    # fit applies to new data
    np.testing.assert_allclose(fit.transform([1.0, 1.0], [0.05, 0.95]), 1.0 - means[[0, 9]])


def test_residualise_empty_bin_and_per_rollout_lists():
    g = np.array([1.0, 3.0, 10.0])
    u = np.array([0.05, 0.1, 0.95])  # bins 0 and 9 only
    fit = fit_prefix_residualiser(g, u, method="bins", n_bins=10)
    np.testing.assert_allclose(fit.bin_means, [2, 2, 2, 2, 2, 10, 10, 10, 10, 10])  # nearest; tie -> lower
    per = [np.array([1.0, 2.0]), np.array([0.0, 1.0, 2.0, 3.0]), np.array([5.0])]
    out, fit2 = residualise_prefix(per, None, min_count=1)
    u_all = np.concatenate([relative_positions(len(p)) for p in per])
    flat, _ = residualise_prefix(np.concatenate(per), u_all, min_count=1)
    np.testing.assert_allclose(np.concatenate(out), flat)
    np.testing.assert_allclose(relative_positions(4), [0.25, 0.5, 0.75, 1.0])


def test_residualise_kernel_against_numpy():
    rng = np.random.default_rng(1)
    u = rng.uniform(0.05, 1, 60)
    g = np.sin(3 * u) + rng.normal(0, 0.1, 60)
    g[5] = np.nan  # ignored at fit
    g_t, fit = residualise_prefix(g, u, method="kernel", bandwidth=0.15)
    ok = np.isfinite(g)
    for i in (0, 17, 42):
        w = np.exp(-0.5 * ((u[i] - u[ok]) / 0.15) ** 2)
        assert g_t[i] == pytest.approx(g[i] - (w * g[ok]).sum() / w.sum(), abs=1e-12)
    assert np.isnan(g_t[5])
