"""Tables the Phase-1 notebooks (04, 05) record from the revision tables of ``revision.generation`` and
``revision.pool``: where the rules pick (Figure 4 analogue), rejections by reason, before/after examples."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .pool import OK


def position_histogram(selected: pd.DataFrame, n_bins: int = 5) -> pd.DataFrame:
    """Relative positions u = k/T of the selected steps per dataset and rule (Figure 4 analogue): the share of
    a rule's picks in each of ``n_bins`` equal bins of (0, 1] (u = 1 falls in the last bin)."""
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    rows = []
    for (ds, rule), g in selected.groupby(["dataset", "rule"], sort=True):
        b = np.clip(np.ceil(g["u"].to_numpy(float) * n_bins).astype(int) - 1, 0, n_bins - 1)
        counts = np.bincount(b, minlength=n_bins)
        rows += [dict(dataset=ds, rule=rule, lo=edges[i], hi=edges[i + 1], picks=int(counts[i]),
                      share=counts[i] / len(g)) for i in range(n_bins)]
    return pd.DataFrame(rows, columns=["dataset", "rule", "lo", "hi", "picks", "share"])


def status_counts(revisions: pd.DataFrame) -> pd.DataFrame:
    """Revisions per dataset, rule and status ("ok" or the first rejection reason), with the share of the
    rule's revisions in that dataset."""
    t = revisions.groupby(["dataset", "rule", "status"], sort=True).size().rename("revisions").reset_index()
    t["share"] = t["revisions"] / t.groupby(["dataset", "rule"])["revisions"].transform("sum")
    return t


def examples(outcome: pd.DataFrame, n: int = 4) -> pd.DataFrame:
    """A few before/after pairs of revised steps: kept revisions first, then accepted, then rejected, one per
    distinct unit, in a stable order."""
    o = outcome.drop_duplicates("unit_id").copy()
    o["_order"] = np.where(o["kept"], 0, np.where(o["status"] == OK, 1, 2))
    o = o.sort_values(["_order", "dataset", "unit_id"]).groupby("_order").head(max(1, n // 2)).head(n)
    return pd.DataFrame(dict(dataset=o["dataset"], unit=o["unit_id"], rule=o["rule"], k=o["k"], gold=o["gold"],
                             before=o["target"], after=[" | ".join(s) for s in o["sub_steps"]],
                             status=o["status"], successes=o["n_success"])).reset_index(drop=True)
