"""Gold-computable rubric edits for the rule-faithfulness intervention (App. I, "Intervention Strategies").

LoR band shifts (level 0, "no creditworthy content", stays 0 under every edit):
* ``lor_a1``: uniform +2 on every level's band (low and high).
* ``lor_a2``: expand x2: low, high and step doubled, so every gold mark doubles exactly.
* ``lor_b1``: differential per-level shift, default +1/+2/+2 from the lowest to the highest band
  (levels beyond the given shifts take the last one).
PTS rescales: every point value (and the cap) multiplied by 0.5, 1.5 or 2.0 (``pts_x0.5``, ...).

Rounding rule: values are scaled exactly (0.5, 1.5, ... are kept as floats); only the response's total is
rounded, half-up (``round_half_up``), at the end, inside ``scheme.gold``. M_q is recomputed the same way.
Gold is recomputed through ``scheme.gold`` on the edited scheme from the known coverage, never guessed.
"""
from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Callable

from edit_lib.data.schema import Dataset, LevelScheme, PointsScheme, Question, round_half_up
from edit_lib.registry import Registry

EditFn = Callable[[Question], Question]


def _with_scheme(q: Question, scheme) -> Question:
    return replace(q, scheme=scheme, max_mark=scheme.max_mark)


def lor_shift(q: Question, shifts: tuple[int, ...] = (2,)) -> Question:
    """LoR band shift (App. I A1 with shifts=(2,), B1 with shifts=(1, 2, 2)): level i gains shifts[i]."""
    s = _require(q, LevelScheme)
    ordered = sorted(s.levels, key=lambda lv: lv.level)
    rank = {lv.level: i for i, lv in enumerate(ordered)}
    if any(b < a for a, b in zip(shifts, shifts[1:])):
        raise ValueError(f"shifts {shifts} must be non-decreasing so bands stay ordered")
    levels = tuple(replace(lv, low=lv.low + d, high=lv.high + d)
                   for lv in s.levels for d in [shifts[min(rank[lv.level], len(shifts) - 1)]])
    return _with_scheme(q, replace(s, levels=levels))


def lor_expand(q: Question, factor: int = 2) -> Question:
    """LoR expand (App. I A2): low, high and step multiplied by ``factor``, so gold scales exactly."""
    s = _require(q, LevelScheme)
    levels = tuple(replace(lv, low=lv.low * factor, high=lv.high * factor, step=lv.step * factor)
                   for lv in s.levels)
    return _with_scheme(q, replace(s, levels=levels))


def pts_rescale(q: Question, factor: float) -> Question:
    """PTS rescale (App. I): every point value and the cap times ``factor``, kept exact (no rounding here)."""
    s = _require(q, PointsScheme)
    pts = tuple(replace(p, value=p.value * factor) for p in s.points)
    cap = None if s.cap is None else s.cap * factor
    return _with_scheme(q, replace(s, points=pts, cap=cap))


def _require(q: Question, kind: type):
    if not isinstance(q.scheme, kind):
        raise TypeError(f"question {q.id}: edit needs a {kind.__name__}, got {type(q.scheme).__name__}")
    return q.scheme


# name -> edit function, in Table 14's order; EDIT_KIND gives the scheme kind each edit applies to
EDITS: Registry[EditFn] = Registry("rubric edit (App. I)")
EDITS.update({
    "lor_a1": partial(lor_shift, shifts=(2,)),
    "lor_a2": partial(lor_expand, factor=2),
    "lor_b1": partial(lor_shift, shifts=(1, 2, 2)),
    "pts_x0.5": partial(pts_rescale, factor=0.5),
    "pts_x1.5": partial(pts_rescale, factor=1.5),
    "pts_x2.0": partial(pts_rescale, factor=2.0),
})
EDIT_KIND = {name: ("lor" if name.startswith("lor") else "pts") for name in EDITS}


def apply_edit(question: Question, name: str) -> Question:
    """Apply the App. I edit ``name`` to one question (TypeError if its scheme is of the other kind; an unknown name
    is a ``registry.UnknownName`` listing the edits)."""
    return EDITS[name](question)


def _regolded(dataset: Dataset, name: str, gold_of, excluded: str, method: str) -> Dataset:
    """The edited dataset: questions of the edit's scheme kind with the edit applied, each response's gold from
    ``gold_of(original question, edited question, response)`` (None: excluded and counted as ``excluded``).
    Questions of the other kind are excluded and counted too; response ids are unchanged, so predictions before
    and after the edit pair up by id (RSR, App. I)."""
    if name not in EDITS:
        raise KeyError(f"unknown rubric edit {name!r}; known: {sorted(EDITS)}")
    kind = EDIT_KIND[name]
    edited = {qid: apply_edit(q, name) for qid, q in dataset.questions.items() if q.scheme.kind == kind}
    responses, n_excluded, other_kind = [], 0, 0
    for r in dataset.responses:
        if r.question_id not in edited:
            other_kind += 1
            continue
        g = gold_of(dataset.questions[r.question_id], edited[r.question_id], r)
        if g is None:
            n_excluded += 1
            continue
        responses.append(replace(r, gold=g))
    used = {r.question_id for r in responses}
    questions = {qid: q for qid, q in edited.items() if qid in used}
    meta = dict(dataset.meta, edit=name, regold={
        "edit": name, "kind": kind, "method": method, "kept_questions": len(questions),
        "kept_responses": len(responses),
        "excluded_questions_other_kind": sum(q.scheme.kind != kind for q in dataset.questions.values()),
        "excluded_responses_other_kind": other_kind, f"excluded_responses_{excluded}": n_excluded})
    out = Dataset(name=f"{dataset.name}+{name}", questions=questions, responses=responses, meta=meta)
    out.validate()
    return out


def regold(dataset: Dataset, name: str) -> Dataset:
    """Edited dataset with gold recomputed exactly from coverage (App. I).

    Only questions whose scheme kind matches the edit are kept; the others, and responses without
    coverage ground truth, are excluded and counted in ``meta["regold"]`` (never silently). Response ids
    are unchanged, so predictions before and after the edit pair up by id (RSR, App. I).
    """
    def from_coverage(_orig: Question, q: Question, r) -> int | None:
        return q.scheme.gold([c.point_id for c in r.coverage if c.covered]) if r.coverage else None
    return _regolded(dataset, name, from_coverage, "no_coverage", "coverage")


# ------------------------------------------------------------------ regold from the gold mark alone

def _is_integral(x: float | None) -> bool:
    return x is None or float(x).is_integer()


def gold_only_mark(original: Question, edited: Question, gold: int) -> int | None:
    """The edited gold from the original gold and the two schemes alone, or None where coverage is needed
    (App. I edits, for data without per-point coverage: a human-scored dataset with a PTS or LoR scheme).

    Derivation (checked against the coverage regold by ``tests/data/test_rubric_edits.py``):
    * PTS rescale by a uniform factor f (every point value and the cap): with integral point values and cap,
      the original capped total equals the gold exactly, and min(f*s, f*c) = f*min(s, c), so the edited gold is
      round_half_up(f * gold). With a fractional value or cap the total before rounding is not known from the
      gold (2.5 and 3.0 both round to 3): None.
    * LoR: gold 0 with no band containing 0 is level 0, which every edit keeps at 0. Otherwise the level is
      the one band containing the gold (None if none or several do). A band shifted by d (low, high + d, same
      step; A1, B1) moves the gold to gold + d, since min(high + d, low + d + step*k) = gold + d; a band scaled
      by f (low, high and step times f; A2) gives f * gold. Any other change of the band: None.
    """
    o, e = original.scheme, edited.scheme
    if isinstance(o, PointsScheme) and isinstance(e, PointsScheme):
        if len(o.points) != len(e.points) or not all(_is_integral(p.value) for p in o.points) \
                or not _is_integral(o.cap) or (o.cap is None) != (e.cap is None):
            return None
        ratios = {e_p.value / o_p.value for o_p, e_p in zip(o.points, e.points) if o_p.value}
        if o.cap:
            ratios.add(e.cap / o.cap)
        if len(ratios) != 1:
            return None
        return round_half_up(ratios.pop() * gold)
    if isinstance(o, LevelScheme) and isinstance(e, LevelScheme):
        holding = [lv for lv in o.levels if lv.low <= gold <= lv.high]
        if gold == 0 and not holding:
            return 0
        if len(holding) != 1:
            return None
        lv = holding[0]
        new = {x.level: x for x in e.levels}.get(lv.level)
        if new is None or new.min_points != lv.min_points:
            return None
        d = new.low - lv.low
        if new.high - lv.high == d and new.step == lv.step:
            return gold + d
        if lv.high and new.high % lv.high == 0:
            f = new.high // lv.high
            if (new.low, new.step) == (lv.low * f, lv.step * f):
                return gold * f
        return None
    return None


def regold_from_gold(dataset: Dataset, name: str) -> Dataset:
    """Edited dataset with gold derived from the original gold alone (``gold_only_mark``), for data that has a
    PTS or LoR scheme but no per-point coverage (App. I on a user's own data). Responses whose edited gold
    needs coverage, and questions of the other scheme kind (free-text rubrics included: ASAP and SAS-Bench
    give no structured scheme, so no App. I edit applies to them), are excluded and counted in
    ``meta["regold"]``."""
    return _regolded(dataset, name, lambda o, e, r: gold_only_mark(o, e, r.gold), "needs_coverage", "gold_only")
