"""The book's comparison pages: this run against another, as ``edit-suite compare A B --book`` kept it in
``<A>/compare/<B>.json`` (``tools.compare``): the profile values that differ, the stages whose keys differ and
why, and per table the values that moved with the intervals the results hold (App. G's bootstrap intervals,
Table 12's and Table 4's delta intervals) and whether each move is beyond A's interval."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from edit_lib.book.pages import render
from edit_lib.tools.compare import BEYOND_RULE, beyond_text, numerics_note, show

ROWS_PER_TABLE = 50  # a page stays readable; the JSON beside the run keeps every moved value
NEEDED = ("a", "b", "values", "keys", "tables", "differences")


def compare_page(c: dict, source: str = "") -> str:
    """One comparison (the dict ``compare_runs`` returns) as MyST markdown (``templates/compare.md.j2``);
    ``source`` names its JSON file."""
    values = pd.DataFrame([[v["path"], show(v["a"]), show(v["b"]), ", ".join(v["stages"])] for v in c["values"]],
                          columns=["value", "A", "B", "recorded by"])
    keys = pd.DataFrame([[k["stage"], "; ".join(k["why"])] for k in c["keys"]], columns=["stage", "why"])
    tables = []
    for t in c["tables"]:
        moved = t.get("moved", [])
        shown = pd.DataFrame([[m["row"], m["column"], show(m["a"]), show(m["b"]),
                               "" if m["move"] is None else f"{m['move']:+.4g}",
                               show(m["interval_a"]) if m["interval_a"] else "",
                               show(m["interval_b"]) if m["interval_b"] else "", beyond_text(m)]
                              for m in moved[:ROWS_PER_TABLE]],
                             columns=["row", "column", "A", "B", "B - A", "A's interval", "B's interval", "beyond"])
        tables.append({"only_in": None, "not_keyed": None, "only_a": [], "only_b": [], "key_columns": [], **t,
                       "moved": moved, "n_beyond": sum(m["beyond"] is True for m in moved), "shown": shown})
    return render("compare", c=c, source=source, beyond_rule=BEYOND_RULE, note=numerics_note(c.get("numerics", [])),
                  values=values, keys=keys, tables=tables, rows_per_table=ROWS_PER_TABLE)


def compare_pages(run_dir: str | Path) -> dict[str, str]:
    """{page name: markdown} for every comparison JSON in ``<run_dir>/compare/`` (none there: {})."""
    out = {}
    for f in sorted((Path(run_dir) / "compare").glob("*.json")):
        c = json.loads(f.read_text())
        if f.name.startswith("conclusions-"):  # `compare --conclusions --book` (book/conclusions.py)
            out[f"compare_{f.stem}"] = conclusions_page(c, str(f))
            continue
        missing = [k for k in NEEDED if k not in c] if isinstance(c, dict) else list(NEEDED)
        if missing:
            raise ValueError(f"{f}: not a comparison written by `edit-suite compare --book` (missing "
                             f"{', '.join(missing)}); delete it or write it again")
        out[f"compare_{f.stem}"] = compare_page(c, str(f))
    return out


def conclusions_page(c: dict, source: str) -> str:
    """The page of one ``edit-suite compare --conclusions --book`` report: its verdict, then the report."""
    from edit_lib.book.conclusions import format_conclusions
    if not isinstance(c, dict) or "same" not in c:
        raise ValueError(f"{source}: not a report written by `edit-suite compare --conclusions --book`")
    name = lambda run: "/".join(Path(run).parts[-3:])  # noqa: E731 (runs are often <where>/runs/<profile>)
    return render("conclusions", a=name(c["a"]), b=name(c["b"]), source=source, same=c["same"],
                  report=format_conclusions(c))
