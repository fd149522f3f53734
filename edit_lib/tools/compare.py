"""`edit-suite compare RUN_A RUN_B`: what differs between two run folders (``runs/<profile>``).

(a) The profile values the stages recorded (``inputs.params`` of each results JSON) that differ
(``keys.leaf_diff``), and the stages whose keys differ, with why (``keys.why``). (b) Every value of every table
of every results JSON that moved, rows keyed as the golden file keys them (``golden.row_key``, ``key_columns``);
a table whose rows cannot be keyed is compared whole and, if it differs, reported "not compared: rows not
keyed". (c) For each moved number the interval its row holds for it: ``<col>_ci_low``/``<col>_ci_high`` (Table 12,
Table 4, 09's delta), ``<col>_lo``/``<col>_hi`` (09's response bootstrap), and a bare ``ci_low``/``ci_high``,
which 09 writes for the row's ``qwk`` (App. G). Bare ``lo``/``hi`` are histogram bin edges, not intervals.
BEYOND_RULE: a move is beyond its interval when B's value lies outside A's interval (a bootstrap interval may
be asymmetric, so no half-width is used). Floats compare within ``tol`` (default 0: exact, as JSON keeps them).
Not compared: ``extra`` and ``warnings`` (they hold each folder's absolute paths). Noted, not counted: the
stages whose kernels' setting differs (``runner.keys``), and RUN_SPECIFIC values: timings (a column named
``seconds`` or ``*_seconds*``) and paths inside each run's own folder that differ only by that folder and the
stage key in it (an adapter's path). Exit: 0 no differences, 1 differences, 2 not a run folder.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from edit_lib.artifacts import as_json
from edit_lib.tools.golden import key_columns, row_key, same_value
from edit_lib.runner.keys import at_path, describe_reason, leaf_diff, why, numerics_differ, numerics_note

ABSENT = "<absent>"  # a value or column one run has and the other lacks
BEYOND_RULE = "B's value lies outside A's interval"
INTERVALS = (("_ci_low", "_ci_high"), ("_ci_lo", "_ci_hi"), ("_lo", "_hi"))
BARE_INTERVAL = ("ci_low", "ci_high", "qwk")  # 09's significance table: the interval of its qwk column
TIMING = re.compile(r"(^|_)seconds($|_)")  # a stage's or run's wall time: the machine's, not a result
ARTIFACT_KEY = re.compile(r"^artifacts/([^/]+)/[0-9a-f]{12}/")  # <run>/artifacts/<stage>/<stage key>/...
RUN_SPECIFIC = "timings and paths inside each run's own folder (they differ by machine, folder and stage key)"


class NotARunFolder(ValueError):
    """A path given to `compare` is not a run folder; the message names what is missing."""


def variant_folder(run_a: str | Path, run_b: str) -> str:
    """``run_b`` itself when it is a folder; else, when RUN_A has a variant of that name, its folder
    (``RUN_A/variants/NAME``, ``runner.variants``)."""
    from edit_lib.runner.variants import VARIANTS

    folder = Path(run_a) / VARIANTS / run_b
    if Path(run_b).is_dir() or "/" in run_b:
        return run_b
    if folder.is_dir():
        return str(folder)
    known = sorted(p.name for p in (Path(run_a) / VARIANTS).glob("*") if p.is_dir())
    raise NotARunFolder(f"{run_b} is neither a run folder nor a variant of {run_a}"
                        + (f" (its variants: {', '.join(known)})" if known else " (it has no variants)"))


def read_run(folder: str | Path) -> dict[str, dict]:
    """{stage: results JSON} of a run folder (``<folder>/results/<stage>.json``)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise NotARunFolder(f"{folder} is not a run folder: no such folder")
    res = folder / "results"
    files = sorted(res.glob("*.json")) if res.is_dir() else []
    if not files:
        inner = sorted(p.name for p in [*folder.iterdir(), *(folder / "variants").glob("*")]
                       if (p / "results").is_dir())
        hint = f" (it holds run folders: {', '.join(inner)})" if inner else ""
        raise NotARunFolder(f"{folder} is not a run folder: no {res}/<stage>.json results file{hint}")
    out = {}
    for f in files:
        try:
            out[f.stem] = json.loads(f.read_text())
        except json.JSONDecodeError as e:
            raise NotARunFolder(f"{f} is not a results file: not JSON ({e})") from None
        if not isinstance(out[f.stem], dict) or not isinstance(out[f.stem].get("tables", {}), dict):
            raise NotARunFolder(f"{f} is not a results file: expected an object with a 'tables' mapping")
    return out


def _params(res: dict) -> dict:
    inputs = res.get("inputs")
    return as_json(inputs.get("params", {}) if isinstance(inputs, dict) else res.get("params", {}))


def profile_values(ra: dict[str, dict], rb: dict[str, dict]) -> list[dict]:
    """The recorded profile values that differ: [{path, a, b, stages}], one entry per (path, a, b)."""
    found: dict[tuple, dict] = {}
    for stage in sorted(set(ra) & set(rb)):
        pa, pb = _params(ra[stage]), _params(rb[stage])
        for path in leaf_diff(pa, pb):
            a, b = at_path(pa, path, ABSENT), at_path(pb, path, ABSENT)
            entry = found.setdefault((path, json.dumps(a), json.dumps(b)), dict(path=path, a=a, b=b, stages=[]))
            entry["stages"].append(stage)
    return [found[k] for k in sorted(found)]


def stage_keys(ra: dict[str, dict], rb: dict[str, dict]) -> list[dict]:
    """Stages whose keys differ: [{stage, a, b, reasons: [(kind, detail)], why: [text]}] (``keys.why``)."""
    out = []
    for stage in sorted(set(ra) & set(rb)):
        a, b = ra[stage], rb[stage]
        if a.get("key") == b.get("key"):
            continue
        inputs = b.get("inputs")
        try:
            reasons = why(a, as_json(inputs)) if isinstance(inputs, dict) else [
                ("recorded", "not knowable: B's results were recorded without the inputs of their key")]
        except KeyError as e:
            reasons = [("recorded", f"not knowable: B's recorded inputs lack {e}")]
        if not reasons:
            reasons = [("recorded", "the recorded inputs are alike (the key's formula differs)")]
        out.append(dict(stage=stage, a=a.get("key"), b=b.get("key"), reasons=as_json(reasons),
                        why=[describe_reason(*r) for r in reasons]))
    return out


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and not math.isnan(x)


def interval(row: dict, column: str) -> list[float] | None:
    """[low, high] the row holds for ``column`` (see the module docstring), or None."""
    pairs = [(column + lo, column + hi) for lo, hi in INTERVALS]
    if column == BARE_INTERVAL[2]:
        pairs.append(BARE_INTERVAL[:2])
    for lo, hi in pairs:
        if _number(row.get(lo)) and _number(row.get(hi)):
            return [row[lo], row[hi]]
    return None


def moved_value(row_a: dict, row_b: dict, column: str) -> dict:
    """One moved value: a, b, the move b - a, each run's interval and whether b lies outside A's (BEYOND_RULE;
    None when A holds no interval or a value is not a number)."""
    a, b = row_a.get(column, ABSENT), row_b.get(column, ABSENT)
    both = _number(a) and _number(b)
    ia, ib = interval(row_a, column), interval(row_b, column)
    beyond = None if not (both and ia) else not (ia[0] <= b <= ia[1])
    return dict(column=column, a=a, b=b, move=b - a if both else None, interval_a=ia, interval_b=ib, beyond=beyond)


def _whole_same(ta: Any, tb: Any, tol: float) -> bool:
    if isinstance(ta, list) and isinstance(tb, list) and len(ta) == len(tb):
        return all(isinstance(x, dict) and isinstance(y, dict) and set(x) == set(y)
                   and all(same_value(x[c], y[c], tol) for c in x) for x, y in zip(ta, tb))
    return ta == tb


def in_run(x: Any, root: str | None) -> Any:
    """A path inside the run folder ``root`` as the part below it, its stage key as ``<key>``; other values as
    they are."""
    if not (isinstance(x, str) and root and x.startswith(root.rstrip("/") + "/")):
        return x
    return ARTIFACT_KEY.sub(r"artifacts/\1/<key>/", x[len(root.rstrip("/")) + 1:])


def compare_table(stage: str, name: str, ta: Any, tb: Any, tol: float = 0.0,
                  roots: tuple[str | None, str | None] = (None, None)) -> dict:
    """One table of both runs: {stage, table, key_columns, moved: [{row, column, ...}], only_a, only_b
    (row keys), not_keyed (str when the rows cannot be keyed and the tables differ), run_specific (the values
    that differ as RUN_SPECIFIC says, counted apart)}. ``roots``: the two run folders, as their paths are
    written in the tables."""
    out = dict(stage=stage, table=name, key_columns=None, moved=[], only_a=[], only_b=[], not_keyed=None,
               run_specific=0)
    cols = key_columns(ta, tb)
    if cols is None:
        if not _whole_same(ta, tb, tol):
            out["not_keyed"] = "not compared: rows not keyed (golden.ROW_KEYS and MORE_ROW_KEYS leave two " \
                               "rows alike, or the rows are not records); the tables differ"
        return out
    ka, kb = ({row_key(r, cols): r for r in t} for t in (ta, tb))
    out["key_columns"] = [c for c in cols if any(c in r for r in [*ta, *tb])]
    out["only_a"], out["only_b"] = [k for k in ka if k not in kb], [k for k in kb if k not in ka]
    for k in (k for k in ka if k in kb):
        ra, rb = ka[k], kb[k]
        for c in [c for c in dict.fromkeys([*ra, *rb]) if c not in cols]:
            if c not in ra or c not in rb or not same_value(ra[c], rb[c], tol):
                if c in ra and c in rb and (TIMING.search(c) or in_run(ra[c], roots[0]) == in_run(rb[c], roots[1])
                                            != ra[c]):
                    out["run_specific"] += 1
                else:
                    out["moved"].append(dict(row=k, **moved_value(ra, rb, c)))
    return out


def compare_runs(run_a: str | Path, run_b: str | Path, tol: float = 0.0) -> dict:
    """The whole comparison of two run folders (what ``--json`` writes); ``differences`` counts its entries.
    ``numerics`` (the stages whose kernels' setting differs, ``runner.keys``) is a note beside them, not a
    difference: it says why floats may have moved, not that they did."""
    ra, rb = read_run(run_a), read_run(run_b)
    roots = (str(Path(run_a).resolve()), str(Path(run_b).resolve()))
    tables, not_keyed_equal, n_tables, run_specific = [], 0, 0, 0
    for stage in sorted(set(ra) & set(rb)):
        ta, tb = ra[stage].get("tables", {}), rb[stage].get("tables", {})
        n_tables += len(set(ta) & set(tb))
        for name in sorted(set(ta) & set(tb)):
            t = compare_table(stage, name, ta[name], tb[name], tol, roots)
            not_keyed_equal += t["key_columns"] is None and t["not_keyed"] is None
            run_specific += t["run_specific"]
            if t["moved"] or t["only_a"] or t["only_b"] or t["not_keyed"]:
                tables.append(t)
        tables += [dict(stage=stage, table=n, only_in="A" if n in ta else "B") for n in sorted(set(ta) ^ set(tb))]
    out = dict(a=str(Path(run_a).resolve()), b=str(Path(run_b).resolve()),
               profiles=dict(a=_profile(ra), b=_profile(rb)), tolerance=tol, beyond_rule=BEYOND_RULE,
               values=profile_values(ra, rb), keys=stage_keys(ra, rb),
               stages_only_a=sorted(set(ra) - set(rb)), stages_only_b=sorted(set(rb) - set(ra)), tables=tables,
               compared=dict(stages=len(set(ra) & set(rb)), tables=n_tables,
                             tables_compared_whole=not_keyed_equal),
               numerics=numerics_differ(ra, rb), run_specific=run_specific)
    out["differences"] = (len(out["values"]) + len(out["keys"]) + len(out["stages_only_a"]) + len(out["stages_only_b"])
                          + sum(len(t.get("moved", [])) + len(t.get("only_a", [])) + len(t.get("only_b", []))
                                + bool(t.get("not_keyed") or t.get("only_in")) for t in tables))
    return out


def _profile(results: dict[str, dict]) -> str:
    return ", ".join(sorted({str(r.get("profile")) for r in results.values() if r.get("profile")})) or "?"


def show(x: Any) -> str:
    """A value as the terminal and the book page print it."""
    if isinstance(x, float) and not isinstance(x, bool):
        return f"{x:.6g}"
    if isinstance(x, list) and len(x) == 2 and all(_number(v) for v in x):
        return f"[{show(x[0])}, {show(x[1])}]"
    return x if isinstance(x, str) else json.dumps(x)


def beyond_text(m: dict) -> str:
    """'yes' / 'no' / '' (no interval in A, or not a number)."""
    return {True: "yes", False: "no", None: ""}[m["beyond"]]


def format_comparison(c: dict, limit: int = 20) -> str:
    """The terminal table: values, keys, then per table its moved values (at most ``limit`` each; 0: all)."""
    lines = [f"A: {c['a']}  (profile {c['profiles']['a']})", f"B: {c['b']}  (profile {c['profiles']['b']})", ""]
    lines += numerics_note(c.get("numerics", []))
    if c.get("run_specific"):
        lines += [f"Not counted: {c['run_specific']} value(s) that are {RUN_SPECIFIC}.", ""]
    if c["differences"] == 0:
        n = c["compared"]
        return "\n".join(lines + [f"no differences ({n['stages']} stages, {n.get('tables', '?')} tables compared)"])
    if c["values"]:
        lines += ["Profile values that differ (A -> B), as the stages recorded them:"]
        lines += [f"  {v['path']}: {show(v['a'])} -> {show(v['b'])}   ({', '.join(v['stages'])})" for v in c["values"]]
    if c["keys"]:
        lines += ["", "Stage keys that differ:"] + [f"  {k['stage']}: {'; '.join(k['why'])}" for k in c["keys"]]
    for side in ("a", "b"):
        if c[f"stages_only_{side}"]:
            lines += ["", f"Stages only in {side.upper()}: {', '.join(c[f'stages_only_{side}'])}"]
    if c["tables"]:
        lines += ["", f"Tables that differ (floats within {c['tolerance']:g}; beyond: {BEYOND_RULE}):"]
    for t in c["tables"]:
        head = f"  {t['stage']} / {t['table']}"
        if t.get("only_in"):
            lines.append(f"{head}: only in {t['only_in']}")
            continue
        if t["not_keyed"]:
            lines.append(f"{head}: {t['not_keyed']}")
            continue
        n_beyond = sum(m["beyond"] is True for m in t["moved"])
        lines.append(f"{head}  (rows keyed by {'/'.join(t['key_columns']) or 'nothing: one row'}): "
                     f"{len(t['moved'])} value(s) moved" + (f", {n_beyond} beyond their interval" if n_beyond else ""))
        rows = [[m["row"], m["column"], show(m["a"]), show(m["b"]), "" if m["move"] is None else f"{m['move']:+.4g}",
                 show(m["interval_a"]) if m["interval_a"] else "", beyond_text(m)] for m in t["moved"]]
        shown = rows if limit <= 0 else rows[:limit]
        if shown:
            table = [["row", "column", "A", "B", "B - A", "A's interval", "beyond"], *shown]
            width = [max(len(str(r[i])) for r in table) for i in range(7)]
            lines += ["    " + "  ".join(str(v).ljust(w) for v, w in zip(r, width)).rstrip() for r in table]
        if len(rows) > len(shown):
            lines.append(f"    ... and {len(rows) - len(shown)} more (--limit 0 shows all; --json FILE keeps all)")
        for side in ("a", "b"):
            keys = t[f"only_{side}"]
            if keys:
                more = f" and {len(keys) - limit} more" if 0 < limit < len(keys) else ""
                lines.append(f"    {len(keys)} row(s) only in {side.upper()}: "
                             f"{', '.join(keys[:limit] if more else keys)}{more}")
    return "\n".join(lines + ["", f"{c['differences']} difference(s)"])


def book_json_path(run_a: str | Path, run_b: str | Path) -> Path:
    """Where ``--book`` keeps the comparison: ``<A>/compare/<B's parent>-<B>.json`` (the book reads it)."""
    b = Path(run_b).resolve()
    return Path(run_a) / "compare" / (re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{b.parent.name}-{b.name}") + ".json")


def compare_cli(run_a: str, run_b: str, json_out: str | None = None, book: bool = False, tol: float = 0.0,
                limit: int = 20) -> int:
    """`edit-suite compare`: print the comparison; ``json_out`` writes it; ``book`` keeps it in A's folder for
    the book's compare page (``book.conclusions.compare_page``). Exit 0 no differences, 1 differences; a path
    that is not a run folder raises NotARunFolder (``cli`` exits 2)."""
    c = compare_runs(run_a, run_b, tol)
    print(format_comparison(c, limit))
    outs = [(Path(json_out), "")] if json_out else []
    if book:
        outs.append((book_json_path(run_a, run_b), f" (`edit-suite book` of {Path(run_a).name} shows it as a page)"))
    for path, note in outs:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(c, indent=1, default=str) + "\n")
        print(f"wrote {path}{note}")
    return 1 if c["differences"] else 0
