"""EDIT-RL rewards (edit_lib/train/rewards.py; Sec. 2.3, Eq. 5-7): hand-computed Eq. 5 / Eq. 6 cases, the TRL
reward functions on hand-written completions, the parse-failure metric, and the batched frozen-probe shaping
reward against a naive one-completion-at-a-time probe on the micro grader."""
import numpy as np
import pytest
import torch

from edit_lib.config import ModelConfig, ProbeConfig
from edit_lib.data.synthetic import WorldConfig, generate_world
from edit_lib.embedded.teacher import teacher_grade
from edit_lib.model.policy import Policy, load_policy
from edit_lib.signals.probe import probe_readout, rollout_tokens
from edit_lib.signals.probe import probe_rollouts_naive
from edit_lib.train.rewards import (check_frozen, make_outcome_reward, make_shaping_reward, outcome_reward,
                                    shaping_penalty, total_reward)

torch.set_num_threads(1)
MICRO = ModelConfig(name_or_path="micro", torch_threads=1, local_files_only=True)


# ---------------------------------------------------------------------------------------------------------------
# Eq. 5-7 by hand

def test_outcome_reward_eq5_hand_cases():
    assert outcome_reward(3, 3, 5) == 1.0
    assert outcome_reward(2, 3, 5) == pytest.approx(0.8)  # 1 - 1/5
    assert outcome_reward(0, 3, 4) == pytest.approx(0.25)  # 1 - 3/4
    assert outcome_reward(0, 26, 26) == 0.0  # distance M_q: exactly 0
    assert outcome_reward(None, 3, 5) == 0.0  # parse failure
    with pytest.raises(ValueError, match="gold"):
        outcome_reward(1, 6, 5)
    with pytest.raises(ValueError, match="max_mark"):
        outcome_reward(1, 0, 0)


def test_shaping_penalty_eq6_hand_cases():
    # gold 2, M 4, beta 0.5; |m_hat - 2| = 0.2, 1.5, 3.0 -> excess 0, 1.0, 2.5 -> -(3.5/3)/4
    assert shaping_penalty([2.2, 0.5, 5.0], 2, 4, 0.5) == pytest.approx(-(3.5 / 3) / 4)
    # beta_drift tolerance: every drift within beta -> no penalty; beta 0 -> mean absolute error / M
    assert shaping_penalty([2.2, 1.5, 2.75], 2, 4, 0.75) == 0.0
    assert shaping_penalty([2.2, 1.5], 2, 4, 0.0) == pytest.approx(-((0.2 + 0.5) / 2) / 4)
    assert shaping_penalty([], 2, 4, 0.5) == 0.0  # T = 0: no step, nothing to penalise
    with pytest.raises(ValueError, match="beta_drift"):
        shaping_penalty([1.0], 1, 4, -0.1)


def test_total_reward_eq7():
    assert total_reward(0.8, -0.25, 0.1) == pytest.approx(0.775)
    assert total_reward(0.8, 0.0, 0.1) == pytest.approx(0.8)


# ---------------------------------------------------------------------------------------------------------------
# TRL reward functions

def test_outcome_reward_function_and_parse_failure_metric():
    fn = make_outcome_reward()
    logged = []
    completions = ["Step 1: ok\nFinal mark: 3", "Final mark : 1 / 5",  # tiny tokenizer's decoded spacing
                   "no mark here", "Final mark: 9", [{"role": "assistant", "content": "Final mark: 0"}]]
    out = fn(completions=completions, gold=[3, 3, 3, 3, 4], max_mark=[5, 5, 5, 5, 4],
             log_metric=lambda name, v: logged.append((name, v)), trainer_state=None)
    assert out == pytest.approx([1.0, 0.6, 0.0, 0.0, 0.0])  # 'no mark' and 9 > M_q are parse failures
    assert dict(logged) == {"parse_failures": 2.0, "parse_failure_rate": 0.4}
    assert fn.__name__ == "outcome_reward"
    assert fn(completions=["Final mark: 2"], gold=[2], max_mark=[2]) == [1.0]  # no log_metric: fine
    with pytest.raises(ValueError, match="completion 0"):
        fn(completions=["Final mark: 2"], gold=[3], max_mark=[2])


# ---------------------------------------------------------------------------------------------------------------
# shaping on the micro grader

@pytest.fixture(scope="module")
def frozen():
    model, tok, kind = load_policy("micro", MICRO)
    model.requires_grad_(False).eval()
    return Policy(model=model, tokenizer=tok, kind=kind, name="micro")


@pytest.fixture(scope="module")
def group(frozen):
    """Prompts (policy input text), teacher completions (several steps, some with an error, one empty) and golds."""
    world = generate_world(WorldConfig(shape="sas_like", n_questions=3, answers_per_question=2, ood_questions=0,
                                       seed=5))
    rng = np.random.default_rng(1)
    rows = []
    for r in world.responses[:5]:
        q = world.question(r)
        c = teacher_grade(q, r, rng).completion
        rows.append(dict(prompt=frozen.grading_input(q, r.answer), completion=c, gold=int(r.gold),
                         max_mark=int(q.max_mark), dataset="ds_a" if len(rows) % 2 else "ds_b"))
    q0, r0 = world.question(world.responses[0]), world.responses[0]
    rows.append(dict(prompt=frozen.grading_input(q0, r0.answer), completion=f"Final mark: {r0.gold}",
                     gold=int(r0.gold), max_mark=int(q0.max_mark), dataset="ds_a"))  # T = 0
    return rows


def _naive(frozen, cfg, rows, shaping):
    """gamma * r_shape, one completion at a time through the plain-HF probe and a hand-written Eq. 6 loop."""
    out = []
    for row in rows:
        toks = rollout_tokens(frozen, row["prompt"], row["completion"], "auto")
        beta, gamma = shaping[row["dataset"]]
        if not toks.steps_ids:
            out.append(0.0)
            continue
        ro = probe_readout(frozen, cfg.scaffold, cfg.terminator, row["max_mark"], cfg.read)
        res = probe_rollouts_naive(frozen.model, toks.prompt_ids, toks.steps_ids, ro.scaffold, ro.marks,
                                   gold=row["gold"], temperature=cfg.temperature)
        total = 0.0
        for k in range(1, res.n_steps + 1):
            total += max(0.0, abs(res.expected[k] - row["gold"]) - beta)
        out.append(gamma * -(total / res.n_steps) / row["max_mark"])
    return out


def test_shaping_reward_matches_naive_probe_and_leaves_model_untouched(frozen, group):
    cfg = ProbeConfig(temperature=0.7, batch_size=4)
    shaping = {"ds_a": (0.0, 0.2), "ds_b": (0.25, 0.05)}  # beta 0 makes most completions fire
    before = {k: v.clone() for k, v in frozen.model.state_dict().items()}
    fn = make_shaping_reward(frozen, cfg, shaping, step_rule="auto")
    logged = {}
    cols = {k: [r[k] for r in group] for k in ("prompt", "gold", "max_mark", "dataset")}
    out = fn(prompts=cols["prompt"], completions=[r["completion"] for r in group], completion_ids=None,
             gold=cols["gold"], max_mark=cols["max_mark"], dataset=cols["dataset"],
             log_metric=lambda n, v: logged.__setitem__(n, v))
    ref = _naive(frozen, cfg, group, shaping)
    np.testing.assert_allclose(out, ref, atol=1e-6, rtol=0)
    assert out[-1] == 0.0  # T = 0
    assert any(v < 0 for v in out)  # the comparison is not vacuous
    assert logged["shaping_fire_rate"] == pytest.approx(np.mean([v < 0 for v in ref]))
    after = frozen.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert not any(p.requires_grad for p in frozen.model.parameters())


def test_shaping_reward_refuses_trainable_model_and_unknown_dataset(frozen, group):
    cfg = ProbeConfig()
    fn = make_shaping_reward(frozen, cfg, {"ds_a": (0.5, 0.1)})
    row = group[0]
    with pytest.raises(KeyError, match="ds_b"):
        fn(prompts=[row["prompt"]], completions=[row["completion"]], gold=[row["gold"]],
           max_mark=[row["max_mark"]], dataset=["ds_b"])
    p = next(frozen.model.parameters())
    p.requires_grad_(True)
    try:
        with pytest.raises(ValueError, match="FROZEN"):
            check_frozen(frozen.model)
        with pytest.raises(ValueError, match="FROZEN"):
            fn(prompts=[row["prompt"]], completions=[row["completion"]], gold=[row["gold"]],
               max_mark=[row["max_mark"]], dataset=["ds_a"])
    finally:
        p.requires_grad_(False)
