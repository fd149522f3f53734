"""Monte-Carlo check of the probe (edit_lib/signals/montecarlo.py; beyond the paper, issue 9 item 8): JSD and
Spearman against hand computations and scipy, the empirical belief from a stub sampler with known marks, the
Monte-Carlo oracle selection on a hand-built table, and one small real run on the micro grader."""
import math

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.spatial.distance import jensenshannon
from scipy.stats import spearmanr

import edit_lib.signals.montecarlo as mcmod
from edit_lib.config import Decoding, BeliefCheckConfig, ModelConfig, ProbeConfig
from edit_lib.data.synthetic import WorldConfig, generate_world
from edit_lib.model.policy import Policy, load_policy
from edit_lib.segment import segment
from edit_lib.config import SelectionConfig
from edit_lib.selection import mc_selection
from edit_lib.signals.montecarlo import (compare_with_probe, empirical_belief, jensen_shannon, mc_beliefs,
                                         probe_vs_mc, rank_correlation)

torch.set_num_threads(1)
KEYS = ["dataset", "response_id", "rollout_id"]


# ------------------------------------------------------------------------------------------------ JSD, Spearman

def test_jsd_hand_cases_and_scipy_convention():
    # p = (1, 0), q = (1/2, 1/2): a = (3/4, 1/4); KL(p||a) = ln(4/3), KL(q||a) = ln(4/3) / 2 -> JSD = 3/4 ln(4/3)
    assert jensen_shannon([1, 0], [0.5, 0.5]) == pytest.approx(0.75 * math.log(4 / 3), abs=1e-12)
    assert jensen_shannon([1, 0, 0], [0, 0, 1]) == pytest.approx(math.log(2), abs=1e-12)  # disjoint: ln 2
    assert jensen_shannon([0.2, 0.3, 0.5], [0.2, 0.3, 0.5]) == pytest.approx(0.0, abs=1e-15)
    # scipy returns the JS *distance* sqrt(JSD) (natural log by default): its square is our divergence
    rng = np.random.default_rng(0)
    for _ in range(20):
        p, q = rng.dirichlet(np.ones(5)), rng.dirichlet(np.ones(5))
        assert jensen_shannon(p, q) == pytest.approx(jensenshannon(p, q) ** 2, rel=1e-9)
        assert jensen_shannon(p, q) != pytest.approx(jensenshannon(p, q), rel=1e-3)
    with pytest.raises(ValueError, match="different supports"):
        jensen_shannon([1, 0], [1, 0, 0])
    with pytest.raises(ValueError, match="not probability"):
        jensen_shannon([0.5, 0.6], [1, 0])


def test_rank_correlation_hand_table_and_nan_reasons():
    x = [1, 2, 3, 4, 5]
    y = [5, 6, 7, 8, 7]  # ranks of y: 1, 2, 3.5, 5, 3.5 -> rho = 8 / sqrt(10 * 9.5)
    rho, p, n, note = rank_correlation(x, y)
    assert rho == pytest.approx(8 / math.sqrt(95), abs=1e-12) and n == 5 and note == ""
    assert (rho, p) == pytest.approx(tuple(spearmanr(x, y)))
    rho, _, n, _ = rank_correlation([1, np.nan, 2, 3, 4], [4, 1, 3, 2, np.nan])  # pairs with a NaN are dropped
    assert n == 3 and rho == pytest.approx(-1.0)
    assert rank_correlation([1, 2], [2, 1])[2:] == (2, "fewer than 3 steps (2)")
    assert math.isnan(rank_correlation([1, 2, 3], [0, 0, 0])[0])
    assert rank_correlation([1, 1, 1], [0, 1, 2])[3] == "constant probe delta-eps"
    assert rank_correlation([1, 2, 3], [0, 0, 0])[3] == "constant Monte-Carlo delta-eps"


def _tables():
    """A probe table and a Monte-Carlo table for one 2-step rollout (+ one 3-step rollout), max mark 2."""
    probe = pd.DataFrame([
        dict(dataset="d", response_id="r1", rollout_id=0, k=0, n_steps=2, probs=[0.5, 0.5, 0.0], expected=0.5,
             delta_eps=np.nan),
        dict(dataset="d", response_id="r1", rollout_id=0, k=1, n_steps=2, probs=[1.0, 0.0, 0.0], expected=0.0,
             delta_eps=-0.5),
        dict(dataset="d", response_id="r1", rollout_id=0, k=2, n_steps=2, probs=[0.0, 0.0, 1.0], expected=2.0,
             delta_eps=2.0),
        *[dict(dataset="d", response_id="r2", rollout_id=1, k=k, n_steps=3, probs=[0.0, 1.0, 0.0], expected=1.0,
               delta_eps=np.nan if k == 0 else d) for k, d in zip(range(4), [0, 0.3, 0.1, -0.2])],
        dict(dataset="d", response_id="r9", rollout_id=0, k=0, n_steps=0, probs=[1, 0, 0], expected=0.0,
             delta_eps=np.nan),  # probed but not sampled: not in the comparison
    ])
    mc = pd.DataFrame([
        dict(dataset="d", response_id="r1", rollout_id=0, k=0, n_steps=2, u=0.0, gold=1, n_parsed=2, n_unparsed=0,
             mc_probs=[1.0, 0.0, 0.0], mc_expected=0.0, mc_delta_eps=np.nan),
        dict(dataset="d", response_id="r1", rollout_id=0, k=1, n_steps=2, u=0.5, gold=1, n_parsed=0, n_unparsed=2,
             mc_probs=[np.nan] * 3, mc_expected=np.nan, mc_delta_eps=np.nan),
        dict(dataset="d", response_id="r1", rollout_id=0, k=2, n_steps=2, u=1.0, gold=1, n_parsed=1, n_unparsed=1,
             mc_probs=[0.0, 0.0, 1.0], mc_expected=2.0, mc_delta_eps=np.nan),
        *[dict(dataset="d", response_id="r2", rollout_id=1, k=k, n_steps=3, u=k / 3, gold=1, n_parsed=2,
               n_unparsed=0, mc_probs=[0.0, 1.0, 0.0], mc_expected=1.0, mc_delta_eps=np.nan if k == 0 else d)
          for k, d in zip(range(4), [0, 0.5, 0.0, -1.0])],
    ])
    return probe, mc


def test_compare_with_probe_by_hand():
    probe, mc = _tables()
    t = probe_vs_mc(probe, mc)
    assert len(t) == 7  # r9 (probe only) is not compared
    r1 = t[t["response_id"] == "r1"].set_index("k")
    assert r1.loc[0, "jsd"] == pytest.approx(0.75 * math.log(4 / 3))
    assert math.isnan(r1.loc[1, "jsd"]) and r1.loc[2, "jsd"] == pytest.approx(0.0)
    assert r1.loc[0, "abs_expected_diff"] == pytest.approx(0.5)
    s = compare_with_probe(probe, mc).iloc[0]
    assert (s["rollouts"], s["boundaries"], s["boundaries_used"]) == (2, 7, 6)
    assert s["unparsed_share"] == pytest.approx(3 / 14)
    assert s["jsd_mean"] == pytest.approx(0.75 * math.log(4 / 3) / 6)
    assert s["abs_expected_diff_mean"] == pytest.approx(0.5 / 6)
    # steps with both shifts: r2's k = 1..3 -> probe (0.3, 0.1, -0.2) vs MC (0.5, 0.0, -1.0): same order, rho = 1
    assert s["steps_used"] == 3 and s["spearman_rho"] == pytest.approx(1.0) and s["spearman_note"] == ""
    with pytest.raises(ValueError, match="no probe row"):
        probe_vs_mc(probe[probe["response_id"] != "r2"], mc)
    bad = probe.copy()
    bad.loc[bad["response_id"] == "r2", "n_steps"] = 4
    with pytest.raises(ValueError, match="same steps.rule"):
        probe_vs_mc(bad, mc)


# ------------------------------------------------------------------------------ the empirical belief (stub sampler)

def test_empirical_belief_counts_parsed_marks_only():
    probs, ok, bad = empirical_belief([2, None, 0, 2], 3)
    assert probs.tolist() == pytest.approx([1 / 3, 0, 2 / 3, 0]) and (ok, bad) == (3, 1)
    probs, ok, bad = empirical_belief([None, None], 2)
    assert np.isnan(probs).all() and (ok, bad) == (0, 2)


class _StubPolicy:
    model, tokenizer = "model", "tokenizer"

    def grading_input(self, q, answer):
        return f"<grade {q.id}>"


def test_mc_beliefs_from_stub_sampler(monkeypatch):
    world = generate_world(WorldConfig(shape="sas_like", n_questions=2, answers_per_question=2, ood_questions=0))
    r = world.responses[0]
    q = world.question(r)
    text = "1. first point\n2. second point\n3. third point\nFinal mark: 0/9\n"
    bounds = segment(text, "lines").bounds
    assert len(bounds) == 4
    # the continuation's mark at boundary k (None: no mark line); the gold mark is r.gold
    table = {0: ["Final mark: 0", "Final mark: 0", "garbage", "Final mark: 1"],
             1: ["x\nFinal mark: 1", "Final mark: 1", "Final mark: 1", "Final mark: 1"],
             2: ["nothing"] * 4,
             3: [f"Final mark: {q.max_mark + 1}", "Final mark: 1", "Final mark: 0", "Final mark: 0"]}
    seen = {}

    def fake_generate(policy, prompts, cfg, progress=True):
        seen.update(prompts=list(prompts), cfg=cfg)
        rows = []
        for i, p in enumerate(prompts):
            k = next(k for k in range(4) if p == f"<grade {q.id}>" + text[:bounds[k]])
            rows += [dict(prompt_index=i, rollout_id=j, text=t, finished=j != 0) for j, t in enumerate(table[k])]
        return pd.DataFrame(rows)

    monkeypatch.setattr(mcmod, "policy_generate", fake_generate)
    roll = pd.DataFrame([dict(dataset=world.name, response_id=r.id, rollout_id=3, text=text, n_steps=3)])
    cfg = BeliefCheckConfig(samples=4, max_rollouts=1, decoding=Decoding(temperature=0.9, max_new_tokens=0))
    mc = mc_beliefs(_StubPolicy(), {world.name: world}, roll, cfg, rule="lines", max_new_tokens=77,
                    batch_size=5, seed=11, progress=False).set_index("k")
    c = seen["cfg"]
    assert (c.n, c.temperature, c.max_new_tokens, c.seed, c.batch_size, c.greedy) == (4, 0.9, 77, 11, 5, False)
    assert seen["prompts"] == [f"<grade {q.id}>" + text[:b] for b in bounds]
    assert "Final mark" not in seen["prompts"][-1]
    assert mc["n_parsed"].tolist() == [3, 4, 0, 3] and mc["n_unparsed"].tolist() == [1, 0, 4, 1]
    assert (mc["samples"] == 4).all() and (mc["n_unfinished"] == 1).all()
    m = q.max_mark
    assert mc.loc[0, "mc_probs"] == pytest.approx([2 / 3, 1 / 3] + [0] * (m - 1))
    assert mc.loc[0, "mc_marks"] == [0, 0, None, 1]
    expected = [1 / 3, 1.0, np.nan, 1 / 3]
    np.testing.assert_allclose(mc["mc_expected"], expected)
    eps = np.abs(np.array(expected) - r.gold)
    np.testing.assert_allclose(mc["mc_eps"], eps)
    np.testing.assert_allclose(mc["mc_delta_eps"], [np.nan, eps[0] - eps[1], np.nan, np.nan])
    assert mc["u"].tolist() == pytest.approx([0, 1 / 3, 2 / 3, 1])
    with pytest.raises(ValueError, match="row 0 .*n_steps = 5"):
        mc_beliefs(_StubPolicy(), {world.name: world}, roll.assign(n_steps=5), cfg, rule="lines", progress=False)
    with pytest.raises(KeyError, match="row 0"):
        mc_beliefs(_StubPolicy(), {world.name: world}, roll.assign(response_id="nope"), cfg, rule="lines",
                   progress=False)


# ------------------------------------------------------------------------------------------- Monte-Carlo oracle

def test_mc_selection_hand_table():
    mc = pd.DataFrame(
        [dict(dataset="d", response_id="a", rollout_id=0, k=k, n_steps=4, mc_delta_eps=d)
         for k, d in enumerate([np.nan, -0.5, 0.2, -0.5, -1.0])]
        + [dict(dataset="d", response_id="b", rollout_id=0, k=k, n_steps=2, mc_delta_eps=d)
           for k, d in enumerate([np.nan, -0.04, np.nan])]  # near-tie and a NaN: nothing selected
        + [dict(dataset="d", response_id="c", rollout_id=0, k=k, n_steps=1, mc_delta_eps=d)
           for k, d in enumerate([np.nan, -2.0])])  # checked but not in the step table
    steps = pd.DataFrame([dict(dataset="d", response_id=r, rollout_id=0, k=k, n_steps=T)
                          for r, T in (("a", 4), ("b", 2), ("z", 3)) for k in range(1, T + 1)])
    out = mc_selection(steps, mc, SelectionConfig(shortlist_k=3, budget_n=2, tie_margin=0.05))
    # a: shortlist by most negative: k=4 (-1.0), then k=1 and k=3 tie at -0.5 -> earlier first; budget 2
    assert out[["response_id", "k", "rank"]].values.tolist() == [["a", 4, 0], ["a", 1, 1]]
    assert out["delta_eps"].tolist() == [-1.0, -0.5] and (out["rule"] == "mc_oracle").all()
    assert out["u"].tolist() == [1.0, 0.25]
    assert out.attrs == dict(rollouts=2, steps_without_mc=1, mc_without_steps=1)
    assert mc_selection(steps, mc, SelectionConfig(shortlist_k=1, budget_n=2))["k"].tolist() == [4]
    bad = steps.copy()
    bad.loc[bad["response_id"] == "a", "n_steps"] = 5
    with pytest.raises(ValueError, match="d/a/0"):
        mc_selection(bad, mc, SelectionConfig())


# ------------------------------------------------------------------------------------ real run on the micro grader

def test_mc_beliefs_on_micro_grader_shapes_and_probe_comparison():
    from edit_lib.embedded.teacher import teacher_grade
    from edit_lib.signals.tables import probe_table

    model, tok, kind = load_policy("micro", ModelConfig(name_or_path="micro", torch_threads=1,
                                                        local_files_only=True))
    pol = Policy(model=model, tokenizer=tok, kind=kind, name="micro")
    world = generate_world(WorldConfig(shape="sas_like", n_questions=2, answers_per_question=2, ood_questions=0,
                                       seed=3))
    r = world.responses[0]
    text = teacher_grade(world.question(r), r, np.random.default_rng(0), None).completion
    T = segment(text).n_steps
    roll = pd.DataFrame([dict(dataset=world.name, response_id=r.id, rollout_id=0, text=text, n_steps=T,
                              correct=False)])
    cfg = BeliefCheckConfig(samples=2, max_rollouts=1, decoding=Decoding(temperature=1.0, max_new_tokens=0))
    mc = mc_beliefs(pol, {world.name: world}, roll, cfg, max_new_tokens=96, batch_size=16, seed=0, progress=False)
    assert mc["k"].tolist() == list(range(T + 1)) and (mc["samples"] == 2).all()
    assert ((mc["n_parsed"] + mc["n_unparsed"]) == 2).all()
    assert all(len(p) == world.question(r).max_mark + 1 for p in mc["mc_probs"])
    assert all(len(m) == 2 for m in mc["mc_marks"])
    again = mc_beliefs(pol, {world.name: world}, roll, cfg, max_new_tokens=96, batch_size=16, seed=0,
                       progress=False)
    assert again["mc_marks"].tolist() == mc["mc_marks"].tolist()  # seeded
    beliefs = probe_table(pol, {world.name: world}, roll, ProbeConfig(), progress=False)
    s = compare_with_probe(beliefs, mc)
    assert s["boundaries"].tolist() == [T + 1]
    assert s["boundaries_used"].iloc[0] == int((mc["n_parsed"] >= 1).sum())
    used = s["jsd_mean"].iloc[0]
    assert np.isnan(used) or 0 <= used <= math.log(2) + 1e-12
