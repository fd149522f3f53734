"""Model loading, the embedded tiny Qwen3 grader, and the shared LoRA recipe (App. B).

One code path for every profile: `load_model_and_tokenizer` opens any Hugging Face causal LM by hub name or
local directory (Qwen3-8B in the paper profile, the suite's tiny grader in the embedded default).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, Qwen3Config, Qwen3ForCausalLM

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "auto": "auto"}
# App. B: "applied to all attention and MLP projection matrices (q, k, v, o, gate, up, down)"
PAPER_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass
class ModelConfig:
    """Which causal LM to load and how (paper profile: Qwen/Qwen3-8B in bfloat16 on cuda, App. B)."""
    name_or_path: str = field(metadata={"help": "Hub id (e.g. Qwen/Qwen3-8B) or local directory with config + weights."})
    dtype: str = field(default="auto", metadata={"help": "auto (the checkpoint's: float32 tiny grader, bfloat16 Qwen3-8B) "
                                                       "| float32 | bfloat16 | float16."})
    device: str = field(default="auto", metadata={"help": "cpu | cuda | cuda:N | auto (cuda when available, else cpu)."})
    attn_implementation: str | None = field(
        default=None, metadata={"help": "eager | sdpa | flash_attention_2 | None (transformers' default)."})
    trust_remote_code: bool = field(default=False, metadata={"help": "Allow custom modelling code from the hub."})
    local_files_only: bool = field(default=False, metadata={"help": "Never touch the network (tests, offline runs)."})


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
    tokenizer = AutoTokenizer.from_pretrained(cfg.name_or_path, **kw)
    extra = {"attn_implementation": cfg.attn_implementation} if cfg.attn_implementation else {}
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
    """Qwen3 architecture (the paper's Qwen3-8B, App. B) at embedded-default scale (DESIGN §5).

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
    """Freshly initialised tiny Qwen3 grader for `tokenizer` (DESIGN §5), deterministic given `seed`."""
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


@dataclass
class LoraSpec:
    """The shared LoRA recipe of App. B (SFT and, as a fresh adapter, RL: Table 7)."""
    r: int = field(default=64, metadata={"help": "LoRA rank (App. B: 64)."})
    alpha: int = field(default=128, metadata={"help": "LoRA alpha (App. B: 128)."})
    dropout: float = field(default=0.05, metadata={"help": "LoRA dropout."})
    target_modules: tuple[str, ...] = field(
        default=PAPER_LORA_TARGETS, metadata={"help": "All attention and MLP projections (App. B)."})
    bias: str = field(default="none", metadata={"help": "peft bias mode: none | all | lora_only."})

    def to_peft(self):
        from peft import LoraConfig
        return LoraConfig(r=self.r, lora_alpha=self.alpha, lora_dropout=self.dropout,
                          target_modules=list(self.target_modules), bias=self.bias, task_type="CAUSAL_LM")

    def to_dict(self) -> dict:
        return {**asdict(self), "target_modules": list(self.target_modules)}


def attach_lora(model: PreTrainedModel, spec: LoraSpec | None = None):
    """Wrap `model` with a fresh LoRA adapter (App. B recipe by default); base weights are frozen."""
    import warnings
    from peft import get_peft_model
    with warnings.catch_warnings():  # peft 0.21 calls a deprecated transformers 5 helper
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        return get_peft_model(model, (spec or LoraSpec()).to_peft())


def merge_lora(model):
    """Fold the adapter into the base weights and return the plain model (App. B: RL starts from the merged
    initialisation, which is also the KL reference). A model without an adapter is returned unchanged."""
    from peft import PeftModel
    return model.merge_and_unload() if isinstance(model, PeftModel) else model
