"""``edit-suite bench merge``: greedy grading by a policy with a LoRA adapter (the demo's SFT recipe, App. B; random
non-zero weights, so the adapter moves the logits) loaded as the stages load it against the same adapter folded into
the weights (``model.pool_merges_adapters``), at the benchmark's two torch threads. The two compute the same
function up to floating-point rounding, so the rows that differ are counted and reported, never assumed."""
from __future__ import annotations

import tempfile
import time

import torch

from edit_lib.config import load_profile
from edit_lib.data.registry import build_dataset
from edit_lib.model.generate import eval_sampling, generate
from edit_lib.model.hf import attach_lora
from edit_lib.model.policy import load_policy, policy_from_weights
from edit_lib.runner.register import register_all


def _adapter(prof, folder: str, seed: int) -> None:
    """The demo's SFT LoRA on the embedded grader with random A and B (scale 0.02), saved to ``folder``."""
    model, _, _ = load_policy(prof.model.name_or_path)
    peft_model = attach_lora(model, prof.sft.lora)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
    peft_model.save_pretrained(folder)


def bench_merge(n_prompts: int = 128, repeats: int = 2, seed: int = 0) -> dict:
    """Greedy grading (the demo's ``eval`` section: App. B, one greedy completion per marking) of ``n_prompts``
    training answers of the demo's SAS-like world, ``repeats`` times each way, alternating; the fastest of each
    counts. ``ratio``: unmerged seconds over merged; ``rows_differing``: completions whose text differs."""
    register_all()
    prof = load_profile("demo")
    ds = build_dataset(next(d for d in prof.data.datasets if d.name == "synth_sas"), seed=prof.run.seed)
    cfg = eval_sampling(prof.eval, prof.run.seed)
    best, rows = {False: float("inf"), True: float("inf")}, {}
    with tempfile.TemporaryDirectory() as folder:
        _adapter(prof, folder, seed)
        policies = {merge: policy_from_weights(prof.model, folder, merge=merge) for merge in (False, True)}
        prompts = [policies[False].grading_input(ds.question(r), r.answer) for r in ds.responses
                   if r.split == "train"][:n_prompts]
        for _ in range(repeats):
            for merge, policy in policies.items():
                t0 = time.perf_counter()
                rows[merge] = generate(policy.model, policy.tokenizer, prompts, cfg, progress=False,
                                       lean=prof.model.lean_decoding)
                best[merge] = min(best[merge], time.perf_counter() - t0)
    differing = int((rows[False]["text"] != rows[True]["text"]).sum())
    return dict(model=prof.model.name_or_path, prompts=len(prompts), batch_size=cfg.batch_size,
                max_new_tokens=cfg.max_new_tokens, lora_r=prof.sft.lora.r, repeats=repeats,
                unmerged_s=round(best[False], 2), merged_s=round(best[True], 2),
                ratio=round(best[False] / best[True], 3), rows_differing=differing)
