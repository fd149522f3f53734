"""``edit-suite bench``: speed benchmarks as ratios against the naive way (never timed assertions)."""
from __future__ import annotations

import json
import platform
import time
from pathlib import Path


def run_bench(what: str, out_dir: Path) -> dict:
    """Run one benchmark, add machine facts, and write ``<out_dir>/<what>.json``."""
    import torch

    torch.set_num_threads(2)
    if what == "probe":
        from .signals.bench import bench_probe as fn
    elif what == "audit":
        from .signals.bench import bench_audit as fn
    elif what == "shaping":
        from .train.bench_shaping import bench_shaping as fn
    else:
        raise ValueError(f"unknown benchmark {what!r}; choose probe, audit or shaping")
    result = dict(fn())
    result.update(bench=what, torch=torch.__version__, threads=torch.get_num_threads(),
                  machine=platform.machine(), processor=platform.processor() or "unknown",
                  when=time.strftime("%Y-%m-%d %H:%M:%S"))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{what}.json").write_text(json.dumps(result, indent=2, sort_keys=True))
    return result
