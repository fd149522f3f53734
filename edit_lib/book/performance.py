"""The book's performance page of one run: wall time per stage, where it goes (forward passes, generation,
training, the rest) for the stages run with ``edit-suite run --time-split``, and the ``edit-suite bench`` results
next to the run."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from edit_lib.book.pages import label, md_table, stage_table
from edit_lib.tools.bench import SPLIT_COLUMNS, SPLIT_LEGEND


def _flat(d: dict, prefix: str = "") -> list[dict]:
    out = []
    for k, v in d.items():
        if isinstance(v, dict):
            out += _flat(v, f"{prefix}{k}.")
        elif isinstance(v, list) and v and all(isinstance(x, (int, float)) for x in v):
            out.append({"field": prefix + k, "value": f"{len(v)} values, median {pd.Series(v).median():.3g}"})
        elif not isinstance(v, list):
            out.append({"field": prefix + k, "value": v})
    return out


def split_section(split: dict[str, dict]) -> list[str]:
    """Where each timed stage's seconds went (``runner.time_split.breakdown``: {stage: its timing}), in seconds
    and as a share of the stage's wall time; [] when no stage of the run was timed."""
    if not split:
        return []
    rows = []
    for stage, t in split.items():
        wall = t["wall_seconds"]
        rows.append(dict(stage=stage, seconds=f"{wall:.1f}", **{c: f"{t[f]:.1f}" for c, f in SPLIT_COLUMNS.items()},
                         **{f"{c} %": f"{100 * t[f] / max(wall, 1e-9):.1f}"
                            for c, f in list(SPLIT_COLUMNS.items())[:4]}))
    return ["## Where the time goes (`edit-suite run --time-split`)", "",
            "Seconds of each stage timed by `edit-suite run --time-split` (the runner's wall time, the kernel's "
            "start included; `edit_lib/runner/time_split.py`), and each part's share of them.", "",
            md_table(pd.DataFrame(rows)), "", SPLIT_LEGEND + ".", ""]


def performance_page(name: str, results: dict, bench_dir: Path, split: dict[str, dict]) -> str:
    """The page: ``results`` ({stage: results JSON}), ``split`` (``split_section``), ``bench_dir``'s JSON files."""
    st = stage_table(results)
    out = [f"# Performance (run `{name}`)", "", label(name, results), "", "## Wall time per stage", ""]
    if len(st):
        st = st.assign(minutes=st.seconds / 60, percent=(100 * st.seconds / max(st.seconds.sum(), 1e-9)).round(1))
        out += [md_table(st[["stage", "seconds", "minutes", "percent"]]), "",
                f"Total: {st.seconds.sum():.1f} s ({st.seconds.sum() / 60:.1f} min) over {len(st)} stages, as "
                f"recorded when each stage last ran (a reused stage keeps its first time).", ""]
    out += split_section(split)
    benches = sorted(bench_dir.glob("*.json")) if bench_dir.is_dir() else []
    out += ["## Benchmarks (`edit-suite bench`)", ""]
    out += [] if benches else [f"No `{bench_dir.name}/*.json` next to this run: run `edit-suite bench`.", ""]
    for f in benches:
        out += [f"### `{f.stem}`", "", md_table(pd.DataFrame(_flat(json.loads(f.read_text())))), ""]
    return "\n".join(out)
