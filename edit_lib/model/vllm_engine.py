"""The optional vLLM generation backend (``model.generation_backend: vllm``): rollouts and greedy evaluation of a
policy on GPUs through vLLM, the same rows as ``generate.generate`` (App. B "Decoding and evaluation": one greedy
completion per marking; Table 9: 8 rollouts at T = 1.0, 1,024 tokens).

vLLM is never required: it is imported only when a profile asks for it, and a clear error says what is missing
(the package, or a GPU). A policy maps onto vLLM as follows:

* Base: one ``vllm.LLM`` on the Base weights.
* Base + LoRA adapter (SFT systems, Base-initialised RL): the same engine, the adapter passed per request as a
  ``LoRARequest`` (vLLM applies it without merging).
* An RL adapter over a merged SFT initialisation (App. B: RL trains a fresh LoRA on the merged SFT model): the
  initialisation is merged once into a folder of the suite's cache, keyed by the digests of the Base config and
  the SFT adapter, and an engine on that folder serves the RL adapter as a ``LoRARequest``.

Engines are kept per weights folder for the life of the process (loading an 8B model takes minutes).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd

from edit_lib.model.generate import Parse, SamplingConfig, generate_vllm

_ENGINES: dict[str, Any] = {}


class VLLMUnavailable(RuntimeError):
    """The profile asks for vLLM where it cannot run."""


def check_available() -> None:
    """Raise ``VLLMUnavailable`` naming what is missing (the ``vllm`` package, a CUDA device)."""
    try:
        import vllm  # noqa: F401
    except ImportError as err:
        raise VLLMUnavailable("model.generation_backend is 'vllm' but vllm is not installed (pip install vllm on a "
                              "GPU machine), or set model.generation_backend=hf") from err
    import torch
    if not torch.cuda.is_available():
        raise VLLMUnavailable("model.generation_backend is 'vllm' but no CUDA device is visible; set "
                              "model.generation_backend=hf on CPU")


def merged_folder(base_path: str, init_adapter: str | Path, model_cfg, load: Callable[..., tuple],
                  cache_root: Path | None = None) -> Path:
    """Base with ``init_adapter`` merged (App. B: the RL initialisation), saved once under the suite's cache as a
    plain checkpoint vLLM can load; reused while the Base path and the adapter's files are unchanged. ``load`` is
    ``policy.load_policy`` (passed in: the policy module imports this one)."""
    from edit_lib.artifacts import cache_dir, folder_digest
    from edit_lib.model.hf import save_model_and_tokenizer
    key = hashlib.sha256(f"{base_path}|{folder_digest(Path(init_adapter))}".encode()).hexdigest()[:16]
    out = (cache_root or cache_dir()) / "vllm_merged" / key
    if not (out / "config.json").exists():
        model, tok, _ = load(base_path, model_cfg, adapter=init_adapter, merge=True)
        save_model_and_tokenizer(model, tok, out)
    return out


def engine_for(weights: str, model_cfg, max_lora_rank: int, seed: int = 0):
    """One ``vllm.LLM`` per weights folder (LoRA enabled up to ``max_lora_rank``), built on first use."""
    if weights not in _ENGINES:
        from vllm import LLM
        _ENGINES[weights] = LLM(model=weights, dtype=model_cfg.dtype,
                                enable_lora=True, max_lora_rank=max_lora_rank, seed=seed,
                                gpu_memory_utilization=model_cfg.vllm_gpu_memory_utilization,
                                trust_remote_code=model_cfg.trust_remote_code)
    return _ENGINES[weights]


@dataclass
class VLLMPolicyEngine:
    """A policy's generation through vLLM: the engine and, for an adapter policy, its ``LoRARequest``."""
    llm: Any
    lora_request: Any = None
    gpu_memory_utilization: float | None = None  # GRPO's co-located engine gets the same share (rl_config)

    def generate(self, prompts: Sequence[str], cfg: SamplingConfig, ids: Sequence | None = None,
                 progress: bool = True, parse: Parse | None = None) -> pd.DataFrame:
        return generate_vllm(self.llm, prompts, cfg, ids=ids, parse=parse, lora_request=self.lora_request,
                             progress=progress)


_LORA_IDS: dict[str, int] = {}


def policy_engine(profile, base_path: str, load: Callable[..., tuple], adapter: str | Path | None = None,
                  init_adapter: str | Path | None = None) -> VLLMPolicyEngine:
    """The vLLM engine of the policy ``load_policy_from_profile`` builds (same Base, adapter and initialisation);
    ``load`` (``policy.load_policy``) merges an ``init_adapter`` into Base (``merged_folder``)."""
    check_available()
    m = profile.model
    weights = str(merged_folder(base_path, init_adapter, m, load) if init_adapter is not None else base_path)
    llm = engine_for(weights, m, max_lora_rank=profile.sft.lora.r, seed=profile.run.seed)
    share = m.vllm_gpu_memory_utilization
    if adapter is None:
        return VLLMPolicyEngine(llm, gpu_memory_utilization=share)
    from vllm.lora.request import LoRARequest
    path = str(Path(adapter).resolve())
    lora_id = _LORA_IDS.setdefault(path, len(_LORA_IDS) + 1)  # vLLM wants a stable positive int per adapter
    return VLLMPolicyEngine(llm, LoRARequest(Path(adapter).name, lora_id, path), gpu_memory_utilization=share)
