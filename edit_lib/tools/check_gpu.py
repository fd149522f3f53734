"""``edit-suite check-gpu``: the first thing a user with a GPU runs. The smoke profile on CUDA in float32 and in
bfloat16 (two processes on one GPU) beside a CPU run, each compared with the CPU golden file:

* **rows**: 01's sampled rollouts against the CPU run's. Sampling draws its noise per row on CPU generators
  (``model.generate``), so tokens agree unless the devices' logits order two tokens differently; a row's first
  differing token is a *flip*. Float32 passes at most 0.1% flips per generated token.
* **key numbers** (``tools.golden``) against ``tests/golden/smoke.json``, each within the CPU's seed-to-seed
  spread (``tests/golden/smoke_spread.json``: the range over ``run.seed`` 0, 1, 2 of the smoke profile), at least
  the golden tolerance; zero spread means equal, and a key may be missing only where a seed lacked it too.
  GPU kernels and bf16 autocast in training are not bit for bit the CPU's, so trained numbers (05-09) move.
* **bfloat16 probe reads** (``bench_precision`` on CUDA): beliefs, Alg. 1's picks, shaping firings.

Per stage: seconds and ``torch.cuda.max_memory_allocated`` (also in each results JSON). The micro grader is built
(on the CPU, its recipe's pinned threads) before the runs start, and reused by all of them.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from edit_lib.artifacts import RunPaths, recorded_stage_dir
from edit_lib.tools.golden import GOLDEN_FILE, key_numbers, read_golden

SPREAD_FILE = GOLDEN_FILE.with_name("smoke_spread.json")
ARMS = {"cpu": ["model.device=cpu"],
        "float32": ["model.device=cuda", "model.dtype=float32"],
        "bfloat16": ["model.device=cuda", "model.dtype=bfloat16"]}
MAX_FLIP_RATE = 0.001  # flips per generated token, float32 against the CPU


class GPUUnavailable(RuntimeError):
    """No CUDA device is visible to torch."""


def seed_spread(run_dirs: list[Path]) -> tuple[dict[str, float], list[str]]:
    """(spread, optional) over runs of the same profile under different ``run.seed``: per numeric key number,
    max - min over the runs that have it; and the keys some runs have and others lack (a system whose pool is
    empty under one seed), which a compared run may lack or add. Other keys must match the golden file exactly."""
    numbers = [_present(key_numbers(d)) for d in run_dirs]
    every, some = set.intersection(*(set(n) for n in numbers)), set.union(*(set(n) for n in numbers))
    out = {}
    for key in sorted(some):
        vals = [n[key] for n in numbers if key in n]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) and v == v for v in vals):
            out[key] = max(map(float, vals)) - min(map(float, vals))
    return out, sorted(some - every)


def write_spread(run_dirs: list[Path], seeds: list[int], path: Path = SPREAD_FILE) -> Path:
    spread, optional = seed_spread(run_dirs)
    payload = dict(profile="smoke", seeds=seeds, how="max - min over the runs of each key number (tools.golden); "
                   "optional: keys some of the runs lack", refresh="edit-suite check-gpu --spread RUN_DIR ... "
                   "(smoke runs under -p run.seed=N)", spread=spread, optional=optional)
    path.write_text(json.dumps(payload, indent=1) + "\n")
    return path


def read_spread(path: Path = SPREAD_FILE) -> tuple[dict[str, float], set[str]]:
    """(spread, optional keys) of the seed-spread file."""
    if not path.exists():
        raise FileNotFoundError(f"no seed-spread file {path}: make it with `edit-suite check-gpu --spread` from smoke "
                                "runs under three seeds")
    data = json.loads(path.read_text())
    return data["spread"], set(data.get("optional", []))


def _present(numbers: dict) -> dict:
    """A key whose value is None (a table cell left empty) counts as absent."""
    return {k: v for k, v in numbers.items() if v is not None}


def compare_numbers(numbers: dict, golden: dict, spread: dict, tol: float, optional: set = frozenset()) -> pd.DataFrame:
    """One row per key: the run's value, the golden one, the allowed distance (the seed spread, at least ``tol``)
    and whether it holds; a key in ``optional`` may be missing on either side."""
    rows = []
    golden, numbers = _present(golden), _present(numbers)
    for key in sorted(set(golden) | set(numbers)):
        g, v = golden.get(key), numbers.get(key)
        allowed = max(tol, spread.get(key, 0.0))
        if key not in golden or key not in numbers:
            dist, ok = None, key in optional
        elif isinstance(g, (int, float)) and isinstance(v, (int, float)) and not isinstance(g, bool):
            dist = abs(float(v) - float(g)) if (g == g and v == v) else (0.0 if g != g and v != v else float("inf"))
            ok = dist <= allowed + 1e-12
        else:
            dist, ok = (0.0, True) if g == v else (None, False)
        rows.append(dict(stage=key.split("/")[0], key=key, golden=g, run=v, distance=dist, allowed=allowed,
                         exact=bool(ok and dist is not None and dist <= tol), within=bool(ok)))
    return pd.DataFrame(rows)


def token_flips(ref: pd.DataFrame, other: pd.DataFrame, tokenizer) -> dict:
    """Rows of ``other`` (01's rollouts) against ``ref``: rows whose text differs, and the flip rate (rows that
    diverge per generated token of the reference)."""
    keys = ["dataset", "response_id", "rollout_id"]
    m = ref.merge(other, on=keys, suffixes=("", "_o"), validate="one_to_one")
    if len(m) != len(ref) or len(m) != len(other):
        raise ValueError(f"the runs sampled different rows: {len(ref)} against {len(other)}")
    differ = m["text"] != m["text_o"]
    tokens = int(sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in m["text"])) or 1
    return dict(rows=len(m), rows_differing=int(differ.sum()), generated_tokens=tokens,
                flip_rate=float(differ.sum()) / tokens)


def stage_report(run_dir: Path) -> list[dict]:
    """Per stage of a run: wall seconds and peak GPU memory (MiB; None: no CUDA) from its results JSON."""
    rows = []
    for f in sorted(RunPaths(run_dir).results.glob("*.json")):
        r = json.loads(f.read_text())
        peak = r.get("peak_gpu_memory_bytes")
        rows.append(dict(stage=r.get("notebook", f.stem), seconds=r.get("seconds"),
                         peak_gpu_mib=None if peak is None else round(peak / 2 ** 20, 1)))
    return rows


def _arm_overrides(arm: str, threads: int) -> list[str]:
    return [*ARMS[arm], f"model.torch_threads={threads}"]


def arm_dir(root: Path, arm: str, profile: str, threads: int) -> Path:
    """The run folder of ``arm``: its profile's main run under ``root/<arm>``, or the variant its values make
    (``runner.variants``)."""
    from edit_lib.runner.variants import resolve
    return resolve(profile, _arm_overrides(arm, threads), root / arm)[1].root


def _launch(arm: str, profile: str, root: Path, threads: int) -> tuple[subprocess.Popen, Path]:
    overrides = [x for o in _arm_overrides(arm, threads) for x in ("-p", o)]
    log = root / f"{arm}.log"
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "edit_lib.cli", "run", "--profile", profile, "--run-root", str(root / arm),
           *overrides]
    return subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env), log


def check_gpu(run_root: str | Path, profile: str = "smoke", arms: tuple[str, ...] = tuple(ARMS),
              threads: int = 2, timeout_s: float = 420.0, echo=print) -> dict:
    """Run ``arms`` of ``profile`` at once under ``run_root/<arm>``, compare, write ``run_root/check_gpu.json``."""
    import torch
    if any(a != "cpu" for a in arms) and not torch.cuda.is_available():
        raise GPUUnavailable("torch sees no CUDA device (torch.cuda.is_available() is False): check-gpu needs one")
    from edit_lib.config import load_profile
    from edit_lib.model.bases import resolve_base_path
    from edit_lib.runner.register import register_all
    register_all()
    root = Path(run_root)
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    prof = load_profile(profile)
    base = resolve_base_path(prof.model.name_or_path)  # builds a named Base (micro) once, on the CPU
    echo(f"check-gpu: Base {prof.model.name_or_path} at {base} ready in {time.perf_counter() - t0:.0f} s; "
         f"running {', '.join(arms)} at once under {root}")
    procs = {a: _launch(a, profile, root, threads) for a in arms}
    deadline = time.monotonic() + timeout_s
    codes = {}
    for a, (p, log) in procs.items():
        try:
            codes[a] = p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            codes[a] = "timeout"
        echo(f"  {a}: exit {codes[a]} after {time.perf_counter() - t0:.0f} s (log {log})")
    golden, tol = read_golden()
    spread, optional = read_spread()
    result = dict(profile=profile, device=torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
                  torch=torch.__version__, threads=threads, exit_codes=codes, tolerance=tol,
                  max_flip_rate=MAX_FLIP_RATE, arms={})
    ref_rows = _rollouts(RunPaths(arm_dir(root, "cpu", profile, threads))) if "cpu" in arms else None
    tok = None
    for a in arms:
        run_dir = arm_dir(root, a, profile, threads)
        cmp = compare_numbers(key_numbers(run_dir), golden, spread, tol, optional)
        by_stage = cmp.groupby("stage").agg(keys=("key", "size"), exact=("exact", "sum"), within=("within", "sum"))
        arm = dict(stages=stage_report(run_dir),
                   numbers=by_stage.reset_index().to_dict("records"),
                   outside=cmp[~cmp.within].head(40).to_dict("records"),
                   numbers_within=bool(cmp.within.all()))
        rows = _rollouts(RunPaths(run_dir))
        if ref_rows is not None and rows is not None and a != "cpu":
            if tok is None:
                from transformers import AutoTokenizer
                tok = AutoTokenizer.from_pretrained(str(base))
            arm["rows"] = token_flips(ref_rows, rows, tok)
        result["arms"][a] = arm
    if "float32" in arms and codes.get("float32") == 0:
        result["precision"] = _precision(profile, root / "float32", _arm_overrides("float32", threads), echo)
    f32 = result["arms"].get("float32", {})
    result["float32_passes"] = bool(codes.get("float32") == 0 and f32.get("numbers_within")
                                    and f32.get("rows", {}).get("flip_rate", 0.0) <= MAX_FLIP_RATE)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    (root / "check_gpu.json").write_text(json.dumps(result, indent=1, default=str))
    return result


def _rollouts(paths: RunPaths) -> pd.DataFrame | None:
    """01's sampled rollouts of a run, or None where 01 did not finish."""
    try:
        f = recorded_stage_dir(paths, "01_base_policy") / "rollouts.parquet"
    except FileNotFoundError:
        return None
    return pd.read_parquet(f) if f.exists() else None


def _precision(profile: str, run_root: Path, overrides: list[str], echo) -> dict | str:
    from edit_lib.tools.bench_precision import bench_precision
    try:
        return bench_precision(profile, run_root, overrides=overrides)
    except Exception as e:  # reported, not fatal: the runs' comparison stands on its own
        echo(f"  precision comparison failed: {type(e).__name__}: {e}")
        return f"{type(e).__name__}: {e}"


def format_check(result: dict) -> str:
    """The report: per arm the stage times and memory, the numbers within tolerance per stage, the rows."""
    out = [f"check-gpu on {result['device']} (torch {result['torch']}), {result['seconds']} s in all"]
    for a, arm in result["arms"].items():
        st = pd.DataFrame(arm["stages"], columns=["stage", "seconds", "peak_gpu_mib"]).merge(
            pd.DataFrame(arm["numbers"], columns=["stage", "keys", "exact", "within"]), on="stage", how="outer")
        out.append(f"\n[{a}] exit {result['exit_codes'].get(a)}; key numbers within tolerance: "
                   f"{'yes' if arm['numbers_within'] else 'NO'}")
        if "rows" in arm:
            r = arm["rows"]
            out.append(f"  01 rollouts: {r['rows_differing']} of {r['rows']} rows differ from the CPU run "
                       f"({r['flip_rate']:.2e} flips per generated token; float32 allows {result['max_flip_rate']})")
        out.append(st.to_string(index=False))
        for o in arm["outside"][:8]:
            out.append(f"  outside: {o['key']}: golden {o['golden']}, run {o['run']} (allowed {o['allowed']:.3g})")
    p = result.get("precision")
    if isinstance(p, dict):
        from edit_lib.tools.bench_precision import format_precision
        out.append("\n" + format_precision(p))
    if "float32" in result["arms"]:
        out.append(f"\nfloat32 on the GPU agrees with the CPU: {'yes' if result['float32_passes'] else 'NO'}")
    return "\n".join(out)


def check_gpu_cli(a) -> int:
    """``edit-suite check-gpu`` (arguments in ``cli.py``): the check, ``--memory``, or ``--spread``. Exit 0 when
    float32 agrees, 1 when it does not, 2 without a GPU or without the spread file."""
    if a.spread:
        if len(a.spread) != len(a.seeds):
            print(f"edit-suite check-gpu --spread: {len(a.spread)} run folders for {len(a.seeds)} --seeds",
                  file=sys.stderr)
            return 2
        print(f"wrote {write_spread([Path(d) for d in a.spread], a.seeds)}")
        return 0
    if a.memory:
        import torch

        from edit_lib.tools.check_memory import check_memory
        if not torch.cuda.is_available():
            print("edit-suite check-gpu --memory: torch sees no CUDA device", file=sys.stderr)
            return 2
        result = check_memory(layers=a.layers, echo=lambda s: None)
        Path(a.run_root).mkdir(parents=True, exist_ok=True)
        (Path(a.run_root) / "check_memory.json").write_text(json.dumps(result, indent=1))
        print(json.dumps(result, indent=1))
        return 0
    try:
        result = check_gpu(a.run_root, profile=a.profile, arms=tuple(a.arms), timeout_s=a.timeout)
    except (GPUUnavailable, FileNotFoundError) as e:
        print(f"edit-suite check-gpu: {e}", file=sys.stderr)
        return 2
    print(format_check(result))
    return 0 if result["float32_passes"] or "float32" not in a.arms else 1
