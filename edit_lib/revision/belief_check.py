"""Beyond the paper: is the probe's belief a real belief? 04 compares it with Monte-Carlo continuations at every
boundary of a seeded sample of the repaired rollouts (``signals.montecarlo``), and repairs the steps the
Monte-Carlo belief shift picks (``selection.mc_selection``, no grounding re-rank) with the same rewriter, so Table
12 gains a "Monte-Carlo oracle" row beside EDIT on the same rollouts."""
from __future__ import annotations

from typing import Callable

import pandas as pd

from edit_lib.random_streams import MC_BELIEFS, stream_seed
from edit_lib.revision.generation import ROLLOUT, per_rule
from edit_lib.revision.phase1 import Phase1Inputs
from edit_lib.revision.pool import outcome_filter, retention, success_at_n
from edit_lib.selection import mc_selection
from edit_lib.signals import montecarlo


def belief_check(inputs: Phase1Inputs, beliefs: pd.DataFrame, edit: pd.DataFrame, keys: pd.DataFrame, profile,
                 cached: Callable) -> dict[str, pd.DataFrame]:
    """The check's tables on the rollouts ``keys``: ``probe_vs_mc`` (per dataset), ``probe_vs_mc_boundaries`` and
    ``mc_oracle_table12`` (Success@N and retention of EDIT and the Monte-Carlo oracle). ``inputs``: 04's Phase-1
    bundle (a step both rules pick is rewritten once); ``beliefs``: 02's probe beliefs (Eq. 1-2); ``edit``: EDIT's
    picks (Alg. 1); ``cached``: the stage's cache for the four generation tables. The Monte-Carlo continuations
    draw the ``MC_BELIEFS`` stream of ``run.seed``."""
    P, settings = profile, inputs.settings
    mc = cached("mc_beliefs", lambda: montecarlo.mc_beliefs(
        inputs.policy, inputs.datasets, inputs.rollouts.merge(keys, on=ROLLOUT), P.belief_check,
        rule=inputs.step_rule, max_new_tokens=settings.continuation_decoding.max_new_tokens,
        batch_size=settings.batch_size,
        seed=stream_seed(inputs.seed, MC_BELIEFS)))
    mc_sel = mc_selection(inputs.steps.merge(keys, on=ROLLOUT), mc, P.selection)
    done = inputs.rewrites[[*ROLLOUT, "k"]].drop_duplicates().assign(done=True)
    extra = (mc_sel[[*ROLLOUT, "k"]].drop_duplicates().merge(done, on=[*ROLLOUT, "k"], how="left")
             .query("done != True").drop(columns="done").merge(inputs.steps, on=[*ROLLOUT, "k"]))
    rw = cached("rewrites_mc", lambda: inputs.rewrite(extra) if len(extra) else inputs.rewrites.iloc[:0])
    ct = cached("continuations_mc", lambda: inputs.continue_rewrites(rw)
                if (rw.status == "ok").any() else inputs.continuations.iloc[:0])
    both = pd.concat([edit.merge(keys, on=ROLLOUT), mc_sel], ignore_index=True)
    rev, cont = per_rule(both, pd.concat([inputs.rewrites, rw], ignore_index=True),
                         pd.concat([inputs.continuations, ct], ignore_index=True))
    out = outcome_filter(rev, cont, settings.n_continuations)
    return dict(probe_vs_mc=montecarlo.compare_with_probe(beliefs, mc),
                probe_vs_mc_boundaries=montecarlo.probe_vs_mc(beliefs, mc),
                mc_oracle_table12=success_at_n(out).merge(retention(inputs.rollouts.merge(keys, on=ROLLOUT), out),
                                                          on=["dataset", "rule"]))


def check_sample(keys: pd.DataFrame, max_rollouts: int, seed: int) -> pd.DataFrame:
    """The repaired rollouts the check runs on: a seeded sample of ``belief_check.max_rollouts`` (0: none)."""
    return keys.sample(min(max_rollouts, len(keys)), random_state=seed) if max_rollouts else keys.iloc[:0]
