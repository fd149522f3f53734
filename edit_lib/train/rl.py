"""GRPO and EDIT-RL trainers on TRL's `GRPOTrainer` (Sec. 2.3; App. B "RL configuration and checkpoint
selection"; Table 9).

The two arms share everything but one reward function:

* GRPO: the distance-aware outcome reward r_out (Eq. 5) only;
* EDIT-RL: r_out plus gamma_Phi * r_shape (Eq. 6), the belief-guided shaping penalty read by the posterior
  probe (Eq. 1) of a FROZEN copy of the arm's initialisation; TRL sums the two, which is Eq. 7.

Both start from `policy` (a fresh LoRA over the merged initialisation, recipe `rl_config.build_grpo_config`,
Table 9) and save the final-step adapter (App. B: no checkpoint selection); DGPO plugs in via `trainer_cls`.

Departures from the paper and from public code:
book/departures.md, section "GRPO and EDIT-RL trainers (edit_lib/train/rl.py)".
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

from edit_lib.config import LoraConfig, OpsConfig, ProbeConfig, RLConfig
from edit_lib.data.schema import Dataset
from edit_lib.model.hf import count_parameters, merge_lora
from edit_lib.model.lean_decode import lean_rollouts
from edit_lib.model.policy import Policy
from edit_lib.train.rewards import make_outcome_reward, make_shaping_reward
from edit_lib.train.rl_config import build_grpo_config, build_rl_lora
from edit_lib.train.sft import point_tensorboard, trains_on_cpu

__all__ = ["ARMS", "RLResult", "make_rl_trainer", "rl_dataset", "rl_reward_functions", "train_rl_arm"]

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
    in place by peft. `ops`: the profile's `ops` section (`build_grpo_config`); TensorBoard writes to `log_dir`."""
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
    point_tensorboard(trainer, log_dir, out_dir)
    return trainer


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
    `out_dir/resume` resumes from it (`resume.prepare`: optimiser, scheduler, RNG, sampler position), records
    the step in the summary (`resumed_from_step`) and deletes the state when done."""
    from edit_lib.train import resume
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paper_steps = rl_cfg.steps_for(dataset_name)
    trainer = make_rl_trainer(policy, dataset_rows, rl_cfg, lora_cfg, out_dir, dataset_name, seed, arm,
                              frozen_probe_policy, probe_cfg, shaping, step_rule, max_steps, callbacks,
                              trainer_cls, use_cpu, progress, per_device_batch_size, ops, log_dir)
    start = resume.prepare(trainer, out_dir)
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
                      resumed_from_step=resume.step_of(start),
                      log_history=[dict(e) for e in trainer.state.log_history],
                      trainable_parameters=count_parameters(model, trainable_only=True),
                      policy=Policy(model=model, tokenizer=policy.tokenizer, kind=policy.kind,
                                    name=f"{policy.name}+{arm}"))
    summary = {**result.summary(), "init": policy.name, "max_steps_override": max_steps,
               "reward_functions": list(trainer.reward_func_names), "n_prompts": len(trainer.train_dataset)}
    (out_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, default=float))
    resume.clear(out_dir)  # the adapter and summary now mark the run done (rl_runs._done)
    return result
