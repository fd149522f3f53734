"""`edit-suite compare --conclusions RUN_A RUN_B`: do two runs draw the same conclusions, whatever their digits?

A change that moves floats (another kernel, a batch of another size, a compiled graph) passes when, on the same
profile and seed: (1) every claim of the claims ledger (``claims.evaluate``) reads the same verdict, and the
same magnitude verdict where its sentence gives a number; (2) every headline estimate lies inside the other run's
95% interval, both ways: the held-out QWK of each main system per dataset (the README's figure,
``book.headline.figure_data``) and each headline comparison (Table 3's differences from Base, Table 4, Table 12:
``headline.headline_rows``); (3) every count of inputs is equal: questions and responses per dataset and
split (00's Table 8), the graded systems (07's ``graded_policies``), the gradings behind each metric row (07's
``metrics``: ``n``) and the questions behind each significance row (09: ``n_questions``). An estimate without an
interval in either run is listed, not judged. Exit 0 the same conclusions, 1 not, 2 not a run folder.

The book's comparison pages live here too: a run against another as ``edit-suite compare A B --book`` kept it in
``<A>/compare/<B>.json`` (``compare_page``: the values, keys and tables that moved, with intervals) and a
``--conclusions --book`` report (``conclusions_page``).
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from edit_lib.book import claim_rules
from edit_lib.book.claims import evaluate
from edit_lib.book.headline import figure_data, headline_rows
from edit_lib.book.pages import render
from edit_lib.tools.compare import (BEYOND_RULE, RUN_SPECIFIC, beyond_text, book_json_path,
                                    numerics_note, read_run, show)

VERDICT_FIELDS = ("verdict", "magnitude")


def ledger(results: dict) -> dict[str, dict]:
    """{claim id: {verdict, magnitude}} of a run's results (the claims ledger's rules)."""
    return {v.claim.id: dict(verdict=v.verdict, magnitude=v.magnitude) for v in evaluate(results)}


def estimates(results: dict) -> dict[str, dict]:
    """{name: {estimate, ci_low, ci_high}}: the README's held-out QWK per system and dataset, and the headline
    comparisons (``headline_rows``), each named by what it is."""
    out = {}
    for p in figure_data(results):
        for s in p["systems"]:
            out[f"QWK {s['label']} on {p['dataset']} ({p['scope']})"] = dict(
                estimate=s["qwk"], ci_low=s["ci_low"], ci_high=s["ci_high"])
    for r in headline_rows(results).to_dict("records"):
        out[f"{r['panel']}: {r['comparison']} on {r['dataset']}"] = dict(
            estimate=r["estimate"], ci_low=r["ci_low"], ci_high=r["ci_high"])
    return out


def counts(results: dict) -> dict[str, object]:
    """{what: count} of the inputs behind the tables (module docstring, (3))."""
    out: dict[str, object] = {}
    for r in claim_rules.rows(results, "00_data", "table8") or []:
        for k in ("questions", "responses"):
            out[f"00 {k}: {r.get('dataset')} {r.get('split')}"] = r.get(k)
    graded = sorted(f"{r.get('system')}/{r.get('dataset')}/seed {r.get('seed')}"
                    for r in (claim_rules.rows(results, "07_evaluation", "graded_policies") or []))
    if graded:
        out["07 graded systems"] = graded
    for r in claim_rules.rows(results, "07_evaluation", "metrics") or []:
        out[f"07 gradings: {r.get('system')} {r.get('dataset')} {r.get('split')} subject {r.get('subject')} "
            f"seed {r.get('seed')}"] = r.get("n")
    for r in claim_rules.rows(results, "09_significance", "significance") or []:
        out[f"09 questions: {r.get('system')} {r.get('dataset')} {r.get('scope')}"] = r.get("n_questions")
    return out


def _inside(x, lo, hi) -> bool | None:
    if any(v is None or v != v for v in (x, lo, hi)):
        return None
    return lo <= x <= hi


def conclusions(run_a: str | Path, run_b: str | Path) -> dict:
    """The comparison (what ``--json`` writes): ``verdicts``, ``estimates`` and ``counts``, each a list of what
    differs, ``not_judged`` (estimates without an interval, or in one run only) and ``same`` (bool)."""
    ra, rb = read_run(run_a), read_run(run_b)
    la, lb = ledger(ra), ledger(rb)
    verdicts = []
    for c in dict.fromkeys([*la, *lb]):
        a, b = la.get(c, {}), lb.get(c, {})
        if any(a.get(f) != b.get(f) for f in VERDICT_FIELDS):
            verdicts.append(dict(claim=c, **{f"{f}_{side}": v.get(f) for f in VERDICT_FIELDS
                                             for side, v in (("a", a), ("b", b))}))
    ea, eb = estimates(ra), estimates(rb)
    moved, not_judged = [], []
    for name in dict.fromkeys([*ea, *eb]):
        a, b = ea.get(name), eb.get(name)
        if a is None or b is None:
            not_judged.append(dict(name=name, why=f"only in {'A' if b is None else 'B'}"))
            continue
        b_in_a = _inside(b["estimate"], a["ci_low"], a["ci_high"])
        a_in_b = _inside(a["estimate"], b["ci_low"], b["ci_high"])
        if b_in_a is None or a_in_b is None:
            not_judged.append(dict(name=name, why="no estimate or interval in one run", a=a, b=b))
        elif not (b_in_a and a_in_b):
            moved.append(dict(name=name, a=a, b=b, b_inside_a=b_in_a, a_inside_b=a_in_b))
    ca, cb = counts(ra), counts(rb)
    count_diffs = [dict(what=k, a=ca.get(k), b=cb.get(k)) for k in dict.fromkeys([*ca, *cb]) if ca.get(k) != cb.get(k)]
    out = dict(a=str(Path(run_a).resolve()), b=str(Path(run_b).resolve()), claims=len(set(la) | set(lb)),
               estimates_judged=len(set(ea) & set(eb)) - sum("a" in n for n in not_judged),
               counts=len(set(ca) | set(cb)),
               verdicts=verdicts, estimates=moved, count_differences=count_diffs, not_judged=not_judged)
    out["same"] = not (verdicts or moved or count_diffs)
    return out


def _interval(e: dict) -> str:
    return f"{show(e['estimate'])} [{show(e['ci_low'])}, {show(e['ci_high'])}]"


def format_conclusions(c: dict) -> str:
    """The terminal report: what differs under each of the three rules, then the verdict line."""
    lines = [f"A: {c['a']}", f"B: {c['b']}", ""]
    lines.append(f"claims ledger ({c['claims']} claims): " + (
        "every verdict equal" if not c["verdicts"] else f"{len(c['verdicts'])} verdict(s) differ"))
    for v in c["verdicts"]:
        lines.append(f"  {v['claim']}: {v['verdict_a']} -> {v['verdict_b']}"
                     + (f"; magnitude {v['magnitude_a'] or '-'} -> {v['magnitude_b'] or '-'}"
                        if v["magnitude_a"] != v["magnitude_b"] else ""))
    lines.append(f"headline estimates ({c['estimates_judged']} judged, each inside the other run's 95% interval): "
                 + ("all inside" if not c["estimates"] else f"{len(c['estimates'])} outside"))
    for e in c["estimates"]:
        lines.append(f"  {e['name']}: A {_interval(e['a'])}, B {_interval(e['b'])}")
    for n in c["not_judged"]:
        lines.append(f"  not judged: {n['name']} ({n['why']})")
    lines.append(f"counts of inputs ({c['counts']}): " + (
        "all equal" if not c["count_differences"] else f"{len(c['count_differences'])} differ"))
    for d in c["count_differences"]:
        lines.append(f"  {d['what']}: {d['a']} -> {d['b']}")
    lines += ["", "the same conclusions" if c["same"] else "NOT the same conclusions"]
    return "\n".join(lines)


def conclusions_cli(run_a: str, run_b: str, json_out: str | None = None, book: bool = False) -> int:
    """``edit-suite compare --conclusions``: print the report; ``json_out`` writes it; ``book`` keeps it in A's
    ``compare/`` folder (``conclusions-<B>.json``) for the book. Exit 0 the same conclusions, 1 not (a path that
    is not a run folder raises NotARunFolder: ``cli`` exits 2)."""
    c = conclusions(run_a, run_b)
    print(format_conclusions(c))
    outs = [Path(json_out)] if json_out else []
    if book:
        p = book_json_path(run_a, run_b)
        outs.append(p.with_name("conclusions-" + p.name))
    for path in outs:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(c, indent=1, default=str) + "\n")
        print(f"wrote {path}")
    return 0 if c["same"] else 1


# ------------------------------------------------------------------ the book's comparison pages

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
                  run_specific=RUN_SPECIFIC, values=values, keys=keys, tables=tables, rows_per_table=ROWS_PER_TABLE)


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
    if not isinstance(c, dict) or "same" not in c:
        raise ValueError(f"{source}: not a report written by `edit-suite compare --conclusions --book`")
    name = lambda run: "/".join(Path(run).parts[-3:])  # noqa: E731 (runs are often <where>/runs/<profile>)
    return render("conclusions", a=name(c["a"]), b=name(c["b"]), source=source, same=c["same"],
                  report=format_conclusions(c))
