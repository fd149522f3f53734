"""Calibration inputs of EDIT-RL (App. B "RL configuration and checkpoint selection"; Table 9 lower block): the
initialisation's training rollouts on a seeded 10% of the training responses, probed by the FROZEN
initialisation (Eq. 1 read at ``probe.temperature``, 0.7 in App. B), as ``calibration.CalibRollout`` rows.

* Base: its own training rollouts (01, ``rollouts.n_per_response`` per response).
* An SFT initialisation (EDIT-SFT): ``rl.rollouts_per_prompt`` rollouts per drawn response, sampled at
  ``rl.decoding.temperature`` (its training rollouts, as RL would sample them).

The groups (training responses) are drawn first with ``calibration.draw_groups`` (the same draw as
``calibration_subset``), so only the calibration subset is generated and probed; ``calibrate`` then runs with
fraction 1.0 on it. A rollout with no step boundary (T = 0) has no shaping penalty (Eq. 6) and is left out and
counted; a rollout whose mark did not parse has r_out = 0 and counts as incorrect (Eq. 5).

``table9_row`` turns one (initialisation, dataset) calibration into 06's Table 9 (lower block) row, the
(beta_drift, gamma) EDIT-RL uses, and the warnings 06 shows (grid-edge / cap flags, a failed calibration).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from edit_lib import paper_reference
from edit_lib.config import Decoding, ProbeConfig, ShapingValues
from edit_lib.data.schema import Dataset
from edit_lib.model.generate import SamplingConfig
from edit_lib.model.policy import Policy
from edit_lib.model.rollouts import grade_responses
from edit_lib.train.calibration import CalibRollout, calibrate, draw_groups
from edit_lib.train.rewards import outcome_reward, shaping_terms


def sample_rollouts(policy: Policy, ds: Dataset, response_ids: set, n: int, decoding: Decoding, batch_size: int,
                    seed: int, rule: str = "auto", progress: bool = True) -> pd.DataFrame:
    """``n`` rollouts per training response in ``response_ids`` decoded as ``decoding`` (``rl.decoding``: RL's
    own sampling, App. B), through ``rollouts.grade_responses``."""
    responses = [r for r in ds.split("train") if r.id in response_ids]
    cfg = SamplingConfig.of(decoding, n=n, batch_size=batch_size, seed=seed)
    return grade_responses(policy, ds, responses, cfg, progress=progress, rule=rule)


def calibration_rows(frozen: Policy, ds: Dataset, rollouts: pd.DataFrame, probe_cfg: ProbeConfig,
                     rule: str = "auto") -> tuple[list[CalibRollout], int]:
    """CalibRollout rows of ``rollouts`` (columns response_id, text, mark, gold, max_mark) with the expected
    marks m_hat_k (k = 1..T) of the frozen policy's probe; returns (rows, rollouts left out for T = 0)."""
    index = {r.id: r for r in ds.responses}
    prompts = [frozen.grading_input(ds.question(index[rid]), index[rid].answer) for rid in rollouts["response_id"]]
    marks = [None if pd.isna(m) else int(m) for m in rollouts["mark"]]
    gold, mm = rollouts["gold"].astype(int).tolist(), rollouts["max_mark"].astype(int).tolist()
    m_hats = shaping_terms(frozen, probe_cfg, prompts, rollouts["text"].tolist(), gold, mm, rule)
    rows, dropped = [], 0
    for rid, m, g, M, mh in zip(rollouts["response_id"], marks, gold, mm, m_hats):
        if len(mh) == 0:
            dropped += 1
            continue
        rows.append(CalibRollout(group=str(rid), r_out=outcome_reward(m, g, M), correct=m == g, max_mark=float(M),
                                 gold=float(g), m_hat=tuple(float(x) for x in mh)))
    return rows, dropped


def drawn_responses(ds: Dataset, fraction: float, seed: int) -> set:
    """The seeded calibration groups: ``fraction`` of the training responses (App. B: 10%)."""
    return draw_groups({r.id for r in ds.split("train")}, fraction, seed)


def table9_shaping() -> dict[str, tuple[float, float]]:
    """Table 9, lower block: the paper's (beta_drift, gamma_Phi) per dataset, keyed as the paper profile names
    its datasets ('sas_history', 'private_biology'), read from ``paper_reference``."""
    t = paper_reference.table("Table 9")
    out: dict[str, dict] = {}
    for r in t.itertuples():
        prefix = "sas" if r.dataset == "SAS" else "private"
        out.setdefault(f"{prefix}_{r.subject.lower()}", {})[r.metric] = r.value
    return {k: (v["beta_drift"], v["gamma"]) for k, v in out.items()}


def values_source(dataset: str, beta_drift: float, gamma: float) -> str:
    """'paper (Table 9)' when the dataset names a Table 9 row (e.g. ``sas_history``) and the values are that
    row's, else 'profile'."""
    row = table9_shaping().get(dataset.lower())
    return "paper (Table 9)" if row == (float(beta_drift), float(gamma)) else "profile"


def shaping_plan(profile) -> list[str]:
    """Per dataset RL runs on, the beta_drift / gamma_Phi EDIT-RL will use (Eq. 6-7; the dry run says it):
    calibrated in 06 (App. B) or the fixed values of ``rl.shaping_by_dataset`` / ``rl.shaping``, named by their
    source (``values_source``)."""
    out = []
    for d in profile.rl.datasets_in([s.name for s in profile.data.datasets]):
        v = profile.rl.shaping_for(d)
        how = (f"calibrated in 06 (App. B: a seeded {profile.rl.shaping.calibration_fraction:.0%} of its training "
               f"rollouts)" if profile.rl.calibrates(d) else
               f"{values_source(d, v.beta_drift, v.gamma)}: beta_drift {v.beta_drift:g}, gamma {v.gamma:g}")
        out.append(f"{d}: {how}")
    return out


@dataclass
class Table9Row:
    """One row of 06's Table 9 (lower block), the (beta_drift, gamma) EDIT-RL uses, the sweep rows for the
    figure, and the warnings to show."""
    row: dict
    used: tuple[float, float]
    sweep: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def table9_row(profile, init: str, dataset: str, rows: list[CalibRollout], n_rollouts: int,
               without_steps: int) -> Table9Row:
    """Calibrate one (initialisation, dataset) (App. B; Table 9 lower block; ``calibration.calibrate`` with the
    profile's ``rl.shaping``, beside Table 9's values where the dataset names a Table 9 row) and pick the values
    EDIT-RL uses: the calibrated ones where ``rl.calibrates(dataset)``, else the profile's (``rl.shaping_for``),
    labelled 'paper (Table 9)' when they are the paper's (``values_source``). ``flags`` lists a beta_drift the
    search range decided and a gamma on its cap, each also a warning. A calibration that cannot run (no correct or
    no incorrect rollout) falls back to the profile's values with a warning."""
    S, fixed, calibrated = profile.rl.shaping, profile.rl.shaping_for(dataset), profile.rl.calibrates(dataset)
    profile_used = (fixed.beta_drift, fixed.gamma)
    source = values_source(dataset, *profile_used)
    base = dict(init=init, dataset=dataset, rollouts=n_rollouts, without_steps=without_steps)
    paper = {dataset: ShapingValues(*table9_shaping()[dataset.lower()])} if dataset.lower() in table9_shaping() \
        else {}
    try:
        t = calibrate({dataset: rows}, fraction=1.0, seed=profile.run.seed, grid=S.beta_grid, cap=S.gamma_cap,
                      safety=S.gamma_safety, paper=paper, rule=S.flip_safe_rule)[dataset]
    except ValueError as e:  # e.g. no correct (or no incorrect) rollout to separate
        msg = (f"calibration {init}/{dataset} not possible ({e}); EDIT-RL uses the {source} values beta_drift "
               f"{fixed.beta_drift} and gamma {fixed.gamma}")
        return Table9Row(dict(base, used=f"{source} (calibration failed)", beta_drift_used=fixed.beta_drift,
                              gamma_used=fixed.gamma, flags=""), profile_used, warnings=[msg])
    used = (t.beta_drift, t.gamma.gamma) if calibrated else profile_used
    d = t.to_dict()
    row = dict(base, groups=t.n_groups, correct=t.n_correct, incorrect=t.n_incorrect, beta_drift=t.beta_drift,
               gamma=t.gamma.gamma, flip_safe_rule=t.gamma.rule, flip_safe_bound=d["gamma"]["bound"],
               worst_case_bound=d["worst_case_bound"], flags=", ".join(t.flags), paper_beta_drift=t.paper_beta_drift,
               paper_gamma=t.paper_gamma, paper_flip_safe_bound=d["paper_flip_safe_bound"],
               paper_worst_case_bound=t.paper_worst_case_bound, notes="; ".join(t.notes),
               used="calibrated" if calibrated else source, beta_drift_used=used[0], gamma_used=used[1])
    sweep = [dict(init=init, dataset=dataset, chosen=s.beta_drift == t.beta_drift, **vars(s)) for s in t.sweep]
    role = "used by EDIT-RL" if calibrated else f"reported only; EDIT-RL uses the {source} values"
    warnings = []
    for f in t.flags:
        what = {"beta_drift_at_cap": f"beta_drift {t.beta_drift} is the largest maximum mark M_q, up to which the "
                                     f"sweep went on above rl.shaping.beta_grid {list(S.beta_grid)}: no tolerance "
                                     f"below it separates incorrect from correct rollouts",
                "beta_drift_at_grid_bottom": f"beta_drift {t.beta_drift} is the bottom of rl.shaping.beta_grid "
                                             f"{list(S.beta_grid)}: the best separation may lie below the grid",
                "gamma_at_cap": f"gamma {t.gamma.gamma} sits on rl.shaping.gamma_cap {S.gamma_cap}: the cap, not "
                                f"flip-safety (bound {t.gamma.bound:.4g}), set it"}[f]
        warnings.append(f"calibration {init}/{dataset} ({role}): {what}")
    return Table9Row(row, used, sweep, warnings)
