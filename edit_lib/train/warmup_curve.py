"""The warm-up's held-out curve (``model.warmup.curve_every``): held-out training answers graded greedily as 01
grades (App. B's greedy grading, Tables 1-2 metrics) while the warm-up trains, each point judged by the budget
guard (``model.warmup_guard``).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from edit_lib.config import WarmupConfig
from edit_lib.data.schema import Dataset, Response
from edit_lib.model.rollouts import greedy_grades
from edit_lib.model.warmup_guard import WarmupGuardStop, point_verdict, stop_message, top_mark

__all__ = ["curve_hook", "mark_shares"]


def curve_hook(policy, held: dict[str, list[Response]], datasets: dict[str, Dataset], cfg: WarmupConfig,
               eval_cfg, rule: str, points: list, progress: bool = False):
    """The trainer's ``on_step`` hook that greedy-grades the held-out training answers at step 0, every
    ``cfg.curve_every`` steps and at the last step, appending {step, qwk, acc, n, n_invalid, top_share, top_mark,
    gold_share, mark_shares} to ``points``: the curve of held-out QWK (macro over questions, ``eval.invalid_as``)
    against warm-up steps that 01 draws, with the largest share one mark takes of a dataset's gradings, that mark's
    share of their gold marks, and every mark's (``mark_shares``). Under ``cfg.guard == 'stop'`` a point before the
    last step at which the guard fires (``model.warmup_guard``) stops the warm-up there. ``progress``: a line per
    point and the gradings' bar, so the trainer's bar standing still while a point is graded says why."""
    def point(model, step: int) -> None:
        if step % cfg.curve_every and step != cfg.steps:
            return
        model.eval()
        p = dataclasses.replace(policy, model=model)
        if progress:
            print(f"warm-up step {step}: grading {sum(map(len, held.values()))} held-out answers (the curve)",
                  flush=True)
        rows = {"step": step, "n": 0, "n_invalid": 0, "qwk": [], "acc": [], "top_share": 0.0, "mark_shares": []}
        for name, rs in held.items():
            if rs:
                df, m = greedy_grades(p, datasets[name], rs, eval_cfg, rule=rule, progress=progress)
                rows["n"] += m["n"]
                rows["n_invalid"] += m["n_invalid"]
                rows["qwk"].append(m["qwk"])
                rows["acc"].append(m["acc"])
                rows["mark_shares"].append(f"{name}: {mark_shares(df)}")
                top = top_mark(df, name)
                if top["top_share"] > rows["top_share"]:
                    rows.update(top)
        points.append({**rows, "qwk": float(np.nanmean(rows["qwk"])), "acc": float(np.mean(rows["acc"])),
                       "mark_shares": "; ".join(rows["mark_shares"])})
        if cfg.guard == "stop" and step < cfg.steps:
            why = point_verdict(points[-1], points[-2] if len(points) > 1 else None, cfg)
            if why:
                raise WarmupGuardStop(stop_message(why))

    return point


def mark_shares(graded) -> str:
    """Each mark's share of a dataset's graded rows (column ``mark``; "unparsed" for a failed parse) beside its
    share of their gold marks (``gold``), e.g. '0 3% (gold 11%), 1 47% (56%)': the held-out curve per mark, which
    shows a warm-up that settles on one mark (book/records/real_model-cpu-real.md)."""
    marks = graded["mark"].map(lambda m: "unparsed" if pd.isna(m) else str(int(m)))
    gold = graded["gold"].map(lambda g: str(int(g)))
    keys = sorted(set(marks) | set(gold), key=lambda k: (k == "unparsed", int(k) if k.isdigit() else 0))
    return ", ".join(f"{k} {(marks == k).mean():.0%} ({'gold ' if i == 0 else ''}{(gold == k).mean():.0%})"
                     for i, k in enumerate(keys))
