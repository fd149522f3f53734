"""The paper's own numbers (reference data, Qwen3-8B on SAS-Bench and a private dataset), transcribed once from
the paper; each value cites its table and row. Shown beside the suite's results, never used as results.

The data is ``paper_reference.csv`` next to this module, in long format (one value a row) with the columns
``table, dataset, subject, split, metric, system, value, cite``. It covers Tables 1-8, 9's lower block, 12-14 and the pool sizes of App. B (numbering as
in the compiled paper). Blank fields are empty strings, never NaN; ``value`` is a float.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pandas as pd

CSV_PATH = Path(__file__).with_name("paper_reference.csv")
COLUMNS = ["table", "dataset", "subject", "split", "metric", "system", "value", "cite"]
_TEXT = [c for c in COLUMNS if c != "value"]


@lru_cache(maxsize=1)
def _cached() -> pd.DataFrame:
    df = pd.read_csv(CSV_PATH, dtype={c: str for c in _TEXT}, keep_default_na=False, na_values=[])
    if list(df.columns) != COLUMNS:
        raise ValueError(f"{CSV_PATH.name}: columns {list(df.columns)}, expected {COLUMNS}")
    df["value"] = df["value"].astype(float)
    return df


def load() -> pd.DataFrame:
    """All reference rows (a fresh copy; safe to modify)."""
    return _cached().copy()


def tables() -> list[str]:
    """The tables present, in the order they first appear in the CSV."""
    return list(dict.fromkeys(_cached()["table"]))


def table(name: str) -> pd.DataFrame:
    """The rows of one table, e.g. ``table("Table 1")``; KeyError for a table not transcribed."""
    df = _cached()
    if name not in set(df["table"]):
        raise KeyError(f"no reference data for {name!r}; known tables: {', '.join(tables())}")
    return df[df["table"] == name].reset_index(drop=True).copy()


def value(table: str, metric: str, system: str, dataset: str | None = None, subject: str | None = None,
          split: str | None = None) -> float:
    """The one value matching all given fields (None: any); LookupError when none or several match."""
    df = _cached()
    want = {"table": table, "metric": metric, "system": system, "dataset": dataset, "subject": subject,
            "split": split}
    mask = pd.Series(True, index=df.index)
    for col, v in want.items():
        if v is not None:
            mask &= df[col] == v
    hits = df[mask]
    given = ", ".join(f"{k}={v!r}" for k, v in want.items() if v is not None)
    if len(hits) == 0:
        raise LookupError(f"no reference value for {given}")
    if len(hits) > 1:
        keys = hits[["dataset", "subject", "split"]].drop_duplicates().to_dict("records")
        raise LookupError(f"{len(hits)} reference values match {given}; narrow with dataset/subject/split: {keys}")
    return float(hits["value"].iloc[0])
