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


def load_policy_from_profile(profile) -> Policy:
    """The profile's policy: 'embedded' (shipped tiny grader), 'micro' (built on the fly) or an HF model."""
    m = profile.model
    model, tokenizer, kind = load_policy(m.name_or_path, m)
    return Policy(model=model, tokenizer=tokenizer, kind=kind, name=m.name_or_path)


def load_policy(name_or_path: str = "embedded", model_cfg=None):
    """Load the Base policy: 'embedded' (shipped tiny grader), 'micro' (built into the cache if absent) or any
    HF causal LM name/path (Qwen3-8B in the paper profile, App. B). Returns (model, tokenizer, kind) with kind
    'tiny' (plain `tiny_text` prompts) or 'chat' (the tokenizer's chat template).

    `model_cfg` (a `config.ModelConfig`, the profile's `model` section) says how to load; its name_or_path is
    replaced by the resolved path. None: the checkpoint's dtype on cuda when available, else cpu."""
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
    return model, tok, kind

