"""Fractional marks: the ``mark_scale`` loader option (half marks are common in real data).

Real mark sheets hold half marks (two examiners averaged: 3.5 of 5). The suite grades integer marks
0..M_q (the probe of Eq. 1 is a distribution over integer marks), so a loader given ``mark_scale=k``
multiplies every mark by ``k`` - gold marks, M_q, and the mark scheme's point values, caps and level
bands - and keeps the original scale in the dataset metadata (``meta["mark_scale"]``,
``meta["original_max_marks"]``). ``k=2`` turns 3.5 of 5 into 7 of 10. Without the option a
non-integer mark is an error that names it; with it, a mark that is not a multiple of ``1/k`` is an
error naming the file, line and field.
"""
from __future__ import annotations

import math
from typing import Any

from edit_lib.data.errors import DataError
from edit_lib.data.records import get_number

HINT = ("set the loader option mark_scale (e.g. mark_scale: 2 grades half marks on a doubled scale; "
        "data_cards/private_science.md)")


def check_mark_scale(k: Any) -> int:
    """``k`` if it is an integer >= 1, else ValueError."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"mark_scale must be an integer >= 1, not {k!r}")
    return k


def scale_value(v: Any, k: int, field: str, where: dict) -> int:
    """``v * k`` as an integer; DataError when ``v`` is not a multiple of ``1/k``."""
    x = v * k if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan
    if not math.isfinite(x) or abs(x - round(x)) > 1e-9 * max(1.0, abs(x)):
        if k == 1:
            raise DataError(f"not an integer: {v!r}; {HINT}", field=field, **where)
        raise DataError(f"{v!r} is not a multiple of 1/{k} (mark_scale={k})", field=field, **where)
    return int(round(x))


def get_mark(rec: dict, name: str, where: dict, k: int = 1, *, cells: bool = False) -> int:
    """A required mark field on the scale ``k`` (module docstring)."""
    return scale_value(get_number(rec, name, where, cells=cells), k, name, where)


def scale_scheme_dict(sd: dict, k: int, where: dict) -> dict:
    """A scheme's dict form (``schema.scheme_from_dict``) with its marks multiplied by ``k``: PTS point
    values and cap, LoR band ``low``/``high``/``step`` (``min_points`` counts points and stays), the
    free-text scheme's ``max_mark``. Non-numbers are left for the scheme checks to report."""
    if k == 1:
        return sd
    out = dict(sd)
    num = (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool))
    if isinstance(sd.get("points"), list):
        out["points"] = [{**p, "value": p.get("value", 1.0) * k}  # 1.0: MarkingPoint's default value
                         if isinstance(p, dict) and num(p.get("value", 1.0)) else p for p in sd["points"]]
    if num(sd.get("cap")):
        out["cap"] = sd["cap"] * k
    if isinstance(sd.get("levels"), list):
        out["levels"] = [_scale_level({"step": 1, **lv}, k, where) if isinstance(lv, dict) else lv
                         for lv in sd["levels"]]  # step 1: Level's default
    if sd.get("kind") == "text" and num(sd.get("max_mark")) and sd["max_mark"]:
        out["max_mark"] = scale_value(sd["max_mark"], k, "scheme.max_mark", where)
    return out


def _scale_level(lv: dict, k: int, where: dict) -> dict:
    return {**lv, **{f: scale_value(lv[f], k, f"scheme.levels.{f}", where)
                     for f in ("low", "high", "step") if isinstance(lv.get(f), (int, float))
                     and not isinstance(lv.get(f), bool)}}
