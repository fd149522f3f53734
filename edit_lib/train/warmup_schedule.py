"""The order of the warm-up's batches (``model.warmup.role_phase``): which batch each of its ``steps`` optimiser
steps trains on, and what each role got from them.

A warm-up pair's group is its question (grading) or '<question>/<role>' (a Phase-1 role); a batch holds pairs of
one group (``train.packed_sft.group_batches``). ``mixed`` cycles through one seeded order of all batches.
``first`` gives each role batch once, in a seeded order, and then grading's batches in their own seeded order,
cycled for the remaining steps, so the last steps teach the mark alone (book/departures.md says why it exists;
the cpu-real record in the book holds what each order measured).
"""
from __future__ import annotations

from typing import Sequence

from edit_lib.config import WARMUP_ROLES, ConfigError, WarmupConfig
from edit_lib.train.packed_sft import group_batches


def role_of_group(group: str) -> str:
    """The role of a warm-up batch group ('<question>' grades, '<question>/<role>' is a Phase-1 role; a question
    id that itself holds a '/' stays a grading group)."""
    head, _, tail = group.rpartition("/")
    return tail if head and tail in WARMUP_ROLES and tail != "grading" else "grading"


def batch_size_of(cfg: WarmupConfig):
    """The warm-up's batch size of a group: ``cfg.batch_size`` for grading, ``cfg.role_batch_size`` else."""
    return lambda group: cfg.batch_size if role_of_group(group) == "grading" else cfg.role_batch_size


def _batches_of(groups: Sequence[str], keep: list[int], cfg: WarmupConfig, seed: int) -> list[list[int]]:
    """``group_batches`` of the pairs ``keep`` (indices into ``groups``), returned as indices into ``groups``."""
    part = group_batches([groups[i] for i in keep], batch_size_of(cfg), seed)
    return [[keep[j] for j in b] for b in part]


def warmup_batches(groups: Sequence[str], cfg: WarmupConfig, seed: int) -> list[list[int]]:
    """The pair indices of each of the warm-up's ``cfg.steps`` optimiser steps, in order (module docstring)."""
    if cfg.role_phase == "mixed":
        cycle = group_batches(groups, batch_size_of(cfg), seed)
        return [cycle[s % len(cycle)] for s in range(cfg.steps)]
    roles = [i for i, g in enumerate(groups) if role_of_group(g) != "grading"]
    grading = [i for i, g in enumerate(groups) if role_of_group(g) == "grading"]
    first = _batches_of(groups, roles, cfg, seed) if roles else []
    rest = _batches_of(groups, grading, cfg, seed) if grading else []
    if not rest or len(first) >= cfg.steps:
        raise ConfigError(f"model.warmup.role_phase='first': the {len(first)} role batches leave no step of the "
                          f"{cfg.steps} for grading's {len(rest)} batches (raise model.warmup.steps or "
                          "role_batch_size)")
    return first + [rest[s % len(rest)] for s in range(cfg.steps - len(first))]


def trained_per_role(groups: Sequence[str], cfg: WarmupConfig, seed: int) -> dict:
    """{role: [examples trained on, optimiser steps]} over the warm-up's steps (``warmup_batches``)."""
    out: dict[str, list[int]] = {}
    for b in warmup_batches(groups, cfg, seed):
        t = out.setdefault(role_of_group(groups[b[0]]), [0, 0])
        t[0] += len(b)
        t[1] += 1
    return out
