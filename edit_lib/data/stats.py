"""Dataset statistics: the Table 8 analogue (App. A), gold-mark distributions and answer composition.

Every function returns the table a notebook records; the figures of `edit_lib.plots` draw these tables as
they are (no re-binning of data they are given).
"""
from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from edit_lib.data.schema import SPLITS, Dataset


def split_statistics(ds: Dataset) -> pd.DataFrame:
    """Responses / questions per split and the range of M_q, one row per split (App. A, Table 8)."""
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


def gold_histogram(gold: pd.DataFrame, bins: int = 10) -> pd.DataFrame:
    """Gold / M_q in ``bins`` equal-width bins over [0, 1] per dataset and split: one row per bin (empty bins
    included), with ``lo``/``hi`` edges, ``count`` and ``share`` of the split. Bin i holds
    lo <= fraction < hi; the last bin also holds fraction = 1 (full marks). ``gold`` is `gold_table` output."""
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    frac = gold["gold_fraction"].to_numpy(dtype=float)
    if len(frac) and (np.nanmin(frac) < 0 or np.nanmax(frac) > 1):
        raise ValueError("gold_fraction must lie in [0, 1]")
    # the small epsilon keeps k/M == i/bins in bin i despite floating-point products such as 0.7 * 10
    idx = np.minimum(np.floor(frac * bins + 1e-9).astype(int), bins - 1)
    counts = Counter(zip(gold["dataset"], gold["split"], idx))
    rows = []
    for dataset, split in dict.fromkeys(zip(gold["dataset"], gold["split"])):
        total = sum(counts[(dataset, split, i)] for i in range(bins))
        for i in range(bins):
            n = counts[(dataset, split, i)]
            rows.append(dict(dataset=dataset, split=split, bin=i, lo=i / bins, hi=(i + 1) / bins, count=n,
                             share=n / total))
    cols = ["dataset", "split", "bin", "lo", "hi", "count", "share"]
    return pd.DataFrame(rows, columns=cols)


def coverage_statistics(ds: Dataset) -> pd.DataFrame:
    """Share of each coverage status (synthetic world only; empty for real data)."""
    counts = Counter((r.split, c.status) for r in ds.responses for c in r.coverage)
    if not counts:
        return pd.DataFrame(columns=["dataset", "split", "status", "count", "share"])
    df = pd.DataFrame([dict(dataset=ds.name, split=s, status=st, count=n) for (s, st), n in counts.items()])
    df["share"] = df["count"] / df.groupby("split")["count"].transform("sum")
    return df.sort_values(["split", "status"]).reset_index(drop=True)


def dataset_overview(datasets: dict[str, Dataset]) -> dict[str, dict]:
    """Per dataset: number of questions and responses and the scalar entries of its ``meta`` (results JSON)."""
    return {name: dict(questions=len(ds.questions), responses=len(ds.responses),
                       meta={k: v for k, v in ds.meta.items() if isinstance(v, (int, float, str))})
            for name, ds in datasets.items()}


def skip_statistics(datasets: dict[str, Dataset]) -> pd.DataFrame:
    """Per dataset: records read, records skipped (``data.on_error: skip``) and their share, one row per
    reason (``errors.reason_of``; reason None when nothing was skipped)."""
    rows = []
    for name, ds in datasets.items():
        rep = ds.meta.get("skip_report")
        n = int(ds.meta.get("n_records", 0))
        skipped = len(rep) if rep is not None else 0
        base = dict(dataset=name, n_records=n, skipped=skipped, share=skipped / n if n else 0.0)
        counts = rep.reason_counts() if rep is not None else Counter()
        rows += [dict(base, reason=r, count=c) for r, c in counts.most_common()] or [dict(base, reason=None, count=0)]
    return pd.DataFrame(rows, columns=["dataset", "n_records", "skipped", "share", "reason", "count"])


def build_summary(datasets: dict[str, Dataset]) -> str:
    """One line per built dataset: its questions, responses and what its loader skipped."""
    return "\n".join(f"{name}: {len(ds.questions)} questions, {len(ds.responses)} responses; "
                     f"{ds.meta.get('skipped_report', '0 records skipped')}" for name, ds in datasets.items())
