"""``edit-suite check-gpu``: the first thing a user with a GPU runs (longer than 400 lines because its ``--memory``
check, the dry run's estimate against a small Qwen3, shares its runs' set-up). The smoke profile on CUDA in
float32 and in bfloat16 (two processes on one GPU) beside a CPU run, each compared with the CPU golden file:

* **rows**: 01's sampled rollouts against the CPU run's. Sampling draws its noise per row on CPU generators
  (``model.generate``), so tokens agree unless the devices' logits order two tokens differently; a row's first
  differing token is a *flip*. Float32 passes at most 0.1% flips per generated token.
* **key numbers** (``tools.golden``) against ``tests/golden/smoke.json``, each within the CPU's seed-to-seed
  spread (``tests/golden/smoke_spread.json``: the range over ``run.seed`` 0, 1, 2 of the smoke profile), at least
  the golden tolerance; zero spread means equal, and a key may be missing only where a seed lacked it too.
  GPU kernels and bf16 autocast in training are not bit for bit the CPU's, so trained numbers (05-09) move.
* **bfloat16 probe reads** (``bench_precision`` on CUDA): beliefs, Alg. 1's picks, shaping firings.

Per stage: seconds and ``torch.cuda.max_memory_allocated``. The micro grader is built (on the CPU, its recipe's
pinned threads) before the runs start.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from edit_lib.artifacts import recorded_stage_dir, RunPaths
from edit_lib.config import CONFIG_DIR, load_profile
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
    from edit_lib.providers import resolve_base_path
    from edit_lib.runner.keys import register_all
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
    from edit_lib.tools.bench_signals import bench_precision
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
        from edit_lib.tools.bench_signals import format_precision
        out.append("\n" + format_precision(p))
    if "float32" in result["arms"]:
        out.append(f"\nfloat32 on the GPU agrees with the CPU: {'yes' if result['float32_passes'] else 'NO'}")
    return "\n".join(out)


def check_gpu_cli(a) -> int:
    """``edit-suite check-gpu`` (arguments in ``cli.py``): the check, ``--memory``, or ``--spread``. Exit 0 when
    float32 agrees, 1 when it does not; without a GPU or the spread file it raises (``cli`` exits 2)."""
    if a.spread:
        if len(a.spread) != len(a.seeds):
            print(f"edit-suite check-gpu --spread: {len(a.spread)} run folders for {len(a.seeds)} --seeds",
                  file=sys.stderr)
            return 2
        print(f"wrote {write_spread([Path(d) for d in a.spread], a.seeds)}")
        return 0
    if a.memory:
        import torch
        if not torch.cuda.is_available():
            print("edit-suite check-gpu --memory: torch sees no CUDA device", file=sys.stderr)
            return 2
        result = check_memory(layers=a.layers, echo=lambda s: None)
        Path(a.run_root).mkdir(parents=True, exist_ok=True)
        (Path(a.run_root) / "check_memory.json").write_text(json.dumps(result, indent=1))
        print(json.dumps(result, indent=1))
        return 0
    result = check_gpu(a.run_root, profile=a.profile, arms=tuple(a.arms), timeout_s=a.timeout)
    print(format_check(result))
    return 0 if result["float32_passes"] or "float32" not in a.arms else 1


# ---------------------------------------------------------------- ``check-gpu --memory``
# The dry run's GPU memory estimate (``runner.dry_run.memory_estimate``) against what a Qwen3-8B-config model with
# ``layers`` decoder layers and random bfloat16 weights (nothing downloaded) allocates in 01, 02, 05 and 06, under
# ``torch.cuda.max_memory_allocated``, with the paper profile at ``SHAPES`` and prompts of ``prompt_tokens`` tokens:
# 01 sampled rollouts and a greedy batch; 02 the packed probe forward; 05 one LoRA SFT step and a greedy batch
# through the adapter; 06 one EDIT-RL step (GRPO plus the frozen probe). The error is (estimate - measured) /
# measured; each phase's seconds go beside ``check_memory_seconds`` for the device's GPU.

GIB = 2 ** 30
SHAPES = ["rollouts.batch_size=16", "rollouts.decoding.max_new_tokens=256", "eval.batch_size=16",
          "eval.decoding.max_new_tokens=256",
          "probe.batch_size=4", "sft.per_device_batch_size=4", "sft.effective_batch_size=4",
          "sft.effective_batch_by_dataset={}", "rl.rollouts_per_prompt=4", "rl.prompts_per_step=1",
          "rl.per_device_batch_size=4", "rl.decoding.max_new_tokens=256", "rl.steps=1", "rl.steps_by_dataset={}",
          "rl.shaping_by_dataset={}", "rl.datasets=[]"]


def small_qwen3(layers: int, device: str, tokenizer, config: dict | None = None):
    """Qwen3-8B's architecture with ``layers`` layers (``config`` overrides more keys) and ``tokenizer``'s special
    token ids, random bfloat16 weights created on ``device``; (the model, its config dict)."""
    from edit_lib.runner.dry_run import meta_model
    raw = json.loads((CONFIG_DIR / "models" / "qwen3-8b.json").read_text())
    raw.update(num_hidden_layers=layers, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
               pad_token_id=tokenizer.pad_token_id, **(config or {}))
    raw.pop("layer_types", None)  # sized for 36 layers
    return meta_model(raw, device).eval(), raw


def _peak(fn, device, times: dict | None = None, key: str = "") -> float | None:
    """GiB allocated at the peak of ``fn()`` (None on a CPU); its wall seconds go to ``times[key]``."""
    import torch
    cuda = device != "cpu"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    fn()
    if cuda:
        torch.cuda.synchronize()
    if times is not None:
        times[key] = time.perf_counter() - t0
    return torch.cuda.max_memory_allocated() / GIB if cuda else None


def _text(tok, n: int) -> str:
    """A text of exactly ``n`` tokens for ``tok`` (one repeated one-token word)."""
    word = next(w for w in ("mark", "point", "answer", "step") if len(tok(w, add_special_tokens=False)["input_ids"]) == 1)
    base = len(tok(word)["input_ids"]) - 1  # special tokens the tokenizer adds
    return " ".join([word] * (n - base))


def check_memory(layers: int = 2, prompt_tokens: int = 512, device: str = "cuda", config: dict | None = None,
                 echo=print) -> dict:
    """Estimate against measurement for 01, 02, 05 and 06 (module docstring); ``config`` shrinks the model for a
    CPU test (no measurement there)."""
    from datasets import Dataset as HFDataset

    from edit_lib.embedded.recipe import ASSETS_DIR
    from edit_lib.model.generate import SamplingConfig, generate
    from edit_lib.model.hf import prepare_tokenizer
    from edit_lib.model.policy import Policy
    from edit_lib.runner.dry_run import memory_estimate, parameter_counts, meta_model
    from edit_lib.signals.probe import probe_rollouts
    from edit_lib.train.rl import train_rl_arm
    from edit_lib.train.sft import train_sft
    from transformers import AutoTokenizer

    t0 = time.perf_counter()
    P = load_profile("paper", SHAPES + [f"model.device={device}"])
    tok = prepare_tokenizer(AutoTokenizer.from_pretrained(str(ASSETS_DIR)))  # any tokenizer: ids < the vocabulary
    model, raw = small_qwen3(layers, device, tok, config)
    counts = parameter_counts(meta_model(raw), P.sft.lora)
    est = {r["stage"]: r for r in memory_estimate(P, counts, prompt_tokens)}
    policy = Policy(model=model, tokenizer=tok, kind="tiny", name=f"qwen3-{layers}-layers")
    prompt = _text(tok, prompt_tokens)
    C = P.rollouts.decoding.max_new_tokens
    measured, times = {}, {}

    def gen(pol, b, n):
        cfg = SamplingConfig(n=1, max_new_tokens=n, batch_size=b, seed=0)
        return generate(pol.model, tok, [prompt] * b, cfg, progress=False)

    gen(policy, 2, 4)  # warm-up (CUDA kernels, cuBLAS handles), so the first timed phase does not pay for it

    # random weights: EOS is 1 token in 151,936, so completions run to their budget, as the estimate assumes
    measured["01_base_policy"] = max(_peak(lambda: gen(policy, P.rollouts.batch_size, C), device, times,
                                           "01 sampled rollouts") or 0,
                                     _peak(lambda: gen(policy, P.eval.batch_size, P.eval.decoding.max_new_tokens),
                                           device, times, "01 greedy batch") or 0)
    p_ids = tok(prompt)["input_ids"]
    steps = [[tok.convert_tokens_to_ids("mark")] * (C // 8)] * 8
    sc, marks = tok(" Final mark:", add_special_tokens=False)["input_ids"], [[i] for i in range(5, 16)]
    measured["02_probing"] = _peak(lambda: probe_rollouts(model, [p_ids] * P.probe.batch_size,
                                                          [steps] * P.probe.batch_size, sc, marks,
                                                          batch_size=P.probe.batch_size), device, times,
                                   "02 packed probe forward")
    with tempfile.TemporaryDirectory() as tmp:
        pairs = [(prompt, " " + _text(tok, C + 1))] * P.sft.per_device_batch_size
        res = {}
        measured["05_edit_sft"] = _peak(lambda: res.update(r=train_sft(policy, pairs, P.sft, Path(tmp) / "a",
                                                                       progress=False)), device, times,
                                        "05 LoRA SFT step")
        adapted = res["r"].policy
        measured["05_edit_sft"] = max(measured["05_edit_sft"] or 0,
                                      _peak(lambda: gen(adapted, P.eval.batch_size, P.eval.decoding.max_new_tokens),
                                            device, times, "05 greedy batch (adapter)") or 0)
        adapted.model.unload()
    frozen = Policy(model=small_qwen3(layers, device, tok, config)[0].requires_grad_(False), tokenizer=tok,
                    kind="tiny", name="frozen")
    rows = HFDataset.from_list([dict(prompt=prompt, gold=1, max_mark=3, dataset="sas_history", response_id=i)
                                for i in range(P.rl.prompts_per_step * 2)])
    with tempfile.TemporaryDirectory() as tmp:
        measured["06_rl"] = _peak(lambda: train_rl_arm(policy, rows, P.rl, P.sft.lora, tmp, "sas_history", 42,
                                                       "edit_rl", frozen_probe_policy=frozen, probe_cfg=P.probe,
                                                       max_steps=1), device, times, "06 EDIT-RL step")
    rows_out = []
    for stage, got in measured.items():
        e = est[stage]
        rows_out.append(dict(stage=stage, phase=e["phase"], estimate_gib=round(e["total"], 3),
                             measured_gib=None if device == "cpu" else round(got, 3),
                             error_pct=None if device == "cpu" or not got else round(100 * (e["total"] - got) / got, 1)))
    out = dict(model=f"Qwen3-8B architecture, {layers} layers, random bfloat16 weights", device=device,
               parameters=counts["total"], trainable=counts["trainable"], prompt_tokens=prompt_tokens,
               shapes=SHAPES, stages=rows_out, times=phase_times(P, counts, prompt_tokens, device, times),
               seconds=round(time.perf_counter() - t0, 1))
    echo(json.dumps(out["stages"]))
    return out


def phase_times(profile, counts: dict, prompt_tokens: int, device: str, measured: dict) -> dict:
    """Measured seconds per phase beside ``time_estimate``'s for the device's GPU: ratio = estimate / measured.
    On a CPU, or a GPU not in ``time_estimate.GPUS``, the H100 estimate is shown and nothing is compared."""
    from edit_lib.runner.time_estimate import GPUS, check_memory_seconds, compare_times, gpu_for_device
    key = None
    if device != "cpu":
        import torch
        key = gpu_for_device(torch.cuda.get_device_name(0))
    est = check_memory_seconds(profile, counts, prompt_tokens, GPUS[key or "h100"])
    return dict(gpu=key or "h100 (estimate only)", rows=compare_times(measured if key else {}, est))
