"""The warm-up's budget guard (``model.warmup.guard``): a suite check, not the paper's (its Base grades zero-shot,
App. B). A warm-up Base that does not grade makes every later comparison against it meaningless (Tables 1-3,
App. G), so its held-out curve (``curve_every``) is judged while the warm-up trains (`point_verdict` states the
rule). ``guard: stop`` ends the warm-up at the first firing point before its last step (`WarmupGuardStop`, raised
from the curve hook, so 01 fails at once and nothing later runs), or 01 right after a last point that fires (the
trained Base stays cached); ``guard: warn`` goes on with the last point's verdict as a caveat every later notebook
carries. The guard's values stay out of the warm-up's cache key: they decide whether the run goes on, never the
weights or the curve.
"""
from __future__ import annotations

import math
from typing import Sequence

import pandas as pd

__all__ = ["GUARD_FIELDS", "WarmupGuardStop", "judged", "point_verdict", "stop_message", "top_mark", "verdict"]

GUARD_FIELDS = ("guard", "guard_after", "guard_min_qwk", "guard_min_gain", "guard_max_mark_share",
                "guard_share_margin")


class WarmupGuardStop(RuntimeError):
    """``model.warmup.guard: stop`` fired: the message gives the step, the numbers and what to change."""


def judged(step: int, cfg) -> bool:
    """Whether the curve point at ``step`` is judged (``cfg`` a ``WarmupConfig``)."""
    return step > 0 and step >= math.ceil(cfg.guard_after * cfg.steps)


def point_verdict(point: dict, previous: dict | None, cfg) -> str | None:
    """Why the guard fires at curve ``point`` (``previous`` the point before it), or None. A point holds the held-out
    macro QWK, ``top_share`` (the largest share one mark, "unparsed" included, takes of a dataset's held-out
    gradings) and ``gold_share`` (that mark's share of the same answers' gold marks). The rule:

    * a point is judged from step ``ceil(guard_after * steps)`` on (step 0 is the untrained model);
    * a judged point before the last step fires when its QWK is below ``guard_min_qwk`` and it is **flat** (QWK
      rose less than ``guard_min_gain`` since the previous point) or **degenerate** (``top_share`` above
      ``guard_max_mark_share`` and above ``gold_share + guard_share_margin``: skewed gold marks may rightly put
      most answers on one mark, and a Base that grades them puts a few more there): low and not on its way up;
    * the last point fires when its QWK is below ``guard_min_qwk`` or it is degenerate: training is over."""
    step, qwk = int(point["step"]), float(point["qwk"])
    share = point.get("top_share")
    share = float("nan") if share is None else float(share)
    last = step >= cfg.steps
    low = not qwk >= cfg.guard_min_qwk  # a NaN QWK (one mark for every answer) is low
    gold = point.get("gold_share")
    over = share > cfg.guard_max_mark_share and (gold is None or share > float(gold) + cfg.guard_share_margin)
    flat = previous is None or not qwk - float(previous["qwk"]) >= cfg.guard_min_gain
    fires = (low or over) if last else low and (flat or over)
    if not (judged(step, cfg) and fires):
        return None
    why = []
    if low:
        why.append(f"held-out QWK {qwk:.3f} is below model.warmup.guard_min_qwk={cfg.guard_min_qwk:g}")
    if low and not last and flat and previous is not None:
        why.append(f"rose {qwk - float(previous['qwk']):+.3f} since step {int(previous['step'])} (less than "
                   f"guard_min_gain={cfg.guard_min_gain:g})")
    if over:
        gold_text = "" if gold is None else (f" and than its {float(gold):.0%} of the gold marks + "
                                             f"guard_share_margin={cfg.guard_share_margin:.0%}")
        why.append(f"{point.get('top_mark', 'one mark')} takes {share:.0%} of the held-out gradings (more than "
                   f"guard_max_mark_share={cfg.guard_max_mark_share:.0%}{gold_text})")
    where = "after its last step" if last else f"at step {step} of {cfg.steps}"
    return (f"model.warmup.guard: the warm-up Base {where}: " + "; ".join(why) +
            f" ({int(point.get('n', 0))} held-out answers): a Base that does not grade makes every comparison "
            "against it meaningless")


def top_mark(graded, dataset: str) -> dict:
    """{top_share, top_mark, gold_share} of one dataset's graded rows (columns ``mark``, ``gold``): the mark the
    Base gives most often ("unparsed" for a failed parse), its share of the rows and of their gold marks."""
    marks = graded["mark"].map(lambda m: "unparsed" if pd.isna(m) else str(int(m)))
    shares = marks.value_counts(normalize=True, sort=False).sort_index()
    mark = shares.idxmax()
    gold = float((graded["gold"].map(lambda g: str(int(g))) == mark).mean())
    return dict(top_share=float(shares[mark]), top_mark=f"{dataset}: mark {mark}", gold_share=gold)


def verdict(points: Sequence[dict], cfg) -> str | None:
    """The guard's message on a finished curve: the last point's (`point_verdict`), or None."""
    if not points or cfg.guard == "off":
        return None
    return point_verdict(points[-1], points[-2] if len(points) > 1 else None, cfg)


def stop_message(message: str) -> str:
    """What ``guard: stop`` raises with: the verdict and what to change."""
    return (f"{message}. 01 stops here (model.warmup.guard=stop) before the later stages spend their budget; "
            "set -p model.warmup.guard=warn to go on anyway, or change the warm-up (steps, learning_rate, "
            "judgement, mark_weight, roles) or the data (01's loss figure shows whether the mark tokens' own loss "
            "fell).")
