"""What every repair pass after 04's main one reads (Sec. 2.2, App. F), in one bundle: the policy (and a separate
reviser, if any) and data, 01's rollouts, Alg. 1's step table (02-03), the checklists, the signal percentiles,
the rewrites and continuations 04 already wrote, and the profile's revision settings, tie margin, seed and step
rules. Table 12 under each checklist policy (``checklist_policies``), Table 6's ablations (``variants``) and the
Monte-Carlo check (``belief_check``) take it in place of a dozen arguments; its ``rewrite`` (by the reviser) and
``continue_rewrites`` (by the policy) call ``generation`` as 04 does."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from edit_lib.config import RevisionConfig
from edit_lib.data.schema import Dataset
from edit_lib.model.policy import Policy
from edit_lib.revision.generation import continue_revisions, write_rewrites
from edit_lib.revision.locality import RoleOf


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
        return write_rewrites(self.reviser or self.policy, self.datasets, units, self.rollouts, self.checklists, self.percentiles,
                              self.tie_margin, self.settings, seed=self.seed, role_of=self.role_of,
                              step_rule=self.step_rule, **kw)

    def continue_rewrites(self, rewrites: pd.DataFrame) -> pd.DataFrame:
        """``generation.continue_revisions``: the N continuations after each accepted rewrite (App. F)."""
        return continue_revisions(self.policy, self.datasets, rewrites, self.settings, seed=self.seed)
