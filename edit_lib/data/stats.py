"""Dataset statistics: the Table 6 analogue (App. A) and gold-mark distributions."""
from __future__ import annotations

from collections import Counter

import pandas as pd

from .schema import SPLITS, Dataset


def split_statistics(ds: Dataset) -> pd.DataFrame:
    """Responses / questions per split and the range of M_q, one row per split (App. A, Table 6)."""
    rows = []
    for split in SPLITS:
        resp = ds.split(split)
        qids = sorted({r.question_id for r in resp})
        marks = [ds.questions[q].max_mark for q in qids]
        kinds = Counter(ds.questions[q].scheme.kind for q in qids)
        rows.append(dict(dataset=ds.name, split=split, responses=len(resp), questions=len(qids),
                         min_max_mark=min(marks) if marks else pd.NA, max_max_mark=max(marks) if marks else pd.NA,
                         schemes=", ".join(f"{k}:{v}" for k, v in sorted(kinds.items())),
                         mean_gold_fraction=(sum(r.gold / ds.questions[r.question_id].max_mark for r in resp)
                                             / len(resp)) if resp else None))
    df = pd.DataFrame(rows)
    return df.astype({"min_max_mark": "Int64", "max_max_mark": "Int64"})


def gold_table(ds: Dataset) -> pd.DataFrame:
    """One row per response: dataset, split, question, gold, M_q and gold / M_q."""
    return pd.DataFrame([dict(dataset=ds.name, split=r.split, question_id=r.question_id, gold=r.gold,
                              max_mark=ds.questions[r.question_id].max_mark,
                              gold_fraction=r.gold / ds.questions[r.question_id].max_mark)
                         for r in ds.responses])


def coverage_statistics(ds: Dataset) -> pd.DataFrame:
    """Share of each coverage status (synthetic world only; empty for real data)."""
    counts = Counter((r.split, c.status) for r in ds.responses for c in r.coverage)
    if not counts:
        return pd.DataFrame(columns=["dataset", "split", "status", "count", "share"])
    df = pd.DataFrame([dict(dataset=ds.name, split=s, status=st, count=n) for (s, st), n in counts.items()])
    df["share"] = df["count"] / df.groupby("split")["count"].transform("sum")
    return df.sort_values(["split", "status"]).reset_index(drop=True)
