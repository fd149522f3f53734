"""One decoding step without transformers' per-call plumbing (``model.lean_decoding``): App. B's decoding forward
of one new token per row through the model's own modules, giving the logits of ``model(...)`` bit for bit.

On a small grader the decorators, mask construction, output records and keyword plumbing of transformers' model
classes are a measurable part of a decoding step. `LeanStep` calls what that forward calls, in its order: the
embedding, the rotary module, each decoder layer's norms and projections, transformers' ``apply_rotary_pos_emb``,
the cache update, the attention function registered for the model's ``attn_implementation`` (with its
arguments), the MLP module, the final norm and the head. LoRA layers are the model's own modules, so an adapter
acts as it does in the model, its dropout in training mode included (GRPO samples with the policy in training
mode; the modules draw in transformers' order). The mask is the one transformers builds at a one-token step
(`padding_mask`). `why_not` names what it does not cover (another architecture or attention, sliding windows,
non-default rotary); lean decoding then runs transformers' forward. tests/model/test_lean_decode.py compares
every step's logits with the model's.
"""
from __future__ import annotations

import importlib

import torch
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

# the decoder layers whose forward `LeanStep` follows (read from transformers 5.24), by their modeling module
LAYERS = {"Qwen3DecoderLayer": "transformers.models.qwen3.modeling_qwen3",
          "LlamaDecoderLayer": "transformers.models.llama.modeling_llama"}
ATTENTION = ("eager", "sdpa", "sdpa_blocks")  # whose one-token-step masks `padding_mask` builds


def padding_mask(mask: torch.Tensor | None, batch: int, keys: int, dtype: torch.dtype, attn_implementation: str):
    """The attention mask transformers' ``create_causal_mask`` hands every layer at a one-token step, where the new
    token sees every one of the ``keys`` positions but padding (``mask``: the 2-D mask, None without padding): for
    SDPA, ``mask`` as bool of shape (batch, 1, 1, keys), or none; for eager attention always a float mask, 0 where
    seen and ``dtype``'s minimum elsewhere (``masking_utils.eager_mask``)."""
    if attn_implementation != "eager":
        return None if mask is None else mask.bool()[:, None, None, :]
    if mask is None:
        return torch.zeros((batch, 1, 1, keys), dtype=dtype)
    return torch.where(mask.bool()[:, None, None, :], torch.zeros((), dtype=dtype), torch.finfo(dtype).min)


def why_not(hf) -> str | None:
    """Why `LeanStep` cannot promise ``hf``'s logits (None: it can); ``hf`` is the transformers causal LM."""
    body, cfg = getattr(hf, "model", None), hf.config
    layers = getattr(body, "layers", None)
    if layers is None or not hasattr(hf, "lm_head") or not hasattr(body, "rotary_emb"):
        return f"{type(hf).__name__} is not a decoder-only model with layers, rotary embedding and a head"
    kinds = {type(layer).__name__ for layer in layers}
    if not kinds <= set(LAYERS) or len(kinds) != 1:
        return f"decoder layers {sorted(kinds)} (the lean step follows {sorted(LAYERS)})"
    if cfg._attn_implementation not in ATTENTION:
        return f"attn_implementation {cfg._attn_implementation!r} (the lean step covers {ATTENTION})"
    if any(t != "full_attention" for t in getattr(cfg, "layer_types", None) or ["full_attention"]):
        return "sliding-window layers"
    if getattr(body.rotary_emb, "rope_type", "default") != "default":
        return f"rotary type {body.rotary_emb.rope_type!r}"
    return None


class LeanStep:
    """``hf(input_ids=tokens, position_ids=positions, attention_mask=mask, cache=cache, use_cache=True,
    logits_to_keep=1).logits`` for one new token per row (``tokens`` of shape (batch, 1)); check `why_not` first.
    With a `lean_decode.SharedPromptCache` the cache attends (its prompt read once per group of rows)."""

    def __init__(self, hf):
        self.hf, self.body = hf, hf.model
        modeling = importlib.import_module(LAYERS[type(self.body.layers[0]).__name__])
        self.rotate = modeling.apply_rotary_pos_emb
        self.attend = ALL_ATTENTION_FUNCTIONS.get_interface(hf.config._attn_implementation,
                                                            modeling.eager_attention_forward)

    def __call__(self, tokens: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None, cache):
        if tokens.shape[1] != 1:
            raise ValueError(f"the lean step decodes one token per row, got {tokens.shape[1]}")
        x = self.body.embed_tokens(tokens)
        cos, sin = self.body.rotary_emb(x, positions)
        shared = getattr(cache, "attend", None)  # a lean_decode.SharedPromptCache attends itself
        if shared:  # ``mask``: the rows' own part (their own prompt tokens, then the decoded ones)
            pad = None if mask is None else padding_mask(mask, x.shape[0], mask.shape[1], x.dtype, "eager")
        else:
            pad = padding_mask(mask, x.shape[0], cache.get_seq_length() + 1, x.dtype,
                               self.hf.config._attn_implementation)
        for layer in self.body.layers:
            attn = layer.self_attn
            h = layer.input_layernorm(x)
            shape = (*h.shape[:-1], -1, attn.head_dim)
            q, k, v = attn.q_proj(h).view(shape), attn.k_proj(h).view(shape), attn.v_proj(h).view(shape)
            if hasattr(attn, "q_norm"):  # Qwen3 normalises each head's queries and keys
                q, k = attn.q_norm(q), attn.k_norm(k)
            q, k = self.rotate(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
            k, v = cache.update(k, v.transpose(1, 2), attn.layer_idx)
            if shared:
                out = shared(attn.layer_idx, q, k, v, attn.scaling, pad)
            else:
                extra = {"sliding_window": attn.sliding_window} if hasattr(attn, "sliding_window") else {}
                drop = attn.attention_dropout if attn.training else 0.0
                out, _ = self.attend(attn, q, k, v, pad, dropout=drop, scaling=attn.scaling, **extra)
            x = x + attn.o_proj(out.reshape(*h.shape[:-1], -1).contiguous())
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return self.hf.lm_head(self.body.norm(x))
