"""One SFT adapter or one GRPO / EDIT-RL / DGPO run under whatever process group `accelerate launch` / `torchrun`
set up (data-parallel over GPUs, DeepSpeed ZeRO-2, or gloo over CPU processes), with the global batch held equal.

    python -m edit_lib.runner.launch {sft,grpo,edit_rl,dgpo} --profile smoke --out DIR [--per-device-batch N]
    accelerate launch --config_file configs/accelerate/multi_gpu.yaml -m edit_lib.runner.launch sft ...
    python -m torch.distributed.run --nproc_per_node 2 -m edit_lib.runner.launch edit_rl ...   # CPU: gloo

The recipes are the suite's own (`train.sft.make_trainer`, App. B; `train.rl.make_rl_trainer`, Table 9; EDIT-RL
with a frozen probe copy of the initialisation, Sec. 2.3; DGPO through `baselines.dgpo.DGPOTrainer`); the split of
the global batch is `train.sft.batch_split` with WORLD_SIZE devices. Rank 0 writes `launch_summary.json` in
`--out` and saves the adapter there. (05 / 06 spread a run this way through `train.launched_run`.)

Details: book/departures.md, section "Multi-process launch (edit_lib/runner/launch.py)".
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
from pathlib import Path

SUMMARY_FILE = "launch_summary.json"
KINDS = ("sft", "grpo", "edit_rl", "dgpo")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m edit_lib.runner.launch", description=__doc__.split("\n\n")[0])
    p.add_argument("kind", choices=KINDS)
    p.add_argument("--profile", default="smoke", help="profile name (configs/<name>.yaml) or YAML path")
    p.add_argument("--out", required=True, help="output folder (adapter + launch_summary.json)")
    p.add_argument("--per-device-batch", type=int, default=0,
                   help="sequences (SFT) / completions (GRPO) per process per forward pass, an upper bound "
                        "(default: sft.per_device_batch_size / rl.per_device_batch_size or one group)")
    p.add_argument("--steps", type=int, default=0,
                   help="optimiser steps (default: the profile's sft.max_steps cap, 0 = the full epochs, / "
                        "rl.steps_for(dataset))")
    p.add_argument("--dataset", default="", help="dataset of the profile (default: sft.ablation_dataset / the "
                                                 "first of rl.datasets, else the first dataset)")
    p.add_argument("--pairs", default="", help="SFT: JSONL of {prompt, completion} rows to train on")
    p.add_argument("--init-adapter", default="", help="RL: SFT adapter merged into Base first (App. B)")
    p.add_argument("--beta-drift", type=float, default=None,
                   help="EDIT-RL: beta_drift (Eq. 6; default rl.shaping_for(dataset), e.g. 06's calibration)")
    p.add_argument("--gamma", type=float, default=None,
                   help="EDIT-RL: gamma_Phi (Eq. 7; default rl.shaping_for(dataset))")
    p.add_argument("--seed", type=int, default=None, help="default: run.seed")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="profile override (repeatable), e.g. --set sft.lora.r=4")
    p.add_argument("--cpu", action="store_true", help="train on CPU even when a GPU is visible")
    return p


def _dataset(profile, name: str):
    from edit_lib.data.registry import build_dataset
    specs = {s.name: s for s in profile.data.datasets}
    if name not in specs:
        raise SystemExit(f"launch: dataset {name!r} is not in the profile ({sorted(specs)})")
    return build_dataset(specs[name], seed=profile.run.seed, on_error=profile.data.on_error)


def gold_pairs(policy, ds, n: int) -> list[tuple[str, str]]:
    """`n` (policy grading input, gold final line 'Final mark: m*/M_q') pairs from the training split of `ds`, in
    order (cycled when the split is smaller): a deterministic SFT pool for smoke runs of the mechanics (the
    paper's pools are 05's, passed with --pairs)."""
    from edit_lib.prompts.grading import format_final_line
    train = ds.split("train")
    out = []
    for i in range(n):
        r = train[i % len(train)]
        q = ds.question(r)
        out.append((policy.grading_input(q, r.answer), format_final_line(int(r.gold), int(q.max_mark))))
    return out


def _probe_copy(profile, init_adapter: str | None):
    """EDIT-RL's frozen probe copy of the initialisation (Sec. 2.3), as 06 loads it (``rl_runs.load_init``)."""
    from edit_lib.train.rl_runs import load_init
    frozen = load_init(profile, init_adapter, frozen=True)
    if profile.probe.dtype == "float32":  # as rl_runs.run_one: cast once, every shaping read is float32
        frozen.model.float()
    return frozen


def _shaping(profile, ds_name: str, args) -> tuple[float, float]:
    """(beta_drift, gamma) of EDIT-RL (Eq. 6-7): --beta-drift / --gamma (06's calibration), else the profile's
    ``rl.shaping_for(dataset)``."""
    cfg = profile.rl.shaping_for(ds_name)
    beta = cfg.beta_drift if args.beta_drift is None else args.beta_drift
    gamma = cfg.gamma if args.gamma is None else args.gamma
    if beta < 0 or gamma < 0:
        raise SystemExit(f"launch: --beta-drift and --gamma must be >= 0, got {beta}, {gamma}")
    return float(beta), float(gamma)


def _read_pairs(path: str) -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return [(r["prompt"], r["completion"]) for r in rows]


def _gather(obj) -> list:
    """`obj` of every process, in rank order ([obj] without a process group)."""
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        return [obj]
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def _count_examples(trainer, counts: list[int]) -> None:
    """Wrap the SFT collator: every collated batch appends its example count (this process)."""
    collate = trainer.data_collator

    def counting(features, *a, **kw):
        counts.append(len(features))
        return collate(features, *a, **kw)

    trainer.data_collator = counting


def _count_generations(trainer, rounds: list[list[str]]) -> None:
    """Wrap GRPO's generation: every generation batch appends the response ids it completed (this process)."""
    generate = trainer._generate_and_score_completions

    def counting(inputs):
        if trainer.model.training:
            rounds.append([str(x.get("response_id", x["prompt"])) for x in inputs])
        return generate(inputs)

    trainer._generate_and_score_completions = counting


def main(argv: list[str] | None = None) -> dict:
    args = _parser().parse_args(argv)
    if args.kind != "edit_rl" and (args.beta_drift is not None or args.gamma is not None):
        raise SystemExit(f"launch: --beta-drift / --gamma are EDIT-RL's shaping values; {args.kind} has none")
    import torch
    from accelerate import PartialState

    from edit_lib.config import load_profile
    from edit_lib.model.policy import load_policy_from_profile
    from edit_lib.runner.keys import register_all
    register_all()

    overrides = list(args.overrides)
    threads = os.environ.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0 and not any(o.startswith("model.torch_threads=") for o in overrides):
        overrides.append(f"model.torch_threads={threads}")  # never more threads than the launcher gave a process
    profile = load_profile(args.profile, overrides)
    seed = profile.run.seed if args.seed is None else args.seed
    from edit_lib.model.hf import resolve_device
    # model.device decides, as in a one-process run (train.sft.trains_on_cpu); --cpu forces the CPU
    use_cpu = args.cpu or resolve_device(profile.model.device).type == "cpu" or not torch.cuda.is_available()
    state = PartialState(cpu=use_cpu)  # joins the launcher's process group (gloo on CPU); the trainers reuse it
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = [s.name for s in profile.data.datasets]
    with state.main_process_first():  # builds a missing micro grader once, not once per process
        init = args.init_adapter or None
        policy = load_policy_from_profile(profile, init_adapter=init)
        frozen = _probe_copy(profile, init) if args.kind == "edit_rl" else None

    counts: list[int] = []
    rounds: list[list[str]] = []
    if args.kind == "sft":
        import dataclasses

        from edit_lib.train.sft import make_trainer
        ds_name = args.dataset or profile.sft.ablation_dataset or names[0]
        cfg = profile.sft
        if args.per_device_batch:
            cfg = dataclasses.replace(cfg, per_device_batch_size=args.per_device_batch)
        if args.steps:
            cfg = dataclasses.replace(cfg, max_steps=args.steps)
        if args.pairs:  # sft.max_steps 0 (the paper profile): the full App. B epochs over the pool
            pairs = _read_pairs(args.pairs)
        else:  # just enough pairs for the step cap (2 steps when there is none)
            n = cfg.effective_batch_for(ds_name) * (cfg.max_steps or 2)
            pairs = gold_pairs(policy, _dataset(profile, ds_name), n)
        trainer = make_trainer(policy, pairs, cfg, out, dataset=ds_name, seed=seed, use_cpu=use_cpu, progress=False)
        _count_examples(trainer, counts)
        extra = {"n_pairs": len(pairs), "effective_batch": cfg.effective_batch_for(ds_name)}
    else:
        from edit_lib.train.rl import make_rl_trainer, rl_dataset, completions_per_step, prompts_per_step
        ds_name = args.dataset or (list(profile.rl.datasets) or names)[0]
        rows = rl_dataset(policy, _dataset(profile, ds_name))
        steps = args.steps or profile.rl.steps_for(ds_name)
        per_device = args.per_device_batch or profile.rl.per_device_batch_size or None
        shaping = {ds_name: _shaping(profile, ds_name, args)} if args.kind == "edit_rl" else None
        trainer_cls = None
        if args.kind == "dgpo":
            from edit_lib.baselines.dgpo import DGPOTrainer
            trainer_cls = DGPOTrainer
        arm = "edit_rl" if args.kind == "edit_rl" else "grpo"
        trainer = make_rl_trainer(policy, rows, profile.rl, profile.sft.lora, out, ds_name, seed, arm,
                                  frozen_probe_policy=frozen, probe_cfg=profile.probe, shaping=shaping,
                                  step_rule=profile.steps.rule, max_steps=steps, use_cpu=use_cpu, progress=False,
                                  per_device_batch_size=per_device, trainer_cls=trainer_cls)
        _count_generations(trainer, rounds)
        a = trainer.args
        extra = {"num_generations": a.num_generations, "generation_batch_size": a.generation_batch_size,
                 "steps_per_generation": a.steps_per_generation, "completions_per_step": completions_per_step(a),
                 "prompts_per_step": prompts_per_step(a), "n_prompts": len(rows), "arm": arm,
                 "trainer": type(trainer).__name__, "reward_functions": list(trainer.reward_func_names),
                 "shaping": list(shaping[ds_name]) if shaping else None}

    t0 = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - t0
    with warnings.catch_warnings():  # peft 0.21 calls a deprecated transformers 5 helper
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        trainer.save_model(str(out))  # the adapter, from the main process only

    import torch.distributed as dist
    a = trainer.args
    losses = [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]
    optimizer_steps = int(trainer.state.global_step)
    summary = {
        "kind": args.kind, "profile": profile.name, "dataset": ds_name, "seed": seed,
        "world_size": int(a.world_size), "backend": dist.get_backend() if dist.is_initialized() else None,
        "distributed_type": str(trainer.accelerator.distributed_type).split(".")[-1],
        "device": str(a.device), "per_device_batch": int(a.per_device_train_batch_size),
        "gradient_accumulation": int(a.gradient_accumulation_steps),
        "global_batch": int(a.per_device_train_batch_size * a.gradient_accumulation_steps * a.world_size),
        "optimizer_steps": optimizer_steps, "max_steps": int(a.max_steps), "losses": losses,
        "final_loss": losses[-1] if losses else None,
        "all_losses_finite": bool(losses) and all(math.isfinite(x) for x in losses), "seconds": seconds,
        "logged": sorted({k for e in trainer.state.log_history for k in e}), **extra}
    if args.kind == "sft":  # examples every process collated, summed over processes
        per_rank = _gather(sum(counts))
        summary.update(examples_per_rank=per_rank, examples_seen=sum(per_rank),
                       examples_per_step=sum(per_rank) / optimizer_steps if optimizer_steps else None)
    else:  # completions and distinct prompts of each generation round, over all processes
        by_rank = _gather(rounds)
        n_rounds = max(len(r) for r in by_rank)
        merged = [[rid for r in by_rank if i < len(r) for rid in r[i]] for i in range(n_rounds)]
        summary.update(generation_rounds=n_rounds, completions_per_rank=[sum(map(len, r)) for r in by_rank],
                       completions_per_round=[len(m) for m in merged],
                       prompts_per_round=[len(set(m)) for m in merged])
    if state.is_main_process:
        (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=2))
        print(json.dumps({k: v for k, v in summary.items() if k != "losses"}), flush=True)
    state.wait_for_everyone()
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)
