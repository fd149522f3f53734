"""``edit-suite bench precision``: what a bfloat16 policy moves in the belief probe (Eq. 1-2) and in what is
decided from it: Alg. 1's picks (Sec. 2.2) and the shaping penalty's firings (Eq. 6).

On the rollouts of a finished run (01's rollouts, 02's probed sample, 03's audit), the probe is read three
ways on the same boundaries: the float32 policy (the reference), a bfloat16 copy read in bfloat16 (the paper
profile: policy and probe in bfloat16), and the same bfloat16 copy read in float32 (``probe.dtype =
'float32'``). For each read against the reference: the largest change of a mark probability and of the
expected mark, the share of boundaries whose argmax mark changes, the share of repaired rollouts whose Alg. 1
picks change (the audit held at 03's values), and the share of rollouts (and boundaries) whose Eq. 6 penalty
fires differently at the profile's beta_drift. Runs on the profile's ``model.device``.
"""
from __future__ import annotations

import copy
import dataclasses
import time
from pathlib import Path

import numpy as np
import pandas as pd

from edit_lib.artifacts import recorded_stage_dir
from edit_lib.config import Profile

READS = {"bfloat16": "model", "bfloat16_read_float32": "float32"}
RULES = ("edit", "belief_shift_only")


def belief_differences(ref: pd.DataFrame, other: pd.DataFrame) -> dict:
    """Largest |p| and |expected mark| changes, and the share of boundaries whose argmax changes."""
    keys = ["dataset", "response_id", "rollout_id", "k"]
    m = ref.merge(other, on=keys, suffixes=("", "_o"), validate="one_to_one")
    if len(m) != len(ref):
        raise ValueError(f"the reads cover different boundaries: {len(ref)} against {len(other)}")
    dp = [float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in zip(m["probs"], m["probs_o"])]
    return dict(boundaries=len(m), max_abs_prob=max(dp, default=0.0),
                max_abs_expected=float((m["expected"] - m["expected_o"]).abs().max()),
                argmax_changed=float((m["argmax"] != m["argmax_o"]).mean()))


def picks(rollouts, beliefs, audit, profile: Profile) -> dict:
    """Alg. 1's picks (k lists, best first) per repaired rollout under each rule ('edit', 'belief_shift_only'),
    the audit held fixed: {rule: {rollout: [k, ...]}}."""
    from edit_lib.revision.phase1 import repair_sample
    from edit_lib.selection import ROLLOUT, dataset_percentiles, select_candidates
    sample = repair_sample(rollouts, beliefs, audit, 0, profile.run.seed)
    pct = dataset_percentiles(audit, profile.selection.percentile)
    out = {}
    for rule in RULES:
        sel = select_candidates(sample.steps, profile.selection, rule, percentiles=pct)
        got = out[rule] = {tuple(k): [] for k in sample.keys[ROLLOUT].itertuples(index=False)}
        for r in sel.sort_values([*ROLLOUT, "rank"]).itertuples(index=False):
            got[(r.dataset, r.response_id, r.rollout_id)].append(int(r.k))
    return out


def pick_changes(a: dict, b: dict) -> dict:
    if set(a) != set(b):
        raise ValueError("the two reads repair different rollouts")
    changed = sum(a[k] != b[k] for k in a)
    first = sum(a[k][:1] != b[k][:1] for k in a)
    return dict(rollouts=len(a), picks_changed=changed / max(len(a), 1), first_pick_changed=first / max(len(a), 1))


def firings(beliefs: pd.DataFrame, profile: Profile) -> pd.DataFrame:
    """Per boundary k >= 1: does Eq. 6's hinge max(0, |m_hat_k - m*| - beta_drift) fire (the profile's
    beta_drift per dataset)?"""
    b = beliefs[beliefs.k >= 1].copy()
    beta = b["dataset"].map(lambda d: profile.rl.shaping_for(d).beta_drift)
    b["fires"] = (b["expected"] - b["gold"]).abs() > beta
    return b[["dataset", "response_id", "rollout_id", "k", "fires"]]


def firing_changes(ref: pd.DataFrame, other: pd.DataFrame) -> dict:
    keys = ["dataset", "response_id", "rollout_id"]
    m = ref.merge(other, on=[*keys, "k"], suffixes=("", "_o"), validate="one_to_one")
    per_rollout = m.groupby(keys).agg(a=("fires", "any"), b=("fires_o", "any"))
    return dict(boundary_firings_changed=float((m["fires"] != m["fires_o"]).mean()),
                rollout_penalty_changed=float((per_rollout.a != per_rollout.b).mean()),
                rollouts_penalised=int(per_rollout.a.sum()), rollouts=len(per_rollout))


def bench_precision(profile: str | Path = "smoke", run_root: str | Path | None = None, overrides=(),
                    max_rollouts: int = 0) -> dict:
    """The comparison above on the run ``<run_root>/<profile name>`` (``max_rollouts`` > 0: a seeded subset of
    02's sample)."""
    from edit_lib.data.registry import load_built
    from edit_lib.model.policy import load_policy_from_profile
    from edit_lib.revision.phase1 import read_signals
    from edit_lib.runner.register import register_all
    from edit_lib.runner.variants import resolve
    from edit_lib.signals.precision import bfloat16_copy
    from edit_lib.signals.tables import probe_table, select_rollouts
    register_all()
    P, paths, _ = resolve(profile, list(overrides), run_root)  # the run of those values: a variant's folder
    d00, d01, d02, d03 = (recorded_stage_dir(paths, s) for s in ("00_data", "01_base_policy", "02_probing",
                                                           "03_audit_validation"))
    rollouts, _, audit = read_signals(d01, d02, d03, P.probe.read, P.audit)
    sel = select_rollouts(rollouts, max_rollouts or P.probe.max_rollouts, seed=P.run.seed)
    datasets = load_built(d00)
    P32 = dataclasses.replace(P, model=dataclasses.replace(P.model, dtype="float32"))
    policy = load_policy_from_profile(P32)
    t0 = time.perf_counter()
    reads = {"float32": probe_table(policy, datasets, sel, dataclasses.replace(P.probe, dtype="model"),
                                    P.steps.rule, progress=False)}
    seconds = {"float32": time.perf_counter() - t0}
    low = copy.copy(policy)
    low.model = bfloat16_copy(policy.model)
    for name, dtype in READS.items():
        t0 = time.perf_counter()
        reads[name] = probe_table(low, datasets, sel, dataclasses.replace(P.probe, dtype=dtype), P.steps.rule,
                                  progress=False)
        seconds[name] = time.perf_counter() - t0
    ref_picks = picks(rollouts, reads["float32"], audit, P)
    ref_fire = firings(reads["float32"], P)
    rows = []
    for name in READS:
        got = picks(rollouts, reads[name], audit, P)
        row = dict(read=name, **belief_differences(reads["float32"], reads[name]),
                   **{f"{k}_{rule}" if k != "rollouts" else "repaired_rollouts": v
                      for rule in RULES for k, v in pick_changes(ref_picks[rule], got[rule]).items()},
                   **firing_changes(ref_fire, firings(reads[name], P)), seconds=seconds[name])
        rows.append(row)
    return dict(profile=P.name, run=str(paths.root), device=str(next(policy.model.parameters()).device),
                probed_rollouts=len(sel), float32_seconds=seconds["float32"], step_rule=P.steps.rule,
                probe_read=P.probe.read, beta_drift={d: P.rl.shaping_for(d).beta_drift for d in datasets},
                comparisons=rows)


def format_precision(result: dict) -> str:
    """The comparison as a short table (one row per bfloat16 read)."""
    cols = ["read", "boundaries", "max_abs_prob", "max_abs_expected", "argmax_changed", "picks_changed_edit",
            "first_pick_changed_edit", "repaired_rollouts", "boundary_firings_changed", "rollout_penalty_changed"]
    df = pd.DataFrame(result["comparisons"])[cols]
    return (f"bfloat16 against float32 on {result['probed_rollouts']} rollouts of {result['run']} "
            f"({result['device']}):\n" + df.round(4).to_string(index=False))

