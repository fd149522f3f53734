"""``edit-suite check-gpu --memory``: the dry run's GPU memory estimate (``runner.dry_run.memory_estimate``) against
what a small Qwen3-architecture model allocates in 01, 02, 05 and 06.

The model is Qwen3-8B's config (``configs/models/qwen3-8b.json``: hidden 4,096, MLP 12,288, 32 query and 8
key-value heads, vocabulary 151,936, untied head) with ``layers`` decoder layers and random bfloat16 weights on
the GPU: nothing is downloaded. Shapes: the paper profile with ``SHAPES`` (one GPU-minute), prompts of exactly
``prompt_tokens`` tokens (the estimate's P). The suite's own code runs each phase the estimate models, under
``torch.cuda.max_memory_allocated``: 01 sampled rollouts and a greedy batch (every completion at its budget);
02 the packed probe forward; 05 one LoRA SFT step (TRL, gradient checkpointing and bf16 as the profile says) and
a greedy batch through the adapter; 06 one EDIT-RL step (TRL GRPO plus the frozen probe, a second model).
The error is (estimate - measured) / measured; CUDA context and allocator caching are in neither. Each phase's
wall seconds go beside ``time_estimate.check_memory_seconds`` for the device's GPU (``times``; setup such as a
trainer's construction is in the measured seconds only).
"""
from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from edit_lib.config import CONFIG_DIR, load_profile

GIB = 2 ** 30
SHAPES = ["rollouts.batch_size=16", "rollouts.decoding.max_new_tokens=256", "eval.batch_size=16",
          "eval.decoding.max_new_tokens=256",
          "probe.batch_size=4", "sft.per_device_batch_size=4", "sft.effective_batch_size=4",
          "sft.effective_batch_by_dataset={}", "rl.rollouts_per_prompt=4", "rl.prompts_per_step=1",
          "rl.per_device_batch_size=4", "rl.decoding.max_new_tokens=256", "rl.steps=1", "rl.steps_by_dataset={}",
          "rl.shaping_by_dataset={}", "rl.datasets=[]"]


def small_qwen3(layers: int, device: str, tokenizer, config: dict | None = None):
    """Qwen3-8B's architecture with ``layers`` layers (``config`` overrides more keys) and ``tokenizer``'s special
    token ids, random bfloat16 weights created on ``device``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    raw = json.loads((CONFIG_DIR / "models" / "qwen3-8b.json").read_text())
    raw.pop("_source", None)
    raw.update(num_hidden_layers=layers, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
               pad_token_id=tokenizer.pad_token_id, **(config or {}))
    raw.pop("layer_types", None)  # sized for 36 layers
    cfg = AutoConfig.for_model(**raw)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    return model.eval(), raw


def _peak(fn, device, times: dict | None = None, key: str = "") -> float | None:
    """GiB allocated at the peak of ``fn()`` (None on a CPU); its wall seconds go to ``times[key]``."""
    import torch
    cuda = device != "cpu"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    fn()
    if cuda:
        torch.cuda.synchronize()
    if times is not None:
        times[key] = time.perf_counter() - t0
    return torch.cuda.max_memory_allocated() / GIB if cuda else None


def _text(tok, n: int) -> str:
    """A text of exactly ``n`` tokens for ``tok`` (one repeated one-token word)."""
    word = next(w for w in ("mark", "point", "answer", "step") if len(tok(w, add_special_tokens=False)["input_ids"]) == 1)
    base = len(tok(word)["input_ids"]) - 1  # special tokens the tokenizer adds
    return " ".join([word] * (n - base))


def check_memory(layers: int = 2, prompt_tokens: int = 512, device: str = "cuda", config: dict | None = None,
                 echo=print) -> dict:
    """Estimate against measurement for 01, 02, 05 and 06 (module docstring); ``config`` shrinks the model for a
    CPU test (no measurement there)."""
    from datasets import Dataset as HFDataset

    from edit_lib.embedded.store import ASSETS_DIR
    from edit_lib.model.generate import SamplingConfig, generate
    from edit_lib.model.hf import prepare_tokenizer
    from edit_lib.model.policy import Policy
    from edit_lib.runner.dry_run import memory_estimate, parameter_counts, meta_model
    from edit_lib.signals.probe import probe_rollouts
    from edit_lib.train.rl import train_rl_arm
    from edit_lib.train.sft import train_sft
    from transformers import AutoTokenizer

    t0 = time.perf_counter()
    P = load_profile("paper", SHAPES + [f"model.device={device}"])
    tok = prepare_tokenizer(AutoTokenizer.from_pretrained(str(ASSETS_DIR)))  # any tokenizer: ids < the vocabulary
    model, raw = small_qwen3(layers, device, tok, config)
    with tempfile.TemporaryDirectory() as tmp:
        cfg_file = Path(tmp) / "config.json"
        cfg_file.write_text(json.dumps(raw))
        counts = parameter_counts(meta_model(cfg_file), P.sft.lora)
    est = {r["stage"]: r for r in memory_estimate(P, counts, prompt_tokens)}
    policy = Policy(model=model, tokenizer=tok, kind="tiny", name=f"qwen3-{layers}-layers")
    prompt = _text(tok, prompt_tokens)
    C = P.rollouts.decoding.max_new_tokens
    measured, times = {}, {}

    def gen(pol, b, n):
        cfg = SamplingConfig(n=1, max_new_tokens=n, batch_size=b, seed=0)
        return generate(pol.model, tok, [prompt] * b, cfg, progress=False)

    gen(policy, 2, 4)  # warm-up (CUDA kernels, cuBLAS handles), so the first timed phase does not pay for it

    # random weights: EOS is 1 token in 151,936, so completions run to their budget, as the estimate assumes
    measured["01_base_policy"] = max(_peak(lambda: gen(policy, P.rollouts.batch_size, C), device, times,
                                           "01 sampled rollouts") or 0,
                                     _peak(lambda: gen(policy, P.eval.batch_size, P.eval.decoding.max_new_tokens),
                                           device, times, "01 greedy batch") or 0)
    p_ids = tok(prompt)["input_ids"]
    steps = [[tok.convert_tokens_to_ids("mark")] * (C // 8)] * 8
    sc, marks = tok(" Final mark:", add_special_tokens=False)["input_ids"], [[i] for i in range(5, 16)]
    measured["02_probing"] = _peak(lambda: probe_rollouts(model, [p_ids] * P.probe.batch_size,
                                                          [steps] * P.probe.batch_size, sc, marks,
                                                          batch_size=P.probe.batch_size), device, times,
                                   "02 packed probe forward")
    with tempfile.TemporaryDirectory() as tmp:
        pairs = [(prompt, " " + _text(tok, C + 1))] * P.sft.per_device_batch_size
        res = {}
        measured["05_edit_sft"] = _peak(lambda: res.update(r=train_sft(policy, pairs, P.sft, Path(tmp) / "a",
                                                                       progress=False)), device, times,
                                        "05 LoRA SFT step")
        adapted = res["r"].policy
        measured["05_edit_sft"] = max(measured["05_edit_sft"] or 0,
                                      _peak(lambda: gen(adapted, P.eval.batch_size, P.eval.decoding.max_new_tokens),
                                            device, times, "05 greedy batch (adapter)") or 0)
        adapted.model.unload()
    frozen = Policy(model=small_qwen3(layers, device, tok, config)[0].requires_grad_(False), tokenizer=tok,
                    kind="tiny", name="frozen")
    rows = HFDataset.from_list([dict(prompt=prompt, gold=1, max_mark=3, dataset="sas_history", response_id=i)
                                for i in range(P.rl.prompts_per_step * 2)])
    with tempfile.TemporaryDirectory() as tmp:
        measured["06_rl"] = _peak(lambda: train_rl_arm(policy, rows, P.rl, P.sft.lora, tmp, "sas_history", 42,
                                                       "edit_rl", frozen_probe_policy=frozen, probe_cfg=P.probe,
                                                       max_steps=1), device, times, "06 EDIT-RL step")
    rows_out = []
    for stage, got in measured.items():
        e = est[stage]
        rows_out.append(dict(stage=stage, phase=e["phase"], estimate_gib=round(e["total"], 3),
                             measured_gib=None if device == "cpu" else round(got, 3),
                             error_pct=None if device == "cpu" or not got else round(100 * (e["total"] - got) / got, 1)))
    out = dict(model=f"Qwen3-8B architecture, {layers} layers, random bfloat16 weights", device=device,
               parameters=counts["total"], trainable=counts["trainable"], prompt_tokens=prompt_tokens,
               shapes=SHAPES, stages=rows_out, times=phase_times(P, counts, prompt_tokens, device, times),
               seconds=round(time.perf_counter() - t0, 1))
    echo(json.dumps(out["stages"]))
    return out



def phase_times(profile, counts: dict, prompt_tokens: int, device: str, measured: dict) -> dict:
    """Measured seconds per phase beside ``time_estimate``'s for the device's GPU: ratio = estimate / measured.
    On a CPU, or a GPU not in ``time_estimate.GPUS``, the H100 estimate is shown and nothing is compared."""
    from edit_lib.runner.time_estimate import GPUS, check_memory_seconds, compare_times, gpu_for_device
    key = None
    if device != "cpu":
        import torch
        key = gpu_for_device(torch.cuda.get_device_name(0))
    est = check_memory_seconds(profile, counts, prompt_tokens, GPUS[key or "h100"])
    return dict(gpu=key or "h100 (estimate only)", rows=compare_times(measured if key else {}, est))
