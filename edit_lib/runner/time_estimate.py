"""GPU time ESTIMATE for ``edit-suite run --dry-run --gpu NAME``: the rules, the GPUs and the check against the
two-layer model of ``check-gpu --memory``. Stages, and App. B beside them: ``time_stages``. All estimates.

Rules (N: parameters in matrix multiplies, every weight but the input embedding table; L layers; d_q = query heads
x head_dim; S tokens of a sequence; n_lora the adapter's parameters):
* forward of one sequence: 2 N S + 2 L d_q S^2 FLOPs (each weight one multiply-add per token; causal attention,
  QK^T and AV over S^2 / 2 query-key pairs).
* LoRA training of one sequence: the full forward, plus the backward through the frozen weights down to the
  lowest adapter (dX = dY W^T costs what Y = X W costs: one more forward of the matmuls; attention's backward is
  twice its forward), plus one more forward where gradient checkpointing recomputes it, plus 6 n_lora S for the
  adapters' own forward and gradients. Frozen weights get no weight gradient, so with checkpointing this is 6 N S
  (the familiar 6 x parameters) and without it 4 N S.
* compute time = FLOPs / (the GPU's dense bf16 peak x MFU). Generation is memory-bandwidth bound instead: each
  decode step reads the weights once for its whole batch and every sequence's KV cache, so decode time = bytes
  read / (HBM bandwidth x efficiency), or the compute time where that is longer; the prompt's prefill is compute.
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class GPU:
    label: str
    bf16_tflops: float  # dense Tensor Core BF16 peak, without 2:4 sparsity (datasheets print it doubled with "*")
    hbm_tb_s: float  # memory bandwidth, TB/s
    memory_gb: float


GPUS = {  # vendor datasheets, by name (values as printed there; dense = the sparsity figure halved)
    "h100": GPU("NVIDIA H100 SXM 80GB", 989.0, 3.35, 80),  # NVIDIA H100 Tensor Core GPU datasheet, SXM column
    "h200": GPU("NVIDIA H200 SXM 141GB", 989.0, 4.8, 141),  # NVIDIA H200 Tensor Core GPU datasheet, SXM column
    "a100": GPU("NVIDIA A100 80GB SXM", 312.0, 2.039, 80),  # NVIDIA A100 Tensor Core GPU datasheet, 80GB SXM
    "l40s": GPU("NVIDIA L40S 48GB", 362.05, 0.864, 48),  # NVIDIA L40S datasheet (GDDR6, not HBM)
}
PAPER_GPU = "h200"  # App. B "Compute budget": "All RL runs use a single GPU (H200 141 GB)"
# Suite's choices, fixed before any GPU timing and printed with every estimate:
MFU = {"train": 0.35,  # LoRA steps under HF Trainer / TRL, bf16, gradient checkpointing: 8B-size matmuls run near
                       # peak, but norms, rotary, the LoRA branch's thin matmuls and the optimiser do not
       "forward": 0.35}  # packed probe / audit reads and prefill: the same matmuls, no backward; the dense 4D
                         # masks keep attention off flash kernels, but attention is under 10% of the FLOPs here
BANDWIDTH_EFFICIENCY = {"hf": 0.3,  # transformers generate: eager per-layer kernels launched from Python each step
                        "vllm": 0.6}  # vLLM: CUDA graphs and paged KV, continuous batching
VLLM_SEQS = 256  # vLLM schedules up to max_num_seqs (its default, 256) sequences at once, whatever batch_size says


def gpu_named(name: str) -> GPU:
    """The GPU called ``name`` (case-insensitive key of ``GPUS``); KeyError naming the known ones."""
    key = name.strip().lower()
    if key not in GPUS:
        raise KeyError(f"--gpu {name!r}: unknown GPU; known: {', '.join(GPUS)} "
                       f"({'; '.join(f'{k} = {g.label}' for k, g in GPUS.items())})")
    return GPUS[key]


def gpu_for_device(device_name: str) -> str | None:
    """The ``GPUS`` key of a CUDA device name (``torch.cuda.get_device_name``), or None when none fits."""
    low = device_name.lower()
    return next((k for k in GPUS if k in low), None)


@dataclass(frozen=True)
class Shape:
    """What the rules need of a model (from ``dry_run.parameter_counts``)."""
    matmul: int  # N: every weight but the input embedding (an untied lm_head is a matmul; a tied one too)
    layers: int
    d_q: int
    kv_bytes: int  # K and V of one token, all layers
    lora: int
    w: int  # bytes per weight element

    @classmethod
    def of(cls, counts: dict, w: int = 2) -> "Shape":
        embed = 0 if counts["tied"] else counts["vocab"] * counts["hidden"]
        return cls(matmul=counts["total"] - embed, layers=counts["layers"], d_q=counts["heads"] * counts["head_dim"],
                   kv_bytes=2 * counts["layers"] * counts["kv_heads"] * counts["head_dim"] * w,
                   lora=counts["trainable"], w=w)


def forward_flops(m: Shape, tokens: float, n: float = 1) -> float:
    """n forwards of ``tokens`` tokens each (module docstring)."""
    return n * (2 * m.matmul * tokens + 2 * m.layers * m.d_q * tokens ** 2)


def train_flops(m: Shape, tokens: float, n: float = 1, checkpointing: bool = True) -> float:
    """n LoRA training passes (forward + backward) of ``tokens`` tokens each (module docstring)."""
    linear, attention, again = 2 * m.matmul * tokens, 2 * m.layers * m.d_q * tokens ** 2, int(checkpointing)
    return n * (linear * (2 + again) + attention * (3 + again) + 6 * m.lora * tokens)


def compute_seconds(flops: float, gpu: GPU, kind: str) -> float:
    return flops / (gpu.bf16_tflops * 1e12 * MFU[kind])


def generate_seconds(m: Shape, gpu: GPU, n: float, batch: int, prompt: float, budget: float, mean: float,
                     backend: str = "hf", adapter_bytes: float = 0.0) -> float:
    """Prefill + decode of ``n`` sequences, ``batch`` at a time. 'hf' batches are static: each decodes until its
    longest completion ends, taken at the ``budget``; 'vllm' keeps ``batch`` sequences decoding and each runs its
    ``mean`` length. A decode step reads the weights (+ an unmerged fp32 adapter) once and each sequence's KV
    cache at its average length."""
    if n <= 0:
        return 0.0
    batch = min(batch, n)
    batches = math.ceil(n / batch) if backend == "hf" else n / batch
    steps = budget if backend == "hf" else mean
    b = n / batches
    context = prompt + steps / 2
    read = batches * steps * (m.matmul * m.w + adapter_bytes + b * m.kv_bytes * context)
    decode_flops = batches * steps * b * (2 * m.matmul + 4 * m.layers * m.d_q * context)
    decode = max(read / (gpu.hbm_tb_s * 1e12 * BANDWIDTH_EFFICIENCY[backend]),
                 compute_seconds(decode_flops, gpu, "forward"))
    return compute_seconds(forward_flops(m, prompt, n), gpu, "forward") + decode


def check_memory_seconds(profile, counts: dict, prompt_tokens: int, gpu: GPU, probe_extra: int = 64) -> dict:
    """The estimate of each phase ``check-gpu --memory`` times (``check_memory``; its shapes in ``profile``):
    random weights, so every completion runs to its budget. Keys match ``check_memory``'s timed phases. Fixed
    per-step costs (kernel launches, Python, the row sampler's CPU draws) are not modelled; on two layers they
    dominate decoding, so its ratios test them, while 02 and 05 (FLOP-bound) test the MFU."""
    m, p, P = Shape.of(counts), profile, prompt_tokens
    C, Ce = p.rollouts.decoding.max_new_tokens, p.eval.decoding.max_new_tokens
    g, Cr = p.rl.rollouts_per_prompt * p.rl.prompts_per_step, p.rl.decoding.max_new_tokens
    adapter = counts["trainable"] * 4
    fwd = lambda fl: compute_seconds(fl, gpu, "forward")  # noqa: E731
    sft_tokens = P + C + 1
    return {
        "01 sampled rollouts": generate_seconds(m, gpu, p.rollouts.batch_size, p.rollouts.batch_size, P, C, C),
        "01 greedy batch": generate_seconds(m, gpu, p.eval.batch_size, p.eval.batch_size, P, Ce, Ce),
        "02 packed probe forward": fwd(forward_flops(m, P + C + probe_extra, p.probe.batch_size)),
        "05 LoRA SFT step": compute_seconds(train_flops(m, sft_tokens, p.sft.per_device_batch_size,
                                                        p.sft.gradient_checkpointing), gpu, "train"),
        "05 greedy batch (adapter)": generate_seconds(m, gpu, p.eval.batch_size, p.eval.batch_size, P, Ce, Ce,
                                                      adapter_bytes=adapter),
        "06 EDIT-RL step": generate_seconds(m, gpu, g, g, P, Cr, Cr)
        + compute_seconds(train_flops(m, P + Cr, g, True), gpu, "train")
        + fwd(forward_flops(m, P + Cr, g)) * (p.rl.beta_kl > 0) + fwd(forward_flops(m, P + Cr + probe_extra, g)),
    }


def compare_times(measured: dict, estimated: dict) -> list[dict]:
    """One row per phase in both: measured and estimated seconds and estimate / measured (None where nothing was
    measured or the measurement is zero)."""
    rows = []
    for phase, est in estimated.items():
        got = measured.get(phase)
        rows.append(dict(phase=phase, measured_s=None if got is None else float(f"{got:.4g}"),
                         estimate_s=float(f"{est:.4g}"), ratio=float(f"{est / got:.3g}") if got else None))
    return rows
