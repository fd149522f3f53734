"""Calibration of EDIT-RL's belief shaping: the drift tolerance beta_drift and the shaping weight gamma_Phi (App. B
"RL configuration and checkpoint selection"; Eq. 5-7; Table 9, lower block). Longer than 400 lines because the
rules and their inputs are one procedure: what it reads decides what it may compute from.

Per dataset, on a seeded 10% subset of the initialisation's training rollouts (``rl.shaping.calibration_fraction``),
probed by the FROZEN initialisation (Eq. 1 at ``probe.temperature``), signal statistics only, never a metric:
* beta_drift: the grid value that best separates the penalty's firing rate on incorrect and correct rollouts
  (``sweep_beta_drift``; on above the grid where its top is best); gamma_Phi: the largest flip-safe value
  (``flip_safe_gamma``; ``literal``, as App. B words it, or ``pairwise``); ``edge_flags``, a data-free bound.
* Inputs: Base's own training rollouts (01), an SFT initialisation's ``rl.rollouts_per_prompt`` per drawn response
  at ``rl.decoding``; the groups are drawn first (``draw_groups``), so only the subset is generated and probed. A
  rollout with no boundary (no Eq. 6 penalty) is left out and counted; an unparsed mark has r_out = 0 (Eq. 5).
* ``table9_row``: 06's Table 9 row, the (beta_drift, gamma) EDIT-RL uses, and the warnings 06 shows.

Departures: book/departures.md, section "RL calibration (edit_lib/train/calibration.py)".
"""
from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, field
from typing import Mapping, Sequence

import pandas as pd

from edit_lib import paper_reference
from edit_lib.config import Decoding, ProbeConfig, ShapingValues
from edit_lib.data.schema import Dataset
from edit_lib.model.generate import SamplingConfig
from edit_lib.model.policy import Policy
from edit_lib.model.rollouts import grade_responses
from edit_lib.train.rewards import outcome_reward, shaping_penalty, shaping_terms


# Suite's choices (the paper names neither the grid nor a cap): the grid brackets the paper's values 0.5 / 0.75.
DEFAULT_BETA_GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0)
DEFAULT_GAMMA_CAP = 1.0  # shaping never weighs more than the outcome reward
DEFAULT_SAFETY = 0.99  # flip-safety is a strict inequality: stay strictly below the binding pair's ratio
FLIP_SAFE_RULES = ("literal", "pairwise")  # App. B's wording, and the looser ranking-only rule


@dataclass(frozen=True)
class CalibRollout:
    """One calibration rollout: its outcome reward r_out (Eq. 5), correctness, group (the training response it
    answers), the question's maximum mark M_q, the gold mark m*, and the expected posterior marks m_hat_k of the
    frozen probe at its step boundaries k = 1..T (Eq. 6)."""
    group: str
    r_out: float
    correct: bool
    max_mark: float
    gold: float
    m_hat: tuple[float, ...]

    def check(self, where: str) -> None:
        """Raise a ValueError naming `where` and the field when a value is out of range."""
        def bad(name: str, why: str) -> ValueError:
            return ValueError(f"{where}, field {name!r}: {why}")
        if not isinstance(self.max_mark, (int, float)) or not self.max_mark > 0:
            raise bad("max_mark", f"expected a positive number, got {self.max_mark!r}")
        if not (isinstance(self.r_out, (int, float)) and 0.0 <= self.r_out <= 1.0):
            raise bad("r_out", f"expected a number in [0, 1] (Eq. 5), got {self.r_out!r}")
        if not (isinstance(self.gold, (int, float)) and 0.0 <= self.gold <= self.max_mark):
            raise bad("gold", f"expected a mark in [0, {self.max_mark}], got {self.gold!r}")
        if len(self.m_hat) == 0:
            raise bad("m_hat", "no step boundary (T = 0): the shaping penalty (Eq. 6) is undefined")
        for k, m in enumerate(self.m_hat):
            if not (isinstance(m, (int, float)) and math.isfinite(m) and -1e-9 <= m <= self.max_mark + 1e-9):
                raise bad("m_hat", f"boundary {k}: expected an expected mark in [0, {self.max_mark}], got {m!r}")


def rollout_penalty(r: CalibRollout, beta_drift: float) -> float:
    """pen = -r_shape >= 0 of one rollout (Eq. 6, ``rewards.shaping_penalty``): (1 / M_q)(1 / T) sum_k
    max(0, |m_hat_k - m*| - beta_drift); 0 for a rollout with no step."""
    return -shaping_penalty(r.m_hat, r.gold, r.max_mark, beta_drift)


def _checked(rollouts: Sequence[CalibRollout], where: str) -> list[CalibRollout]:
    if len(rollouts) == 0:
        raise ValueError(f"{where}: no calibration rollouts")
    for i, r in enumerate(rollouts):
        if not isinstance(r, CalibRollout):
            raise ValueError(f"{where} row {i}: expected a CalibRollout, got {type(r).__name__}")
        r.check(f"{where} row {i}")
    return list(rollouts)


def calibration_subset(rollouts: Sequence[CalibRollout], fraction: float, seed: int) -> list[CalibRollout]:
    """The seeded calibration subset (App. B: 10% of the training rollouts), drawn as whole groups: ceil(fraction x
    number of groups) groups, sampled with `random.Random(seed)` from the sorted group ids, rollouts in input order."""
    keep = draw_groups({r.group for r in rollouts}, fraction, seed)
    return [r for r in rollouts if r.group in keep]


def draw_groups(groups, fraction: float, seed: int) -> set:
    """The seeded group draw of `calibration_subset`: ceil(fraction x |groups|) of the sorted group ids under
    `random.Random(seed)`. 06 draws the training responses with it before sampling their rollouts."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"rl.shaping.calibration_fraction must lie in (0, 1], got {fraction}")
    groups = sorted(groups)
    return set(random.Random(seed).sample(groups, max(1, math.ceil(fraction * len(groups))))) if groups else set()


@dataclass
class SweepRow:
    """Firing rates of the shaping penalty (accumulated penalty > 0) at one beta_drift (App. B)."""
    beta_drift: float
    fire_rate_incorrect: float
    fire_rate_correct: float
    separation: float  # incorrect rate minus correct rate
    n_incorrect: int
    n_correct: int


def sweep_beta_drift(rollouts: Sequence[CalibRollout], grid: Sequence[float] = DEFAULT_BETA_GRID,
                     cap: float | None = None) -> tuple[list[SweepRow], float]:
    """Sweep beta_drift (App. B): for each grid value, the share of incorrect and of correct rollouts whose
    shaping penalty (Eq. 6) is > 0; keep the value maximising the separation (incorrect rate minus correct rate).
    Ties go to the smaller beta_drift (the stricter tolerance: the penalty then also sees the smaller drifts).
    Where the best value is the grid's top, the sweep goes on above it by the grid's last step up to ``cap``
    (default: the rollouts' largest M_q, beyond which no penalty fires), so that the value kept is a maximum of the
    separation over the whole range, not the grid's edge (a one-value grid is a fixed tolerance). Returns (rows in
    ascending beta_drift, chosen beta_drift)."""
    rollouts = _checked(rollouts, "calibration sweep")
    if not grid or any((not isinstance(b, (int, float))) or b < 0 for b in grid):
        raise ValueError(f"calibration sweep: the beta_drift grid must be non-negative numbers, got {list(grid)}")
    inc = [r for r in rollouts if not r.correct]
    cor = [r for r in rollouts if r.correct]
    if not inc or not cor:
        raise ValueError(f"calibration sweep: need correct and incorrect rollouts to separate, got {len(cor)} "
                         f"correct and {len(inc)} incorrect")
    def row(b: float) -> SweepRow:
        fi = sum(rollout_penalty(r, b) > 0 for r in inc) / len(inc)
        fc = sum(rollout_penalty(r, b) > 0 for r in cor) / len(cor)
        return SweepRow(b, fi, fc, fi - fc, len(inc), len(cor))

    values = sorted(set(float(x) for x in grid))
    cap = max(r.max_mark for r in rollouts) if cap is None else cap
    rows = [row(b) for b in values]
    best = max(rows, key=lambda r: (r.separation, -r.beta_drift))  # ties -> smaller beta
    if best is rows[-1] and len(values) > 1:  # the grid's top: the rest of the range, up to the cap
        step = values[-1] - values[-2]
        k = 1
        while values[-1] + k * step < cap:
            rows.append(row(round(values[-1] + k * step, 10)))
            k += 1
        if values[-1] < cap:
            rows.append(row(float(cap)))
        best = max(rows, key=lambda r: (r.separation, -r.beta_drift))
    return rows, best.beta_drift


@dataclass
class GammaResult:
    """The flip-safe gamma of one dataset (App. B) and the pair that binds it."""
    gamma: float
    bound: float  # min over binding pairs of (r_out(c) - r_out(i)) / (pen(c) [- pen(i) when pairwise]); inf if none
    cap: float
    safety: float
    n_pairs: int  # (correct, incorrect) pairs within groups with r_out(c) > r_out(i)
    n_binding: int  # those shaping could flip: pen(c) > 0 (literal) or pen(c) > pen(i) (pairwise)
    binding_group: str | None = None
    rule: str = "literal"

    @property
    def at_cap(self) -> bool:
        """True when the cap, not the data, set gamma."""
        return self.gamma >= self.cap


def flip_safe_gamma(rollouts: Sequence[CalibRollout], beta_drift: float, cap: float = DEFAULT_GAMMA_CAP,
                    safety: float = DEFAULT_SAFETY, rule: str = "literal") -> GammaResult:
    """The largest flip-safe shaping weight (App. B; Eq. 5-7), over every correct rollout c and incorrect rollout
    i of the same group with r_out(c) > r_out(i):

    * ``literal`` (App. B: "the accumulated penalty on a correct rollout stays below the outcome-reward gap to an
      incorrect one"): gamma pen(c) < r_out(c) - r_out(i); binds when pen(c) > 0.
    * ``pairwise`` (looser; Eq. 7 never inverts the pair): gamma (pen(c) - pen(i)) < r_out(c) - r_out(i); binds
      when pen(c) > pen(i).

    gamma = min(cap, safety x the smallest binding ratio) with 0 < safety < 1, so the strict inequality holds."""
    rollouts = _checked(rollouts, "flip-safe gamma")
    if not cap > 0 or not 0 < safety < 1:
        raise ValueError(f"flip-safe gamma: need cap > 0 and 0 < safety < 1, got cap={cap}, safety={safety}")
    if rule not in FLIP_SAFE_RULES:
        raise ValueError(f"flip-safe gamma: rule must be one of {FLIP_SAFE_RULES} (rl.shaping.flip_safe_rule), "
                         f"got {rule!r}")
    by_group: dict[str, list[CalibRollout]] = {}
    for r in rollouts:
        by_group.setdefault(r.group, []).append(r)
    bound, where, n_pairs, n_binding = math.inf, None, 0, 0
    for g, rs in by_group.items():
        pens = [(r, rollout_penalty(r, beta_drift)) for r in rs]
        for c, pc in pens:
            if not c.correct:
                continue
            for i, pi in pens:
                if i.correct or not c.r_out > i.r_out:
                    continue
                n_pairs += 1
                excess = pc if rule == "literal" else pc - pi
                if excess > 0:
                    n_binding += 1
                    ratio = (c.r_out - i.r_out) / excess
                    if ratio < bound:
                        bound, where = ratio, g
    gamma = min(cap, safety * bound)
    return GammaResult(gamma=gamma, bound=bound, cap=cap, safety=safety, n_pairs=n_pairs, n_binding=n_binding,
                       binding_group=where, rule=rule)


def worst_case_gamma_bound(max_mark: float, beta_drift: float) -> float:
    """Flip-safe bound of the worst possible pair (App. B; Eq. 5-7): an outcome gap of 1/M_q (a correct rollout
    against one off by one mark) against a penalty gap of up to (M_q - beta_drift)/M_q (the correct rollout's
    belief M_q marks off at every boundary, the incorrect one's never beyond the tolerance), i.e.
    1 / (M_q - beta_drift) under either rule; e.g. 1 / (26 - 0.75) on SAS-History."""
    if not max_mark > beta_drift >= 0:
        raise ValueError(f"worst-case gamma bound: need M_q > beta_drift >= 0, got M_q={max_mark}, "
                         f"beta_drift={beta_drift}")
    return 1.0 / (max_mark - beta_drift)


def edge_flags(beta_drift: float, grid: Sequence[float], gamma: GammaResult, cap: float) -> list[str]:
    """Flags of a calibration the search range decided rather than the data (App. B; Table 9 lower block):
    'beta_drift_at_grid_bottom' (the optimum may lie below a grid whose bottom is above 0), 'beta_drift_at_cap'
    (the sweep went up to ``cap``, the largest M_q, and found no separation below it: `sweep_beta_drift`) and
    'gamma_at_cap' (the flip-safe bound exceeds gamma's cap)."""
    flags = []
    if beta_drift <= min(grid) and min(grid) > 0:
        flags.append("beta_drift_at_grid_bottom")
    if beta_drift >= cap:
        flags.append("beta_drift_at_cap")
    if gamma.at_cap:
        flags.append("gamma_at_cap")
    return flags


@dataclass
class CalibrationTable:
    """One dataset's calibration (Table 9, lower block): the sweep, the chosen values, the bounds and, when given,
    the paper's values with the flip-safe bound at the paper's beta_drift."""
    dataset: str
    n_rollouts: int
    n_groups: int
    n_correct: int
    n_incorrect: int
    max_mark: float  # largest M_q in the subset (the worst-case bound's question)
    sweep: list[SweepRow]
    beta_drift: float
    gamma: GammaResult
    worst_case_bound: float
    paper_beta_drift: float | None = None
    paper_gamma: float | None = None
    paper_flip_safe_bound: float | None = None  # the subset's flip-safe bound at the paper's beta_drift
    paper_worst_case_bound: float | None = None
    notes: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)  # `edge_flags`: beta_drift on a grid edge, gamma on its cap

    def to_dict(self) -> dict:
        """JSON-ready (infinite bounds as None)."""
        d = asdict(self)
        d["gamma"]["bound"] = None if math.isinf(self.gamma.bound) else self.gamma.bound
        d["worst_case_bound"] = None if math.isinf(self.worst_case_bound) else self.worst_case_bound
        if self.paper_flip_safe_bound is not None and math.isinf(self.paper_flip_safe_bound):
            d["paper_flip_safe_bound"] = None
        return d


def calibrate(rollouts_by_dataset: Mapping[str, Sequence[CalibRollout]], *, fraction: float, seed: int,
              grid: Sequence[float] = DEFAULT_BETA_GRID, cap: float = DEFAULT_GAMMA_CAP,
              safety: float = DEFAULT_SAFETY, paper: Mapping[str, object] | None = None,
              rule: str = "literal") -> dict[str, CalibrationTable]:
    """Calibrate beta_drift and gamma_Phi per dataset (App. B; Table 9 lower block) on a seeded `fraction` of its
    rollouts (`calibration_subset`): the beta_drift sweep, the flip-safe gamma at the chosen beta_drift, the
    worst-case bound, and the paper's values (`paper[dataset]` with `beta_drift` / `gamma`, e.g.
    `rl.shaping_by_dataset`) with a note wherever the paper's gamma exceeds a bound; `rule` is the flip-safe
    rule (`flip_safe_gamma`), `flags` the `edge_flags`."""
    out = {}
    for name, rows in rollouts_by_dataset.items():
        sub = _checked(calibration_subset(_checked(rows, f"dataset {name!r}"), fraction, seed),
                       f"dataset {name!r} calibration subset")
        max_mark = max(r.max_mark for r in sub)
        sweep, beta = sweep_beta_drift(sub, grid, max_mark)
        gam = flip_safe_gamma(sub, beta, cap, safety, rule)
        table = CalibrationTable(
            dataset=name, n_rollouts=len(sub), n_groups=len({r.group for r in sub}),
            n_correct=sum(r.correct for r in sub), n_incorrect=sum(not r.correct for r in sub), max_mark=max_mark,
            sweep=sweep, beta_drift=beta, gamma=gam,
            worst_case_bound=worst_case_gamma_bound(max_mark, beta) if beta < max_mark else math.inf,  # none fires
            flags=edge_flags(beta, grid, gam, max_mark))
        ref = (paper or {}).get(name)
        if ref is not None:
            pb, pg = float(getattr(ref, "beta_drift")), float(getattr(ref, "gamma"))
            table.paper_beta_drift, table.paper_gamma = pb, pg
            table.paper_flip_safe_bound = flip_safe_gamma(sub, pb, cap, safety, rule).bound
            table.paper_worst_case_bound = worst_case_gamma_bound(max_mark, pb)
            if pg > table.paper_worst_case_bound:
                table.notes.append(f"paper gamma {pg} exceeds the worst-case flip-safe bound "
                                   f"1/({max_mark:g} - {pb:g}) = {table.paper_worst_case_bound:.4f}")
            if pg >= table.paper_flip_safe_bound:
                table.notes.append(f"paper gamma {pg} is not flip-safe on this calibration subset (bound "
                                   f"{table.paper_flip_safe_bound:.4f} at beta_drift {pb:g})")
        out[name] = table
    return out


# ---------------------------------------------------------------- the inputs: rollouts of the initialisation, probed
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
