"""Audit tables and 03's summaries: NLL reductions (Eq. 3), mu_p per dataset (Eq. 4), Figure 5 data and
Table 11 under both reductions (App. E), each against an independent pandas/numpy computation."""
import numpy as np
import pandas as pd
import pytest

from edit_lib.config import AuditConfig
from edit_lib.signals.audit_summary import (annotate, distribution_histogram, distribution_summary, label_counts,
                                            mu_p_table, table11, dissociation_table)
from edit_lib.signals.tables import add_residual, with_supports


def _sums_table():
    # two steps with hand-picked summed NLLs: G under 'sum' is the difference, under 'mean' divided by n_tokens
    return pd.DataFrame(dict(dataset="d", response_id="r", rollout_id=0, k=[1, 2], n_steps=2, u=[0.5, 1.0],
                             step=["a", "b"], n_tokens=[4, 2], nll_full=[8.0, 3.0], nll_rubric_masked=[10.0, 3.5],
                             nll_answer_masked=[16.0, 3.0], nll_no_prefix=[8.0, 6.0]))


def test_with_supports_sum_and_mean_by_hand():
    s = with_supports(_sums_table(), "sum")
    assert s["G_rho"].tolist() == [2.0, 0.5] and s["G_a"].tolist() == [8.0, 0.0] and s["G_p"].tolist() == [0.0, 3.0]
    m = with_supports(_sums_table(), "mean")
    assert m["G_rho"].tolist() == [0.5, 0.25] and m["G_a"].tolist() == [2.0, 0.0] and m["G_p"].tolist() == [0.0, 1.5]
    assert set(s["reduction"]) == {"sum"} and set(m["reduction"]) == {"mean"}
    with pytest.raises(ValueError, match="reduction"):
        with_supports(_sums_table(), "max")
    with pytest.raises(ValueError, match="nll_no_prefix"):
        with_supports(_sums_table().drop(columns="nll_no_prefix"), "sum")


def _two_datasets(seed=0):
    """G^p with a different position trend per dataset (so a pooled mu_p is wrong for both)."""
    rng = np.random.default_rng(seed)
    rows = []
    for name, slope in (("low", 0.5), ("high", 3.0)):
        for r, T in enumerate([*rng.integers(1, 6, 30), 7]):  # T = 7: six u values with one step each
            for k in range(1, T + 1):
                rows.append(dict(dataset=name, response_id=f"r{r}", rollout_id=0, k=k, n_steps=T, u=k / T,
                                 G_p=slope * k / T + rng.normal(0, 0.1)))
    return pd.DataFrame(rows)


def test_add_residual_fits_mu_p_per_dataset():
    df = _two_datasets()
    cfg = AuditConfig(residual_method="exact", residual_min_count=4, residual_bandwidth=0.1)
    out, fits = add_residual(df, cfg)
    assert set(fits) == {"low", "high"}
    grp = df.groupby(["dataset", "u"])["G_p"]
    mean, size = grp.transform("mean"), grp.transform("size")
    ok = size >= 4
    assert ok.any() and (~ok).any()  # both the conditional mean and the fallback are exercised
    np.testing.assert_allclose(out.loc[ok, "G_p_tilde"], (df["G_p"] - mean)[ok], atol=1e-12)
    for name, g in df[~ok].groupby("dataset"):  # sparse u: the dataset's own kernel, over its steps only
        d = df[df.dataset == name]
        for i, row in g.iterrows():
            w = np.exp(-0.5 * ((row.u - d.u) / 0.1) ** 2)
            assert out.loc[i, "G_p_tilde"] == pytest.approx(row.G_p - (w * d.G_p).sum() / w.sum(), abs=1e-12)
    # a pooled fit would not centre each dataset at u = 1
    pooled = df.groupby("u")["G_p"].transform("mean")
    assert abs((df["G_p"] - pooled)[(df.u == 1.0) & (df.dataset == "high")].mean()) > 0.5
    assert abs(out.loc[(df.u == 1.0) & (df.dataset == "high"), "G_p_tilde"].mean()) < 1e-12


def test_mu_p_table_matches_fits():
    df = _two_datasets(1)
    _, fits = add_residual(df, AuditConfig(residual_method="exact", residual_min_count=6))
    t = mu_p_table(fits)
    agg = df.groupby(["dataset", "u"])["G_p"].agg(["mean", "size"]).reset_index()
    m = t.merge(agg, on=["dataset", "u"], validate="one_to_one")
    assert len(m) == len(agg) == len(t)
    np.testing.assert_allclose(m["mean_G_p"], m["mean"])
    assert (m["n"] == m["size"]).all()
    assert ((m["source"] == "mean") == (m["size"] >= 6)).all() and (m["source"] == "kernel").any()
    sel = m["source"] == "mean"
    np.testing.assert_allclose(m.loc[sel, "mu_p"], m.loc[sel, "mean"])


def _labelled_steps(seed=0):
    """Grounding steps: long, large summed G^a; synthesis steps: short, large per-token G^p."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(12):
        T = 4
        for k in range(1, T + 1):
            lab = "grounding" if k < 3 else "synthesis"
            n = int(rng.integers(8, 12)) if lab == "grounding" else int(rng.integers(1, 3))
            full = rng.uniform(1, 2) * n
            rows.append(dict(dataset="d" if r % 2 else "e", response_id=f"r{r}", rollout_id=0, k=k, n_steps=T,
                             u=k / T, step=f"{lab} {r} {k}", n_tokens=n, nll_full=full,
                             nll_rubric_masked=full + rng.uniform(0, 1) * n,
                             nll_answer_masked=full + (rng.uniform(0.5, 1) if lab == "grounding" else 0.1) * n,
                             nll_no_prefix=full + (2.0 if lab == "synthesis" else 0.3) * rng.uniform(0.5, 1.5) * n))
    return annotate(pd.DataFrame(rows), lambda text: text.split()[0])


def test_table11_under_both_reductions_from_one_table():
    steps = _labelled_steps()
    cfg = AuditConfig(residual_method="exact", residual_min_count=3)
    t = table11(steps, cfg).set_index(["reduction", "signal", "level"])
    assert set(t.index.get_level_values("reduction")) == {"sum", "mean"}
    for red in ("sum", "mean"):
        n = steps["n_tokens"] if red == "mean" else 1.0
        g = steps.assign(G_a=(steps.nll_answer_masked - steps.nll_full) / n,
                         G_rho=(steps.nll_rubric_masked - steps.nll_full) / n,
                         G_p=(steps.nll_no_prefix - steps.nll_full) / n)
        grp = g.groupby(["dataset", "u"])["G_p"]
        g["G_p_tilde"] = g["G_p"] - grp.transform("mean")  # every (dataset, u) has 6 >= 3 steps
        ref = dissociation_table(g, signals=("G_a", "G_rho", "G_p", "G_p_tilde")).set_index(["signal", "level"])
        got = t.loc[red]
        for col in ("median_grounding", "median_synthesis", "r", "p", "U"):
            np.testing.assert_allclose(got[col].astype(float), ref.loc[got.index, col].astype(float), atol=1e-12)
        syn = g[g.label == "synthesis"]
        assert got.loc[("G_p", "step"), "median_synthesis"] == pytest.approx(np.median(syn.G_p))
    # the reductions disagree on these steps: summed G^p favours the long grounding steps, per token synthesis
    assert t.loc[("sum", "G_p", "step"), "r"] < 0 < t.loc[("mean", "G_p", "step"), "r"]


def test_annotate_and_label_counts():
    df = pd.DataFrame(dict(dataset=["a", "a", "a", "b"], response_id=["r1", "r1", "r2", "r1"], rollout_id=[0, 0, 1, 0],
                           step=["g x", "s y", "? z", "g w"]))
    out = annotate(df, lambda t: {"g": "grounding", "s": "synthesis"}.get(t[0]))
    assert out["rollout_key"].tolist() == ["a/r1/0", "a/r1/0", "a/r2/1", "b/r1/0"]
    c = label_counts(out).set_index(["dataset", "label"])
    assert c["steps"].to_dict() == {("a", "grounding"): 1, ("a", "synthesis"): 1, ("a", "unlabelled"): 1,
                                    ("b", "grounding"): 1}
    assert c.loc[("a", "grounding"), "share"] == pytest.approx(1 / 3) and c.loc[("b", "grounding"), "share"] == 1.0


def test_distribution_summary_and_histogram_against_pandas_and_numpy():
    steps = with_supports(_labelled_steps(2), "sum")
    steps.loc[steps.index[0], "G_a"] = np.nan  # non-finite steps are left out
    summ = distribution_summary(steps, signals=("G_a", "G_p")).set_index(["signal", "label"])
    ref = steps.groupby("label")[["G_a", "G_p"]].describe()
    for sig in ("G_a", "G_p"):
        for lab in ("grounding", "synthesis"):
            row, r = summ.loc[(sig, lab)], ref.loc[lab, sig]
            assert row["n"] == r["count"]
            for a, b in (("mean", "mean"), ("sd", "std"), ("q25", "25%"), ("median", "50%"), ("q75", "75%"),
                         ("min", "min"), ("max", "max")):
                assert row[a] == pytest.approx(r[b])
    hist = distribution_histogram(steps, signals=("G_a",), bins=7)
    fin = steps[np.isfinite(steps.G_a)]
    edges = np.histogram_bin_edges(fin.G_a, bins=7)
    for lab, h in hist.groupby("label"):
        dens, _ = np.histogram(fin.loc[fin.label == lab, "G_a"], bins=edges, density=True)
        np.testing.assert_allclose(h["density"], dens)
        assert h["count"].sum() == (fin.label == lab).sum()
