"""06's training-log table and curves (edit_lib/train/rl_runs.py ``log_table``, ``reward_figure``; App. B: the KL
term, beta_KL 0.02, which TRL logs as ``kl`` only when beta > 0), on fabricated TRL log histories."""
import math
from types import SimpleNamespace

import matplotlib
import numpy as np
import pandas as pd

from edit_lib.train import rl_runs

matplotlib.use("Agg")


def _history(n, kl=True, scale=1.0):
    out = [dict(step=s, reward=0.1 * s * scale, loss=0.5 / s, **({"kl": 0.01 * s} if kl else {}))
           for s in range(1, n + 1)]
    return out + [dict(train_runtime=1.0, train_loss=0.2, step=n)]  # TRL's closing entry: no reward, left out


def _plan_and_outcomes(histories):
    rows = [dict(system=s, dataset=d, seed=seed) for (s, d, seed) in histories]
    outcomes = {k: SimpleNamespace(status="trained", summary=dict(log_history=h)) for k, h in histories.items()}
    return pd.DataFrame(rows), outcomes


def _lines(ax):
    return {line.get_label(): line.get_ydata().tolist() for line in ax.get_lines()}


def test_log_table_keeps_reward_loss_and_kl_per_step():
    plan, outcomes = _plan_and_outcomes({("edit_sft_grpo", "a", 42): _history(3),
                                         ("base_grpo", "b", 42): _history(2, kl=False)})
    t = rl_runs.log_table(plan, outcomes)
    assert list(t.columns) == rl_runs.LOG_COLUMNS
    a = t[t.dataset == "a"]
    assert a.step.tolist() == [1, 2, 3]  # the closing train_runtime entry is not a step
    assert np.allclose(a.loss, [0.5, 0.25, 0.5 / 3]) and np.allclose(a.kl, [0.01, 0.02, 0.03])
    assert t[t.dataset == "b"].kl.isna().all()  # beta 0: TRL logged no kl


def test_reward_figure_draws_the_kl_curve_beside_reward_and_loss():
    plan, outcomes = _plan_and_outcomes({("edit_sft_grpo", "a", 42): _history(3),
                                         ("edit_sft_edit_rl", "a", 42): _history(3, scale=2.0)})
    fig = rl_runs.reward_figure(rl_runs.log_table(plan, outcomes))
    axes = np.array(fig.axes).reshape(len(rl_runs.CURVES), 1)
    assert [ax.get_ylabel() for ax in axes[:, 0]] == [label for _, label in rl_runs.CURVES]
    reward, loss, kl = (_lines(ax) for ax in axes[:, 0])
    assert np.allclose(reward["edit_sft_edit_rl s42"], [0.2, 0.4, 0.6])
    assert np.allclose(loss["edit_sft_grpo s42"], [0.5, 0.25, 0.5 / 3])
    assert np.allclose(kl["edit_sft_grpo s42"], [0.01, 0.02, 0.03]) and len(kl) == 2


def test_reward_figure_says_when_no_kl_was_logged():
    plan, outcomes = _plan_and_outcomes({("base_grpo", "a", 42): _history(2),
                                         ("base_grpo", "b", 42): _history(2, kl=False)})
    fig = rl_runs.reward_figure(rl_runs.log_table(plan, outcomes))
    axes = np.array(fig.axes).reshape(len(rl_runs.CURVES), 2)
    kl_a, kl_b = axes[2]
    assert len(kl_a.get_lines()) == 1 and not kl_a.texts
    assert not kl_b.get_lines()  # nothing drawn for b, and the panel says why
    assert any("no kl logged" in t.get_text() and "beta_kl > 0" in t.get_text() for t in kl_b.texts)
    assert len(axes[0][1].get_lines()) == 1 and not math.isnan(axes[0][1].get_lines()[0].get_ydata()[0])
