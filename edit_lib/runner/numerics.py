"""The floating-point setting a stage ran under, recorded in every results JSON as ``numerics``.

On a CPU the kernels PyTorch, MKL and oneDNN pick depend on the instruction set the processor offers (ATen's
``cpu_capability``: default, avx2, avx512, ...) unless an environment variable caps it. Two machines that pick
different kernels can train the same run to a loss that differs in its last digits, and a greedy token at a
near-tie can then flip; ``edit-suite compare`` names such a difference, since the tables' equality is a
same-machine property (book/records/performance.md). ``torch_threads`` is recorded too: a run's reductions, and so
its numbers, depend on it.
"""
from __future__ import annotations

import json
import os
import platform

#: Environment variables that cap the instruction set of a kernel library (each recorded when set).
ISA_ENV = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")


def numerics() -> dict:
    """{torch, cpu_capability, processor, machine, torch_threads, isa_env} of this process (torch imported)."""
    import torch

    return dict(torch=torch.__version__, cpu_capability=torch.backends.cpu.get_cpu_capability(),
                processor=platform.processor() or "unknown", machine=platform.machine(),
                torch_threads=torch.get_num_threads(),
                isa_env={k: os.environ[k] for k in ISA_ENV if k in os.environ})


def numerics_differ(results_a: dict[str, dict], results_b: dict[str, dict]) -> list[dict]:
    """The stages of both runs whose recorded ``numerics`` differ: [{stage, field, a, b}], one entry per field
    (a results JSON written before this record existed counts as unknown, not as different)."""
    out = []
    for stage in sorted(set(results_a) & set(results_b)):
        na, nb = results_a[stage].get("numerics"), results_b[stage].get("numerics")
        if not isinstance(na, dict) or not isinstance(nb, dict):
            continue
        out += [dict(stage=stage, field=f, a=na.get(f), b=nb.get(f))
                for f in sorted(set(na) | set(nb)) if na.get(f) != nb.get(f)]
    return out


def numerics_note(entries: list[dict]) -> list[str]:
    """The lines that name what differs in two runs' kernels (``numerics_differ``), one per field and values, with
    the stages, then an empty line; no entries: no lines."""
    if not entries:
        return []
    by: dict[tuple, list[str]] = {}
    for e in entries:
        by.setdefault((e["field"], json.dumps(e["a"]), json.dumps(e["b"])), []).append(e["stage"])
    return (["The runs' numerics differ (floats may move in their last digits from this alone; "
             "book/records/performance.md):"]
            + [f"  {f}: {_show(a)} -> {_show(b)}   ({', '.join(st)})" for (f, a, b), st in by.items()] + [""])


def _show(dumped: str) -> str:
    value = json.loads(dumped)
    return value if isinstance(value, str) else dumped
