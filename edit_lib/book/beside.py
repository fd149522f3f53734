"""The paper's value beside each cell of a wide results table (Tables 1 and 2: subjects as rows, systems as
columns): a suite cell becomes ``suite (paper)`` where ``paper_reference`` has the same subject, split, metric and
system, and stays the suite's number alone where the paper has no such row (e.g. a subject the paper lacks)."""
from __future__ import annotations

import pandas as pd

TABLES = ("Table 1", "Table 2")  # the wide result tables


def _fmt(x) -> str:
    return f"{x:.3f}" if isinstance(x, float) and abs(x) < 1e5 else str(x)


def paper_lookup(ref: pd.DataFrame) -> dict[tuple, float]:
    """(subject, split, metric, system) -> the paper's value (a row the paper reports once)."""
    return {(r.subject, r.split, r.metric, r.system): float(r.value) for r in ref.itertuples()}


def with_paper_values(suite: pd.DataFrame, ref: pd.DataFrame, systems: list[str]) -> tuple[pd.DataFrame, int]:
    """``suite`` with each system cell written ``suite (paper)`` where the paper reports that subject / split /
    metric / system (Table 1: SAS subjects and SAS-Avg; Table 2: Private-Biology and Private-Physics ID / OOD), and
    the number of cells that got one. A suite row without ``paper_subject`` or ``metric`` is returned unchanged."""
    if not {"paper_subject", "metric"} <= set(suite.columns):
        return suite, 0
    paper, out, n = paper_lookup(ref), suite.copy().astype(object), 0
    for i, row in suite.iterrows():
        for system in systems:
            if system not in suite.columns or pd.isna(row[system]):
                continue
            key = (row["paper_subject"], row.get("split", ""), row["metric"], system)
            if key in paper:
                out.at[i, system], n = f"{_fmt(float(row[system]))} ({_fmt(paper[key])})", n + 1
    return out, n


def beside_cells(number: str, suite: pd.DataFrame, ref: pd.DataFrame | None, systems: list[str]
                 ) -> tuple[pd.DataFrame, str]:
    """The results page's suite table of ``number``: with the paper's values beside its cells when it is one of
    ``TABLES`` and the paper's rows match, and the note the table's caption gets ('' when no cell got one)."""
    if ref is None or number not in TABLES:
        return suite, ""
    out, n = with_paper_values(suite, ref, systems)
    return out, ("; each cell: suite (paper), where the paper reports that subject, split and metric" if n else "")
