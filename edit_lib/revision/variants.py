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

from edit_lib.revision.generation import ROLLOUT, RewriteVariant, per_rule
from edit_lib.revision.phase1_inputs import Phase1Inputs
from edit_lib.revision.pool import outcome_filter
from edit_lib.systems import ABLATIONS as NAMES, BY_NAME

# ablation -> (the rule whose picks it rewrites, its rewriter): ``System.arm`` and ``System.rewrite``
ABLATIONS: dict[str, tuple[str, RewriteVariant]] = {
    n: (BY_NAME[n].arm, RewriteVariant(**{part: False for part in BY_NAME[n].rewrite})) for n in NAMES}


@dataclass
class RepairPass:
    """The tables of one pass: rewrites (per unit), continuations (per unit), revisions and their
    continuations per rule (``per_rule``), and the outcome (``pool.outcome_filter``)."""

    rewrites: pd.DataFrame
    continuations: pd.DataFrame
    revisions: pd.DataFrame
    rule_continuations: pd.DataFrame
    outcome: pd.DataFrame


def repair(inputs: Phase1Inputs, selected: pd.DataFrame, variant: RewriteVariant, rule: str, *,
           cached=None) -> RepairPass:
    """Repair ``selected`` (ROLLOUT, k; any rule) under ``variant``, relabelled as ``rule``, the hints measured
    on ``inputs.steps`` (Alg. 1's step table). ``cached(name, make)`` (the stage context's ``cached``) saves and
    resumes the two generation tables; None computes them."""
    cached = cached or (lambda name, make: make())
    sel = selected[[*ROLLOUT, "k"]].drop_duplicates().assign(rule=rule)
    units = sel[[*ROLLOUT, "k"]].merge(inputs.steps, on=[*ROLLOUT, "k"])
    rw = cached(f"rewrites_{rule}", lambda: inputs.rewrite(units, variant=variant))
    ct = cached(f"continuations_{rule}", lambda: inputs.continue_rewrites(rw)
                if (rw["status"] == "ok").any() else _no_continuations())
    rev, cont = per_rule(sel, rw, ct)
    return RepairPass(rw, ct, rev, cont, outcome_filter(rev, cont, inputs.settings.n_continuations))


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


def repair_ablations(inputs: Phase1Inputs, selected: pd.DataFrame, dataset: str, skip=(), *,
                     cached=None) -> dict[str, RepairPass]:
    """One ``repair`` pass per Table 6 ablation (``ABLATIONS``, those not in ``skip``) on ``dataset``'s picks of
    its rule in ``selected`` (04's picks of every rule), each with its own rewriter."""
    passes = {}
    for name, (rule, variant) in ABLATIONS.items():
        if name in skip:
            continue
        sel = selected[(selected["rule"] == rule) & (selected["dataset"] == dataset)]
        passes[name] = repair(inputs, sel, variant, name, cached=cached)
    return passes


def ablation_outcome(edit_outcome: pd.DataFrame, passes: dict[str, RepairPass], dataset: str) -> pd.DataFrame:
    """EDIT's outcome on ``dataset`` beside every ablation's (Table 6's repair rows)."""
    return pd.concat([edit_outcome[edit_outcome["dataset"] == dataset]] + [p.outcome for p in passes.values()],
                     ignore_index=True)
