"""Model loading, the tiny Qwen3 architecture of the embedded grader, and the shared LoRA recipe (App. B).

One code path for every profile: `load_model_and_tokenizer` opens any Hugging Face causal LM by hub name or
local directory (Qwen3-8B in the paper profile, the suite's tiny grader in the embedded default). What to load
is the profile's `model` section (`config.ModelConfig`); the adapter is `sft.lora` (`config.LoraConfig`).
"""
from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, Qwen3Config, Qwen3ForCausalLM

from edit_lib.config import PAPER_LORA_TARGETS, LoraConfig, ModelConfig
from edit_lib.model import block_attention

__all__ = ["PAPER_LORA_TARGETS", "LoraConfig", "ModelConfig", "attach_lora", "count_parameters",
           "init_tiny_model", "load_model_and_tokenizer", "lora_to_peft", "merge_lora", "prepare_tokenizer",
           "resolve_device", "save_model_and_tokenizer", "tiny_qwen3_config"]

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "auto": "auto"}


def resolve_device(device: str = "auto") -> torch.device:
    """'auto' -> cuda when available, else cpu."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device)


def prepare_tokenizer(tokenizer, model: PreTrainedModel | None = None):
    """Pad token falls back to EOS; left padding (decoder-only generation); mirror ids into the model config."""
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    if model is not None:
        for cfg in (model.config, model.generation_config):
            if cfg is not None and getattr(cfg, "pad_token_id", None) is None:
                cfg.pad_token_id = tokenizer.pad_token_id
    return tokenizer


def load_model_and_tokenizer(cfg: ModelConfig):
    """Load any HF causal LM and its tokenizer (the grader policy of App. B); returns (model, tokenizer) in eval mode."""
    if cfg.dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {sorted(_DTYPES)}, got {cfg.dtype!r}")
    kw = dict(trust_remote_code=cfg.trust_remote_code, local_files_only=cfg.local_files_only)
    if getattr(cfg, "hub_commit", "") and not Path(cfg.name_or_path).expanduser().is_dir():
        kw["revision"] = cfg.hub_commit  # the pinned commit of a hub model (model.hub_commit)
    tokenizer = AutoTokenizer.from_pretrained(cfg.name_or_path, **kw)
    extra = {"attn_implementation": cfg.attn_implementation} if cfg.attn_implementation else {}  # '': HF default
    if cfg.attn_implementation == block_attention.NAME:
        block_attention.register()
    model = AutoModelForCausalLM.from_pretrained(cfg.name_or_path, dtype=_DTYPES[cfg.dtype], **extra, **kw)
    model.to(resolve_device(cfg.device)).eval()
    return model, prepare_tokenizer(tokenizer, model)


def save_model_and_tokenizer(model: PreTrainedModel, tokenizer, path: str | Path) -> Path:
    """Write weights (safetensors) + config + tokenizer to `path`, loadable by `load_model_and_tokenizer`."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def tiny_qwen3_config(vocab_size: int, hidden: int = 128, layers: int = 4, heads: int = 4,
                      kv_heads: int | None = None, intermediate: int = 512, max_position: int = 1024,
                      tie_embeddings: bool = True, pad_token_id: int | None = None,
                      bos_token_id: int | None = None, eos_token_id: int | None = None,
                      rope_theta: float = 10000.0) -> Qwen3Config:
    """Qwen3 architecture (the paper's Qwen3-8B, App. B) at the embedded default's scale (`edit_lib.embedded`).

    kv_heads=None means full multi-head attention (kv_heads == heads); head_dim = hidden // heads.
    """
    if hidden % heads:
        raise ValueError(f"hidden={hidden} not divisible by heads={heads}")
    kv_heads = heads if kv_heads is None else kv_heads
    if heads % kv_heads:
        raise ValueError(f"heads={heads} not divisible by kv_heads={kv_heads}")
    return Qwen3Config(
        vocab_size=vocab_size, hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=hidden // heads,
        max_position_embeddings=max_position, tie_word_embeddings=tie_embeddings, max_window_layers=layers,
        rope_parameters={"rope_type": "default", "rope_theta": rope_theta},
        pad_token_id=pad_token_id, bos_token_id=bos_token_id, eos_token_id=eos_token_id)


def init_tiny_model(tokenizer, seed: int = 0, **config_kwargs) -> Qwen3ForCausalLM:
    """Freshly initialised tiny Qwen3 grader for `tokenizer` (`edit_lib.embedded.build`), deterministic given
    `seed`."""
    cfg = tiny_qwen3_config(len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                            bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                            **config_kwargs)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(cfg)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model.eval()


def count_parameters(model: torch.nn.Module, trainable_only: bool = False) -> int:
    """Number of (trainable) parameters; tied weights are counted once."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def lora_to_peft(cfg: LoraConfig):
    """The peft adapter config of the shared LoRA recipe (App. B: r=64, alpha=128, all projections)."""
    from peft import LoraConfig as PeftLoraConfig
    return PeftLoraConfig(r=cfg.r, lora_alpha=cfg.alpha, lora_dropout=cfg.dropout,
                          target_modules=list(cfg.target_modules), bias=cfg.bias, task_type="CAUSAL_LM")


def attach_lora(model: PreTrainedModel, cfg: LoraConfig | None = None, layers: list[int] | None = None):
    """Wrap `model` with a fresh LoRA adapter (App. B recipe by default); base weights are frozen. `layers`: the
    decoder layers to adapt (None = every layer, App. B)."""
    import warnings
    from peft import get_peft_model
    peft_cfg = lora_to_peft(cfg or LoraConfig())
    if layers is not None:
        peft_cfg.layers_to_transform = list(layers)
    with warnings.catch_warnings():  # peft 0.21 calls a deprecated transformers 5 helper
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        return get_peft_model(model, peft_cfg)


def merge_lora(model):
    """Fold the adapter into the base weights and return the plain model (App. B: RL starts from the merged
    initialisation, which is also the KL reference). A model without an adapter is returned unchanged."""
    from peft import PeftModel
    return model.merge_and_unload() if isinstance(model, PeftModel) else model
