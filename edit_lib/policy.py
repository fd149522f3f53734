"""The policy (grader): a model, its tokenizer, and how a prompt becomes model input text.

The embedded tiny grader reads plain text (prompt + separator + completion); a real chat model (Qwen3-8B in
the paper, App. B) reads its chat template with thinking switched off. Everything downstream (rollouts,
probe, audit, revision, training) goes through ``Policy.input_text`` so both paths share one code path.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .data.schema import Question
from .prompts import chat_text, render_grading_prompt, tiny_text


@dataclass
class Policy:
    model: Any
    tokenizer: Any
    kind: str  # "tiny" (plain text) or "chat" (chat template)
    name: str = ""

    def input_text(self, prompt: str, completion: str | None = None) -> str:
        """Model input for a rendered prompt; with ``completion`` the full sequence prompt + completion."""
        if self.kind == "tiny":
            return tiny_text(prompt, completion or "")
        if self.kind == "chat":
            head = chat_text(self.tokenizer, prompt)
            return head if completion is None else head + completion
        raise ValueError(f"unknown policy kind {self.kind!r} (expected 'tiny' or 'chat')")

    def grading_input(self, q: Question, answer: str, mask: str | None = None) -> str:
        """Input that asks the policy to grade ``answer`` (Sec. 2.1 grading prompt; ``mask`` for Eq. 3). A chat
        model gets the one-judgement-per-line instruction (``prompts.grading_instruction``)."""
        style = "chat" if self.kind == "chat" else "tiny"
        return self.input_text(render_grading_prompt(q, answer, mask=mask, style=style))


def load_policy_from_profile(profile, adapter: str | Path | None = None, merge: bool = False,
                             init_adapter: str | Path | None = None) -> Policy:
    """The profile's policy: 'embedded' (shipped tiny grader), 'micro' (built on the fly) or an HF model;
    with `adapter`, a LoRA adapter saved by `train.sft.train_sft` on top (see `load_policy`).

    `init_adapter`: an adapter merged into Base first, the initialisation an RL adapter was trained over (App. B:
    RL trains a fresh LoRA on the merged SFT model), so `init_adapter=<EDIT-SFT>, adapter=<RL run>` loads an
    EDIT-SFT+EDIT-RL policy; alone it gives the merged initialisation."""
    m = profile.model
    if init_adapter is None:
        model, tokenizer, kind = load_policy(m.name_or_path, m, adapter=adapter, merge=merge)
    else:
        model, tokenizer, kind = load_policy(m.name_or_path, m, adapter=init_adapter, merge=True)
        if adapter is not None:
            model = apply_adapter(model, adapter, merge=merge)
    parts = [m.name_or_path] + [Path(a).name for a in (init_adapter, adapter) if a is not None]
    return Policy(model=model, tokenizer=tokenizer, kind=kind, name="+".join(parts))


def apply_adapter(model, adapter: str | Path, merge: bool = False):
    """Base `model` with the LoRA adapter folder `adapter` (peft `save_pretrained` output of `train_sft`, App. B
    recipe) applied, eval mode. Unmerged (default): a peft model whose logits equal the trained in-memory model's
    and whose adapter can be switched off; `merge=True` folds it into the weights (`models.merge_lora`; App. B:
    RL starts from the merged initialisation)."""
    from peft import PeftModel
    path = Path(adapter)
    if not (path / "adapter_config.json").is_file():
        raise FileNotFoundError(f"adapter {str(adapter)!r}: no adapter_config.json (expected a folder written by "
                                f"edit_lib.train.sft.train_sft)")
    import warnings
    with warnings.catch_warnings():  # peft 0.21 calls a deprecated transformers 5 helper
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        peft_model = PeftModel.from_pretrained(model, str(path), is_trainable=False).eval()
    return peft_model.merge_and_unload() if merge else peft_model


def load_policy(name_or_path: str = "embedded", model_cfg=None, adapter: str | Path | None = None,
                merge: bool = False):
    """Load the Base policy: 'embedded' (shipped tiny grader), 'micro' (built into the cache if absent) or any
    HF causal LM name/path (Qwen3-8B in the paper profile, App. B). Returns (model, tokenizer, kind) with kind
    'tiny' (plain `tiny_text` prompts) or 'chat' (the tokenizer's chat template).

    `model_cfg` (a `config.ModelConfig`, the profile's `model` section) says how to load; its name_or_path is
    replaced by the resolved path. None: the checkpoint's dtype on cuda when available, else cpu.
    `adapter`: a LoRA folder saved by `train.sft.train_sft`, applied on top of this Base (`apply_adapter`;
    unmerged unless `merge`), so trained policies load and grade through the same path as Base."""
    import dataclasses

    from .config import ModelConfig
    from .models import load_model_and_tokenizer
    cfg = model_cfg or ModelConfig(dtype="auto", device="auto", attn_implementation="", torch_threads=0)
    local = False
    if name_or_path in ("embedded", "micro"):  # only these two names reach the embedded package
        from .embedded.store import ASSETS_DIR, ensure_micro_grader
    if name_or_path == "embedded":
        path, local = ASSETS_DIR, True
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"no shipped grader in {path}; run `edit-suite build-grader`")
    elif name_or_path == "micro":
        path, local = ensure_micro_grader(), True
    else:
        path = name_or_path
        local = (Path(path) / "recipe.json").exists()
    if cfg.torch_threads:
        import torch
        torch.set_num_threads(cfg.torch_threads)
    cfg = dataclasses.replace(cfg, name_or_path=str(path), local_files_only=cfg.local_files_only or local)
    model, tok = load_model_and_tokenizer(cfg)
    kind = "tiny" if local or not getattr(tok, "chat_template", None) else "chat"
    if adapter is not None:
        model = apply_adapter(model, adapter, merge=merge)
    return model, tok, kind

