"""Beyond the paper: is the probe's belief a real belief? 04 compares it with Monte-Carlo continuations at every
boundary of a seeded sample of the repaired rollouts (``signals.montecarlo``), and repairs the steps the
Monte-Carlo belief shift picks (``selection.mc_selection``, no grounding re-rank) with the same rewriter, so Table
12 gains a "Monte-Carlo oracle" row beside EDIT on the same rollouts."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pandas as pd

from edit_lib.revision.generation import ROLLOUT, continue_revisions, per_rule, write_rewrites
from edit_lib.revision.pool import outcome_filter, retention, success_at_n
from edit_lib.selection import mc_selection
from edit_lib.signals import montecarlo


@dataclass
class Phase1Run:
    """What 04 computed that the check reuses: the policy and data, Alg. 1's inputs and EDIT's picks, and the
    rewrites and continuations already written (a step both rules pick is rewritten once)."""
    policy: object
    datasets: dict
    rollouts: pd.DataFrame
    beliefs: pd.DataFrame
    steps: pd.DataFrame
    edit: pd.DataFrame
    checklists: pd.DataFrame
    percentiles: pd.DataFrame
    rewrites: pd.DataFrame
    continuations: pd.DataFrame


def belief_check(run: Phase1Run, keys: pd.DataFrame, profile, settings, role_of,
                 cached: Callable) -> dict[str, pd.DataFrame]:
    """The check's tables on the rollouts ``keys``: ``probe_vs_mc`` (per dataset), ``probe_vs_mc_boundaries`` and
    ``mc_oracle_table12`` (Success@N and retention of EDIT and the Monte-Carlo oracle). ``settings``: the
    resolved ``revision`` section; ``cached``: the stage's cache for the four generation tables."""
    P, seed = profile, profile.run.seed
    mc = cached("mc_beliefs", lambda: montecarlo.mc_beliefs(
        run.policy, run.datasets, run.rollouts.merge(keys, on=ROLLOUT), P.belief_check, rule=P.steps.rule,
        max_new_tokens=settings.continuation_max_new_tokens, batch_size=settings.batch_size, seed=seed * 1000 + 3))
    mc_sel = mc_selection(run.steps.merge(keys, on=ROLLOUT), mc, P.selection)
    done = run.rewrites[[*ROLLOUT, "k"]].drop_duplicates().assign(done=True)
    extra = (mc_sel[[*ROLLOUT, "k"]].drop_duplicates().merge(done, on=[*ROLLOUT, "k"], how="left")
             .query("done != True").drop(columns="done").merge(run.steps, on=[*ROLLOUT, "k"]))
    rw = cached("rewrites_mc", lambda: write_rewrites(
        run.policy, run.datasets, extra, run.rollouts, run.checklists, run.percentiles, P.selection.tie_margin,
        settings, seed=seed, role_of=role_of, step_rule=P.steps.rule) if len(extra) else run.rewrites.iloc[:0])
    ct = cached("continuations_mc", lambda: continue_revisions(run.policy, run.datasets, rw, settings, seed=seed)
                if (rw.status == "ok").any() else run.continuations.iloc[:0])
    both = pd.concat([run.edit.merge(keys, on=ROLLOUT), mc_sel], ignore_index=True)
    rev, cont = per_rule(both, pd.concat([run.rewrites, rw], ignore_index=True),
                         pd.concat([run.continuations, ct], ignore_index=True))
    out = outcome_filter(rev, cont, settings.n_continuations)
    return dict(probe_vs_mc=montecarlo.compare_with_probe(run.beliefs, mc),
                probe_vs_mc_boundaries=montecarlo.probe_vs_mc(run.beliefs, mc),
                mc_oracle_table12=success_at_n(out).merge(retention(run.rollouts.merge(keys, on=ROLLOUT), out),
                                                          on=["dataset", "rule"]))


def check_sample(keys: pd.DataFrame, max_rollouts: int, seed: int) -> pd.DataFrame:
    """The repaired rollouts the check runs on: a seeded sample of ``belief_check.max_rollouts`` (0: none)."""
    return keys.sample(min(max_rollouts, len(keys)), random_state=seed) if max_rollouts else keys.iloc[:0]
