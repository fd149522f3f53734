"""``edit-suite bench``: speed benchmarks as ratios against the naive way (never timed assertions), and the
suite's per-stage wall times (``bench suite``). ``BENCHMARKS`` (a ``registry.Registry``) is the one list of them:
the CLI's choices, its help, the dispatch and the error for an unknown name all read it.

``Comparison`` is the one harness of the benchmarks that set ways of computing the same thing against each other:
a benchmark declares its arms (the baseline first), its check (identity, or what it counts as a difference) and its
shapes, and the harness times the arms interleaved (so that a change in the machine's load hits every arm) and
reports ``<arm>_s``, ``ratio_<arm>`` (the baseline's seconds over the arm's) and the check's fields.
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from edit_lib.registry import Lazy, Registry


@dataclass(frozen=True)
class Benchmark:
    """One ``edit-suite bench`` choice. ``function`` and ``formatter`` are callables or ``module:function`` (a
    module of ``edit_lib.tools``), imported only when the benchmark runs, so that the CLI's parser reads this
    table without loading torch. A benchmark with a ``formatter`` reads the profile's last run (it is called with
    the profile and the run root, and its result is shown as text); one without runs standalone (one JSON line)."""
    function: str | Callable[..., dict]
    help: str
    formatter: str | Callable[[dict], str] | None = None

    @property
    def reads_run(self) -> bool:
        return self.formatter is not None

    def load(self) -> Callable[..., dict]:
        return _resolve(self.function)

    def load_formatter(self) -> Callable[[dict], str]:
        if self.formatter is None:
            raise ValueError(f"benchmark {self.function!r} runs standalone and has no formatter")
        return _resolve(self.formatter)


BENCHMARKS: Registry[Benchmark] = Registry("benchmark of `edit-suite bench`")
BENCHMARKS.update({
    "probe": Benchmark("bench_signals:bench_probe", "the belief probe (Eq. 1-2) in one packed call against a pass "
                       "per boundary and mark, on a random Qwen3 the size of the embedded grader"),
    "probe-real": Benchmark("bench_signals:bench_probe_real", "the same probe on SmolLM2-135M-Instruct (needs "
                            "`make real-model`)"),
    "audit": Benchmark("bench_signals:bench_audit", "the grounding audit (Eq. 3) packed against a pass per step and "
                       "variant"),
    "shaping": Benchmark("bench_signals:bench_shaping", "EDIT-RL against GRPO step time: what belief shaping costs "
                         "(Sec. 2.3, App. B)"),
    "generation": Benchmark("bench_generation:bench_generation", "a pool of two worker processes "
                            "(model.generation_workers) against one over the demo's 01 calls, start-up included "
                            "and excluded, outputs compared"),
    "packed-sft": Benchmark("bench_signals:bench_packed_sft", "one warm-up step on SmolLM2-135M-Instruct, "
                            "prefix-shared against TRL's padded batch, and under sdpa_blocks against plain SDPA"),
    "prefix": Benchmark("bench_generation:bench_prefix", "greedy grading with each batch's prompt prefix encoded once "
                        "against the plain call (embedded grader, and SmolLM2 where installed), outputs compared"),
    "merge": Benchmark("bench_generation:bench_merge", "greedy grading by a policy with a LoRA adapter loaded as the "
                       "stages load it against the adapter folded into the weights (model.pool_merges_adapters), "
                       "rows compared"),
    "decoding": Benchmark("bench_generation:bench_decoding", "lean decoding (model.lean_decoding) against transformers "
                          "generate on the embedded grader at the demo's batch size and budget, and against itself "
                          "with every finished row kept (compaction's share) and with each rollout row reading its "
                          "own copy of the prompt's keys (the shared prompt's share), outputs compared"),
    "bound": Benchmark("bench_generation:bench_bound", "the embedded grader's greedy decoding throughput (tokens/s, one "
                       "thread) beside the machine's bound: measured matmul GFLOP/s at its shapes and memory "
                       "bandwidth, over the FLOP and key/value-cache bytes of a token"),
    "profiler": Benchmark("bench_generation:bench_profiler", "the embedded grader's greedy decoding with and without "
                          "torch.profiler tracing it (one thread): what a trace costs, and why --time-split uses "
                          "timers"),
    "rollouts": Benchmark("bench_generation:bench_rollouts", "a demo GRPO run with its rollouts decoded by lean "
                          "decoding (model.lean_decoding) against TRL's transformers generate, logs and weights "
                          "compared"),
    "suite": Benchmark("bench:bench_suite", "the per-stage wall times of the profile's last run, beside the time "
                       "budget, split into forward / generation / training / other where it ran with "
                       "--time-split", formatter="bench:format_suite"),
    "precision": Benchmark("bench_signals:bench_precision", "bfloat16 against float32 probe reads on the "
                           "profile's last run (beliefs, Alg. 1 picks, shaping firings)",
                           formatter="bench_signals:format_precision"),
})


@dataclass
class Comparison:
    """One benchmark's declaration: ``arms`` ({name: a call without arguments}) compute the same thing in ways
    whose speed is compared, the first the baseline (today's path, or the naive way); ``check(baseline's output,
    arm's output)`` returns what the benchmark reports of their difference (a dict) and raises AssertionError where
    the outputs must be identical and are not (no ratio is reported then); ``shapes`` says what the arms compute.
    ``statistic``: each arm's fastest repeat ("min", the default: the least disturbed by other processes) or the
    median; ``warmup``: each arm once untimed first (one-off allocations, kernel dispatch)."""
    arms: dict[str, Callable[[], object]]
    check: Callable[[object, object], dict] | None = None
    shapes: dict = field(default_factory=dict)
    repeats: int = 2
    statistic: str = "min"
    warmup: bool = False
    outputs: dict = field(default_factory=dict, init=False)  # each arm's output of its fastest repeat

    def run(self) -> dict:
        """Time the arms in turn, ``repeats`` rounds; the flat result: shapes, ``<arm>_s``, ``ratio_<arm>`` for
        each arm after the baseline, and the check's fields prefixed with the arm's name (where more than one arm
        is checked)."""
        if self.statistic not in ("min", "median"):
            raise ValueError(f"Comparison.statistic is 'min' or 'median', not {self.statistic!r}")
        if len(self.arms) < 2 or self.repeats < 1:
            raise ValueError("a Comparison needs two arms or more and one repeat or more")
        if self.warmup:
            for fn in self.arms.values():
                fn()
        times: dict[str, list[float]] = {a: [] for a in self.arms}
        for _ in range(self.repeats):
            for arm, fn in self.arms.items():
                t0 = time.perf_counter()
                out = fn()
                times[arm].append(time.perf_counter() - t0)
                if times[arm][-1] <= min(times[arm]):
                    self.outputs[arm] = out
        pick = min if self.statistic == "min" else statistics.median
        seconds = {a: pick(t) for a, t in times.items()}
        base, *others = self.arms
        result = dict(self.shapes, repeats=self.repeats, statistic=self.statistic,
                      **{f"{a}_s": round(s, 4) for a, s in seconds.items()},
                      **{f"ratio_{a}": round(seconds[base] / seconds[a], 3) for a in others})
        for a in others if self.check else ():
            found = self.check(self.outputs[base], self.outputs[a])
            result.update(found if len(others) == 1 else {f"{a}_{k}": v for k, v in found.items()})
        return result


def identical_frames(a, b) -> dict:
    """A check: two tables equal row for row and dtype for dtype (AssertionError otherwise)."""
    import pandas as pd

    pd.testing.assert_frame_equal(a, b)
    return dict(identical=True)


def rows_differing(columns: tuple[str, ...] = ("text",)):
    """A check: how many rows of two tables of the same rows differ in any of ``columns``, and the share equal."""
    def check(a, b) -> dict:
        differ = (a[list(columns)].reset_index(drop=True) != b[list(columns)].reset_index(drop=True)).any(axis=1)
        return dict(rows_differing=int(differ.sum()), same_rows=round(1 - float(differ.mean()), 4))
    return check


def clocked(fn: Callable, spent: list) -> Callable:
    """``fn``, adding each call's wall time to ``spent``, under ``fn``'s name (TRL names a reward function by it);
    a call inside another clocked one on the same ``spent`` is not counted again (the lean loop's fallback runs
    generate)."""
    def clocked_fn(*a, **kw):
        if spent and spent[-1] is None:  # an outer clocked call is running
            return fn(*a, **kw)
        spent.append(None)
        t0 = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            spent[-1] = time.perf_counter() - t0
    clocked_fn.__name__ = fn.__name__
    return clocked_fn


def _resolve(ref: str | Callable) -> Callable:
    return ref if callable(ref) else Lazy(f"{__package__}.{ref}").resolve()


def benchmark(what: str) -> Benchmark:
    """The registered benchmark ``what``; a ``registry.UnknownName`` (a ValueError) listing every name otherwise."""
    return BENCHMARKS[what]


def choices_help() -> str:
    """The CLI's help for the benchmark name: each name with its line of help."""
    return "; ".join(f"{name}: {b.help}" for name, b in BENCHMARKS.items())


def run_bench(what: str, out_dir: Path) -> dict:
    """Run one standalone benchmark, add machine facts, and write ``<out_dir>/<what>.json``."""
    import torch

    spec = benchmark(what)
    if spec.reads_run:
        raise ValueError(f"benchmark {what!r} reads a profile's last run: call bench_run")
    torch.set_num_threads(2)
    result = dict(spec.load()())
    result.update(bench=what, torch=torch.__version__, threads=torch.get_num_threads(),
                  machine=platform.machine(), processor=platform.processor() or "unknown",
                  when=time.strftime("%Y-%m-%d %H:%M:%S"))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{what}.json").write_text(json.dumps(result, indent=2, sort_keys=True))
    return result


def bench_run(what: str, profile: str, run_root: str | Path | None, out_dir: Path) -> tuple[dict, str]:
    """Run a benchmark of the profile's last run, write ``<out_dir>/<what>_<profile>.json``; (result, text)."""
    spec = benchmark(what)
    result = spec.load()(profile, run_root)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{what}_{result['profile']}.json").write_text(json.dumps(result, indent=2))
    return result, spec.load_formatter()(result)


def bench_cli(what: str, profile: str, run_root: str | Path | None) -> int:
    """``edit-suite bench WHAT``: 0 with the result printed (a missing run or real model raises
    FileNotFoundError: ``cli`` exits 2)."""
    from edit_lib.artifacts import DEFAULT_RUN_ROOT

    out_dir = Path(run_root or DEFAULT_RUN_ROOT) / "bench"
    if benchmark(what).reads_run:
        print(bench_run(what, profile, run_root, out_dir)[1])
    else:
        print(json.dumps(run_bench(what, out_dir=out_dir), sort_keys=True))
    return 0


# The main job's time budget on the reference machine (2 cores): per group of stages, in minutes. Phase 1 (04)
# repairs every incorrect rollout of the Phase-1 sample, and 01 samples only that sample's rollouts; 06 trains
# Tables 1-3's RL systems on every dataset (18 runs), so 00-03 and 05 gave it time.
SUITE_BUDGET_MIN = {"00-03": 3.0, "04": 5.5, "05": 3.5, "06": 7.0, "07-09": 6.0}
SUITE_TOTAL_MIN = 25.0


# a timed stage's fields (``runner.time_split.finish``) in ``bench_suite``'s rows, and the columns shown
TIME_SPLIT_FIELDS = ("forward_seconds", "generation_seconds", "training_seconds", "other_seconds", "calls",
                     "workers", "worker_process_seconds", "worker_forward_seconds", "worker_generation_seconds",
                     "worker_training_seconds")
SPLIT_COLUMNS = {"forward": "forward_seconds", "generate": "generation_seconds", "train": "training_seconds",
                 "other": "other_seconds", "workers": "worker_process_seconds"}
SPLIT_LEGEND = ("forward: outermost model forward passes; generate: generation calls less their forwards; train: "
                "backward and optimiser steps; other: the rest of seconds (kernel start, pandas, I/O, waiting on "
                "workers); workers: pool workers' process-seconds, run beside the stage (edit-suite run --time-split)")


def _group(stage: str) -> str:
    n = int(stage[:2])
    return "00-03" if n <= 3 else "07-09" if n >= 7 else f"{n:02d}"


def bench_suite(profile: str, run_root: str | Path | None = None) -> dict:
    """The wall time of every stage of the profile's last run (``runner_seconds``: the kernel's start included,
    recorded by ``edit-suite run``; else the notebook's own ``seconds``), per budget group and in total, beside
    the budget. A stage reused with ``--reuse-stale`` keeps the time of the run that computed it (flagged). A
    stage that ran with ``--time-split`` adds its split (``runner.time_split``): ``TIME_SPLIT_FIELDS``."""
    from edit_lib.artifacts import RunPaths
    from edit_lib.config import load_profile
    from edit_lib.runner.keys import STAGES
    from edit_lib.runner.time_split import breakdown
    paths = RunPaths.for_profile(load_profile(profile).name, run_root)
    results = {n: json.loads(paths.results_file(n).read_text()) for n in STAGES if paths.results_file(n).exists()}
    split = breakdown(paths.root, results)
    rows = []
    for name, res in results.items():
        rows.append(dict(stage=name, seconds=float(res.get("runner_seconds", res.get("seconds", 0.0))),
                         measured="runner" if "runner_seconds" in res else "notebook",
                         reused_stale=bool(res.get("reused_stale")), key=res.get("key"),
                         **{k: split[name][k] for k in TIME_SPLIT_FIELDS if name in split}))
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
    """``bench_suite``'s result as a plain-text table; where a stage was timed, its split beside its seconds
    (forward passes, generation outside them, training, the rest; and its pool workers' process-seconds)."""
    split = any("forward_seconds" in r for r in result["stages"])
    cols = "".join(f" {c:>8s}" for c in SPLIT_COLUMNS) if split else ""
    lines = [f"profile {result['profile']} ({result['cpus']} CPUs)", f"{'stage':32s} {'seconds':>8s}{cols}"]
    for r in result["stages"]:
        flag = " (reused stale: time of an earlier run)" if r["reused_stale"] else ""
        parts = "".join(f" {r[f]:8.1f}" for f in SPLIT_COLUMNS.values()) if "forward_seconds" in r else ""
        lines.append(f"{r['stage']:32s} {r['seconds']:8.1f}{parts}{flag}")
    for g in result["groups"]:
        b = g["budget_minutes"]
        lines.append(f"group {g['group']:26s} {g['minutes']:8.2f} min" + (f"  (budget {b:g} min)" if b else ""))
    lines.append(f"{'total':32s} {result['total_minutes']:8.2f} min  (budget {result['budget_total_minutes']:.0f} min)")
    if split:
        lines.append(SPLIT_LEGEND)
    return "\n".join(lines)
