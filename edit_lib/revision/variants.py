"""One repair pass of a rule under one rewriter (App. F, Table 6): rewrite the rule's selected steps, continue the
accepted rewrites N times, apply the outcome filter. 04 runs it for the selection rules with the full rewriter
(shared rewrites); 05 runs it for Table 6's ablations, each with its own ``RewriteVariant`` and its own picks:

* ``wo_localiser``: the self-audit's picks (04), rewritten without the locator's hints;
* ``wo_checklist``: EDIT's picks, rewritten without the per-criterion rubric analysis;
* ``wo_atomic``: EDIT's picks, rewritten from the target to the end, locality not enforced.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from edit_lib.data.schema import Dataset
from edit_lib.model.policy import Policy
from edit_lib.config.schema import RevisionConfig
from edit_lib.revision.generation import ROLLOUT, RewriteVariant, continue_revisions, per_rule, write_rewrites
from edit_lib.revision.locality import RoleOf
from edit_lib.revision.pool import outcome_filter

ABLATIONS: dict[str, tuple[str, RewriteVariant]] = {
    "wo_localiser": ("self_audit", RewriteVariant(hints=False)),
    "wo_checklist": ("edit", RewriteVariant(checklist=False)),
    "wo_atomic": ("edit", RewriteVariant(atomic=False)),
}


@dataclass
class RepairPass:
    """The tables of one pass: rewrites (per unit), continuations (per unit), revisions and their
    continuations per rule (``per_rule``), and the outcome (``pool.outcome_filter``)."""

    rewrites: pd.DataFrame
    continuations: pd.DataFrame
    revisions: pd.DataFrame
    rule_continuations: pd.DataFrame
    outcome: pd.DataFrame


def repair(policy: Policy, datasets: dict[str, Dataset], selected: pd.DataFrame, steps: pd.DataFrame,
           rollouts: pd.DataFrame, checklists: pd.DataFrame, percentiles: pd.DataFrame, tie_margin: float,
           settings: RevisionConfig, variant: RewriteVariant, rule: str, *, seed: int, role_of: RoleOf | None = None,
           step_rule: str = "auto", cached=None) -> RepairPass:
    """Repair ``selected`` (ROLLOUT, k; any rule) under ``variant``, relabelled as ``rule``. ``steps`` is the
    Alg. 1 step table (``generation.step_table``: the hints' measurements). ``cached(name, make)`` (the stage
    context's ``cached``) saves and resumes the two generation tables; None computes them."""
    cached = cached or (lambda name, make: make())
    sel = selected[[*ROLLOUT, "k"]].drop_duplicates().assign(rule=rule)
    units = sel[[*ROLLOUT, "k"]].merge(steps, on=[*ROLLOUT, "k"])
    rw = cached(f"rewrites_{rule}", lambda: write_rewrites(
        policy, datasets, units, rollouts, checklists, percentiles, tie_margin, settings, seed=seed, role_of=role_of,
        step_rule=step_rule, variant=variant))
    ct = cached(f"continuations_{rule}", lambda: continue_revisions(policy, datasets, rw, settings, seed=seed)
                if (rw["status"] == "ok").any() else _no_continuations())
    rev, cont = per_rule(sel, rw, ct)
    return RepairPass(rw, ct, rev, cont, outcome_filter(rev, cont, settings.n_continuations))


def _no_continuations() -> pd.DataFrame:
    return pd.DataFrame({"unit_id": pd.Series(dtype=str), "continuation": pd.Series(dtype=int),
                         "text": pd.Series(dtype=str), "mark": pd.Series(dtype=float),
                         "parse_status": pd.Series(dtype=str), "n_prompt_tokens": pd.Series(dtype=int),
                         "n_tokens": pd.Series(dtype=int)})


def ablation_dataset(sft_cfg, datasets: dict) -> str:
    """Table 6's dataset: ``sft.ablation_dataset``, else the first dataset name in alphabetical order."""
    name = sft_cfg.ablation_dataset or sorted(datasets)[0]
    if name not in datasets:
        raise ValueError(f"sft.ablation_dataset = {name!r} is not a dataset of this profile: {sorted(datasets)}")
    return name


def repair_ablations(policy: Policy, datasets: dict[str, Dataset], selected: pd.DataFrame, steps: pd.DataFrame,
                     rollouts: pd.DataFrame, checklists: pd.DataFrame, percentiles: pd.DataFrame, tie_margin: float,
                     settings: RevisionConfig, dataset: str, skip=(), *, seed: int, **repair_kw) -> dict[str, RepairPass]:
    """One ``repair`` pass per Table 6 ablation (``ABLATIONS``, those not in ``skip``) on ``dataset``'s picks of
    its rule, each with its own rewriter."""
    abl_steps = steps[steps["dataset"] == dataset]
    passes = {}
    for name, (rule, variant) in ABLATIONS.items():
        if name in skip:
            continue
        sel = selected[(selected["rule"] == rule) & (selected["dataset"] == dataset)]
        passes[name] = repair(policy, datasets, sel, abl_steps, rollouts, checklists, percentiles, tie_margin,
                              settings, variant, name, seed=seed, **repair_kw)
    return passes


def ablation_outcome(edit_outcome: pd.DataFrame, passes: dict[str, RepairPass], dataset: str) -> pd.DataFrame:
    """EDIT's outcome on ``dataset`` beside every ablation's (Table 6's repair rows)."""
    return pd.concat([edit_outcome[edit_outcome["dataset"] == dataset]] + [p.outcome for p in passes.values()],
                     ignore_index=True)
