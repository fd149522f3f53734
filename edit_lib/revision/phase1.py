"""Phase 1 (Sec. 2.2, App. F): what it works on and the repair passes beyond 04's main one.

* What 04 and 05 read: the upstream tables, the incorrect rollouts 04 repairs (every one probed in 02 and audited
  in 03, or a seeded sample of ``selection.max_rollouts``) and the counts 04 shows.
* ``Phase1Inputs``: what every later pass reads, in one bundle (the policy and a separate reviser, if any, the
  data, 01's rollouts, Alg. 1's step table, the checklists, the signal percentiles, 04's rewrites and
  continuations, the revision settings, tie margin, seed and step rule); its ``rewrite`` (by the reviser) and
  ``continue_rewrites`` (by the policy) call ``generation`` as 04 does.
* ``repair``: one pass of a rule under one rewriter (rewrite its picks, continue the accepted rewrites N times,
  apply the outcome filter), and Table 6's ablations, each with its own ``RewriteVariant`` and picks.
* ``table12_by_policy``: Table 12 under each policy for a checklist that fails verification.
* ``belief_check`` (beyond the paper): the probe's belief against Monte-Carlo continuations at every boundary of a
  seeded sample of the repaired rollouts (``signals.montecarlo``), and a Table 12 row for the steps the Monte-Carlo
  belief shift picks (``selection.mc_selection``), repaired by the same rewriter beside EDIT on the same rollouts.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from edit_lib.config import CHECKLIST_FAILURE_POLICIES, RevisionConfig
from edit_lib.data.schema import Dataset
from edit_lib.model.policy import Policy
from edit_lib.random_streams import MC_BELIEFS, stream_seed
from edit_lib.revision.checklist import checklist_context
from edit_lib.revision.generation import (ROLLOUT, RewriteVariant, continue_revisions, per_rule, step_table,
                                          write_rewrites, RoleOf)
from edit_lib.revision.pool import OK, outcome_filter, retention, success_at_n
from edit_lib.selection import mc_selection
from edit_lib.signals import montecarlo
from edit_lib.signals.tables import add_residual, with_supports
from edit_lib.systems import ABLATIONS as NAMES, BY_NAME


def read_signals(d01: Path, d02: Path, d03: Path, probe_read: str, audit_cfg) -> tuple[pd.DataFrame, ...]:
    """(rollouts of 01, beliefs of 02 under ``probe.read``, the audit of 03 with G^rho, G^a, G^p under the profile's
    NLL reduction and G~^p with mu_p per dataset, Eq. 3-4, as 03 computes them)."""
    rollouts = pd.read_parquet(d01 / "rollouts.parquet")
    beliefs = pd.read_parquet(d02 / f"beliefs_{probe_read}.parquet")
    audit_raw = pd.read_parquet(d03 / "audit_steps.parquet")
    audit, _ = add_residual(with_supports(audit_raw, audit_cfg.nll_reduction), audit_cfg)
    return rollouts, beliefs, audit


@dataclass
class RepairSample:
    """Alg. 1's step table of every incorrect rollout in both 02 and 03 (``all_steps``), the rollouts 04 repairs
    (``keys``) and their steps (``steps``)."""
    all_steps: pd.DataFrame
    keys: pd.DataFrame
    steps: pd.DataFrame


def repair_sample(rollouts: pd.DataFrame, beliefs: pd.DataFrame, audit: pd.DataFrame, max_rollouts: int,
                  seed: int) -> RepairSample:
    """The incorrect rollouts 04 repairs under every rule: all of them, or a seeded sample of ``max_rollouts``."""
    all_steps = step_table(rollouts, beliefs, audit)
    keys = all_steps[ROLLOUT].drop_duplicates()
    if max_rollouts and len(keys) > max_rollouts:
        keys = keys.sample(max_rollouts, random_state=seed)
    steps = all_steps.merge(keys, on=ROLLOUT).sort_values([*ROLLOUT, "k"]).reset_index(drop=True)
    return RepairSample(all_steps, keys, steps)


# what Table 12's Retention (App. F) divides by: ``retention``'s incorrect_rollouts, 04's repaired rollouts
RETENTION_DENOMINATOR = "repaired incorrect rollouts with >= 1 step (rollouts_used.repaired; no_boundary excluded)"


def rollouts_used(rollouts: pd.DataFrame, sample: RepairSample) -> pd.DataFrame:
    """Per dataset: the Phase-1 responses and rollouts of 01, the incorrect ones, those with no step boundary
    (``no_boundary``: n_steps = 0, nothing to select, so outside Retention's denominator, App. F), those probed
    and audited, those repaired (the denominator, ``RETENTION_DENOMINATOR``), and their steps."""
    bad = rollouts[~rollouts["correct"].astype(bool)]
    no_step = bad[bad["n_steps"] == 0]
    probed = sample.all_steps.drop_duplicates(ROLLOUT)
    return pd.DataFrame([dict(
        dataset=ds, phase1_responses=int(rollouts[rollouts.dataset == ds].response_id.nunique()),
        rollouts_in_01=int((rollouts.dataset == ds).sum()), incorrect_in_01=int((bad.dataset == ds).sum()),
        no_boundary=int((no_step.dataset == ds).sum()),
        incorrect_probed_and_audited=int((probed.dataset == ds).sum()),
        repaired=int((sample.keys.dataset == ds).sum()), steps=int((sample.steps.dataset == ds).sum()))
        for ds in sorted(rollouts.dataset.unique())])


# the tables 04 writes for 05 (``read_outputs``)
OUTPUTS = ("selected", "steps", "checklists", "percentiles", "rewrites", "continuations", "int_proposals",
           "repaired_rollouts")


def read_outputs(d04: Path) -> dict[str, pd.DataFrame]:
    """04's tables by name (``OUTPUTS``); a missing one names the notebook that writes it."""
    missing = [n for n in OUTPUTS if not (d04 / f"{n}.parquet").exists()]
    if missing:
        raise FileNotFoundError(f"{d04}: no {', '.join(missing)} (run notebooks/04_counterfactual_selection.ipynb)")
    return {n: pd.read_parquet(d04 / f"{n}.parquet") for n in OUTPUTS}


def pool_source(rollouts: pd.DataFrame, keys: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the incorrect rollouts both methods repair, 04's ``keys``; what SFT pools draw on: the correct rollouts of
    the Phase-1 sample, the golden candidates, and those repaired ones)."""
    repaired = rollouts.merge(keys, on=ROLLOUT)
    return repaired, pd.concat([rollouts[rollouts["correct"].astype(bool)], repaired], ignore_index=True)


# ---------------------------------------------------------------- the bundle every later pass reads

@dataclass(frozen=True)
class Phase1Inputs:
    """The inputs of a Phase-1 repair pass (Sec. 2.2, App. F); ``from_profile`` fills the settings as 04 does."""

    policy: Policy | None  # the policy that writes rewrites and continuations (None: a pass that generates nothing)
    datasets: dict[str, Dataset]
    rollouts: pd.DataFrame  # 01's rollouts
    steps: pd.DataFrame  # Alg. 1's step table of the repaired rollouts (``generation.step_table``, 02-03)
    checklists: pd.DataFrame  # 04's rubric checklists (``generation.write_checklists``)
    percentiles: pd.DataFrame  # the per-dataset signal percentiles (``selection.dataset_percentiles``)
    rewrites: pd.DataFrame  # 04's rewrites of every rule's picks, one per (rollout, k)
    continuations: pd.DataFrame  # 04's continuations of the accepted ones
    settings: RevisionConfig  # the ``revision`` section resolved against the rollouts' budget
    tie_margin: float  # Alg. 1's tie margin (``selection.tie_margin``; the rewriter's hints)
    seed: int  # ``run.seed`` (each generation role draws its own named stream, ``random_streams``)
    role_of: RoleOf | None = None  # the locality check's step-role annotator (None: rule 3 left out)
    step_rule: str = "auto"  # ``steps.rule``
    reviser: Policy | None = None  # who writes the rewrites, if not ``policy`` (``model.policy.reviser_for``)

    @classmethod
    def from_profile(cls, profile, policy: Policy | None, datasets: dict[str, Dataset], *, rollouts: pd.DataFrame,
                     steps: pd.DataFrame, checklists: pd.DataFrame, percentiles: pd.DataFrame,
                     rewrites: pd.DataFrame, continuations: pd.DataFrame,
                     role_of: RoleOf | None = None, reviser: Policy | None = None) -> Phase1Inputs:
        """The bundle of these tables under ``profile``: ``revision`` resolved against ``rollouts``,
        ``selection.tie_margin``, ``run.seed`` and ``steps.rule``; ``reviser`` None: the policy rewrites."""
        return cls(policy, datasets, rollouts, steps, checklists, percentiles, rewrites, continuations,
                   profile.revision.resolved(profile.rollouts), profile.selection.tie_margin, profile.run.seed,
                   role_of, profile.steps.rule, reviser)

    def rewrite(self, units: pd.DataFrame, **kw) -> pd.DataFrame:
        """``generation.write_rewrites`` of ``units`` (App. J, Figure 6) under this bundle; ``kw``: its
        ``variant``, ``checklist_failure``, ``tag`` or ``progress``."""
        return write_rewrites(self.reviser or self.policy, self.datasets, units, self.rollouts, self.checklists,
                              self.percentiles, self.tie_margin, self.settings, seed=self.seed, role_of=self.role_of,
                              step_rule=self.step_rule, **kw)

    def continue_rewrites(self, rewrites: pd.DataFrame) -> pd.DataFrame:
        """``generation.continue_revisions``: the N continuations after each accepted rewrite (App. F)."""
        return continue_revisions(self.policy, self.datasets, rewrites, self.settings, seed=self.seed)


# ---------------------------------------------------------------- one repair pass; Table 6's ablations
# wo_localiser: the self-audit's picks (04), rewritten without the locator's hints; wo_checklist: EDIT's picks,
# rewritten without the per-criterion rubric analysis; wo_atomic: EDIT's picks, rewritten from the target to the
# end, locality not enforced. 04 runs ``repair`` for the selection rules with the full rewriter.

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


# ---------------------------------------------------------------- Table 12 under each checklist policy
# The paper uses the rubric checklist as the reviser's context (Sec. 2.2) and says nothing of verifying it, so what a
# failed checklist does is the suite's choice (``revision.checklist_failure``): keep it, drop its failing lines, or
# block the rewrite. A rewrite whose prompt is the same under two policies is written once and shared.

def policy_rewrites(inputs: Phase1Inputs, units: pd.DataFrame, failure_policy: str) -> pd.DataFrame:
    """The rewrites of ``units`` under ``failure_policy``: ``inputs.rewrites`` (written under
    ``inputs.settings.checklist_failure``) where the checklist context is the same, new rewrites (unit ids tagged
    ``/cl-<policy>``) where it differs; one row per (rollout, k)."""
    if failure_policy not in CHECKLIST_FAILURE_POLICIES:
        raise ValueError(f"checklist policy must be one of {CHECKLIST_FAILURE_POLICIES}, got {failure_policy!r}")
    chosen, base_rewrites = inputs.settings.checklist_failure, inputs.rewrites
    cl = {(c.dataset, c.response_id): c for c in inputs.checklists.itertuples()}
    u = units.drop_duplicates([*ROLLOUT, "k"])
    differs = [checklist_context(cl[(d, r)], failure_policy) != checklist_context(cl[(d, r)], chosen)
               for d, r in u[["dataset", "response_id"]].to_numpy()]
    todo = u[pd.Series(differs, index=u.index, dtype=bool)]
    keep = base_rewrites.merge(u[~pd.Series(differs, index=u.index, dtype=bool)][[*ROLLOUT, "k"]], on=[*ROLLOUT, "k"])
    new = inputs.rewrite(todo, checklist_failure=failure_policy, tag=f"/cl-{failure_policy}") \
        if len(todo) else base_rewrites.iloc[:0]
    return pd.concat([keep, new], ignore_index=True)


def table12_by_policy(inputs: Phase1Inputs, selected: pd.DataFrame, *, cached=None,
                      policies=CHECKLIST_FAILURE_POLICIES) -> pd.DataFrame:
    """Success@N per rule (App. F, Table 12) of ``selected`` under each checklist policy in ``policies`` (every
    one by default), with a ``policy`` column; the chosen policy (``inputs.settings.checklist_failure``) reuses
    ``inputs.rewrites`` and ``inputs.continuations``, and ``cached(name, fn)`` (the stage's cache) keeps each other
    policy's new rewrites and continuations."""
    unknown = sorted(set(policies) - set(CHECKLIST_FAILURE_POLICIES))
    if unknown or not len(policies):
        raise ValueError(f"checklist policies must be a non-empty subset of {CHECKLIST_FAILURE_POLICIES}, "
                         f"got {list(policies)}")
    cached = cached or (lambda name, fn: fn())
    base_rewrites, base_continuations = inputs.rewrites, inputs.continuations
    units = selected[[*ROLLOUT, "k"]].drop_duplicates().merge(inputs.steps, on=[*ROLLOUT, "k"])
    out = []
    for name in policies:
        if name == inputs.settings.checklist_failure:
            rw, ct = base_rewrites, base_continuations
        else:
            rw = cached(f"rewrites_checklist_{name}", lambda: policy_rewrites(inputs, units, name))
            fresh = rw[(rw["status"] == OK) & ~rw["unit_id"].isin(base_rewrites["unit_id"])]
            new = cached(f"continuations_checklist_{name}", lambda: inputs.continue_rewrites(fresh) if len(fresh)
                         else base_continuations.iloc[:0])
            ct = pd.concat([base_continuations, new], ignore_index=True)
        rev, cont = per_rule(selected, rw, ct)
        out.append(success_at_n(outcome_filter(rev, cont, inputs.settings.n_continuations)).assign(policy=name))
    t = pd.concat(out, ignore_index=True)
    return t[["policy", *[c for c in t.columns if c != "policy"]]].fillna({c: 0 for c in t.columns
                                                                        if c.startswith("not_rewritten_")})


# ---------------------------------------------------------------- beyond the paper: is the probe's belief a belief?

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
