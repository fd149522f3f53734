"""GRPO and EDIT-RL trainers on TRL's ``GRPOTrainer`` (Sec. 2.3; App. B "RL configuration and checkpoint
selection"; Table 9), and the one RL recipe every RL method (GRPO, DGPO, InT-RL, EDIT-RL) is built from.

The two arms share everything but one reward function: GRPO the distance-aware outcome reward r_out (Eq. 5)
only; EDIT-RL r_out plus gamma_Phi * r_shape (Eq. 6), the belief-guided shaping penalty read by the posterior
probe (Eq. 1) of a FROZEN copy of the arm's initialisation; TRL sums the two, which is Eq. 7. Both start from
``policy`` (a fresh LoRA over the merged initialisation, ``build_rl_lora``, with the SFT recipe) and save the
final-step adapter (App. B: no checkpoint selection); DGPO plugs in via ``trainer_cls``.

``build_grpo_config`` sets every value Table 9 fixes, since TRL's ``GRPOConfig`` defaults differ silently (beta
0.0, loss 'dapo', 512 completion tokens, lr 1e-6 linear, no warm-up): lr 5e-6, cosine, 3% warm-up, beta_KL 0.02
towards the initialisation (the adapter disabled), 8 rollouts x 4 prompts per optimiser step (32 completions; TRL's
``per_device_train_batch_size`` counts completions), temperature 1.0, 1,024 tokens, the horizon, the final step.

Departures: book/departures.md, section "GRPO and EDIT-RL trainers (edit_lib/train/rl.py)".
"""
from __future__ import annotations

import dataclasses
import json
import math
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import torch

from edit_lib.config import LoraConfig, OpsConfig, ProbeConfig, RLConfig
from edit_lib.data.schema import Dataset
from edit_lib.model.hf import count_parameters, merge_lora
from edit_lib.model.lean_decode import lean_rollouts
from edit_lib.model.policy import Policy
from edit_lib.train.rewards import make_outcome_reward, make_shaping_reward
from edit_lib.train.sft import batch_split, n_devices, point_tensorboard, trains_on_cpu



# GRPO as the paper uses it (Sec. 2.3, App. B; Shao et al. 2024), set here rather than left to TRL's defaults, which a
# minor release may move: Eq. 7's reward (r_out + gamma * r_shape, one function each) summed with weight 1 and
# standardised within each group; the PPO-clipped ratio at 0.2 on both sides, per token; sampling as
# ``rl.decoding`` says (Table 9: T = 1.0 over the whole vocabulary, top_p 1 and top_k 0 set explicitly in
# ``build_grpo_config``); truncated completions kept in the loss (scored r_out = 0 when they carry no mark, Eq. 5);
# dropout as the model and adapter define it in the loss's forwards (rollouts are sampled without it:
# ``rollouts_in_eval_mode``).
GRPO_OBJECTIVE = dict(scale_rewards="group", multi_objective_aggregation="sum_then_normalize", epsilon=0.2,
                      epsilon_high=0.2, importance_sampling_level="token", top_entropy_quantile=1.0, min_p=None,
                      repetition_penalty=1.0, mask_truncated_completions=False, disable_dropout=False)


def build_rl_lora(lora: LoraConfig):
    """The fresh RL adapter: the SFT LoRA recipe (App. B; Table 9 "LoRA as in SFT": r = 64, alpha = 128,
    q/k/v/o/gate/up/down) as a peft config, for `GRPOTrainer(peft_config=...)`."""
    from edit_lib.model.hf import lora_to_peft
    if lora.r < 1 or not lora.target_modules:
        raise ValueError(f"rl lora: need r >= 1 and at least one target module, got r={lora.r}, "
                         f"target_modules={lora.target_modules}")
    return lora_to_peft(lora)


def build_grpo_config(rl: RLConfig, lora: LoraConfig, out_dir: str | Path, dataset: str, seed: int,
                      use_cpu: bool | None = None, *, per_device_batch_size: int | None = None,
                      progress: bool = True, vllm_gpu_memory_utilization: float | None = None,
                      ops: OpsConfig | None = None, n_rewards: int = 1):
    """TRL `GRPOConfig` of one RL run (App. B; Table 9), every paper value set explicitly from `rl`:
    lr `rl.learning_rate` (5e-6), `rl.lr_scheduler` (cosine), warm-up `rl.warmup_ratio` (3%; transformers 5 reads
    a warmup_steps below 1 as a share of the steps), beta `rl.beta_kl` (0.02), `rl.rollouts_per_prompt` (8)
    generations x `rl.prompts_per_step` (4) prompts per optimiser step, temperature `rl.decoding.temperature` (1.0),
    `rl.decoding.max_new_tokens` (1,024), loss_type 'grpo', max_steps `rl.steps_for(dataset)` (200 SAS, 500
    Private-Science), `seed`; the objective of GRPO itself (`GRPO_OBJECTIVE`) and a weight of 1 for each of the
    `n_rewards` reward functions (Eq. 7: r = r_out + gamma * r_shape, the weight gamma inside r_shape).

    `lora` is the adapter recipe the run trains (`build_rl_lora`; checked here so a run cannot start without
    one). `per_device_batch_size` (completions per forward pass; suite's choice, memory only) defaults to one
    group (`rl.rollouts_per_prompt`); gradient accumulation makes up the 32 completions. CPU (no GPU, or
    `use_cpu=True`): use_cpu, bf16 off, gradient checkpointing off. Always: the caller saves the final-step
    adapter (the only one kept), a log line every optimiser step.

    `ops` (the profile's `ops` section; default: none, 0) changes no number of the run: `ops.report_to`
    ('none' or 'tensorboard'; the trainer factory points TensorBoard at its folder) and, with `ops.resume_every`
    > 0, a resumable state every that many steps in `out_dir/resume` (`sft.resume_args`).

    `vllm_gpu_memory_utilization` (a share of GPU memory; None: HF generation): rollouts by vLLM co-located
    with training (App. B: "the rollout engine co-located"), TRL's `use_vllm` + `vllm_mode='colocate'`."""
    from trl import GRPOConfig

    from edit_lib.train.sft import resume_args
    ops = ops or OpsConfig()
    if not 0.0 <= rl.warmup_ratio < 1.0:  # >= 1 would be read as a step count
        raise ValueError(f"rl.warmup_ratio must lie in [0, 1), got {rl.warmup_ratio}")
    if rl.rollouts_per_prompt < 2:
        raise ValueError(f"rl.rollouts_per_prompt must be >= 2 (group-relative advantages), got "
                         f"{rl.rollouts_per_prompt}")
    if rl.prompts_per_step < 1 or rl.decoding.max_new_tokens < 1 or rl.decoding.temperature <= 0:
        raise ValueError(f"rl: prompts_per_step ({rl.prompts_per_step}), max_completion_tokens "
                         f"({rl.decoding.max_new_tokens}) and temperature ({rl.decoding.temperature}) must be positive")
    steps = rl.steps_for(dataset)
    if steps < 1:
        raise ValueError(f"rl.steps_for({dataset!r}) must be >= 1, got {steps}")
    build_rl_lora(lora)  # fail early on an unusable adapter recipe
    use_cpu = (not torch.cuda.is_available()) if use_cpu is None else use_cpu
    completions = rl.rollouts_per_prompt * rl.prompts_per_step
    per_device, accum = batch_split(completions, per_device_batch_size or rl.rollouts_per_prompt,
                                    n_devices(use_cpu))
    bf16 = (not use_cpu) and torch.cuda.is_bf16_supported()
    vllm = {}
    if vllm_gpu_memory_utilization is not None:
        if use_cpu:
            raise ValueError("rl: vLLM generation needs a GPU (model.generation_backend=hf on CPU)")
        if not 0.0 < vllm_gpu_memory_utilization < 1.0:
            raise ValueError(f"rl: vllm_gpu_memory_utilization must lie in (0, 1), got {vllm_gpu_memory_utilization}")
        vllm = dict(use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=vllm_gpu_memory_utilization)
    return GRPOConfig(
        # Table 9 recipe
        learning_rate=rl.learning_rate, lr_scheduler_type=rl.lr_scheduler, warmup_steps=rl.warmup_ratio,
        beta=rl.beta_kl, num_generations=rl.rollouts_per_prompt, temperature=rl.decoding.temperature,
        top_p=rl.decoding.top_p, top_k=rl.decoding.top_k, max_completion_length=rl.decoding.max_new_tokens,
        loss_type="grpo", max_steps=steps,
        # 32 completions per optimiser step, generated once per step (steps_per_generation = accumulation)
        per_device_train_batch_size=per_device, gradient_accumulation_steps=accum, steps_per_generation=accum,
        num_iterations=1, reward_weights=[1.0] * n_rewards, **GRPO_OBJECTIVE,
        # device and precision (gradient checkpointing: the transformers 5 name)
        use_cpu=use_cpu, bf16=bf16, fp16=False, activation_checkpointing=not use_cpu,
        # bookkeeping: seed, every step logged; ops: where it reports, resumable states (else none, final step only)
        seed=seed, data_seed=seed, eval_strategy="no", report_to=ops.report_to,
        **resume_args(out_dir, ops.resume_every),
        logging_strategy="steps", logging_steps=1, disable_tqdm=not progress, dataloader_num_workers=0, **vllm)


def completions_per_step(args) -> int:
    """Completions one optimiser step of `args` (a GRPOConfig) sees: per-device batch x processes x
    accumulation (TRL 1.16 semantics)."""
    return args.per_device_train_batch_size * args.world_size * args.gradient_accumulation_steps


def prompts_per_step(args) -> int:
    """Prompts per optimiser step of `args`: completions per step / generations per prompt (Table 9: 4)."""
    n = completions_per_step(args)
    if n % args.num_generations or args.generation_batch_size != n:
        raise ValueError(f"rl: {n} completions per step do not form whole groups of {args.num_generations} in one "
                         f"generation batch ({args.generation_batch_size})")
    return n // args.num_generations


# ---------------------------------------------------------------- the trainers

ARMS = ("grpo", "edit_rl")
SUMMARY_FILE = "rl_summary.json"
COLUMNS = ("prompt", "gold", "max_mark", "dataset", "response_id")


@dataclass
class RLResult:
    """What one RL run produced: the final-step adapter, the per-step log, and its cost."""
    arm: str
    adapter_dir: Path
    dataset: str
    seed: int
    steps: int = 0  # optimiser steps run
    paper_steps: int = 0  # the horizon the profile fixes (Table 9: 200 SAS, 500 Private-Science)
    seconds: float = 0.0  # of this process: from `resumed_from_step` when the run resumed
    log_history: list[dict] = field(default_factory=list)  # trainer.state.log_history, one entry per step
    trainable_parameters: int = 0
    policy: Policy | None = None  # the trained policy in memory (peft model over the merged init, eval mode)
    resumed_from_step: int | None = None  # the saved state this run resumed from (ops.resume_every), else None

    @property
    def seconds_per_step(self) -> float:
        run = self.steps - (self.resumed_from_step or 0)  # the steps `seconds` timed
        return self.seconds / run if run else math.nan

    def summary(self) -> dict:
        """JSON-ready summary (written next to the adapter as rl_summary.json)."""
        return {"arm": self.arm, "adapter_dir": str(self.adapter_dir), "dataset": self.dataset, "seed": self.seed,
                "steps": self.steps, "paper_steps": self.paper_steps, "seconds": self.seconds,
                "seconds_per_step": self.seconds_per_step, "trainable_parameters": self.trainable_parameters,
                "resumed_from_step": self.resumed_from_step,
                "log_history": self.log_history}


def rl_dataset(policy: Policy, ds: Dataset, split: str = "train"):
    """The RL prompt set (Sec. 2.3) as a `datasets.Dataset`: one row per response of `split`, with the policy
    input text `prompt` (`Policy.grading_input`), `gold` m*, `max_mark` M_q (Eq. 5-6), `dataset` (selects
    beta_drift / gamma, Table 9 lower block) and `response_id`."""
    from datasets import Dataset as HFDataset
    responses = ds.split(split)
    if not responses:
        raise ValueError(f"rl_dataset: dataset {ds.name!r} has no responses in split {split!r}")
    rows = []
    for r in responses:
        q = ds.question(r)
        rows.append({"prompt": policy.grading_input(q, r.answer), "gold": int(r.gold), "max_mark": int(q.max_mark),
                     "dataset": ds.name, "response_id": r.id})
    return HFDataset.from_list(rows)


def _check_rows(rows, dataset_name: str):
    """The rows as a `datasets.Dataset`, every column present and every row's dataset = `dataset_name`."""
    from datasets import Dataset as HFDataset
    if not isinstance(rows, HFDataset):
        rows = HFDataset.from_list(list(rows))
    if len(rows) == 0:
        raise ValueError("rl: no training rows")
    missing = [c for c in COLUMNS[:4] if c not in rows.column_names]
    if missing:
        raise ValueError(f"rl rows: columns {missing} missing (have {rows.column_names}); build them with "
                         f"edit_lib.train.rl.rl_dataset")
    for i, (p, g, mm, d) in enumerate(zip(rows["prompt"], rows["gold"], rows["max_mark"], rows["dataset"])):
        if not isinstance(p, str) or not p:
            raise ValueError(f"rl rows row {i}, field 'prompt': expected the policy input text, got {p!r:.60}")
        if mm is None or mm <= 0 or g is None or not 0 <= g <= mm:
            raise ValueError(f"rl rows row {i}, fields 'gold'/'max_mark': need 0 <= gold <= max_mark, max_mark > 0, "
                             f"got gold={g!r}, max_mark={mm!r}")
        if d != dataset_name:
            raise ValueError(f"rl rows row {i}, field 'dataset': {d!r}, but this run is on {dataset_name!r} (one "
                             f"run per dataset, App. B)")
    return rows


def rl_reward_functions(arm: str, dataset_name: str, rl_cfg: RLConfig, frozen_probe_policy: Policy | None = None,
                        probe_cfg: ProbeConfig | None = None, shaping=None, step_rule: str = "auto",
                        trained_model=None) -> list:
    """TRL reward functions of an arm (Sec. 2.3): [r_out] (Eq. 5) for 'grpo'; [r_out, gamma_Phi * r_shape]
    (Eq. 5-7) for 'edit_rl', the shaping from `frozen_probe_policy` (a frozen copy of the initialisation, never
    `trained_model`) at `probe_cfg` (default `ProbeConfig()`: temperature 0.7, App. B) with `shaping` (a
    {dataset: (beta_drift, gamma)} map; default `rl_cfg.shaping_for(dataset_name)`, Table 9 lower block)."""
    if arm not in ARMS:
        raise ValueError(f"rl: arm must be one of {ARMS}, got {arm!r}")
    funcs = [make_outcome_reward()]
    if arm == "grpo":
        return funcs
    if frozen_probe_policy is None:
        raise ValueError("rl: arm 'edit_rl' needs frozen_probe_policy, a frozen copy of the arm's initialisation "
                         "(Sec. 2.3)")
    if trained_model is not None and frozen_probe_policy.model is trained_model:
        raise ValueError("rl: frozen_probe_policy.model is the model being trained; load a separate frozen copy of "
                         "the initialisation (Sec. 2.3)")
    frozen_probe_policy.model.requires_grad_(False)
    shaping = shaping if shaping is not None else {dataset_name: rl_cfg.shaping_for(dataset_name)}
    funcs.append(make_shaping_reward(frozen_probe_policy, probe_cfg or ProbeConfig(), shaping, step_rule))
    return funcs


def make_rl_trainer(policy: Policy, dataset_rows, rl_cfg: RLConfig, lora_cfg: LoraConfig, out_dir: str | Path,
                    dataset_name: str, seed: int, arm: str, frozen_probe_policy: Policy | None = None,
                    probe_cfg: ProbeConfig | None = None, shaping=None, step_rule: str = "auto",
                    max_steps: int | None = None, callbacks: Sequence = (), trainer_cls=None,
                    use_cpu: bool | None = None, progress: bool = False, per_device_batch_size: int | None = None,
                    ops: OpsConfig | None = None, log_dir: str | Path | None = None):
    """The `GRPOTrainer` (or `trainer_cls`, e.g. DGPO's subclass) of one arm (Sec. 2.3; App. B; Table 9): merged
    initialisation, fresh LoRA (`build_rl_lora`), `build_grpo_config` recipe with the horizon optionally cut to
    `max_steps`, the arm's reward functions (`rl_reward_functions`), on the policy's device unless `use_cpu` says
    otherwise (`sft.trains_on_cpu`). `policy.model` is merged and then wrapped
    in place by peft. `ops`: the profile's `ops` section (`build_grpo_config`); TensorBoard writes to `log_dir`.
    Rollouts by HF generate are sampled in eval mode (`rollouts_in_eval_mode`), by the lean loop with
    ``model.lean_decoding``."""
    from transformers import PrinterCallback, set_seed
    from trl import GRPOTrainer
    rows = _check_rows(dataset_rows, dataset_name)
    if max_steps is not None:
        if max_steps < 1:
            raise ValueError(f"rl: max_steps must be >= 1, got {max_steps}")
        rl_cfg = dataclasses.replace(rl_cfg, steps_by_dataset={**rl_cfg.steps_by_dataset, dataset_name: max_steps})
    engine = getattr(policy, "engine", None)  # a vLLM policy generates its GRPO rollouts with vLLM too
    use_cpu = trains_on_cpu(policy.model, use_cpu)  # before the merge below, as the policy was loaded
    model = merge_lora(policy.model)  # App. B: RL over the merged initialisation (also the KL reference)
    funcs = rl_reward_functions(arm, dataset_name, rl_cfg, frozen_probe_policy, probe_cfg, shaping, step_rule,
                                trained_model=model)
    args = build_grpo_config(rl_cfg, lora_cfg, out_dir, dataset_name, seed, progress=progress, use_cpu=use_cpu,
                             per_device_batch_size=per_device_batch_size,
                             vllm_gpu_memory_utilization=getattr(engine, "gpu_memory_utilization", None), ops=ops,
                             n_rewards=len(funcs))
    set_seed(seed)  # the fresh adapter's initialisation
    cls = trainer_cls or GRPOTrainer
    with warnings.catch_warnings():  # peft 0.21 calls a deprecated transformers 5 helper
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        trainer = cls(model=model, reward_funcs=funcs, args=args, train_dataset=rows,
                      processing_class=policy.tokenizer, peft_config=build_rl_lora(lora_cfg),
                      callbacks=list(callbacks) or None)
    if not progress:
        trainer.remove_callback(PrinterCallback)
    if getattr(policy, "lean_decoding", False) and engine is None:  # the same rollouts, decoded by the lean loop
        lean_rollouts(trainer.model)
    if not args.use_vllm:  # TRL samples by transformers generate: without dropout, as vLLM does
        rollouts_in_eval_mode(trainer.model)
    point_tensorboard(trainer, log_dir, out_dir)
    return trainer


def rollouts_in_eval_mode(model) -> None:
    """GRPO's rollouts (Sec. 2.3) sampled from the policy without dropout, as App. B's co-located rollout engine
    (vLLM: TRL's ``use_vllm``, this suite's GPU path) and TRL's own batched generation sample them: ``model`` (the
    trainer's PEFT model) gets a ``generate`` that runs in eval mode and restores the mode it found. TRL's plain
    HF path would sample in training mode, the LoRA dropout (`sft.lora.dropout`) drawing masks; the loss's forwards
    keep it (``GRPO_OBJECTIVE``'s ``disable_dropout=False``). Without dropout draws a rollout batch shares its
    prompt and drops its finished rows in the lean loop (``model.lean_decode``)."""
    inner = model.generate

    def generate(*args, **kwargs):
        training = model.training
        model.eval()
        try:
            return inner(*args, **kwargs)
        finally:
            model.train(training)

    model.generate = generate


def train_rl_arm(policy: Policy, dataset_rows, rl_cfg: RLConfig, lora_cfg: LoraConfig, out_dir: str | Path,
                 dataset_name: str, seed: int, arm: str, frozen_probe_policy: Policy | None = None,
                 probe_cfg: ProbeConfig | None = None, shaping=None, step_rule: str = "auto",
                 max_steps: int | None = None, callbacks: Sequence = (), *, trainer_cls=None,
                 use_cpu: bool | None = None, progress: bool = False,
                 per_device_batch_size: int | None = None, ops: OpsConfig | None = None,
                 log_dir: str | Path | None = None) -> RLResult:
    """Train one RL arm (Sec. 2.3; App. B; Table 9): 'grpo' (outcome reward, Eq. 5) or 'edit_rl' (Eq. 5 plus the
    frozen-probe shaping of Eq. 6, summed as Eq. 7), from `policy` (merged if it carries an adapter), with a fresh
    LoRA over it and the Table 9 recipe (`max_steps` shortens the horizon for smoke/demo; the paper's horizon is
    recorded too). `rl_cfg`/`lora_cfg` are the profile's `rl` and `sft.lora` sections; `step_rule` the profile's
    `steps.rule`; `seed` the run seed (Table 4: 42, 43, 44).

    Saves the final-step adapter (App. B: no checkpoint selection) in `out_dir` with `rl_summary.json` (arm,
    steps, seconds, TRL's per-step log history: reward means per function, `parse_failure_rate`, and for
    EDIT-RL `shaping_fire_rate` / `r_shape_mean`). The adapter sits on the merged initialisation: load it with
    `policy.load_policy(base, model_cfg, adapter=out_dir)` when the initialisation is Base; an SFT-initialised
    arm needs the SFT adapter merged first. `policy.model` is modified in place; use `result.policy`.

    `ops` / `log_dir`: TensorBoard and resumable states (`make_rl_trainer`); a run that finds a state in
    `out_dir/resume` resumes from it (`sft.prepare`: optimiser, scheduler, RNG, sampler position), records
    the step in the summary (`resumed_from_step`) and deletes the state when done."""
    from edit_lib.train.sft import clear, prepare, step_of
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paper_steps = rl_cfg.steps_for(dataset_name)
    trainer = make_rl_trainer(policy, dataset_rows, rl_cfg, lora_cfg, out_dir, dataset_name, seed, arm,
                              frozen_probe_policy, probe_cfg, shaping, step_rule, max_steps, callbacks,
                              trainer_cls, use_cpu, progress, per_device_batch_size, ops, log_dir)
    start = prepare(trainer, out_dir)
    with warnings.catch_warnings():  # peft 0.21 calls a deprecated transformers 5 helper
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        t0 = time.perf_counter()
        trainer.train(resume_from_checkpoint=start)
        seconds = time.perf_counter() - t0
    model = trainer.model.eval()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        model.save_pretrained(str(out_dir))
    result = RLResult(arm=arm, adapter_dir=out_dir, dataset=dataset_name, seed=seed,
                      steps=int(trainer.state.global_step), paper_steps=paper_steps, seconds=seconds,
                      resumed_from_step=step_of(start),
                      log_history=[dict(e) for e in trainer.state.log_history],
                      trainable_parameters=count_parameters(model, trainable_only=True),
                      policy=Policy(model=model, tokenizer=policy.tokenizer, kind=policy.kind,
                                    name=f"{policy.name}+{arm}"))
    summary = {**result.summary(), "init": policy.name, "max_steps_override": max_steps,
               "reward_functions": list(trainer.reward_func_names), "n_prompts": len(trainer.train_dataset)}
    (out_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, default=float))
    clear(out_dir)  # the adapter and summary now mark the run done (rl_runs._done)
    return result
