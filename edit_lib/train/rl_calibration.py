"""Calibration inputs of EDIT-RL (App. B "RL configuration and checkpoint selection"; Table 9 lower block): the
initialisation's training rollouts on a seeded 10% of the training responses, probed by the FROZEN
initialisation (Eq. 1 read at ``probe.temperature``, 0.7 in App. B), as ``calibrate.CalibRollout`` rows.

* Base: its own training rollouts (01, ``rollouts.n_per_response`` per response).
* An SFT initialisation (EDIT-SFT): ``rl.rollouts_per_prompt`` rollouts per drawn response, sampled at
  ``rl.temperature`` (its training rollouts, as RL would sample them).

The groups (training responses) are drawn first with ``calibrate.draw_groups`` (the same draw as
``calibration_subset``), so only the calibration subset is generated and probed; ``calibrate`` then runs with
fraction 1.0 on it. A rollout with no step boundary (T = 0) has no shaping penalty (Eq. 6) and is left out and
counted; a rollout whose mark did not parse has r_out = 0 and counts as incorrect (Eq. 5).
"""
from __future__ import annotations

import pandas as pd

from ..config import ProbeConfig
from ..data.schema import Dataset
from ..generate import SamplingConfig
from ..policy import Policy
from ..rollouts import grade_responses
from .calibrate import CalibRollout, draw_groups
from .rewards import outcome_reward, shaping_terms


def sample_rollouts(policy: Policy, ds: Dataset, response_ids: set, n: int, temperature: float,
                    max_new_tokens: int, batch_size: int, seed: int, rule: str = "auto",
                    progress: bool = True) -> pd.DataFrame:
    """``n`` sampled rollouts per training response in ``response_ids`` (``rollouts.grade_responses``)."""
    responses = [r for r in ds.split("train") if r.id in response_ids]
    cfg = SamplingConfig(n=n, temperature=temperature, max_new_tokens=max_new_tokens, batch_size=batch_size,
                         seed=seed)
    return grade_responses(policy, ds, responses, cfg, progress=progress, rule=rule)


def calibration_rows(frozen: Policy, ds: Dataset, rollouts: pd.DataFrame, probe_cfg: ProbeConfig,
                     rule: str = "auto") -> tuple[list[CalibRollout], int]:
    """CalibRollout rows of ``rollouts`` (columns response_id, text, mark, gold, max_mark) with the expected
    marks m_hat_k (k = 1..T) of the frozen policy's probe; returns (rows, rollouts left out for T = 0)."""
    index = {r.id: r for r in ds.responses}
    prompts = [frozen.grading_input(ds.question(index[rid]), index[rid].answer) for rid in rollouts["response_id"]]
    marks = [None if pd.isna(m) else int(m) for m in rollouts["mark"]]
    gold, mm = rollouts["gold"].astype(int).tolist(), rollouts["max_mark"].astype(int).tolist()
    m_hats = shaping_terms(frozen, probe_cfg, prompts, rollouts["text"].tolist(), gold, mm, rule)
    rows, dropped = [], 0
    for rid, m, g, M, mh in zip(rollouts["response_id"], marks, gold, mm, m_hats):
        if len(mh) == 0:
            dropped += 1
            continue
        rows.append(CalibRollout(group=str(rid), r_out=outcome_reward(m, g, M), correct=m == g, max_mark=float(M),
                                 gold=float(g), m_hat=tuple(float(x) for x in mh)))
    return rows, dropped


def drawn_responses(ds: Dataset, fraction: float, seed: int) -> set:
    """The seeded calibration groups: ``fraction`` of the training responses (App. B: 10%)."""
    return draw_groups({r.id for r in ds.split("train")}, fraction, seed)
