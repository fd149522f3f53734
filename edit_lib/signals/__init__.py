"""Internal-state signals (§2.1): posterior belief probe (Eq. 1-2) and mask-based grounding audit (Eq. 3-4).

Token-level and model-agnostic: callers pass token ids (prompt/context variants, steps, scaffold, mark
continuations) and any HF causal LM. ``probe_rollouts``/``audit_rollouts`` pack everything into one forward pass
per rollout with a block attention mask (App. B); the ``*_naive`` twins are the plain-HF references.
"""
from edit_lib.signals.grounding import (VARIANTS, AuditResult, audit_rollouts, audit_rollouts_naive, PrefixResidualiser,
                                        fit_prefix_residualiser, relative_positions, residualise_prefix)
from edit_lib.signals.probe import (ProbeResult, belief_from_scores, mark_continuations, probe_rollouts,
                    probe_rollouts_naive)

__all__ = [
    "VARIANTS", "AuditResult", "PrefixResidualiser", "audit_rollouts", "audit_rollouts_naive",
    "fit_prefix_residualiser", "relative_positions", "residualise_prefix", "ProbeResult", "belief_from_scores",
    "mark_continuations", "probe_rollouts", "probe_rollouts_naive",
]
