"""What Phase 1 (Sec. 2.2) works on: the upstream tables 04 and 05 read, the incorrect rollouts 04 repairs (every
one probed in 02 and audited in 03, or a seeded sample of ``selection.max_rollouts``) and the counts 04 shows."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from edit_lib.revision.generation import ROLLOUT, step_table
from edit_lib.signals.tables import add_residual, with_supports


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
