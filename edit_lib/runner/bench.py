"""``edit-suite bench``: speed benchmarks as ratios against the naive way (never timed assertions), and the
suite's per-stage wall times (``bench suite``)."""
from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path


def run_bench(what: str, out_dir: Path) -> dict:
    """Run one benchmark, add machine facts, and write ``<out_dir>/<what>.json``."""
    import torch

    torch.set_num_threads(2)
    if what == "probe":
        from edit_lib.runner.bench_signals import bench_probe as fn
    elif what == "audit":
        from edit_lib.runner.bench_signals import bench_audit as fn
    elif what == "shaping":
        from edit_lib.runner.bench_shaping import bench_shaping as fn
    elif what == "probe-real":
        from edit_lib.runner.bench_signals import bench_probe_real as fn
    elif what == "generation":
        from edit_lib.runner.bench_generation import bench_generation as fn
    elif what == "packed-sft":
        from edit_lib.runner.bench_packed import bench_packed_sft as fn
    elif what == "prefix":
        from edit_lib.runner.bench_prefix import bench_prefix as fn
    else:
        raise ValueError(f"unknown benchmark {what!r}; choose probe, probe-real, audit, shaping, generation, "
                         "packed-sft or prefix")
    result = dict(fn())
    result.update(bench=what, torch=torch.__version__, threads=torch.get_num_threads(),
                  machine=platform.machine(), processor=platform.processor() or "unknown",
                  when=time.strftime("%Y-%m-%d %H:%M:%S"))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{what}.json").write_text(json.dumps(result, indent=2, sort_keys=True))
    return result


# The main job's time budget on the reference machine (2 cores): per group of stages, in minutes. Phase 1 (04)
# repairs every incorrect rollout of the Phase-1 sample, and 01 samples only that sample's rollouts; 06 trains
# Tables 1-3's RL systems on every dataset (18 runs), so 00-03 and 05 gave it time.
SUITE_BUDGET_MIN = {"00-03": 3.0, "04": 5.5, "05": 3.5, "06": 7.0, "07-09": 6.0}
SUITE_TOTAL_MIN = 25.0


def _group(stage: str) -> str:
    n = int(stage[:2])
    return "00-03" if n <= 3 else "07-09" if n >= 7 else f"{n:02d}"


def bench_suite(profile: str, run_root: str | Path | None = None) -> dict:
    """The wall time of every stage of the profile's last run (``runner_seconds``: the kernel's start included,
    recorded by ``edit-suite run``; else the notebook's own ``seconds``), per budget group and in total, beside
    the budget. A stage reused with ``--reuse-stale`` keeps the time of the run that computed it (flagged)."""
    from edit_lib.artifacts import RunPaths
    from edit_lib.config import load_profile
    from edit_lib.runner.keys import STAGES
    paths = RunPaths.for_profile(load_profile(profile).name, run_root)
    rows = []
    for name in STAGES:
        f = paths.results_file(name)
        if not f.exists():
            continue
        res = json.loads(f.read_text())
        rows.append(dict(stage=name, seconds=float(res.get("runner_seconds", res.get("seconds", 0.0))),
                         measured="runner" if "runner_seconds" in res else "notebook",
                         reused_stale=bool(res.get("reused_stale")), key=res.get("key")))
    if not rows:
        raise FileNotFoundError(f"no results in {paths.results}: run `edit-suite run --profile {profile}` first")
    groups = {}
    for r in rows:
        groups.setdefault(_group(r["stage"]), 0.0)
        groups[_group(r["stage"])] += r["seconds"]
    total = sum(r["seconds"] for r in rows)
    return dict(profile=paths.root.name, stages=rows,
                groups=[dict(group=g, minutes=round(s / 60, 2), budget_minutes=SUITE_BUDGET_MIN.get(g))
                        for g, s in groups.items()],
                total_minutes=round(total / 60, 2), budget_total_minutes=SUITE_TOTAL_MIN,
                within_budget=total / 60 <= SUITE_TOTAL_MIN, cpus=os.cpu_count())


def format_suite(result: dict) -> str:
    """``bench_suite``'s result as a plain-text table."""
    lines = [f"profile {result['profile']} ({result['cpus']} CPUs)", f"{'stage':32s} {'seconds':>8s}"]
    for r in result["stages"]:
        flag = " (reused stale: time of an earlier run)" if r["reused_stale"] else ""
        lines.append(f"{r['stage']:32s} {r['seconds']:8.1f}{flag}")
    for g in result["groups"]:
        b = g["budget_minutes"]
        lines.append(f"group {g['group']:26s} {g['minutes']:8.2f} min" + (f"  (budget {b:g} min)" if b else ""))
    lines.append(f"{'total':32s} {result['total_minutes']:8.2f} min  (budget {result['budget_total_minutes']:.0f} min)")
    return "\n".join(lines)
