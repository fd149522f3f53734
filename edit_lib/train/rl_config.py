"""One RL recipe for every RL method (GRPO, DGPO, InT-RL, EDIT-RL), set explicitly from the profile's `rl`
section (App. B "RL configuration and checkpoint selection"; Table 9, upper block).

TRL 1.16's `GRPOConfig` defaults differ silently from the paper: beta 0.0 (no KL term, no reference model),
loss_type 'dapo', max_completion_length 512, lr 1e-6 with a linear schedule and no warm-up, bf16 and gradient
checkpointing on, a checkpoint every 500 steps. `build_grpo_config` sets every value Table 9 fixes: lr 5e-6,
cosine, 3% warm-up, beta_KL 0.02 towards the initialisation, 8 rollouts per prompt x 4 prompts per optimiser step
(32 completions), temperature 1.0, 1,024 completion tokens, the GRPO loss, the per-dataset horizon (200 SAS,
500 Private-Science), only the final step kept. `build_rl_lora` is the fresh adapter with the SFT recipe
(r = 64, alpha = 128, all seven projections), trained over the merged initialisation, which with beta > 0 is
also TRL's KL reference (the peft model with its adapter disabled).

Batch arithmetic of TRL 1.16: `per_device_train_batch_size` counts completions, one optimiser step sees
per_device x processes x gradient_accumulation completions, and by default one generation batch
(`steps_per_generation` = gradient_accumulation) is generated per optimiser step, so 4 prompts x 8 = 32.
"""
from __future__ import annotations

from pathlib import Path

import torch

from edit_lib.config import LoraConfig, OpsConfig, RLConfig
from edit_lib.train.sft import n_devices, batch_split

__all__ = ["GRPO_OBJECTIVE", "build_grpo_config", "build_rl_lora", "completions_per_step", "prompts_per_step"]

# GRPO as the paper uses it (Sec. 2.3, App. B; Shao et al. 2024), set here rather than left to TRL's defaults, which a
# minor release may move: Eq. 7's reward (r_out + gamma * r_shape, one function each) summed with weight 1 and
# standardised within each group; the PPO-clipped ratio at 0.2 on both sides, per token; sampling as
# ``rl.decoding`` says (Table 9: T = 1.0 over the whole vocabulary, top_p 1 and top_k 0 set explicitly in
# ``build_grpo_config``); truncated completions kept in the loss (scored r_out = 0 when they carry no mark, Eq. 5);
# dropout as the model and adapter define it.
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
    > 0, a resumable state every that many steps in `out_dir/resume` (`resume.resume_args`).

    `vllm_gpu_memory_utilization` (a share of GPU memory; None: HF generation): rollouts by vLLM co-located
    with training (App. B: "the rollout engine co-located"), TRL's `use_vllm` + `vllm_mode='colocate'`."""
    from trl import GRPOConfig

    from edit_lib.train.resume import resume_args
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
