"""One summary of a paired bootstrap (``power.paired_summary``) for App. G's question-level bootstrap, the
response-level one and Table 12's rollout-paired contrast: at ci = 0.95 each gives bit for bit what it gave
before the three shared it (values pinned from the code before the change, as float hex), and each follows
``ci`` (ci = 0.9: the 5th/95th percentiles and an MDE with z_0.95) against numpy and scipy."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from edit_lib.evaluation.significance import response_bootstrap
from edit_lib.evaluation.significance import cluster_bootstrap, pairwise_table
from edit_lib.power import paired_summary
from edit_lib.revision.pool import paired_success_contrast
from rewrite_outcomes import paired_rewrite_outcomes

SYSTEMS = ["base", "edit_sft", "int_sft", "sparse"]


def question_qwks():
    """Per-question QWKs of four systems on 12 questions; 'sparse' is defined on 2 only, so some resamples draw
    none of its questions (NaN replicates, left out)."""
    rng = np.random.default_rng(11)
    rows = []
    for s in SYSTEMS:
        v = rng.uniform(0.2, 1.0, 12)
        v[rng.random(12) < 0.15] = np.nan
        if s == "sparse":
            v[2:] = np.nan
        rows += [dict(system=s, question_id=f"q{q:02d}", qwk=v[q]) for q in range(12)]
    return pd.DataFrame(rows)


def response_marks():
    rng = np.random.default_rng(1)
    rows = []
    for q in ("a", "b", "c"):
        for i in range(25):
            g = int(rng.integers(0, 4))
            good = g if rng.random() < 0.7 else int(rng.integers(0, 4))
            for s, m in (("base", int(rng.integers(0, 4))), ("edit_sft", good)):
                rows.append(dict(system=s, seed=np.nan, dataset="d", split="id_test", question_id=q,
                                 response_id=f"{q}{i}", gold=g, max_mark=3, mark=m))
    df = pd.DataFrame(rows)
    df["mark"] = df["mark"].astype("Int64")
    return df


def _cluster(ci=0.95):
    return cluster_bootstrap(question_qwks(), SYSTEMS, n_boot=400, ci=ci, seed=7)


def _pairwise(ci=0.95):
    return pairwise_table(question_qwks().assign(dataset="d"), n_boot=400, ci=ci, seed=3, target="edit_sft",
                          rivals=("base", "int_sft"), pairs=(("edit_sft", "sparse"),))


def _response(ci=0.95):
    return response_bootstrap(response_marks(), ["edit_sft"], n_boot=300, ci=ci, seed=2)


def _contrast(ci=0.95):
    return paired_success_contrast(paired_rewrite_outcomes(seed=0), n_boot=300, ci=ci, seed=5)


# What the three functions returned at ci = 0.95 before they shared power.paired_summary.
BEFORE = {
    ('cluster', 'base'): ('0x1.8d0bc54bacf67p-2', '0x1.59177552fd2a4p-1', 'nan', 'nan', 'nan', 'nan'),
    ('cluster', 'edit_sft'): ('0x1.a8503f601d1cfp-2', '0x1.58edfdd683043p-1', '-0x1.310da062fe988p-2',
                              '0x1.12e28c22d91c4p-2', '0x1.16a090a4b141bp-3', '0x1.864c86d4d1119p-2'),
    ('cluster', 'int_sft'): ('0x1.4233b4317f3a5p-2', '0x1.50bd989f78a22p-1', '-0x1.d547edf979822p-2',
                             '0x1.184b3a2874912p-3', '0x1.3582485430908p-3', '0x1.b18ecc1fae39bp-2'),
    ('cluster', 'sparse'): ('0x1.b7076c7e1014ap-3', '0x1.18e7a3e560f97p-2', '-0x1.8a4b3eb051ba7p-2',
                            '-0x1.d38491b0ca2b0p-6', '0x1.15bded10970d8p-3', '0x1.850f0d6f3dd09p-2'),
    ('pairwise', 'edit_sft', 'base'): ('-0x1.227351ac438cep-2', '0x1.0e4ef161b2e3ep-2', '0x1.1fbc48f4ec51cp-3',
                                       '0x1.930ec864ff79dp-2'),
    ('pairwise', 'edit_sft', 'sparse'): ('0x1.aa98888856a6cp-3', '0x1.d5eb9d9723a3fp-2', '0x1.876ea396b6bf8p-4',
                                         '0x1.12285c1287595p-2'),
    ('response', 'base'): ('-0x1.83b90a91c07ccp-3', '0x1.8e1443073f28fp-3', 'nan', 'nan', 'nan', 'nan'),
    ('response', 'edit_sft'): ('0x1.bbed1c41e77f9p-2', '0x1.ae77ceec1c788p-1', '0x1.90a106012b25bp-2',
                               '0x1.d9322d96d3156p-1', '0x1.14ff1600a554fp-3', '0x1.8403b99fd72edp-2'),
    ('contrast', 'd'): ('0x0.0p+0', '0x1.872f41eeac88bp-2', '0x1.9ac59e3203a14p-4', '0x1.1fb401cb1f00ap-2'),
}


def _hex(row, cols):
    return tuple(float(row[c]).hex() for c in cols)


def test_the_three_give_bit_for_bit_what_they_gave_at_095():
    t = _cluster()["table"]
    assert t.set_index("system").loc["sparse", "n_boot_nan_delta"] > 0  # the NaN replicates are exercised
    got = {("cluster", r["system"]): _hex(r, ("ci_low", "ci_high", "delta_ci_low", "delta_ci_high", "delta_se",
                                              "mde")) for r in t.to_dict("records")}
    got.update({("pairwise", r["system"], r["versus"]): _hex(r, ("delta_ci_low", "delta_ci_high", "delta_se", "mde"))
                for r in _pairwise().to_dict("records")})
    got.update({("response", r["system"]): _hex(r, ("qwk_lo", "qwk_hi", "delta_lo", "delta_hi", "delta_se", "mde"))
                for r in _response().to_dict("records")})
    got.update({("contrast", r["dataset"]): _hex(r, ("delta_ci_low", "delta_ci_high", "delta_se", "mde"))
                for r in _contrast().to_dict("records")})
    assert got == BEFORE


Z90_MDE = stats.norm.ppf(0.95) + stats.norm.ppf(0.8)  # two-sided alpha = 0.1 at 80% power


def _check_ci90(boot, lo, hi, se, mde):
    b = boot[~np.isnan(boot)]
    assert (lo, hi) == pytest.approx(tuple(np.percentile(b, [5, 95])), rel=1e-12)
    assert se == pytest.approx(np.std(b, ddof=1), rel=1e-12)
    assert mde == pytest.approx(Z90_MDE * se, rel=1e-12)


def test_the_question_level_bootstrap_follows_ci():
    res = _cluster(ci=0.9)
    t = res["table"].set_index("system")
    for i, s in enumerate(res["systems"]):
        assert (t.loc[s, "ci_low"], t.loc[s, "ci_high"]) == pytest.approx(
            tuple(np.nanpercentile(res["boot"][i], [5, 95])), rel=1e-12)
        if s != "base":
            r = t.loc[s]
            _check_ci90(res["delta_boot"][i], r.delta_ci_low, r.delta_ci_high, r.delta_se, r.mde)
    pw = _pairwise(ci=0.9)
    assert len(pw) == 2 and np.allclose(pw["mde"], Z90_MDE * pw["delta_se"], rtol=1e-12, atol=0)


def test_the_response_level_bootstrap_follows_ci():
    wide, narrow = _response(0.95).set_index("system"), _response(0.9).set_index("system")
    e, e95 = narrow.loc["edit_sft"], wide.loc["edit_sft"]
    assert e.delta_se == e95.delta_se  # the same resamples: only the level moves
    assert e.mde == pytest.approx(Z90_MDE * e.delta_se, rel=1e-12) and e.mde < e95.mde
    assert e95.delta_lo < e.delta_lo < e.delta < e.delta_hi < e95.delta_hi
    assert wide.loc["base", "qwk_lo"] < narrow.loc["base", "qwk_lo"] < narrow.loc["base", "qwk_hi"] < wide.loc[
        "base", "qwk_hi"]


def test_the_rollout_paired_contrast_follows_ci():
    t = _contrast(ci=0.9).iloc[0]
    o = paired_rewrite_outcomes(seed=0)  # the same resamples written out: whole rollouts, both Success@N ratios
    per = o.groupby(["response_id", "rule"])["kept"].agg(["size", "sum"]).unstack("rule")
    idx = np.random.default_rng(5).integers(0, len(per), size=(300, len(per)))
    n, s = per["size"].to_numpy(float), per["sum"].to_numpy(float)
    boot = s[idx, 0].sum(1) / n[idx, 0].sum(1) - s[idx, 1].sum(1) / n[idx, 1].sum(1)
    _check_ci90(boot, t.delta_ci_low, t.delta_ci_high, t.delta_se, t.mde)


def test_a_degenerate_bootstrap_has_no_mde():
    """Every resample the same difference: SE 0, and no MDE (not 0, which would claim any effect detectable)."""
    s = paired_summary(0.25, np.full(50, 0.25))
    assert (s.delta, s.ci_low, s.ci_high, s.se) == (0.25, 0.25, 0.25, 0.0) and math.isnan(s.mde)
    s = paired_summary(0.1, np.array([np.nan, np.nan]))
    assert all(math.isnan(x) for x in (s.ci_low, s.ci_high, s.se, s.mde))
    with pytest.raises(ValueError, match="ci"):
        paired_summary(0.0, np.zeros(3), ci=95)
