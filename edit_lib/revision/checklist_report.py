"""How many rubric checklists (Sec. 2.2) 04 wrote, verified and lost, per dataset and rubric kind.

The checklists table is ``generation.write_checklists`` output: one row per response with ``status`` ("ok", a
``checklist.FAILURE_REASONS`` reason, or "no_points" when nothing was written), ``n_tokens`` and, on newer caches,
``rubric`` ("points": the scheme lists its marking points; "free_text": checked against a free-text rubric) and
``clause_share`` (share of the free-text rubric's clauses the checklist lists; NaN for points). An older cache
without them reads as points.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from edit_lib.revision.checklist import FAILURE_REASONS

OK, NO_POINTS = "ok", "no_points"


def checklist_counts(checklists: pd.DataFrame, budget: int) -> pd.DataFrame:
    """Per (dataset, rubric), the Sec. 2.2 checklists: ``responses``, ``written`` (generated: not no_points),
    ``verified`` (status ok), ``failed`` (written, not ok), ``truncated`` (not ok and ``n_tokens`` >= ``budget``,
    the checklist role's token budget), one column per failure status present (``FAILURE_REASONS`` order, then
    any other, e.g. no_points) and ``clause_share`` (mean; NaN for points rubrics)."""
    c = checklists.copy()
    if "rubric" not in c:
        c["rubric"] = "points"
    if "clause_share" not in c:
        c["clause_share"] = np.nan
    c["rubric"] = c["rubric"].fillna("points")
    present = set(c["status"]) - {OK}
    reasons = [r for r in FAILURE_REASONS if r in present] + sorted(present - set(FAILURE_REASONS))
    cut = (pd.to_numeric(c["n_tokens"], errors="coerce") >= budget) & (c["status"] != OK)
    rows = []
    for (ds, rubric), g in c.groupby(["dataset", "rubric"], sort=True):
        written = int((g["status"] != NO_POINTS).sum())
        verified = int((g["status"] == OK).sum())
        rows.append(dict(dataset=ds, rubric=rubric, responses=len(g), written=written, verified=verified,
                         failed=written - verified, truncated=int(cut[g.index].sum()),
                         **{r: int((g["status"] == r).sum()) for r in reasons},
                         clause_share=float(pd.to_numeric(g["clause_share"], errors="coerce").mean())))
    return pd.DataFrame(rows, columns=["dataset", "rubric", "responses", "written", "verified", "failed", "truncated",
                                       *reasons, "clause_share"])
