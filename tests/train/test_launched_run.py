"""Multi-process training (edit_lib/runner/launch.py, configs/accelerate/, edit_lib/train/launched_run.py): the
smoke SFT and GRPO steps run as two CPU processes over gloo, under torchrun and under `accelerate launch` with
configs/accelerate/cpu_2proc.yaml, the EDIT-RL and DGPO steps under torchrun, and keep what the single-process run
has: the global batch (the per-process batch halved), the optimiser-step count and finite losses; 05 and 06 spread
one run over two processes when sft.processes / rl.processes ask. What every step really saw is counted on every process
by the launcher (SFT: examples collated; GRPO: completions and distinct prompts per generation round).

The GPU configs (multi_gpu.yaml, deepspeed_zero2.yaml) cannot run here; they are checked through accelerate's own
launch-argument validation. Each launch is a subprocess with OMP_NUM_THREADS=1 and HF_HUB_OFFLINE=1; the micro
grader is built (once, into the suite's cache) before any launch."""
import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edit_lib.config import ModelConfig, load_profile
from edit_lib.data.registry import build_dataset
from edit_lib.embedded.teacher import teacher_grade
from edit_lib.model.policy import Policy, load_policy

ROOT = Path(__file__).resolve().parents[2]
ACCEL = ROOT / "configs" / "accelerate"
STEPS = 2
PER_DEVICE = 4  # the single-process batch; batch_split gives each of two processes half of it
TIMEOUT = 300
LAUNCHERS = {
    "single": [],
    "torchrun": ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"],
    "accelerate": ["-m", "accelerate.commands.launch", "--config_file", str(ACCEL / "cpu_2proc.yaml")],
}
EXTRA = {"edit_rl": ["--beta-drift", "0.5", "--gamma", "0.05"]}  # as 06 passes its calibrated values
TEACHER_DATASET = "synth_sas"  # a world the teacher can grade (the smoke's ablation dataset is free text)


def _env() -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):  # never inherit a process group
        env.pop(k, None)
    return env


@pytest.fixture(scope="module")
def sft_pairs(tmp_path_factory) -> Path:
    """Teacher pairs (as tests/train/test_sft.py builds them) on the smoke profile's SFT dataset, as a JSONL for --pairs;
    building the policy here also builds the micro grader once, before any launch."""
    profile = load_profile("smoke")
    ds_name = TEACHER_DATASET
    ds = build_dataset(next(s for s in profile.data.datasets if s.name == ds_name), seed=profile.run.seed)
    model, tok, kind = load_policy("micro", ModelConfig(name_or_path="micro", torch_threads=1))
    pol = Policy(model=model, tokenizer=tok, kind=kind, name="micro")
    train, rng = ds.split("train"), np.random.default_rng(0)
    n = profile.sft.effective_batch_for(ds_name) * STEPS
    rows = [{"prompt": pol.grading_input(ds.question(r), r.answer),
             "completion": teacher_grade(ds.question(r), r, rng, None).completion} for r in train[:n]]
    assert len(rows) == n
    path = tmp_path_factory.mktemp("pairs") / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def launch(tmp_path_factory, sft_pairs):
    """launch(kind, launcher) -> the rank-0 summary of that run (each run once per module)."""
    done = {}

    def run(kind: str, launcher: str) -> dict:
        if (kind, launcher) not in done:
            out = tmp_path_factory.mktemp(f"{kind}_{launcher}")
            cmd = [sys.executable, *LAUNCHERS[launcher], "-m", "edit_lib.runner.launch", kind, "--profile", "smoke",
                   "--out", str(out), "--per-device-batch", str(PER_DEVICE), "--steps", str(STEPS)]
            if kind == "sft":
                cmd += ["--pairs", str(sft_pairs), "--dataset", TEACHER_DATASET]
            cmd += EXTRA.get(kind, [])
            p = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=TIMEOUT)
            assert p.returncode == 0, f"{' '.join(cmd)} failed ({p.returncode}):\n{(p.stdout + p.stderr)[-4000:]}"
            done[(kind, launcher)] = json.loads((out / "launch_summary.json").read_text())
            assert (out / "adapter_config.json").is_file()
        return done[(kind, launcher)]

    return run


def _common(single: dict, multi: dict) -> None:
    assert single["world_size"] == 1 and single["distributed_type"] == "NO"
    assert multi["world_size"] == 2 and multi["backend"] == "gloo" and multi["distributed_type"] == "MULTI_CPU"
    # global batch held equal: per-process batch halved, same accumulation
    assert multi["global_batch"] == single["global_batch"]
    assert multi["per_device_batch"] * 2 == single["per_device_batch"] == PER_DEVICE
    assert multi["gradient_accumulation"] == single["gradient_accumulation"]
    # same optimiser steps, one finite loss per step
    for s in (single, multi):
        assert s["optimizer_steps"] == s["max_steps"] == STEPS
        assert len(s["losses"]) == STEPS and s["all_losses_finite"]
        assert all(math.isfinite(x) for x in s["losses"])


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["torchrun", "accelerate"])
def test_sft_two_processes_match_one(launch, launcher):
    single, multi = launch("sft", "single"), launch("sft", launcher)
    _common(single, multi)
    assert single["global_batch"] == single["effective_batch"] == 4
    # what the processes really collated: half of every global batch each, the same total
    assert single["examples_per_rank"] == [STEPS * 4]
    assert multi["examples_per_rank"] == [STEPS * 2, STEPS * 2]
    assert multi["examples_per_step"] == single["examples_per_step"] == single["global_batch"]
    # data-parallel = one big batch: the same examples per step give the same loss (the LoRA B matrices start at 0,
    # so dropout cannot tell the runs apart before the first update, and barely after it)
    assert multi["losses"] == pytest.approx(single["losses"], rel=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["torchrun", "accelerate"])
def test_grpo_two_processes_match_one(launch, launcher):
    single, multi = launch("grpo", "single"), launch("grpo", launcher)
    _common(single, multi)
    _same_rounds(single, multi)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["edit_rl", "dgpo"])
def test_edit_rl_and_dgpo_two_processes_match_one(launch, kind):
    """EDIT-RL (a frozen probe copy in every process, --beta-drift / --gamma as 06's calibration passes them) and
    DGPO (DGPOTrainer) over two gloo processes keep the one-process batch, steps and completions per round."""
    single, multi = launch(kind, "single"), launch(kind, "torchrun")
    _common(single, multi)
    _same_rounds(single, multi)
    for s in (single, multi):
        if kind == "edit_rl":
            assert s["arm"] == "edit_rl" and s["trainer"] == "GRPOTrainer"
            assert s["reward_functions"][-1] == "belief_shaping" and len(s["reward_functions"]) == 2
            assert s["shaping"] == [0.5, 0.05]
            assert any("shaping_fire_rate" in k for k in s["logged"]), s["logged"]
        else:
            assert s["arm"] == "grpo" and s["trainer"] == "DGPOTrainer" and len(s["reward_functions"]) == 1
            assert any(k.startswith("dgpo/") for k in s["logged"]), s["logged"]


def _same_rounds(single: dict, multi: dict) -> None:
    """GRPO-family runs: one generation round per optimiser step of the profile's completions, split evenly."""
    rl = load_profile("smoke").rl
    per_step = rl.rollouts_per_prompt * rl.prompts_per_step  # 2 completions x 2 prompts (TRL 1.16 semantics)
    for s in (single, multi):
        assert s["num_generations"] == rl.rollouts_per_prompt
        assert s["completions_per_step"] == s["generation_batch_size"] == s["global_batch"] == per_step
        assert s["prompts_per_step"] == rl.prompts_per_step
        # one generation round per optimiser step, each of 2 prompts x 2 completions over all processes
        assert s["generation_rounds"] == STEPS
        assert s["completions_per_round"] == [per_step] * STEPS
        assert s["prompts_per_round"] == [rl.prompts_per_step] * STEPS
    assert single["completions_per_rank"] == [STEPS * per_step]
    assert multi["completions_per_rank"] == [STEPS * per_step // 2] * 2


def test_world_size_splits_the_profile_batch(monkeypatch):
    """Under a launcher (WORLD_SIZE=2), on CPU too, the suite's batch split halves the per-device batch of the
    profile (the TRL configs themselves are built only inside the launched processes: building one here would
    join a process group)."""
    from edit_lib.train.sft import batch_split, n_devices
    p = load_profile("smoke")
    sft_batch, grpo_batch = p.sft.effective_batch_for("synth_sas"), p.rl.rollouts_per_prompt * p.rl.prompts_per_step
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert n_devices(use_cpu=True) == 1
    assert batch_split(sft_batch, PER_DEVICE, n_devices(True)) == batch_split(grpo_batch, PER_DEVICE, 1) == (4, 1)
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert n_devices(use_cpu=True) == n_devices(use_cpu=False) == 2
    assert batch_split(sft_batch, PER_DEVICE, n_devices(True)) == batch_split(grpo_batch, PER_DEVICE, 2) == (2, 1)


@pytest.mark.parametrize("name, kind, processes, precision", [
    ("multi_gpu", "MULTI_GPU", 8, "bf16"), ("deepspeed_zero2", "DEEPSPEED", 8, "bf16"),
    ("cpu_2proc", "MULTI_GPU", 2, "no")])
def test_accelerate_configs_validate(name, kind, processes, precision):
    """accelerate 1.x reads each config as `accelerate launch` would (the GPU ones cannot run here)."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    args = launch_command_parser().parse_args(["--config_file", str(ACCEL / f"{name}.yaml"), "-m",
                                               "edit_lib.runner.launch", "sft", "--out", "unused"])
    args, defaults, _ = _validate_launch_command(args)
    assert str(defaults.distributed_type).split(".")[-1] == kind
    assert (args.num_processes, args.mixed_precision) == (processes, precision)
    assert args.use_deepspeed == (kind == "DEEPSPEED") and args.multi_gpu == (kind == "MULTI_GPU")
    if name == "deepspeed_zero2":
        assert int(args.zero_stage) == 2
    assert defaults.use_cpu == (name == "cpu_2proc")


def _stage_profile(stage: str, overrides: list[str]):
    """The smoke profile as a stage's notebook passes it (a ProfileView, pickled into the job file)."""
    from edit_lib.runner.keys import STAGES, ProfileView, register_all
    register_all()
    return ProfileView(load_profile("smoke", overrides), stage, STAGES[stage].sections)


def _spread_checks(out: Path, summary: dict) -> None:
    """A run spread over two processes: world_size 2 over gloo in its summary, one adapter (rank 0's), the
    other rank's scratch folder and the job file gone, the processes' output kept in launch.log."""
    from edit_lib.train import launched_run
    assert summary["world_size"] == 2 and summary["backend"] == "gloo" and summary["device_per_process"] == "cpu"
    assert [p.parent for p in out.rglob("adapter_config.json")] == [out]
    assert not list(out.glob(".rank*")) and not (out / launched_run.JOB_FILE).exists()
    assert (out / launched_run.LOG_FILE).is_file()


@pytest.mark.slow
def test_06_spreads_a_run_over_two_processes(tmp_path, monkeypatch, capsys):
    """rl.processes = 2: run_plan trains an EDIT-RL run (frozen probe copy in each process) through torchrun and
    launched_run, with ops.resume_every turned off and said so; a second call reuses it."""
    from edit_lib.data.synthetic import WorldConfig, generate_world
    from edit_lib.train import rl_runs
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    world = generate_world(WorldConfig(shape="sas_like", n_questions=3, answers_per_question=2, ood_questions=0,
                                       seed=1))
    P = _stage_profile("06_rl", ["rl.workers=1", "rl.processes=2", "rl.steps=1", "rl.checkpoint_every=0",
                                 "rl.decoding.max_new_tokens=24", "rl.datasets=[]", "ops.resume_every=1"])
    plan = rl_runs.plan_runs(P, {world.name: world}, {}, tmp_path)
    plan = plan[plan.system == "base_edit_rl"]
    out = rl_runs.run_plan(P, plan, {world.name: world}, {("base", world.name): (0.5, 0.05)})
    (outcome,) = out.values()
    assert outcome.status == "trained" and outcome.summary["steps"] == 1 and outcome.summary["arm"] == "edit_rl"
    assert outcome.summary["reward_functions"] == ["outcome_reward", "belief_shaping"]
    _spread_checks(Path(plan.out_dir.item()), outcome.summary)
    assert "ops.resume_every=1 is off for a run over 2 processes" in capsys.readouterr().out
    assert {o.status for o in rl_runs.run_plan(P, plan, {world.name: world}, {("base", world.name): (0.5, 0.05)})
            .values()} == {"reused"}
    with pytest.raises(ValueError, match="workers=2 and processes=2: set one of them"):
        rl_runs.run_plan(P.replace(rl=dataclasses.replace(P.rl, workers=2)), plan, {}, {})


@pytest.mark.slow
def test_05_spreads_an_sft_run_over_two_processes(tmp_path, monkeypatch, sft_pairs):
    """sft.processes = 2: train_all trains a pool through torchrun and launched_run, 2 steps of the global batch."""
    from edit_lib.train import sft_runs
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    P = _stage_profile("05_edit_sft", ["sft.processes=2"])
    rows = [json.loads(x) for x in sft_pairs.read_text().splitlines()]
    runs = sft_runs.train_all({("edit_sft", TEACHER_DATASET): [(r["prompt"], r["completion"]) for r in rows]}, P,
                              tmp_path)
    out = tmp_path / "edit_sft" / TEACHER_DATASET
    assert runs.summary.status.tolist() == ["trained"] and runs.summary.steps.tolist() == [STEPS]
    summary = json.loads((out / "sft_summary.json").read_text())
    assert summary["effective_batch"] == 4 and summary["n_pairs"] == len(rows) == 4 * STEPS
    _spread_checks(out, summary)


def test_launcher_takes_edit_rl_shaping_from_the_profile_or_the_flags():
    """EDIT-RL's (beta_drift, gamma): rl.shaping_for(dataset) unless --beta-drift / --gamma give 06's values; the
    flags are refused for an arm without shaping."""
    from edit_lib.config import ShapingValues
    from edit_lib.runner import launch as L
    p = load_profile("smoke")
    p = dataclasses.replace(p, rl=dataclasses.replace(p.rl, shaping_by_dataset={"synth_sas": ShapingValues(0.25, 0.3)}))
    parse = L._parser().parse_args
    assert L._shaping(p, "synth_sas", parse(["edit_rl", "--out", "x"])) == (0.25, 0.3)
    assert L._shaping(p, "other", parse(["edit_rl", "--out", "x"])) == (p.rl.shaping.beta_drift, p.rl.shaping.gamma)
    assert L._shaping(p, "synth_sas", parse(["edit_rl", "--out", "x", "--gamma", "0.05"])) == (0.25, 0.05)
    with pytest.raises(SystemExit, match="dgpo has none"):
        L.main(["dgpo", "--out", "x", "--beta-drift", "0.5"])
