"""Training the format warm-up Base (``model.warmup``; see ``warmup_base`` for what it is and why): LoRA SFT
(``train.sft``) on (grading prompt, templated judgement) pairs from the training split, merged into the weights
and saved once under ``warmup_base.warmup_dir``. Notebook 01 calls ``ensure_warmup_base`` before it loads Base.
"""
from __future__ import annotations

import dataclasses
import json
import math
import shutil
import tempfile
from pathlib import Path

import numpy as np

from edit_lib.config import LoraConfig, Profile, SFTConfig, WarmupConfig
from edit_lib.data.schema import Dataset
from edit_lib.model.warmup import judgement, warmup_dir, warmup_key


def warmup_pairs(policy, datasets: dict[str, Dataset], cfg: WarmupConfig, seed: int = 0
                 ) -> tuple[list[tuple[str, str]], dict]:
    """(prompt input, judgement) pairs from the training split of every dataset: at most
    ``cfg.responses_per_question`` responses per question (a seeded sample). Pairs longer than ``cfg.max_length``
    tokens are left out and counted in the returned report, never silently."""
    rng = np.random.default_rng(seed)
    pairs, report = [], {"candidates": 0, "too_long": 0, "kept": 0, "by_dataset": {}}
    for name, ds in datasets.items():
        by_q: dict[str, list] = {}
        for r in ds.split("train"):
            by_q.setdefault(r.question_id, []).append(r)
        kept = 0
        for qid in sorted(by_q):
            rs = by_q[qid]
            for i in sorted(rng.choice(len(rs), size=min(len(rs), cfg.responses_per_question), replace=False)):
                r = rs[i]
                q = ds.question(r)
                prompt, comp = policy.grading_input(q, r.answer), judgement(q.max_mark, r.gold)
                report["candidates"] += 1
                if len(policy.tokenizer(prompt + comp)["input_ids"]) + 1 > cfg.max_length:  # + EOS
                    report["too_long"] += 1
                    continue
                pairs.append((prompt, comp))
                kept += 1
        report["by_dataset"][name] = kept
    report["kept"] = len(pairs)
    if not pairs:
        raise ValueError(f"model.warmup: no training pair fits model.warmup.max_length={cfg.max_length} tokens "
                         f"({report['too_long']} of {report['candidates']} too long); raise it")
    return pairs, report


def warmup_sft_config(cfg: WarmupConfig, n_pairs: int) -> SFTConfig:
    """The warm-up's SFT settings: exactly ``cfg.steps`` optimiser steps of ``cfg.batch_size`` examples, a LoRA of
    rank ``cfg.lora_r`` (alpha = 2r, as App. B's 64/128) on all seven projections, ``cfg.learning_rate`` with the
    App. B schedule (cosine, 10% warm-up)."""
    epochs = max(1, math.ceil(cfg.steps * cfg.batch_size / max(n_pairs, 1)))
    return SFTConfig(lora=LoraConfig(r=cfg.lora_r, alpha=2 * cfg.lora_r, dropout=0.0), epochs=epochs,
                     learning_rate=cfg.learning_rate, effective_batch_size=cfg.batch_size,
                     per_device_batch_size=cfg.batch_size, max_steps=cfg.steps, max_length=cfg.max_length,
                     gradient_checkpointing=False)


def ensure_warmup_base(profile: Profile, datasets: dict[str, Dataset], progress: bool = True) -> Path:
    """The warm-up Base's folder, trained on first use (on ``datasets``, the profile's built datasets) and
    reused while its key holds. ``warmup_summary.json`` beside the weights records the pairs, the loss curve
    and the time."""
    from edit_lib.model.hf import merge_lora, save_model_and_tokenizer
    from edit_lib.model.policy import Policy, load_policy
    from edit_lib.train.sft import train_sft
    out = warmup_dir(profile)
    if (out / "config.json").exists():
        return out
    cfg = profile.model.warmup
    if cfg.steps <= 0:
        raise ValueError("model.warmup.steps is 0: this profile has no warm-up Base")
    m = dataclasses.replace(profile.model, warmup=WarmupConfig())  # the plain Base
    model, tok, kind = load_policy(m.name_or_path, m)
    policy = Policy(model=model, tokenizer=tok, kind=kind, name=m.name_or_path)
    pairs, report = warmup_pairs(policy, datasets, cfg, profile.run.seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="warmup-", dir=out.parent))
    try:
        res = train_sft(policy, pairs, warmup_sft_config(cfg, len(pairs)), tmp / "adapter", seed=profile.run.seed,
                        progress=progress)
        part = tmp / "merged"
        save_model_and_tokenizer(merge_lora(res.policy.model), tok, part)
        (part / "warmup_summary.json").write_text(json.dumps(
            {"key": warmup_key(profile), "base": m.name_or_path, "pairs": report, "steps": res.steps,
             "seconds": res.seconds, "loss_curve": res.loss_curve, "example_judgement": judgement(3, 2)}, indent=1))
        if not (out / "config.json").exists():
            shutil.rmtree(out, ignore_errors=True)
            part.rename(out)  # a complete folder or none
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def prepare_base(profile: Profile, datasets: dict[str, Dataset]) -> str:
    """01's Base: trains the format warm-up when ``model.warmup.steps`` > 0 (cpu-real; a departure from the paper,
    whose Base grades zero-shot, App. B) and says which Base the run grades with."""
    if profile.model.warmup.steps <= 0:
        return f"Base: {profile.model.name_or_path}, zero-shot (the paper's setting)"
    return f"warm-up Base: {ensure_warmup_base(profile, datasets).name}"
