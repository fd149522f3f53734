"""The policy (grader): a model, its tokenizer, and how a prompt becomes model input text.

The embedded tiny grader reads plain text (prompt + separator + completion); a real chat model (Qwen3-8B in
the paper, App. B) reads its chat template with thinking switched off. Everything downstream (rollouts,
probe, audit, revision, training) goes through ``Policy.input_text`` so both paths share one code path.
"""
from __future__ import annotations

from dataclasses import dataclass
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
        """Input that asks the policy to grade ``answer`` (Sec. 2.1 grading prompt; ``mask`` for Eq. 3)."""
        return self.input_text(render_grading_prompt(q, answer, mask=mask))


def load_policy_from_profile(profile) -> Policy:
    """The profile's policy: 'embedded' (shipped tiny grader), 'micro' (built on the fly) or an HF model."""
    from .grader import load_policy
    from .models import ModelConfig

    m = profile.model
    cfg = ModelConfig(name_or_path=m.name_or_path, dtype=m.dtype, device=m.device,
                      attn_implementation=m.attn_implementation)
    model, tokenizer, kind = load_policy(m.name_or_path, cfg)
    return Policy(model=model, tokenizer=tokenizer, kind=kind, name=m.name_or_path)
