"""Caveats that travel: a run-level warning found by 01 (the Base cannot read the data, or its marks are
degenerate) shown at the top of every later notebook and read by the claims ledger.

01 records them in its results as ``extra["caveats"]`` (a list of strings, each starting ``"<dataset>: "``, or
``"warm-up Base: "`` for the warm-up guard's verdict, ``model.warmup``);
its ``vocab_coverage`` entries over the unknown-token threshold count as caveats too (:func:`run_caveats`).
A suite check, not the paper's: a Base that gives one mark to nearly every answer has a QWK near 0 and every
comparison against it (Tables 1-3, App. G) says nothing about grading.
"""
from __future__ import annotations

import pandas as pd

DEGENERATE_SHARE = 0.9  # one mark on >= 90% of a dataset's predictions: the marks are degenerate


def mark_distribution(preds: pd.DataFrame, by: tuple[str, ...] = ("dataset",)) -> pd.DataFrame:
    """Predicted-mark counts per group of ``by``: columns ``*by, mark, n, share`` (a failed parse, a missing
    mark, counts as the mark "unparsed"); ``preds`` needs ``by`` and ``mark``."""
    missing = [c for c in (*by, "mark") if c not in preds.columns]
    if missing:
        raise ValueError(f"predictions lack columns {missing} (need {[*by, 'mark']})")
    mark = preds["mark"].astype(object).where(preds["mark"].notna(), "unparsed")
    d = preds[list(by)].assign(mark=mark.map(lambda m: m if m == "unparsed" else str(int(m))))
    out = d.groupby([*by, "mark"], sort=True).size().rename("n").reset_index()
    out["share"] = out["n"] / out.groupby(list(by))["n"].transform("sum")
    return out


def mark_caveats(preds: pd.DataFrame, system: str = "Base", threshold: float = DEGENERATE_SHARE,
                 by: tuple[str, ...] = ("dataset",)) -> tuple[pd.DataFrame, list[str]]:
    """(distribution, warnings): :func:`mark_distribution` and one text per dataset where a single mark (or
    "unparsed") takes ``>= threshold`` of ``system``'s predictions (e.g. 622 of 630 answers marked 10)."""
    dist = mark_distribution(preds, by)
    msgs = []
    for key, g in dist.groupby(list(by), sort=True):
        top = g.loc[g["share"].idxmax()]
        if top["share"] >= threshold:
            name = "/".join(map(str, key if isinstance(key, tuple) else (key,)))
            msgs.append(f"{name}: {system} gave mark {top['mark']} to {int(top['n'])} of {int(g['n'].sum())} "
                        f"answers ({top['share']:.0%} >= {threshold:.0%}): its marks are degenerate, so QWK and every "
                        f"comparison against {system} on this data are not meaningful")
    return dist, msgs


def run_caveats(base_results: dict | None) -> list[str]:
    """The caveats 01's results record: ``extra["caveats"]`` plus a line per ``extra["vocab_coverage"]``
    dataset over the unknown-token threshold; [] without 01's results."""
    extra = (base_results or {}).get("extra") or {}
    out = [str(c) for c in extra.get("caveats") or []]
    for d, v in (extra.get("vocab_coverage") or {}).items():
        if isinstance(v, dict) and v.get("over_threshold") and not any(c.startswith(f"{d}: ") and "unknown" in c
                                                                       for c in out):
            out.append(f"{d}: {v.get('prompt_unk_share', float('nan')):.1%} of the grading prompts' tokens are "
                       "unknown to the policy's tokenizer: its marks and signals on this data are not meaningful")
    return out


def caveats_markdown(caveats: list[str], source: str = "01_base_policy") -> str:
    """The bold notice every later notebook shows first (``runner.stage.stage``)."""
    return "\n".join([f"**Caveats recorded by {source} for this run: the numbers below may not be meaningful.**",
                      ""] + [f"* **{c}**" for c in caveats])
