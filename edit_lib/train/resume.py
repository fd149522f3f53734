"""Resumable training states inside one SFT or RL run (the profile's ``ops.resume_every``; the recipe is unchanged).

Every ``ops.resume_every`` optimiser steps transformers' own checkpointing writes ``<out_dir>/resume/checkpoint-N``:
the adapter, optimiser and scheduler states, the RNG states (python, numpy, torch CPU and CUDA) and the trainer
state (step, log history), keeping only the latest. A run that finds a complete state there resumes from it
(``Trainer.train(resume_from_checkpoint=...)``) and deletes it once its final adapter and summary are written.
``inputs.json`` fingerprints the trainer's arguments (less the ones ``ops`` sets) and its training rows: a state
saved under other inputs is deleted, never resumed. The run folder already lies under the stage key (profile values,
upstream keys, library code, weights), so the fingerprint only catches a folder reused by other means.

TRL's GRPO prompt sampler (``RepeatSampler``) reshuffles with one generator that advances once per epoch and has no
``set_epoch``; ``SamplerEpochs`` fast-forwards it on resume so that the resumed epoch draws the prompts an
uninterrupted run draws (SFT's sampler is seeded per epoch by accelerate and needs nothing).
"""
from __future__ import annotations

import hashlib
import json
import shutil
import warnings
from pathlib import Path

from transformers import TrainerCallback

__all__ = ["RESUME_DIR", "SamplerEpochs", "clear", "fingerprint", "own_seeded_sampler", "prepare", "resume_args",
           "step_of"]

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
