"""Question-level significance (App. G, Table 3) against independent computations: scikit-learn's kappa,
naive Python-loop bootstraps over the returned index matrix, and statsmodels' Holm."""
import math

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.multitest import multipletests

from edit_lib import metrics
from edit_lib.evaluation.significance import (PAPER_FAMILY, bootstrap_p, cluster_bootstrap, format_table3, holm,
                                              pooled_qwk, question_table, resample_indices, significance_table)


def _preds(seed, systems=("base", "edit_sft"), n_q=8, fail_rate=0.1):
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(n_q):
        m = int(rng.integers(1, 6))
        n = int(rng.integers(2, 15))
        gold = rng.integers(0, m + 1, n)
        for s in systems:
            pred = np.clip(gold + rng.integers(-2, 3, n), 0, m).astype(float)
            pred[rng.random(n) < fail_rate] = np.nan
            rows += [dict(system=s, dataset="sas", split="test", question_id=f"q{q}", response_id=f"r{q}_{i}",
                          gold=int(gold[i]), mark=pred[i], max_mark=m) for i in range(n)]
    return pd.DataFrame(rows)


def _per_question(seed, systems, n_q=12, nan_rate=0.1):
    rng = np.random.default_rng(seed)
    rows = []
    for s in systems:
        v = rng.uniform(0.2, 1.0, n_q)
        v[rng.random(n_q) < nan_rate] = np.nan
        rows += [dict(system=s, question_id=f"q{q:02d}", qwk=v[q]) for q in range(n_q)]
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- question_table, pooled_qwk

@pytest.mark.parametrize("seed", range(3))
def test_question_table_matches_sklearn_and_farthest_mark(seed):
    df = _preds(seed)
    qt = question_table(df, invalid="wrong")
    assert len(qt) == df.groupby(["system", "question_id"]).ngroups
    for _, r in qt.iterrows():
        g = df[(df.system == r.system) & (df.question_id == r.question_id)]
        m = int(g.max_mark.iloc[0])
        pred = [metrics.farthest_mark(int(gd), m) if pd.isna(p) else int(p) for gd, p in zip(g.gold, g.mark)]
        assert r.n == len(g) and r.n_invalid == int(g.mark.isna().sum())
        if len(set(g.gold)) == 1 and len(set(pred)) == 1 and pred[0] == g.gold.iloc[0]:
            assert math.isnan(r.qwk)
            continue
        ref = cohen_kappa_score(g.gold.tolist(), pred, weights="quadratic", labels=list(range(m + 1)))
        assert r.qwk == pytest.approx(ref, nan_ok=True)
    # the macro over defined questions is metrics.grading_metrics' qwk under the same invalid mode
    for mode in ("wrong", "zero", "exclude"):
        qt = question_table(df, invalid=mode)
        for s, g in df.groupby("system"):
            gm = metrics.grading_metrics(g.question_id, g.gold, [None if pd.isna(p) else int(p) for p in g.mark],
                                         g.max_mark.tolist(), invalid=mode)
            assert pooled_qwk(qt[qt.system == s].qwk.to_numpy()) == pytest.approx(gm["qwk"], nan_ok=True)


def test_question_table_failed_parse_is_farthest_mark():
    df = pd.DataFrame(dict(system="a", dataset="d", split="t", question_id="q", response_id=["1", "2", "3"],
                           gold=[0, 3, 1], mark=[np.nan, 3, 1], max_mark=3))
    got = question_table(df).qwk.iloc[0]
    assert got == pytest.approx(cohen_kappa_score([0, 3, 1], [3, 3, 1], weights="quadratic", labels=range(4)))
    assert question_table(df, invalid="zero").qwk.iloc[0] == pytest.approx(1.0)
    excl = question_table(df, invalid="exclude").iloc[0]
    assert excl.n == 2 and excl.qwk == pytest.approx(1.0)


def test_pooled_qwk_ignores_nan():
    assert pooled_qwk(np.array([0.5, np.nan, 0.7, 0.9])) == pytest.approx(0.7)
    assert math.isnan(pooled_qwk(np.array([np.nan, np.nan])))
    assert math.isnan(pooled_qwk(np.array([])))


# ---------------------------------------------------------------- cluster bootstrap

def test_bootstrap_reproducible_and_seed_dependent():
    pq = _per_question(0, ["base", "x", "y"])
    a = cluster_bootstrap(pq, ["base", "x", "y"], n_boot=500, seed=3)
    b = cluster_bootstrap(pq, ["base", "x", "y"], n_boot=500, seed=3)
    c = cluster_bootstrap(pq, ["base", "x", "y"], n_boot=500, seed=4)
    pd.testing.assert_frame_equal(a["table"], b["table"])
    assert np.array_equal(a["indices"], b["indices"]) and not np.array_equal(a["indices"], c["indices"])
    assert not np.allclose(a["boot"], c["boot"], equal_nan=True)
    assert np.array_equal(a["indices"], resample_indices(a["n_questions"], 500, 3))


def test_bootstrap_resamples_whole_questions_naive_loop():
    systems = ["base", "x", "y"]
    pq = _per_question(1, systems, n_q=7, nan_rate=0.3)
    res = cluster_bootstrap(pq, systems, n_boot=60, seed=0)
    idx, qids = res["indices"], res["question_ids"]
    assert idx.shape == (60, 7) and idx.min() >= 0 and idx.max() < 7
    val = {(r.system, r.question_id): r.qwk for r in pq.itertuples()}
    for i, s in enumerate(systems):
        for b in range(60):
            drawn = [qids[j] for j in idx[b]]  # whole question ids: one QWK per draw, shared by all systems
            v = [val[(s, q)] for q in drawn if not math.isnan(val[(s, q)])]
            exp = sum(v) / len(v) if v else math.nan
            assert res["boot"][i, b] == pytest.approx(exp, nan_ok=True)
            d = [val[(s, q)] - val[("base", q)] for q in drawn
                 if not (math.isnan(val[(s, q)]) or math.isnan(val[("base", q)]))]
            exp_d = sum(d) / len(d) if d else math.nan
            assert res["delta_boot"][i, b] == pytest.approx(exp_d, nan_ok=True)
    t = res["table"].set_index("system")
    for i, s in enumerate(systems):
        bb = res["boot"][i][~np.isnan(res["boot"][i])]
        assert t.loc[s, "ci_low"] == pytest.approx(np.percentile(bb, 2.5))
        assert t.loc[s, "n_boot_nan"] == int(np.isnan(res["boot"][i]).sum())
        if s != "base":
            db = res["delta_boot"][i][~np.isnan(res["delta_boot"][i])]
            exp_p = min(1, 2 * min((1 + (db <= 0).sum()) / (len(db) + 1), (1 + (db >= 0).sum()) / (len(db) + 1)))
            assert t.loc[s, "p"] == pytest.approx(exp_p)


def test_paired_constant_shift_and_identical():
    base = np.random.default_rng(0).uniform(0.3, 0.8, 15)
    base[[2, 9]] = np.nan
    c = 0.05
    pq = pd.concat([pd.DataFrame(dict(system=s, question_id=range(15), qwk=v))
                    for s, v in (("base", base), ("shift", base + c), ("same", base.copy()))])
    B = 999
    t = cluster_bootstrap(pq, ["base", "shift", "same"], n_boot=B, seed=1)["table"].set_index("system")
    assert t.loc["shift", "delta"] == pytest.approx(c)
    assert t.loc["shift", "delta_ci_low"] == pytest.approx(c) and t.loc["shift", "delta_ci_high"] == pytest.approx(c)
    assert t.loc["shift", "p"] == pytest.approx(2 / (B + 1))
    assert t.loc["shift", "n_paired"] == 13 and t.loc["shift", "n_undefined"] == 2
    assert t.loc["same", "delta"] == 0 and t.loc["same", "p"] == 1
    assert math.isnan(t.loc["base", "delta"]) and t.loc["base", "n_defined"] == 13


@pytest.mark.parametrize("seed", range(5))
def test_point_estimate_inside_ci(seed):
    systems = ["base", "a", "b", "c"]
    t = cluster_bootstrap(_per_question(seed, systems, n_q=30), systems, n_boot=2000, seed=seed)["table"]
    assert (t.ci_low <= t.qwk).all() and (t.qwk <= t.ci_high).all()
    d = t[t.system != "base"]
    assert (d.delta_ci_low <= d.delta).all() and (d.delta <= d.delta_ci_high).all()
    assert ((d.p > 0) & (d.p <= 1)).all()


def test_bootstrap_p_counts_nan_resamples_out():
    assert bootstrap_p(np.array([np.nan, 1.0, 2.0])) == pytest.approx(2 / 3)
    assert math.isnan(bootstrap_p(np.array([np.nan])))


# ---------------------------------------------------------------- Holm

@pytest.mark.parametrize("n,seed", [(1, 0), (2, 1), (6, 2), (6, 3), (10, 4), (37, 5)])
def test_holm_matches_statsmodels(n, seed):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0, 0.3, n) ** 2
    if n >= 4:
        p[1] = p[3]  # ties
        p[0] = p[1]
    np.testing.assert_allclose(holm(p), multipletests(p, method="holm")[1])


def test_holm_nan_passthrough_not_counted():
    p = np.array([0.01, np.nan, 0.04, 0.03])
    got = holm(p)
    assert math.isnan(got[1])
    np.testing.assert_allclose(got[[0, 2, 3]], multipletests(p[[0, 2, 3]], method="holm")[1])
    assert holm([]).size == 0 and np.isnan(holm([np.nan])).all()
    with pytest.raises(ValueError):
        holm([1.2])


# ---------------------------------------------------------------- significance_table, format_table3

def test_significance_table_families_and_holm():
    systems = ["base", *PAPER_FAMILY, "extra_a", "extra_b"]
    pq = pd.concat([_per_question(0, systems, n_q=10).assign(dataset="sas"),
                    _per_question(1, systems[:4], n_q=9).assign(dataset="bio")])
    pq.loc[(pq.dataset == "sas") & (pq.system == "edit_sft") & (pq.question_id == "q03"), "qwk"] = np.nan
    sig = significance_table(pq, n_boot=300, seed=7)
    assert list(sig.dataset.unique()) == ["bio", "sas"]
    for ds, g in sig.groupby("dataset"):
        fam = dict(zip(g.system, g.family))
        assert fam["base"] == "reference" and math.isnan(g[g.system == "base"].p_holm.iloc[0])
        for f in ("paper", "other"):
            sel = g[g.family == f]
            np.testing.assert_allclose(sel.p_holm, holm(sel.p.to_numpy()))
        paper = g[g.family == "paper"]
        assert set(paper.system) == set(PAPER_FAMILY) & set(g.system)
        # scope i is seeded seed + i and reproduces cluster_bootstrap alone
        i = sorted(sig.dataset.unique()).index(ds)
        sub = pq[pq.dataset == ds]
        ref = cluster_bootstrap(sub, list(g.system), n_boot=300, seed=7 + i)["table"]
        np.testing.assert_allclose(g.qwk, ref.qwk)
        np.testing.assert_allclose(g.ci_low, ref.ci_low)
        np.testing.assert_allclose(g.p, ref.p)
    sas = sig[sig.dataset == "sas"].set_index("system")
    assert set(sas[sas.family == "other"].index) == {"extra_a", "extra_b"}
    assert (sas.n_questions == 10).all()
    raw = pq[pq.dataset == "sas"].groupby("system").qwk.apply(lambda v: int(v.notna().sum()))
    assert (sas.n_defined == raw.reindex(sas.index)).all()
    ok = {s: pq[(pq.dataset == "sas") & (pq.system == s)].set_index("question_id").qwk.notna() for s in systems}
    for s in systems[1:]:
        assert sas.loc[s, "n_paired"] == int((ok[s] & ok["base"]).sum())
        assert sas.loc[s, "n_defined"] + (sas.loc[s, "n_questions"] - sas.loc[s, "n_defined"]) == 10
    assert not ok["edit_sft"]["q03"]


def test_format_table3_layout():
    sig = pd.DataFrame([
        dict(dataset="sas", system="base", family="reference", qwk=0.76, ci_low=0.677, ci_high=0.83,
             delta=np.nan, p_holm=np.nan),
        dict(dataset="sas", system="base_grpo", family="paper", qwk=0.794, ci_low=0.707, ci_high=0.867,
             delta=0.034, p_holm=0.391),
        dict(dataset="sas", system="edit_sft", family="paper", qwk=0.831, ci_low=0.764, ci_high=0.887,
             delta=0.072, p_holm=6 / 10001)])
    out = format_table3(sig, {"base": "Base", "base_grpo": "GRPO"})
    assert out["Method"].tolist() == ["Base", "GRPO", "edit_sft"]
    assert out["QWK [95% CI]"].iloc[0] == "0.760 [0.677, 0.830]"
    assert out["Δ vs Base (Holm p)"].tolist() == ["--", "+0.034 (p=0.391)", "+0.072 (p=0.0006)"]


def test_scopes_with_few_questions_are_flagged():
    rng = np.random.default_rng(1)
    rows = [dict(dataset=d, system=s, question_id=f"q{i}", qwk=float(rng.uniform(0.2, 0.9)))
            for d, nq in (("small", 3), ("large", 12)) for s in ("base", "edit_sft") for i in range(nq)]
    sig = significance_table(pd.DataFrame(rows), n_boot=200, seed=0, min_questions=10)
    flags = sig.groupby("dataset")["few_questions"].agg(["all", "any"])
    assert flags.loc["small", "all"] and not flags.loc["large", "any"]
    t3 = format_table3(sig, {"base": "Base", "edit_sft": "EDIT-SFT"})
    assert t3.loc[t3["dataset"] == "small", "QWK [95% CI]"].str.contains("only 3 questions").all()
    assert not t3.loc[t3["dataset"] == "large", "QWK [95% CI]"].str.contains("only").any()
