"""The main run's Variants page: the runs beside it (``runner.variants``) and its sweeps (``tools.sweep``).

Per variant: the profile values that differ, every claims-ledger verdict that moved and every headline estimate
that moved, with both intervals and whether the variant's estimate lies beyond the main run's interval. Both runs
are judged on the stages the variant has, so a variant that stopped at 04 is not charged with 05-09's claims.
Per sweep: each metric against the swept value, with its interval where the results hold one, as a figure
(``draw_sweep``) and a table (``sweep_table``); the committed sensitivity record (``book/records/variants-demo.md``)
is rendered by ``sensitivity_record`` from the same files.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from edit_lib.book import claim_rules
from edit_lib.book.conclusions import estimates, ledger
from edit_lib.book.pages import render
from edit_lib.runner.keys import STAGES
from edit_lib.runner.variants import variants_of
from edit_lib.tools.compare import profile_values, read_run, show
from edit_lib.tools.sweep import SWEEPS, until_stages

MAX_PANELS = 12  # the figure's panels; the table below it has every metric


def sweeps_of(main: str | Path) -> list[Path]:
    d = Path(main) / SWEEPS
    return sorted(d.glob("*.json")) if d.is_dir() else []


def metrics(results: dict) -> dict[str, dict]:
    """{metric: {estimate, ci_low, ci_high}} of one run's results: the headline estimates with their intervals
    (``conclusions.estimates``) and Table 12's Success@N and retention per dataset and rule (App. F; no interval)."""
    out = dict(estimates(results))
    for r in claim_rules.rows(results, "04_counterfactual_selection", "table12") or []:
        for col, label in (("success_at_n", "Success@N"), ("retention", "Retention")):
            if r.get(col) is not None:
                out[f"Table 12 {label}: {r['rule']} on {r['dataset']}"] = dict(estimate=r[col], ci_low=None,
                                                                             ci_high=None)
    return out


def sweep_metrics(main: Path, sweep: dict) -> list[dict]:
    """Each run of a sweep (``tools.sweep``) with its ``metrics``, read from its folder's results of the stages
    the sweep ran."""
    stages, out = until_stages(sweep["until"]) or list(STAGES), []
    for r in sweep["runs"]:
        results = {s: x for s, x in read_run(Path(main) / r["folder"]).items() if s in stages}
        out.append(dict(r, metrics=metrics(results)))
    return out


def _interval(e: dict | None) -> str:
    if e is None or e.get("estimate") is None:
        return "—"
    if e.get("ci_low") is None or e.get("ci_high") is None:
        return show(e["estimate"])
    return f"{show(e['estimate'])} [{show(e['ci_low'])}, {show(e['ci_high'])}]"


def _beyond(value: float | None, ref: dict) -> str:
    if value is None or ref.get("ci_low") is None or ref.get("ci_high") is None:
        return "no interval"
    return "yes" if not ref["ci_low"] <= value <= ref["ci_high"] else "no"


def variant_shown(main: Path, folder: Path) -> dict:
    """What the Variants page shows of one variant folder: the values that differ, the verdicts and headline
    estimates that moved (both judged on the variant's stages)."""
    rv = read_run(folder)
    rm = {s: r for s, r in read_run(main).items() if s in rv}  # the main run on the variant's stages
    values = profile_values(rm, rv)
    la, lb = ledger(rm), ledger(rv)
    moved = [[c, la.get(c, {}).get("verdict"), lb.get(c, {}).get("verdict")] for c in dict.fromkeys([*la, *lb])
             if la.get(c) != lb.get(c)]
    ea, eb = estimates(rm), estimates(rv)
    rows = [[n, _interval(ea[n]), _interval(eb[n]), _beyond(eb[n]["estimate"], ea[n])]
            for n in ea if n in eb and ea[n]["estimate"] != eb[n]["estimate"]]
    return dict(name=folder.name, where=folder.relative_to(main.parent), stages=sorted(rv),
                adopted=sorted(s for s, r in rv.items() if r.get("adopted_from")),
                changed=pd.DataFrame([[v["path"], show(v["a"]), show(v["b"]), ", ".join(v["stages"])] for v in values],
                                    columns=["value", "main run", "variant", "read by"]),
                verdicts=pd.DataFrame(moved, columns=["claim", "main run", "variant"]),
                estimates=pd.DataFrame(rows, columns=["estimate", "main run", "variant", "beyond"]),
                n_estimates=len(set(ea) & set(eb)))


def _panel(name: str) -> tuple[str, str]:
    """(panel, line) of a metric name: 'Table 12 Success@N: edit on d' -> ('Table 12 Success@N on d', 'edit')."""
    m = re.fullmatch(r"(.*): (.*) on (\S+)(.*)", name)
    return (f"{m[1]} on {m[3]}{m[4]}", m[2]) if m else (name, "estimate")


def draw_sweep(sweep: dict, path: Path) -> Path | None:
    """``sweep`` with its runs' metrics (``sweep_metrics``)."""
    # each metric against the swept value (panels by ``_panel``), error bars where there is an interval
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(n for r in sweep["runs"] for n in r["metrics"]))
    panels: dict[str, list[str]] = {}
    for n in sorted(names, key=lambda n: all(r["metrics"].get(n, {}).get("ci_low") is None for r in sweep["runs"])):
        panels.setdefault(_panel(n)[0], []).append(n)
    keys = list(panels)[:MAX_PANELS]
    if not keys:
        return None
    cols = min(3, len(keys))
    fig, axes = plt.subplots((len(keys) + cols - 1) // cols, cols, figsize=(4.2 * cols, 3.0 * ((len(keys) + cols - 1)
                                                                                            // cols)), squeeze=False)
    xs = list(range(len(sweep["runs"])))
    for ax, key in zip(axes.flat, keys):
        for n in panels[key]:
            pts = [(x, r["metrics"].get(n)) for x, r in zip(xs, sweep["runs"]) if r["metrics"].get(n)]
            pts = [(x, e) for x, e in pts if e.get("estimate") is not None]
            y = [e["estimate"] for _, e in pts]
            err = [[e["estimate"] - e["ci_low"] if e.get("ci_low") is not None else 0 for _, e in pts],
                   [e["ci_high"] - e["estimate"] if e.get("ci_high") is not None else 0 for _, e in pts]]
            ax.errorbar([x for x, _ in pts], y, yerr=err, marker="o", capsize=3, label=_panel(n)[1])
        ax.set_title(key, fontsize=8)
        ax.set_xticks(xs, [r["text"] for r in sweep["runs"]])
        ax.set_xlabel(sweep["parameter"], fontsize=8)
        if len(panels[key]) > 1:
            ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(keys):]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def sweep_table(sweep: dict) -> pd.DataFrame:
    """Every metric (rows) at every value (columns): estimate [interval]."""
    names = list(dict.fromkeys(n for r in sweep["runs"] for n in r["metrics"]))
    rows = [[n, *[_interval(r["metrics"].get(n)) for r in sweep["runs"]]] for n in names]
    return pd.DataFrame(rows, columns=["metric", *[f"{sweep['parameter']} = {r['text']}" for r in sweep["runs"]]])


def variants_page(main: Path, out: Path) -> str:
    """The page (``templates/variants.md.j2``; figures drawn into ``out``)."""
    sweeps = []
    for f in sweeps_of(main):
        sweep = json.loads(f.read_text())
        sweep["runs"] = sweep_metrics(main, sweep)
        fig = draw_sweep(sweep, out / f"sweep_{f.stem}.png")
        sweeps.append(dict(sweep, figure=fig and fig.name, table=sweep_table(sweep)))
    return render("variants", record=False, variants=[variant_shown(main, v) for v in variants_of(main)],
                  sweeps=sweeps)


def sensitivity_record(files: list[Path]) -> str:
    """The committed record (``book/records/``) of the sweeps in ``files``: their tables, machine and commit
    (``edit-suite sweep --render``)."""
    sweeps = []
    for f in files:
        sweep = json.loads(Path(f).read_text())
        sweep["runs"] = sweep_metrics(Path(f).parent.parent, sweep)
        sweeps.append(dict(sweep, figure=None, table=sweep_table(sweep)))
    return render("variants", record=True, variants=[], sweeps=sweeps)
