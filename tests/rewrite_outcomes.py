"""Synthetic Phase-1 rewrite outcomes for Table 12's paired contrast (two rules on the same rollouts)."""
from __future__ import annotations

import numpy as np
import pandas as pd


def paired_rewrite_rows(seed: int = 0, n_rollouts: int = 30) -> list[dict]:
    """Rows of ``revision.pool.paired_success_contrast``'s input: rule 'edit' keeps a rewrite with
    probability 0.4 and 'random' with 0.2, on the same rollouts, one or two rewrites per rollout and rule."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_rollouts):
        for rule, p in (("edit", 0.4), ("random", 0.2)):
            for _ in range(1 + i % 2):
                rows.append(dict(dataset="d", response_id=f"r{i}", rollout_id=0, rule=rule, status="ok",
                                 kept=bool(rng.random() < p)))
    return rows


def paired_rewrite_outcomes(seed: int = 0) -> pd.DataFrame:
    """``paired_rewrite_rows`` as a DataFrame."""
    return pd.DataFrame(paired_rewrite_rows(seed))
