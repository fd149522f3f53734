"""EDIT-RL rewards (Sec. 2.3): the distance-aware outcome reward (Eq. 5), the belief-guided shaping penalty
(Eq. 6) and their sum (Eq. 7), plain and as TRL reward functions.

TRL's ``GRPOTrainer`` SUMS the outputs of its reward functions, so EDIT-RL passes two:

* ``make_outcome_reward()``: r_out per completion (Eq. 5);
* ``make_shaping_reward(...)``: gamma * r_shape per completion (Eq. 6, already weighted by gamma_Phi),

and TRL's sum is r = r_out + gamma * r_shape (Eq. 7). GRPO alone passes only the first. Dataset columns read:
``prompt``, ``gold``, ``max_mark``, ``dataset`` (App. B calibration, Table 9 lower block).

Departures from the paper and from public code:
book/departures.md, section "EDIT-RL rewards (edit_lib/train/rewards.py)".
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from edit_lib.prompts.grading import read_final_mark
from edit_lib.signals.probe import probe_input
from edit_lib.signals.probe import probe_rollouts


# ---------------------------------------------------------------------------------------------------------------
# the formulas

def _check_marks(gold, max_mark, where: str = "") -> None:
    if max_mark is None or float(max_mark) <= 0:
        raise ValueError(f"{where}max_mark must be > 0, got {max_mark!r}")
    if gold is None or not 0 <= float(gold) <= float(max_mark):
        raise ValueError(f"{where}gold must lie in [0, max_mark={max_mark}], got {gold!r}")


def outcome_reward(mark, gold, max_mark) -> float:
    """Distance-aware outcome reward (Eq. 5, Sec. 2.3): r_out = max(0, 1 - |m - m*| / M_q); 0 on a parse
    failure (``mark`` None)."""
    _check_marks(gold, max_mark)
    if mark is None:
        return 0.0
    return max(0.0, 1.0 - abs(float(mark) - float(gold)) / float(max_mark))


def shaping_penalty(expected_marks, gold, max_mark, beta_drift) -> float:
    """Belief-guided shaping (Eq. 6, Sec. 2.3): r_shape = -(1/M_q)(1/T) sum_{k=1..T} max(0, |m_hat_k - m*| -
    beta_drift).

    ``expected_marks`` are the probe's expected marks m_hat_k (Eq. 1) at the step boundaries k = 1..T, i.e.
    WITHOUT k = 0 (the prompt-only boundary, which no step of the rollout has touched; pass
    ``ProbeResult.expected[1:]``). A completion with no step (T = 0) has nothing to penalise: r_shape = 0.
    ``beta_drift`` is the exploration tolerance in raw marks (App. B calibrates it per dataset).
    """
    _check_marks(gold, max_mark)
    if beta_drift < 0:
        raise ValueError(f"beta_drift must be >= 0, got {beta_drift!r}")
    m_hat = np.asarray(expected_marks, dtype=np.float64).reshape(-1)
    if m_hat.size == 0:
        return 0.0
    excess = np.maximum(0.0, np.abs(m_hat - float(gold)) - float(beta_drift))
    return float(-excess.mean() / float(max_mark))


def total_reward(r_out: float, r_shape: float, gamma: float) -> float:
    """Total EDIT-RL reward (Eq. 7, Sec. 2.3): r = r_out + gamma_Phi * r_shape."""
    return float(r_out) + float(gamma) * float(r_shape)


# ---------------------------------------------------------------------------------------------------------------
# TRL reward functions

def _text(completion, i: int) -> str:
    """Completion text: TRL passes a string for plain-text prompts, a one-message list for conversational ones."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    raise TypeError(f"completion {i}: expected a string or a list of chat messages, got {type(completion).__name__}")


def _column(kw: dict, name: str, n: int) -> list:
    if name not in kw:
        raise KeyError(f"reward function: dataset column {name!r} missing (columns passed: {sorted(kw)}); the RL "
                       f"dataset needs 'prompt', 'gold', 'max_mark' and 'dataset' (edit_lib/train/rewards.py)")
    col = list(kw[name])
    if len(col) != n:
        raise ValueError(f"reward function: column {name!r} has {len(col)} values for {n} completions")
    return col


def make_outcome_reward(parse: Callable = read_final_mark) -> Callable:
    """TRL reward function for the outcome reward (Eq. 5, Sec. 2.3).

    ``parse(text, max_mark)`` returns an object with ``.mark`` (None on a parse failure), the project's
    ``prompts.grading.read_final_mark`` by default (it reads 'Final mark: 3' and the tiny tokenizer's decoded
    'Final mark : 3 / 5'). Parse failures score 0 and are reported through TRL's ``log_metric`` as
    ``parse_failures`` (count in the call) and ``parse_failure_rate`` when TRL passes it.
    """
    def outcome_reward_fn(completions, gold, max_mark, **kw) -> list[float]:
        n = len(completions)
        gold, max_mark = list(gold), list(max_mark)
        if not len(gold) == len(max_mark) == n:
            raise ValueError(f"outcome reward: {n} completions but {len(gold)} gold and {len(max_mark)} max_mark")
        rewards, failures = [], 0
        for i, (c, g, mm) in enumerate(zip(completions, gold, max_mark)):
            _check_marks(g, mm, f"outcome reward, completion {i}: ")
            mark = parse(_text(c, i), int(mm)).mark
            failures += mark is None
            rewards.append(outcome_reward(mark, g, mm))
        log = kw.get("log_metric")
        if log is not None:
            log("parse_failures", float(failures))
            log("parse_failure_rate", failures / max(n, 1))
        return rewards

    outcome_reward_fn.__name__ = "outcome_reward"  # TRL logs each reward under its function's name
    return outcome_reward_fn


def _shaping_values(shaping: dict, name) -> tuple[float, float]:
    """(beta_drift, gamma) of a dataset from a tuple or an object with those fields (config.ShapingValues)."""
    if name not in shaping:
        raise KeyError(f"shaping reward: no beta_drift/gamma for dataset {name!r} (have {sorted(shaping)})")
    v = shaping[name]
    if hasattr(v, "beta_drift"):
        return float(v.beta_drift), float(v.gamma)
    beta, gamma = v
    return float(beta), float(gamma)


def check_frozen(model) -> None:
    """The shaping probe's model must be frozen (Sec. 2.3): raise if any parameter requires grad (e.g. the
    object handed to the trainer, whose LoRA parameters do)."""
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    if trainable:
        raise ValueError(f"shaping reward: the probe model has {len(trainable)} trainable parameters (first: "
                         f"{trainable[0]!r}); pass a FROZEN copy of the arm's initialisation, never the trained "
                         f"policy (call .requires_grad_(False))")


def probe_completions(policy, probe_cfg, prompts, completions, max_mark, gold=None, step_rule: str = "auto"):
    """The posterior probe (Eq. 1-2) of ``policy`` over every completion's step boundaries k = 0..T: one
    ``ProbeResult`` per completion (None for a completion with no step, T = 0), all completions probed in packed
    batches of ``probe_cfg.batch_size`` (one forward pass per batch, App. B "Compute budget") at
    ``probe_cfg.temperature`` (0.7 in App. B). Steps s_1..s_T are cut by ``step_rule`` (the profile's
    ``steps.rule``, Sec. 2.1; the final-mark line is never a step). ``gold`` (optional) fills eps / delta-eps."""
    n = len(completions)
    out: list = [None] * n
    todo, p_ids, s_ids, scs, mks = [], [], [], [], []
    readouts: dict[int, object] = {}
    for i, (p, c, mm) in enumerate(zip(prompts, completions, max_mark)):
        if not isinstance(p, str):
            raise TypeError(f"probe, completion {i}: the prompt must be the policy input text (a string "
                            f"dataset column 'prompt'), got {type(p).__name__}")
        toks, ro = probe_input(policy, probe_cfg, readouts, p, _text(c, i), int(mm), step_rule)
        if toks.steps_ids:
            todo.append(i)
            p_ids.append(toks.prompt_ids)
            s_ids.append(toks.steps_ids)
            scs.append(ro.scaffold)
            mks.append(ro.marks)
    if todo:
        results = probe_rollouts(policy.model, p_ids, s_ids, scs, mks,
                                 gold=None if gold is None else [gold[i] for i in todo],
                                 temperature=probe_cfg.temperature, batch_size=probe_cfg.batch_size,
                                 dtype=probe_cfg.dtype)
        for i, res in zip(todo, results):
            out[i] = res
    return out


def shaping_terms(frozen_policy, probe_cfg, prompts, completions, gold, max_mark, step_rule: str = "auto"):
    """Belief-guided shaping inputs (Eq. 1, Eq. 6): the probe's expected marks m_hat_k at k = 1..T of every
    completion, from the frozen policy (``probe_completions``). Completions with no step (T = 0) are not probed
    and get an empty array."""
    results = probe_completions(frozen_policy, probe_cfg, prompts, completions, max_mark, gold, step_rule)
    return [np.zeros(0) if r is None else r.expected[1:] for r in results]  # boundaries k = 1..T (Eq. 6)


def make_shaping_reward(frozen_policy, probe_cfg, shaping: dict, step_rule: str = "auto") -> Callable:
    """TRL reward function gamma_Phi * r_shape (Eq. 6 weighted as in Eq. 7, Sec. 2.3); TRL adds it to
    ``make_outcome_reward``'s r_out, which gives Eq. 7.

    ``frozen_policy`` (a ``policy.Policy``) must be a FROZEN copy of the arm's initialisation (EDIT-SFT for
    EDIT-SFT+EDIT-RL, Base for Base+EDIT-RL), never the model being trained: the paper keeps the shaping
    signal stationary this way (Sec. 2.3, App. D checks how far the trained policy's probe moves). Every call
    checks that no parameter of it requires grad. ``probe_cfg`` is a ``config.ProbeConfig`` (Eq. 1 read,
    scaffold, temperature, batch size); ``shaping`` maps a dataset name to (beta_drift, gamma) or a
    ``config.ShapingValues`` (App. B calibration); ``step_rule`` is the profile's ``steps.rule``.
    Logs ``shaping_fire_rate`` (share of completions with r_shape < 0) and ``r_shape_mean`` via ``log_metric``.
    """
    check_frozen(frozen_policy.model)
    frozen_policy.model.eval()

    def shaping_reward_fn(prompts, completions, gold, max_mark, dataset, **kw) -> list[float]:
        check_frozen(frozen_policy.model)
        n = len(completions)
        cols = {"prompt": prompts, "gold": gold, "max_mark": max_mark, "dataset": dataset}
        prompts, gold, max_mark, dataset = (_column(cols, k, n) for k in cols)
        for i, (g, mm) in enumerate(zip(gold, max_mark)):
            _check_marks(g, mm, f"shaping reward, completion {i}: ")
        m_hats = shaping_terms(frozen_policy, probe_cfg, prompts, completions, gold, max_mark, step_rule)
        rewards, shapes = [], []
        for m_hat, g, mm, ds in zip(m_hats, gold, max_mark, dataset):
            beta, gamma = _shaping_values(shaping, ds)
            r_shape = shaping_penalty(m_hat, g, mm, beta)
            shapes.append(r_shape)
            rewards.append(total_reward(0.0, r_shape, gamma))  # gamma * r_shape; TRL adds r_out
        log = kw.get("log_metric")
        if log is not None and n:
            log("shaping_fire_rate", float(np.mean([s < 0 for s in shapes])))
            log("r_shape_mean", float(np.mean(shapes)))
        return rewards

    shaping_reward_fn.__name__ = "belief_shaping"
    return shaping_reward_fn
