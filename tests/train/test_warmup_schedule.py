"""The warm-up's batch order (``model.warmup.role_phase``, edit_lib/train/warmup.py): ``mixed`` cycles
one seeded order of every batch; ``first`` gives each role batch once, then grading's batches for the rest."""
from __future__ import annotations

import dataclasses

import pytest

from edit_lib.config import ConfigError, WarmupConfig
from edit_lib.train.packed_sft import group_batches
from edit_lib.train.warmup import role_of_group, trained_per_role, warmup_batches

# two questions: 6 and 5 grading pairs, 3 and 4 checklist pairs, 2 rewrite pairs of q1
GROUPS = ["q1"] * 6 + ["q2"] * 5 + ["q1/checklist"] * 3 + ["q2/checklist"] * 4 + ["q1/rewrite"] * 2
CFG = WarmupConfig(steps=12, batch_size=4, role_batch_size=2, roles=["grading", "checklist", "rewrite"])


def test_mixed_is_the_seeded_order_of_every_batch_cycled():
    cycle = group_batches(GROUPS, lambda g: 2 if "/" in g else 4, seed=3)
    assert warmup_batches(GROUPS, CFG, seed=3) == [cycle[s % len(cycle)] for s in range(12)]


def test_first_trains_every_role_pair_once_then_only_grading():
    cfg = dataclasses.replace(CFG, role_phase="first")
    order = warmup_batches(GROUPS, cfg, seed=3)
    assert len(order) == 12 and all(len({GROUPS[i] for i in b}) == 1 for b in order)
    kinds = [role_of_group(GROUPS[b[0]]) for b in order]
    n_roles = sum(k != "grading" for k in kinds)
    assert n_roles == 5 and all(k != "grading" for k in kinds[:n_roles])  # 2+2 checklist batches, 1 rewrite
    role_pairs = sorted(i for b in order[:n_roles] for i in b)
    assert role_pairs == [i for i, g in enumerate(GROUPS) if "/" in g]  # each role pair exactly once
    grading = order[n_roles:]  # 4 grading batches (4+2, 4+1 pairs), cycled over the 7 steps left
    assert grading[4:] == grading[:3] and sorted(i for b in grading[:4] for i in b) == list(range(11))
    assert grading[:4] == group_batches(GROUPS[:11], 4, seed=3)  # grading's own seeded order
    assert trained_per_role(GROUPS, cfg, seed=3) == {"checklist": [7, 4], "rewrite": [2, 1],
                                                     "grading": [11 + sum(len(b) for b in grading[4:]), 7]}


def test_first_refuses_a_schedule_with_no_step_for_grading():
    with pytest.raises(ConfigError, match="5 role batches leave no step of the 5"):
        warmup_batches(GROUPS, dataclasses.replace(CFG, role_phase="first", steps=5), seed=0)


def test_an_unknown_role_phase_is_refused():
    with pytest.raises(ConfigError, match="role_phase"):
        WarmupConfig(role_phase="last")
