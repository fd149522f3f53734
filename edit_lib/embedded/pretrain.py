"""Pre-training of the embedded tiny grader on the teacher's text (`edit-suite build-grader`).

The paper starts from a pretrained Qwen3-8B (App. B); the embedded default has no such model, so the suite builds
its Base policy here: next-token loss on the TARGET of fresh (prompt, target) pairs drawn from a sampler (the
synthetic teacher), prompt tokens masked with -100. Seeded, length-grouped batches, a JSONL log, and an
optional checkpoint file from which an interrupted run resumes exactly where it stopped.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np
from tqdm.auto import tqdm

if TYPE_CHECKING:  # torch is imported where it is used: the stage keys import this module's config
    import torch

Sampler = Callable[[np.random.Generator, int], list[tuple[str, str]]]


@dataclass
class PretrainConfig:
    """Recipe for building the tiny grader. Stops at the first budget reached."""
    lr: float = field(default=2e-3, metadata={"help": "Peak AdamW learning rate."})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay (matrices only)."})
    betas: tuple[float, float] = field(default=(0.9, 0.95), metadata={"help": "AdamW betas."})
    batch_size: int = field(default=32, metadata={"help": "(prompt, target) pairs per optimiser step."})
    max_steps: int | None = field(default=1000, metadata={"help": "Step budget (None: no step limit)."})
    max_tokens: int | None = field(default=None, metadata={"help": "Budget in non-pad tokens processed."})
    max_seconds: float | None = field(default=None, metadata={"help": "Wall-clock budget (not deterministic)."})
    warmup_steps: int = field(default=50, metadata={"help": "Linear warm-up steps."})
    min_lr_ratio: float = field(default=0.1, metadata={"help": "Cosine decays to lr * min_lr_ratio at the budget."})
    grad_clip: float = field(default=1.0, metadata={"help": "Max global grad norm (0: off)."})
    max_length: int = field(default=1024, metadata={"help": "Sequences are cut to this many tokens."})
    pool_batches: int = field(default=8, metadata={"help": "Length grouping: sample this many batches at once, "
                                                             "sort by length, cut into batches, shuffle them."})
    seed: int = field(default=0, metadata={"help": "Seeds the sampler generator and torch."})
    log_every: int = field(default=25, metadata={"help": "Steps between log records."})
    threads: int | None = field(default=2, metadata={"help": "torch.set_num_threads (2 cores: 2; None: leave)."})
    checkpoint_path: str | None = field(default=None, metadata={"help": "Resume from / save to this file."})
    save_every: int = field(default=200, metadata={"help": "Steps between checkpoint saves (if checkpoint_path)."})
    progress: bool = field(default=True, metadata={"help": "Show a tqdm bar."})


def encode_pairs(tokenizer, pairs: list[tuple[str, str]], max_length: int) -> list[tuple[list[int], int]]:
    """Token ids of prompt + target + EOS, with the prompt length (prompt and target tokenised separately,
    exactly as `generate` sees a prompt and then produces the target)."""
    prompts = tokenizer([p for p, _ in pairs], add_special_tokens=True)["input_ids"]
    targets = tokenizer([t for _, t in pairs], add_special_tokens=False)["input_ids"]
    eos = tokenizer.eos_token_id
    return [((p + t + [eos])[:max_length], len(p)) for p, t in zip(prompts, targets)]


def collate(encoded: list[tuple[list[int], int]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded batch; labels are -100 on prompt and padding (loss on target tokens only)."""
    import torch
    width = max(len(ids) for ids, _ in encoded)
    input_ids = torch.full((len(encoded), width), pad_id, dtype=torch.long)
    labels = torch.full_like(input_ids, -100)
    mask = torch.zeros_like(input_ids)
    for i, (ids, n_prompt) in enumerate(encoded):
        input_ids[i, :len(ids)] = torch.tensor(ids)
        labels[i, n_prompt:len(ids)] = input_ids[i, n_prompt:len(ids)]
        mask[i, :len(ids)] = 1
    return {"input_ids": input_ids, "attention_mask": mask, "labels": labels}


def length_grouped_batches(encoded: list, batch_size: int, rng: np.random.Generator) -> list[list]:
    """Sort a pool by length, cut into batches, shuffle batch order: far less padding, same data."""
    order = np.argsort([len(ids) for ids, _ in encoded], kind="stable")
    batches = [[encoded[j] for j in order[i:i + batch_size]] for i in range(0, len(order), batch_size)]
    return [batches[k] for k in rng.permutation(len(batches))]


def lr_factor(step: int, progress: float, cfg: PretrainConfig) -> float:
    """Linear warm-up, then cosine to lr * min_lr_ratio as `progress` (budget_progress) goes 0 -> 1."""
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    cos = 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * cos


def budget_progress(step: int, tokens: int, seconds: float, cfg: PretrainConfig) -> float:
    """Fraction of the budget used, for the cosine. Step/token budgets drive it when set (so the schedule, hence
    the weights, stay deterministic and max_seconds is only a safety stop); time drives it only when alone."""
    fr = [step / cfg.max_steps if cfg.max_steps else None, tokens / cfg.max_tokens if cfg.max_tokens else None]
    fr = [f for f in fr if f is not None]
    return max(fr) if fr else seconds / cfg.max_seconds


def _optimizer(model, cfg: PretrainConfig) -> torch.optim.AdamW:
    import torch
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.ndim >= 2]
    rest = [p for p in params if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": rest, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas)


def pretrain(model, tokenizer, sample_batch: Sampler, cfg: PretrainConfig | None = None,
             log_path: str | Path | None = None) -> dict:
    """Pre-train the tiny grader on fresh teacher pairs; returns {history, steps, tokens, ...}.

    Deterministic given cfg.seed and the initial weights, unless max_seconds is the budget that stops the run.
    `sample_batch(rng, n)` must return n (prompt, target) pairs drawn only from `rng`.
    """
    import torch
    cfg = cfg or PretrainConfig()
    if not (cfg.max_steps or cfg.max_tokens or cfg.max_seconds):
        raise ValueError("set at least one of max_steps, max_tokens, max_seconds")
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    device = next(model.parameters()).device
    opt = _optimizer(model, cfg)
    state = {"step": 0, "tokens": 0, "target_tokens": 0, "seconds": 0.0, "queue": [], "history": []}
    ckpt = Path(cfg.checkpoint_path) if cfg.checkpoint_path else None
    if ckpt is not None and ckpt.exists():
        saved = torch.load(ckpt, map_location="cpu", weights_only=False)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["optimizer"])
        rng.bit_generator.state = saved["rng"]
        torch.set_rng_state(saved["torch_rng"])
        state = saved["state"]
    log = open(log_path, "a" if state["step"] else "w") if log_path else None
    model.train()
    bar = tqdm(total=cfg.max_steps, initial=state["step"], disable=not cfg.progress, desc="pretrain")
    window = {"loss": 0.0, "n": 0, "tokens": 0, "t0": time.perf_counter()}
    t_start = time.perf_counter() - state["seconds"]
    while True:
        seconds = time.perf_counter() - t_start
        if ((cfg.max_steps and state["step"] >= cfg.max_steps) or (cfg.max_seconds and seconds >= cfg.max_seconds)
                or (cfg.max_tokens and state["tokens"] >= cfg.max_tokens)):
            break
        if not state["queue"]:
            pairs = sample_batch(rng, cfg.batch_size * cfg.pool_batches)
            state["queue"] = length_grouped_batches(encode_pairs(tokenizer, pairs, cfg.max_length),
                                                    cfg.batch_size, rng)
        batch = {k: v.to(device) for k, v in collate(state["queue"].pop(0), tokenizer.pad_token_id).items()}
        lr = cfg.lr * lr_factor(state["step"], budget_progress(state["step"], state["tokens"], seconds, cfg), cfg)
        for g in opt.param_groups:
            g["lr"] = lr
        loss = model(**batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip if cfg.grad_clip else float("inf"))
        opt.step()
        n_tok = int(batch["attention_mask"].sum())
        state["step"] += 1
        state["tokens"] += n_tok
        state["target_tokens"] += int((batch["labels"] != -100).sum())
        window["loss"] += loss.item()
        window["n"] += 1
        window["tokens"] += n_tok
        bar.update(1)
        if state["step"] % cfg.log_every == 0 or state["step"] == cfg.max_steps:
            now = time.perf_counter()
            rec = {"step": state["step"], "loss": window["loss"] / window["n"], "lr": lr,
                   "grad_norm": float(gnorm), "tokens": state["tokens"], "target_tokens": state["target_tokens"],
                   "tokens_per_s": window["tokens"] / max(now - window["t0"], 1e-9), "elapsed_s": now - t_start}
            state["history"].append(rec)
            bar.set_postfix(loss=f"{rec['loss']:.3f}", tok_s=f"{rec['tokens_per_s']:.0f}")
            if log:
                log.write(json.dumps(rec) + "\n")
                log.flush()
            window = {"loss": 0.0, "n": 0, "tokens": 0, "t0": now}
        if ckpt is not None and state["step"] % cfg.save_every == 0:
            state["seconds"] = time.perf_counter() - t_start
            _save(ckpt, model, opt, rng, state)
    bar.close()
    model.eval()
    state["seconds"] = time.perf_counter() - t_start
    if ckpt is not None:
        _save(ckpt, model, opt, rng, state)
    if log:
        log.close()
    return {"history": state["history"], "steps": state["step"], "tokens": state["tokens"],
            "target_tokens": state["target_tokens"], "seconds": state["seconds"],
            "tokens_per_s": state["tokens"] / max(state["seconds"], 1e-9), "config": asdict(cfg)}


def _save(path: Path, model, opt, rng, state) -> None:
    import torch
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "rng": rng.bit_generator.state,
                "torch_rng": torch.get_rng_state(), "state": state}, tmp)
    tmp.replace(path)
