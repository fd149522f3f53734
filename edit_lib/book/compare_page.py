"""The book's comparison pages: this run against another, as ``edit-suite compare A B --book`` kept it in
``<A>/compare/<B>.json`` (``tools.compare``): the profile values that differ, the stages whose keys differ and
why, and per table the values that moved with the intervals the results hold (App. G's bootstrap intervals,
Table 12's and Table 4's delta intervals) and whether each move is beyond A's interval."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from edit_lib.book.pages import md_table
from edit_lib.tools.compare import BEYOND_RULE, beyond_text, numerics_note, show

ROWS_PER_TABLE = 50  # a page stays readable; the JSON beside the run keeps every moved value
NEEDED = ("a", "b", "values", "keys", "tables", "differences")


def compare_page(c: dict, source: str = "") -> str:
    """One comparison (the dict ``compare_runs`` returns) as MyST markdown; ``source`` names its JSON file."""
    lines = [f"# Compared with `{c['b']}`", "",
             f"*Run `{c['a']}` (profile `{c['profiles']['a']}`) against `{c['b']}` (profile `{c['profiles']['b']}`), "
             f"as `edit-suite compare` found them"
             + (f" (`{source}`)" if source else "") + f". Floats are compared within {c['tolerance']:g}; a move is "
             f"beyond its interval when {BEYOND_RULE}.*", ""]
    note = numerics_note(c.get("numerics", []))  # the kernels differ: a note, not a difference
    lines += [note[0], "", *(f"* {x.strip()}" for x in note[1:-1]), ""] if note else []
    if c["differences"] == 0:
        return "\n".join(lines + [f"The two runs do not differ ({c['compared']['stages']} stages, "
                                  f"{c['compared'].get('tables', '?')} tables compared)."])
    lines += ["## Profile values that differ", ""]
    lines += [md_table(pd.DataFrame([[v["path"], show(v["a"]), show(v["b"]), ", ".join(v["stages"])]
                                     for v in c["values"]], columns=["value", "A", "B", "recorded by"])), ""] \
        if c["values"] else ["None: the stages recorded the same profile values.", ""]
    if c["keys"]:
        lines += ["## Stage keys that differ", "",
                  md_table(pd.DataFrame([[k["stage"], "; ".join(k["why"])] for k in c["keys"]],
                                        columns=["stage", "why"])), ""]
    only = [f"* stages only in {s.upper()}: {', '.join(c[f'stages_only_{s}'])}"
            for s in ("a", "b") if c[f"stages_only_{s}"]]
    lines += only + ([""] if only else []) + ["## Tables that differ", ""]
    if not c["tables"]:
        lines.append("None: every table holds the same values.")
    for t in c["tables"]:
        lines += [f"### `{t['stage']}` / `{t['table']}`", ""]
        if t.get("only_in") or t.get("not_keyed"):
            lines += [f"Only in {t['only_in']}." if t.get("only_in") else t["not_keyed"][0].upper() + t["not_keyed"][1:]
                      + ".", ""]
            continue
        moved = t["moved"]
        lines += [f"Rows keyed by {'/'.join(t['key_columns']) or 'nothing (one row)'}; {len(moved)} value(s) moved, "
                  f"{sum(m['beyond'] is True for m in moved)} beyond A's interval"
                  + (f"; the first {ROWS_PER_TABLE} are shown, the JSON holds all." if len(moved) > ROWS_PER_TABLE
                     else "."), ""]
        if moved:
            rows = [[m["row"], m["column"], show(m["a"]), show(m["b"]),
                     "" if m["move"] is None else f"{m['move']:+.4g}", show(m["interval_a"]) if m["interval_a"] else "",
                     show(m["interval_b"]) if m["interval_b"] else "", beyond_text(m)] for m in moved[:ROWS_PER_TABLE]]
            lines += [md_table(pd.DataFrame(rows, columns=["row", "column", "A", "B", "B - A", "A's interval",
                                                           "B's interval", "beyond"])), ""]
        for s in ("a", "b"):
            keys = t[f"only_{s}"]
            if keys:
                more = f" and {len(keys) - ROWS_PER_TABLE} more" if len(keys) > ROWS_PER_TABLE else ""
                lines += [f"Rows only in {s.upper()}: {', '.join(f'`{k}`' for k in keys[:ROWS_PER_TABLE])}{more}.", ""]
    return "\n".join(lines).rstrip() + "\n"


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
    verdict = "the same conclusions" if c["same"] else "**not** the same conclusions"
    name = lambda run: "/".join(Path(run).parts[-3:])  # noqa: E731 (runs are often <where>/runs/<profile>)
    return (f"# Same conclusions? {name(c['a'])} and {name(c['b'])}\n\n"
            f"*From `{source}`, written by `edit-suite compare --conclusions`: every claims-ledger verdict equal, "
            f"every headline estimate inside the other run's 95% interval, every count of inputs equal.* "
            f"These runs draw {verdict}.\n\n```text\n{format_conclusions(c)}\n```\n")
