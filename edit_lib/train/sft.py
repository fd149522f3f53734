"""LoRA SFT of the grader with TRL's SFTTrainer, loss on the completion only (Sec. 2.2 "Pool composition and
training"; recipe of App. B), and the resumable training states every SFT and RL run keeps.

Input: (prompt, completion) pairs whose prompt is already in the policy's input form (`Policy.input_text`).
With `completion_only_loss=True` only completion tokens (and the EOS) carry loss; with `eos=False` (InT-SFT,
Sec. 3 Baselines (4)) the appended EOS is dropped again. Every value App. B fixes is set explicitly from the
profile's `sft` section: 2 epochs, lr 2e-4, cosine schedule, 10% warm-up, LoRA r = 64, alpha = 128 on
q/k/v/o/gate/up/down, effective batch 8 on SAS and 32 on Private-Science. Only the final adapter is saved
(peft `save_pretrained`); `policy.load_policy(..., adapter=dir)` loads it on top of Base. Resuming (``ops.resume_every``; the recipe is unchanged): transformers' checkpointing keeps the latest complete
state in ``<out_dir>/resume/``; a run resumes from it and deletes it when done. ``inputs.json`` fingerprints the
trainer's arguments and rows, so a state saved under other inputs is deleted, never resumed; ``SamplerEpochs``
fast-forwards TRL's GRPO prompt sampler so a resumed epoch draws the prompts an uninterrupted run draws.

Departures: book/departures.md, section "LoRA SFT (edit_lib/train/sft.py)".
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import torch
from transformers import TrainerCallback

from edit_lib.config import OpsConfig, SFTConfig
from edit_lib.model.hf import attach_lora, count_parameters
from edit_lib.model.policy import Policy



# ---------------------------------------------------------------- resumable training states (ops.resume_every)

RESUME_DIR = "resume"
FINGERPRINT = "inputs.json"
# trainer arguments that ops (or the progress flag) sets and that change no number of the run
_NOT_INPUTS = ("output_dir", "disable_tqdm", "report_to", "save_strategy", "save_steps", "save_total_limit")
# what a checkpoint must hold to be resumed (trainer_state.json is written last; a kill mid-save leaves it out)
_COMPLETE = ("trainer_state.json", "optimizer.pt", "scheduler.pt", "adapter_config.json")


def resume_args(out_dir: str | Path, every: int) -> dict:
    """The checkpointing arguments of a run's trainer: with ``every`` > 0 (``ops.resume_every``) a full state every
    ``every`` optimiser steps into ``out_dir/resume``, only the latest kept; with 0 none (output_dir = out_dir,
    nothing written there by the trainer)."""
    if not isinstance(every, int) or every < 0:
        raise ValueError(f"ops.resume_every must be an integer >= 0, got {every!r}")
    if every == 0:
        return dict(output_dir=str(out_dir), save_strategy="no")
    return dict(output_dir=str(Path(out_dir) / RESUME_DIR), save_strategy="steps", save_steps=every,
                save_total_limit=1, save_only_model=False)


def fingerprint(trainer) -> dict:
    """What a resumable state is tied to: the trainer's arguments (less ``_NOT_INPUTS``), its training rows and the
    trainable parameters' names and shapes (the weights are in the stage key; a worker names Base by its folder)."""
    args = {k: v for k, v in trainer.args.to_dict().items() if k not in _NOT_INPUTS}
    rows = hashlib.sha256()
    for batch in trainer.train_dataset.iter(batch_size=256):  # streamed: an SFT pool holds every token id
        rows.update(json.dumps(batch, sort_keys=True, default=str).encode())
    params = [(n, list(p.shape)) for n, p in trainer.model.named_parameters() if p.requires_grad]
    return {"args": json.loads(json.dumps(args, sort_keys=True, default=str)), "rows_sha256": rows.hexdigest(),
            "trainable": hashlib.sha256(json.dumps(params).encode()).hexdigest()}


def _complete(folder: Path) -> bool:
    return all((folder / f).is_file() for f in _COMPLETE) and any(folder.glob("rng_state*.pth"))


def step_of(checkpoint: str | Path | None) -> int | None:
    """The optimiser step a state was saved at (``checkpoint-N``), None for no state."""
    return None if checkpoint is None else int(Path(checkpoint).name.rsplit("-", 1)[1])


def prepare(trainer, out_dir: str | Path) -> str | None:
    """The state ``trainer`` resumes from (the latest complete ``out_dir/resume/checkpoint-N``), or None. A state
    whose ``inputs.json`` differs from this run's fingerprint is deleted with a warning naming the fields that
    differ; incomplete checkpoints are deleted. When the trainer saves states (``ops.resume_every`` > 0) the
    fingerprint is written; when it resumes, ``SamplerEpochs`` is added."""
    folder = Path(out_dir) / RESUME_DIR
    mine = fingerprint(trainer)
    if any(folder.glob("checkpoint-*")):  # (the trainer itself creates the empty folder)
        saved = json.loads((folder / FINGERPRINT).read_text()) if (folder / FINGERPRINT).is_file() else {}
        if saved != mine:
            sa, ma = saved.get("args", {}), mine["args"]
            diff = sorted(k for k in {*sa, *ma} if sa.get(k) != ma.get(k))
            diff += [k for k in ("rows_sha256", "trainable") if saved.get(k) != mine[k]]
            warnings.warn(f"{folder}: the resumable state was saved under other inputs (differs in {diff}); "
                          f"deleted, the run starts at step 0", stacklevel=2)
            shutil.rmtree(folder)
    found = sorted((p for p in folder.glob("checkpoint-*") if p.is_dir()), key=step_of)
    for p in found:
        if not _complete(p):
            shutil.rmtree(p)
    found = [p for p in found if p.is_dir()]
    if trainer.args.save_strategy == "steps":
        folder.mkdir(parents=True, exist_ok=True)
        (folder / FINGERPRINT).write_text(json.dumps(mine, indent=1))
    if not found:
        return None
    trainer.add_callback(SamplerEpochs())
    return str(found[-1])


def clear(out_dir: str | Path) -> None:
    """Delete a finished run's resumable state (its final adapter and summary now mark it done)."""
    shutil.rmtree(Path(out_dir) / RESUME_DIR, ignore_errors=True)


def own_seeded_sampler(loader, depth: int = 4):
    """The sampler under ``loader`` (through accelerate's and torch's batch-sampler wrappers) that shuffles with its
    own generator and has no ``set_epoch`` (TRL's ``RepeatSampler``), or None."""
    if loader is None or depth < 0:
        return None
    if getattr(loader, "generator", None) is not None and getattr(loader, "shuffle", False) \
            and not hasattr(loader, "set_epoch") and hasattr(loader, "__iter__"):
        return loader
    for name in ("sampler", "batch_sampler"):
        found = own_seeded_sampler(getattr(loader, name, None), depth - 1)
        if found is not None:
            return found
    return None


class SamplerEpochs(TrainerCallback):
    """On a resumed run, start one sampler pass per epoch already trained (each draws that epoch's permutation from
    the sampler's generator, as the uninterrupted run's epochs did): transformers restores the step, the RNG
    states and the position inside the epoch, not the generator of a sampler without ``set_epoch``."""

    def on_train_begin(self, args, state, control, train_dataloader=None, **kw):
        sampler = own_seeded_sampler(train_dataloader)
        if sampler is None or state.global_step == 0:
            return
        n, accum = len(train_dataloader), args.gradient_accumulation_steps
        per_epoch = max(n // accum + int(n % accum > 0), 1)  # transformers' num_update_steps_per_epoch
        for _ in range(state.global_step // per_epoch):
            next(iter(sampler), None)  # RepeatSampler.__iter__ draws its permutation before the first index


SUMMARY_FILE = "sft_summary.json"


@dataclass
class SFTResult:
    """What one SFT run produced: the adapter folder, the loss curve, and its cost."""
    adapter_dir: Path
    loss_curve: list[dict] = field(default_factory=list)  # [{step, loss}], one per `logging_steps`
    trainable_parameters: int = 0
    total_parameters: int = 0
    seconds: float = 0.0  # of this process: from `resumed_from_step` when the run resumed
    steps: int = 0  # optimiser steps run
    policy: Policy | None = None  # the trained policy in memory (a peft model wrapping Base, eval mode)
    resumed_from_step: int | None = None  # the saved state this run resumed from (ops.resume_every), else None

    def summary(self) -> dict:
        """JSON-ready summary (written next to the adapter as sft_summary.json)."""
        return {"adapter_dir": str(self.adapter_dir), "loss_curve": self.loss_curve, "steps": self.steps,
                "trainable_parameters": self.trainable_parameters, "total_parameters": self.total_parameters,
                "seconds": self.seconds, "resumed_from_step": self.resumed_from_step}


def batch_split(effective: int, per_device: int, n_devices: int = 1) -> tuple[int, int]:
    """(per-device batch, gradient accumulation) giving the App. B effective batch on `n_devices` devices:
    per_device x accumulation x n_devices == effective exactly (8 on SAS, 32 on Private-Science)."""
    if effective < 1 or per_device < 1 or n_devices < 1:
        raise ValueError(f"sft: effective_batch ({effective}), per_device_batch_size ({per_device}) and the device "
                         f"count ({n_devices}) must be positive")
    if effective % n_devices:
        raise ValueError(f"sft: effective batch {effective} is not a multiple of the {n_devices} devices")
    per_device = min(per_device, effective // n_devices)
    if (effective // n_devices) % per_device:
        raise ValueError(f"sft.per_device_batch_size={per_device} does not divide the effective batch "
                         f"{effective} on {n_devices} device(s); choose a divisor of {effective // n_devices}")
    return per_device, effective // n_devices // per_device


def trains_on_cpu(model, use_cpu: bool | None = None) -> bool:
    """Where a run trains: ``use_cpu`` when given, else where the policy's weights are (``model.device``, which
    placed them), so a ``model.device=cpu`` run on a GPU machine trains on the CPU too."""
    if use_cpu is not None:
        return bool(use_cpu)
    return next(model.parameters()).device.type == "cpu"


def n_devices(use_cpu: bool) -> int:
    """Devices the Trainer spreads one step over: DDP processes (WORLD_SIZE, set by torchrun / accelerate
    launch, on GPUs or on CPU with gloo), else all visible GPUs, else 1 on CPU."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        return world
    return 1 if use_cpu else max(1, torch.cuda.device_count())


def build_sft_config(sft: SFTConfig, out_dir: str | Path, *, dataset: str = "", seed: int = 0,
                     use_cpu: bool | None = None, progress: bool = True, n_pairs: int | None = None,
                     ops: OpsConfig | None = None):
    """TRL `SFTConfig` from the profile's `sft` section, every App. B value set explicitly (2 epochs, lr 2e-4,
    cosine, 10% warm-up, effective batch `sft.effective_batch_for(dataset)`: 8 SAS / 32 Private-Science).

    CPU (no GPU, or `use_cpu=True`): use_cpu, bf16 off, gradient checkpointing off. Always the profile's seed; the
    final adapter is saved by `train_sft`. `ops` (the profile's `ops` section; default: none, 0) changes no
    number: `ops.report_to` ('none' or 'tensorboard', pointed at its folder by `make_trainer`) and, with
    `ops.resume_every` > 0, a resumable state every that many steps in `out_dir/resume` (`resume_args`).

    `sft.max_steps` > 0 caps the run (transformers would otherwise let max_steps override the epochs and train
    a small pool for many more epochs than `sft.epochs`): with `n_pairs` given, the run takes
    min(sft.max_steps, the steps of `sft.epochs` epochs)."""
    from trl import SFTConfig as TRLSFTConfig

    ops = ops or OpsConfig()
    if not 0.0 <= sft.warmup_ratio < 1.0:  # transformers reads warmup_steps < 1 as a share of all steps
        raise ValueError(f"sft.warmup_ratio must lie in [0, 1), got {sft.warmup_ratio}")
    use_cpu = (not torch.cuda.is_available()) if use_cpu is None else use_cpu
    per_device, accum = batch_split(sft.effective_batch_for(dataset), sft.per_device_batch_size,
                                    n_devices(use_cpu))
    bf16 = (not use_cpu) and torch.cuda.is_bf16_supported()
    return TRLSFTConfig(
        # App. B recipe
        num_train_epochs=sft.epochs, learning_rate=sft.learning_rate, lr_scheduler_type=sft.lr_scheduler,
        warmup_steps=sft.warmup_ratio, per_device_train_batch_size=per_device,
        gradient_accumulation_steps=accum,
        max_steps=_step_cap(sft, dataset, n_pairs),
        # loss on the completion only (prompt-completion dataset), nothing truncated (pairs checked first)
        completion_only_loss=True, max_length=None, packing=False, dataset_text_field="text",
        # device and precision
        use_cpu=use_cpu, bf16=bf16, fp16=False,  # transformers 5 name of gradient checkpointing:
        activation_checkpointing=bool(sft.gradient_checkpointing and not use_cpu),
        optim="adamw_torch",
        # bookkeeping: seed; ops: where it reports, resumable states (else no checkpoint)
        seed=seed, data_seed=seed, eval_strategy="no", report_to=ops.report_to,
        **resume_args(out_dir, ops.resume_every),
        logging_strategy="steps", logging_steps=sft.logging_steps, disable_tqdm=not progress,
        dataloader_num_workers=0)


def sft_dataset(pairs: Sequence[tuple[str, str]], tokenizer, max_tokens: int | None = None):
    """A TRL prompt-completion `datasets.Dataset` from (prompt input text, completion) pairs. A pair that is
    not two non-empty strings, or longer than `max_tokens` tokens, is an error naming its row and field."""
    from datasets import Dataset
    if len(pairs) == 0:
        raise ValueError("sft: no training pairs")
    rows = []
    for i, pair in enumerate(pairs):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"sft pairs row {i}: expected (prompt, completion), got {type(pair).__name__}")
        for name, value in zip(("prompt", "completion"), pair):
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"sft pairs row {i}, field {name!r}: expected a non-empty string, got {value!r:.60}")
        rows.append({"prompt": pair[0], "completion": pair[1]})
    if max_tokens:
        lengths = tokenizer([r["prompt"] + r["completion"] for r in rows])["input_ids"]
        for i, ids in enumerate(lengths):
            if len(ids) + 1 > max_tokens:  # + EOS, which TRL appends
                raise ValueError(f"sft pairs row {i}, fields 'prompt'+'completion': {len(ids) + 1} tokens exceed "
                                 f"the limit of {max_tokens} (sft.max_length or the model's context length)")
    return Dataset.from_list(rows)


def drop_final_eos(dataset, eos_id: int):
    """TRL's tokenised dataset with the EOS it appended removed from the end of every `input_ids` / `labels`
    (InT-SFT targets, Sec. 3 Baselines (4)); an error when a row does not end with EOS."""
    def strip(row, idx):
        if not row["input_ids"] or row["input_ids"][-1] != eos_id:
            raise ValueError(f"sft pairs row {idx}: expected TRL's tokenised pair to end with EOS id {eos_id}")
        return {"input_ids": row["input_ids"][:-1], "labels": row["labels"][:-1]}
    return dataset.map(strip, with_indices=True, desc="Dropping the final EOS")


def point_tensorboard(trainer, log_dir: str | Path | None, out_dir: str | Path) -> None:
    """Send the trainer's TensorBoard events (`ops.report_to: tensorboard`) to `log_dir`, the run's folder under
    `runs/<profile>/tensorboard/<stage>/` (05 and 06 pass it), else to `<out_dir>/tensorboard` (a caller outside a
    stage: the pilot, the launcher), instead of transformers' default (`<output_dir>/runs/<date>_<host>`)."""
    from transformers.integrations import TensorBoardCallback
    for cb in trainer.callback_handler.callbacks:
        if isinstance(cb, TensorBoardCallback):
            cb.logging_dir = str(log_dir if log_dir is not None else Path(out_dir) / "tensorboard")


def make_trainer(policy: Policy, pairs: Sequence[tuple[str, str]], cfg: SFTConfig, out_dir: str | Path, *,
                 dataset: str = "", seed: int = 0, use_cpu: bool | None = None, progress: bool = True,
                 eos: bool = True, ops: OpsConfig | None = None, log_dir: str | Path | None = None):
    """The TRL `SFTTrainer` of one run: a fresh LoRA adapter (`model.hf.attach_lora`, App. B recipe from
    `cfg.lora`, initialised under `seed`) on `policy.model`, the pairs as a prompt-completion dataset and the
    `build_sft_config` arguments, on the policy's device unless `use_cpu` says otherwise (`trains_on_cpu`). The
    adapter is injected into `policy.model` in place (peft). `eos=False`
    trains the targets without a final EOS (`drop_final_eos`; InT-SFT). `ops`: the profile's `ops` section
    (`build_sft_config`); TensorBoard writes to `log_dir` (`point_tensorboard`)."""
    from peft import PeftModel
    from transformers import PrinterCallback, set_seed
    from trl import SFTTrainer
    if isinstance(policy.model, PeftModel):
        raise ValueError("sft: policy.model already carries an adapter; merge it first (model.hf.merge_lora) or "
                         "load Base afresh")
    args = build_sft_config(cfg, out_dir, dataset=dataset, seed=seed, use_cpu=trains_on_cpu(policy.model, use_cpu),
                            progress=progress, n_pairs=len(pairs), ops=ops)
    limit = cfg.max_length or getattr(policy.model.config, "max_position_embeddings", None)
    data = sft_dataset(pairs, policy.tokenizer, limit)
    set_seed(seed)
    model = attach_lora(policy.model, cfg.lora)
    trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=policy.tokenizer)
    if not eos:
        trainer.train_dataset = drop_final_eos(trainer.train_dataset, policy.tokenizer.eos_token_id)
    effective = cfg.effective_batch_for(dataset)
    got = args.per_device_train_batch_size * max(1, args.n_gpu) * args.world_size * args.gradient_accumulation_steps
    if got != effective:  # e.g. DataParallel over more GPUs than n_devices assumed
        raise ValueError(f"sft: the trainer's effective batch is {got}, the profile asks for {effective}")
    if not progress:
        trainer.remove_callback(PrinterCallback)
    point_tensorboard(trainer, log_dir, out_dir)
    return trainer


def train_sft(policy: Policy, pairs: Sequence[tuple[str, str]], cfg: SFTConfig, out_dir: str | Path, *,
              dataset: str = "", seed: int = 0, use_cpu: bool | None = None, progress: bool = True,
              eos: bool = True, callbacks: Sequence = (), ops: OpsConfig | None = None,
              log_dir: str | Path | None = None) -> SFTResult:
    """LoRA SFT on (prompt input, completion) pairs, loss on the completion only (Sec. 2.2; App. B recipe:
    2 epochs, lr 2e-4, cosine, 10% warm-up, r=64, alpha=128, all seven projections, effective batch
    `cfg.effective_batch_for(dataset)`). `seed` is the profile's `run.seed`.

    Saves the LoRA adapter with peft's `save_pretrained` in `out_dir` (plus sft_summary.json); load it with
    `policy.load_policy(base, model_cfg, adapter=out_dir)`. `policy.model` is wrapped in place: afterwards use
    `result.policy` (the trained model, eval mode) and load Base afresh for comparisons (or call
    `result.policy.model.unload()` to strip the adapter). Progress shows through TRL/transformers' tqdm bar
    and log lines when `progress`. `eos=False` trains the targets without a final EOS (InT-SFT, `make_trainer`).
    `callbacks`: transformers `TrainerCallback`s added to the trainer (the warm-up's held-out curve).
    `ops` / `log_dir`: TensorBoard and resumable states (`make_trainer`); a run that finds a state in
    `out_dir/resume` resumes from it (`prepare`), records the step in the summary (`resumed_from_step`)
    and deletes the state when done."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    trainer = make_trainer(policy, pairs, cfg, out_dir, dataset=dataset, seed=seed, use_cpu=use_cpu,
                           progress=progress, eos=eos, ops=ops, log_dir=log_dir)
    for cb in callbacks:
        trainer.add_callback(cb)
    start = prepare(trainer, out_dir)
    t0 = time.perf_counter()
    trainer.train(resume_from_checkpoint=start)
    seconds = time.perf_counter() - t0
    model = trainer.model.eval()
    with warnings.catch_warnings():  # peft 0.21 calls a deprecated transformers 5 helper
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        model.save_pretrained(str(out_dir))
    curve = [{"step": int(e["step"]), "loss": float(e["loss"])} for e in trainer.state.log_history if "loss" in e]
    result = SFTResult(adapter_dir=out_dir, loss_curve=curve, seconds=seconds, steps=int(trainer.state.global_step),
                       trainable_parameters=count_parameters(model, trainable_only=True),
                       total_parameters=count_parameters(model), resumed_from_step=step_of(start),
                       policy=Policy(model=model, tokenizer=policy.tokenizer, kind=policy.kind,
                                     name=f"{policy.name}+{out_dir.name}"))
    summary = {**result.summary(), "base": policy.name, "dataset": dataset, "seed": seed,
               "effective_batch": cfg.effective_batch_for(dataset), "n_pairs": len(pairs), "eos": eos,
               "warmup_steps": trainer.args.get_warmup_steps(trainer.state.max_steps)}
    (out_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2))
    clear(out_dir)  # the adapter and summary now mark the run done
    return result


def _step_cap(sft: SFTConfig, dataset: str, n_pairs: int | None) -> int:
    if sft.max_steps <= 0:
        return -1  # the full epochs (App. B)
    if n_pairs is None:
        return sft.max_steps
    return expected_steps(n_pairs, sft.effective_batch_for(dataset), sft.epochs, sft.max_steps)


def expected_steps(n_pairs: int, effective_batch: int, epochs: int, max_steps: int = 0) -> int:
    """Optimiser steps of a run (the last partial batch of an epoch is one step), for the notebooks' tables."""
    steps = math.ceil(n_pairs / effective_batch) * epochs
    return min(steps, max_steps) if max_steps > 0 else steps
