"""Lean decoding (``model.lean_decoding``): transformers' greedy / sampling loop with a cache that grows in place and a
one-token step without the model classes' per-call plumbing, giving the tokens of ``model.generate`` (App. B's
decoding unchanged) in less time on a small model. Longer than 400 lines because the loop and its step are one path.

``lean_generate`` takes ``model.generate``'s arguments and returns its tensor: transformers' helpers give the
settings, logits processors and special tokens; each cache layer writes into a buffer sized prompt + budget; a
one-token step runs ``LeanStep`` (embedding, rotary, each layer's norms, projections, cache update, the registered
attention function and MLP, final norm and head: the logits of ``model(...)`` bit for bit) where ``why_not`` finds
it covers the model. ``lean_rollouts`` decodes 06's GRPO rollouts. Three choices move the logits' last digits
(judged by ``compare --conclusions``): finished rows leave the forward (``COMPACT_EVERY``; a row's sampler stream is
unchanged), rows sharing a prompt prefix read its keys once a step (``SHARE_PROMPTS``) and LoRA adapters are folded
into their weights for a call's steps (``MERGE_LORA``); none while a dropout draws. Where generate's tokens cannot
be promised (``unsupported``) it warns and calls ``model.generate``. ``shared_prefix`` (``model.prefix_cache``)
encodes a batch's common prompt prefix once for HF generate. tests/model/test_lean_decode.py, test_shared_prompt.py
and test_prefix_cache.py check them; ``bench decoding``, ``rollouts`` and ``prefix`` time them.
"""
from __future__ import annotations

import importlib
import inspect
import warnings
from dataclasses import dataclass
from typing import Sequence

import torch
from transformers import LogitsProcessorList
from transformers.cache_utils import DynamicCache, DynamicLayer
from transformers.generation.configuration_utils import GenerationMode
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS


# the decoder layers whose forward `LeanStep` follows (read from transformers 5.24), by their modeling module
LAYERS = {"Qwen3DecoderLayer": "transformers.models.qwen3.modeling_qwen3",
          "LlamaDecoderLayer": "transformers.models.llama.modeling_llama"}
ATTENTION = ("eager", "sdpa", "sdpa_blocks")  # whose one-token-step masks `padding_mask` builds


# ---------------------------------------------------------------- a batch's shared prompt prefix, encoded once

def left_pad(seqs: list[list[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Token rows left-padded to one width, with their attention mask (1 on tokens, 0 on padding)."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, s in enumerate(seqs):
        ids[i, width - len(s):] = torch.tensor(s, dtype=torch.long)
        mask[i, width - len(s):] = 1
    return ids.to(device), mask.to(device)


#: Fewest shared prompt tokens worth a separate prefix pass (below it the batch is encoded whole).
MIN_SHARED_PREFIX = 16


def common_prefix_length(seqs: Sequence[Sequence[int]]) -> int:
    """Length of the token prefix every sequence shares, at most ``min(len) - 1`` so that every row keeps at least
    one token of its own (its last prompt token must be fed to give the first logits)."""
    n = min(len(s) for s in seqs) - 1
    first = seqs[0]
    for s in seqs[1:]:
        k = 0
        while k < n and s[k] == first[k]:
            k += 1
        n = k
    return max(n, 0)


def shared_prefix(model, seqs: list[list[int]], pad_id: int, device, min_shared: int = MIN_SHARED_PREFIX):
    """The inputs of one batch with its common prompt prefix encoded once: the prefix's key/value cache, computed
    for one row and repeated for every row, with the full input ids and a mask laid out as [prefix | left-padded
    own tokens]. HF generate then feeds only the tokens past the cache, and takes positions from the mask's
    cumulative sum, so a row's positions and attended tokens are those of its unpadded prompt (the padding between
    prefix and own tokens is masked). Returns None when the rows share fewer than ``min_shared`` tokens."""
    from transformers import DynamicCache
    p = common_prefix_length(seqs)
    if p < min_shared:
        return None
    prefix = torch.tensor([seqs[0][:p]], dtype=torch.long, device=device)
    cache = DynamicCache(config=model.config)
    model(input_ids=prefix, cache=cache, use_cache=True, logits_to_keep=1)
    cache.batch_repeat_interleave(len(seqs))
    own, own_mask = left_pad([s[p:] for s in seqs], pad_id, device)
    input_ids = torch.cat([prefix.expand(len(seqs), p), own], dim=1)
    mask = torch.cat([torch.ones((len(seqs), p), dtype=own_mask.dtype, device=device), own_mask], dim=1)
    return input_ids, mask, cache


# ---------------------------------------------------------------- the lean loop


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


def merged_lora(layers) -> dict:
    """Each plain LoRA linear among ``layers``' modules (peft's, unmerged, adapters on) -> its weight with the
    active adapters folded in, W + scaling * B A (App. B's LoRA), and its bias: one product per projection in
    place of three, for a call's steps. The modules are left as they are (the KL reference keeps its weights)."""
    out = {}
    for mod in layers.modules():
        base = getattr(mod, "base_layer", None)
        if not isinstance(base, torch.nn.Linear) or not hasattr(mod, "lora_A") or mod.merged or mod.disable_adapters:
            continue
        active = [a for a in mod.active_adapters if a in mod.lora_A]
        if any(a in mod.lora_variant or mod.lora_B[a].bias is not None for a in active):  # DoRA, lora_bias: own forward
            continue
        out[mod] = (sum((mod.get_delta_weight(a) for a in active), base.weight), base.bias)
    return out


class LeanStep:
    """``hf(input_ids=tokens, position_ids=positions, attention_mask=mask, cache=cache, use_cache=True,
    logits_to_keep=1).logits`` for one new token per row (``tokens`` of shape (batch, 1)); check `why_not` first.
    With a `lean_decode.SharedPromptCache` the cache attends (its prompt read once per group of rows).
    ``merge_lora``: LoRA linears run with their adapters folded into one weight (`merged_lora`): the same
    function, its last digits moved; only where no dropout draws (`draws_dropout`), since a fold skips the draws."""

    def __init__(self, hf, merge_lora: bool = False):
        self.hf, self.body = hf, hf.model
        modeling = importlib.import_module(LAYERS[type(self.body.layers[0]).__name__])
        self.rotate = modeling.apply_rotary_pos_emb
        self.attend = ALL_ATTENTION_FUNCTIONS.get_interface(hf.config._attn_implementation,
                                                            modeling.eager_attention_forward)
        self.folded = merged_lora(self.body.layers) if merge_lora else {}

    def linear(self, mod, x: torch.Tensor) -> torch.Tensor:
        folded = self.folded.get(mod)
        return mod(x) if folded is None else torch.nn.functional.linear(x, *folded)

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
            q, k, v = (self.linear(proj, h).view(shape) for proj in (attn.q_proj, attn.k_proj, attn.v_proj))
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
            x = x + self.linear(attn.o_proj, out.reshape(*h.shape[:-1], -1).contiguous())
            mlp, h = layer.mlp, layer.post_attention_layernorm(x)  # Qwen3's and Llama's MLP, as their forward
            x = x + self.linear(mlp.down_proj, mlp.act_fn(self.linear(mlp.gate_proj, h)) * self.linear(mlp.up_proj, h))
        return self.hf.lm_head(self.body.norm(x))


# compaction: the finished rows leave the forward once they are 1/COMPACT_EVERY of those left, so that the copy of
# the cache it costs is paid a few times a call, not every step (4 or 8 alike in a sweep; 0 keeps every row); not
# while a dropout draws (`draws_dropout`)
# ---------------------------------------------------------------- the loop

COMPACT_EVERY = 4
# rows sharing a prompt prefix (one prompt's rollouts, one question's gradings) encode it once and read its keys and
# values once a step (the shared-prompt attention, below)
SHARE_PROMPTS = True
# a call's one-token steps run each LoRA linear as one product with its adapter folded in (`merged_lora`): 06's GRPO
# rollouts sample from a policy whose fresh adapter trains, so generate runs three products a projection there
MERGE_LORA = True


class GrowingLayer(DynamicLayer):
    """A DynamicLayer whose keys and values live in a buffer of ``capacity`` positions: an update writes the new
    states in place and returns views of the filled part, equal to what DynamicLayer's concatenation returns, so a
    step copies its own token's states instead of the layer's whole history."""

    def __init__(self, capacity: int):
        super().__init__()
        self.capacity, self.filled = capacity, 0

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.device, self.is_initialized = key_states.device, True
            self.key_buf = key_states.new_empty((*key_states.shape[:2], self.capacity, key_states.shape[3]))
            self.value_buf = value_states.new_empty((*value_states.shape[:2], self.capacity, value_states.shape[3]))
        end = self.filled + key_states.shape[-2]
        if end > self.capacity:
            raise RuntimeError(f"lean decoding: {end} cached positions for a buffer of {self.capacity}")
        self.key_buf[:, :, self.filled:end] = key_states
        self.value_buf[:, :, self.filled:end] = value_states
        self.filled = end
        self.keys, self.values = self.key_buf[:, :, :end], self.value_buf[:, :, :end]
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep the rows ``indices`` (the rows still decoding, `lean_generate`'s compaction)."""
        if self.is_initialized:
            self.key_buf, self.value_buf = self.key_buf[indices], self.value_buf[indices]
            self.keys, self.values = self.key_buf[:, :, :self.filled], self.value_buf[:, :, :self.filled]


def growing_cache(config, capacity: int, prefix: DynamicCache | None = None) -> DynamicCache:
    """The DynamicCache generate would build (``config``'s layer types), every layer a `GrowingLayer`, holding a
    copy of ``prefix``'s states where given (``model.prefix_cache``'s shared prompt prefix)."""
    cache = DynamicCache(config=config)
    if any(type(layer) is not DynamicLayer for layer in cache.layers):
        raise ValueError("lean decoding: only full-attention DynamicLayer caches grow in place")
    cache.layers = [GrowingLayer(capacity) for _ in cache.layers]
    if prefix is not None:
        for mine, theirs in zip(cache.layers, prefix.layers):
            if theirs.get_seq_length() > 0:
                mine.update(theirs.keys, theirs.values)
    return cache


def _transformers_model(model):
    """The transformers model whose generate runs: a PEFT LoRA wrapper generates through its base model."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def unsupported(model, hf, cfg, model_kwargs: dict, input_ids: torch.Tensor, cache) -> str | None:
    """Why lean decoding cannot promise generate's tokens for this call (None: it can)."""
    peft_cfg = getattr(model, "active_peft_config", None)
    if peft_cfg is not None and (peft_cfg.is_prompt_learning or peft_cfg.peft_type == "POLY"
                                 or getattr(peft_cfg, "alora_invocation_tokens", None)):
        return f"a {peft_cfg.peft_type} adapter changes generate's inputs"
    if input_ids.device.type != "cpu":
        return f"checked against generate on the CPU only, not on {input_ids.device.type}"
    if hf.config.is_encoder_decoder or hf.is_remote_code():
        return "an encoder-decoder or remote-code model"
    params = set(inspect.signature(hf.forward).parameters)
    if not {"position_ids", "attention_mask", "logits_to_keep"} <= params:
        return f"{type(hf).__name__}.forward lacks position_ids, attention_mask or logits_to_keep"
    mode = cfg.get_generation_mode()
    if mode not in (GenerationMode.GREEDY_SEARCH, GenerationMode.SAMPLE) or (cfg.num_return_sequences or 1) > 1:
        return f"decoding mode {mode} (num_return_sequences {cfg.num_return_sequences})"
    if cfg.cache_implementation not in (None, "dynamic") or cfg.use_cache is False or cfg.prefill_chunk_size:
        return f"cache_implementation {cfg.cache_implementation!r}, use_cache {cfg.use_cache}"
    if cfg.max_time is not None or cfg.stop_strings is not None or not cfg.max_new_tokens or model_kwargs:
        return "max_time, stop_strings, no max_new_tokens or extra forward arguments in the generation config"
    if cache is not None and not isinstance(cache, DynamicCache):
        return f"a {type(cache).__name__} prompt cache"
    try:
        growing_cache(hf.config, 1)
    except ValueError:
        return f"{type(hf).__name__} has sliding-window or linear-attention cache layers"
    return None


@torch.inference_mode()
def lean_generate(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, generation_config,
                  logits_processor: LogitsProcessorList | None = None, cache: DynamicCache | None = None):
    """``model.generate(input_ids=, attention_mask=, generation_config=, logits_processor=[, cache=])``'s output
    (prompt and new tokens, cut where every row has stopped) by the lean loop (module docstring): App. B's greedy
    evaluation and sampled rollouts as generate decodes them. Calls ``model.generate`` itself, with a warning
    naming the reason, where `unsupported`."""
    hf = _transformers_model(model)
    cfg, model_kwargs = hf._prepare_generation_config(generation_config)
    why = unsupported(model, hf, cfg, model_kwargs, input_ids, cache)
    if why is not None:
        warnings.warn(f"model.lean_decoding: {why}; decoding with transformers generate instead (the same tokens, "
                      "no speed-up)", stacklevel=2)
        kw = {} if cache is None else {"cache": cache}
        return model.generate(input_ids=input_ids, attention_mask=attention_mask, generation_config=generation_config,
                              logits_processor=logits_processor, **kw)
    device, (batch, width) = input_ids.device, input_ids.shape
    hf._prepare_special_tokens(cfg, True, device=device, batch_size=batch)
    pos = attention_mask.long().cumsum(-1) - 1  # generate's position ids: each row counts its own tokens
    pos = pos.masked_fill(attention_mask == 0, 0)
    mask = None if (attention_mask == 1).all() else attention_mask  # generate drops a mask without padding
    cfg.max_length = width + cfg.max_new_tokens
    procs = hf._get_logits_processor(generation_config=cfg, input_ids_seq_length=width, encoder_input_ids=input_ids,
                                     logits_processor=logits_processor or LogitsProcessorList(), device=device,
                                     model_kwargs={"attention_mask": mask})
    eos, pad = cfg._eos_token_tensor, cfg._pad_token_tensor
    past = 0 if cache is None else cache.get_seq_length()
    compacts = not draws_dropout(hf)  # fewer rows would draw fewer masks (a sampler draws for every row, dropped too)
    # one-token steps skip transformers' plumbing where it can, and fold LoRA adapters where no dropout draws
    step = None if why_not(hf) else LeanStep(hf, merge_lora=compacts and MERGE_LORA)
    groups = _prompt_groups(hf, step, cache, input_ids, attention_mask)
    if groups is not None:  # rows sharing a prompt prefix: encode it once, read its keys once a step
        out, kv, mask = prefill(hf, groups, input_ids, attention_mask, cfg.max_new_tokens, GrowingLayer)
        mask = None if mask.all() else mask  # the rows' own part: its padding, grown a column a step below
    else:
        kv = growing_cache(hf.config, cfg.max_length, prefix=cache)
        out = hf(input_ids=input_ids[:, past:], position_ids=pos[:, past:], attention_mask=mask, cache=kv,
                 use_cache=True, logits_to_keep=1, return_dict=True).logits
    step_pos = pos[:, -1:]
    unfinished = torch.ones(batch, dtype=torch.long, device=device)
    live = torch.arange(batch, device=device)  # the rows still in the forward (compaction drops finished ones)
    seq = input_ids
    while True:
        # the processors see every row, in batch order (a row's sampler stream is its own); dropped rows take 0s
        logits = out[:, -1].to(copy=True, dtype=torch.float32)
        if len(live) < batch:
            logits = logits.new_zeros((batch, logits.shape[-1])).index_copy_(0, live, logits)
        scores = procs(seq, logits)
        if cfg.do_sample:  # seeding 'batch': HF's own draw from the global generator
            nxt = torch.multinomial(torch.nn.functional.softmax(scores, dim=-1), num_samples=1).squeeze(1)
        else:
            nxt = torch.argmax(scores, dim=-1)
        if eos is not None:  # finished rows take padding, as in generate
            nxt = nxt * unfinished + pad * (1 - unfinished)
            unfinished = unfinished & ~torch.isin(nxt, eos)
        seq = torch.cat([seq, nxt[:, None]], dim=-1)
        if seq.shape[1] >= cfg.max_length or not unfinished.any():
            return seq
        step_ids, step_pos = nxt[live][:, None], step_pos + 1
        if mask is not None:
            mask = torch.cat([mask, mask.new_ones((len(live), 1))], dim=-1)
        done = unfinished[live] == 0
        if compacts and int(done.sum()) * COMPACT_EVERY >= len(live):
            keep = (~done).nonzero().squeeze(1)  # a finished row's further tokens are padding: stop computing them
            live, step_ids, step_pos = live[keep], step_ids[keep], step_pos[keep]
            mask = None if mask is None else mask[keep]
            kv.batch_select_indices(keep)
        if step is not None:
            out = step(step_ids, step_pos, mask, kv)
        else:
            out = hf(input_ids=step_ids, position_ids=step_pos, attention_mask=mask, cache=kv, use_cache=True,
                     logits_to_keep=1, return_dict=True).logits


def _prompt_groups(hf, step, cache, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> PromptGroups | None:
    """The batch's groups of rows sharing a prompt prefix where their keys are to be shared (``SHARE_PROMPTS``; the
    lean step's attention is the one that reads them, so never with transformers' forward or a cached prefix), else
    None. Not while a dropout draws (`draws_dropout`): encoding a prefix once would draw fewer masks from the global
    stream and change every later sample, where sharing is meant to move only the last digits of the logits."""
    if not SHARE_PROMPTS or step is None or cache is not None or draws_dropout(hf):
        return None
    return PromptGroups.of(input_ids, attention_mask)


def draws_dropout(hf) -> bool:
    """Whether a forward of ``hf`` draws dropout masks from the global random stream (a dropout in training mode,
    such as a LoRA layer's in a policy that trains; 06's rollouts sample in eval mode: ``train.rl``)."""
    return any(m.training and m.p > 0 for m in hf.modules() if isinstance(m, torch.nn.Dropout)) or \
        any(layer.self_attn.training and layer.self_attn.attention_dropout for layer in hf.model.layers)


def lean_rollouts(model) -> None:
    """GRPO's rollouts (Sec. 2.3, Table 9's sampling) by `lean_generate`: TRL's trainer samples with
    ``model.generate(input_ids=, attention_mask=, generation_config=)`` from the global random stream; this gives
    ``model`` (the trainer's PEFT model) a ``generate`` that decodes such calls with the lean loop, and any other call
    with transformers' generate. In eval mode (``train.rl.rollouts_in_eval_mode``) a rollout batch shares its
    prompt and drops its finished rows; a policy in training mode draws its dropout masks as generate does."""
    plain = model.generate

    def generate(input_ids=None, attention_mask=None, generation_config=None, **kwargs):
        # lean_generate's own fallback passes logits_processor, so it lands here, not back in the lean loop
        if kwargs or input_ids is None or attention_mask is None or generation_config is None:
            return plain(input_ids=input_ids, attention_mask=attention_mask, generation_config=generation_config,
                         **kwargs)
        return lean_generate(model, input_ids, attention_mask, generation_config)

    model.generate = generate


# ------------------------------------------------------------------ the shared-prompt attention
# Rows that share a prompt prefix read its keys and values once. App. B samples several completions per prompt (01's
# rollouts, 04's N continuations, 06's GRPO group) and grades many answers to one question; as a plain batch every
# row holds its own copy of that prefix's cache and reads all of it at every step, and on the small grader a step's
# attention is bound by memory (``edit-suite bench bound``). Here rows are grouped by the prefix they share
# (`PromptGroups`: the split that saves the most prompt tokens read per step), each group's prefix is encoded and
# kept once (`prefill`, `SharedPromptCache`), and a step's attention (`shared_prompt_attention`) multiplies a
# group's queries by its prefix's keys in one product, then joins the scores of the row's own tokens before one
# softmax: Qwen3's eager attention summed in another order, so logits may differ in their last digits
# (tests/model/test_shared_prompt.py bounds them; ``edit-suite compare --conclusions`` judges the runs).

#: fewest prompt tokens a group of rows must share to be read once (below it a row keeps its own copy)
MIN_SHARED = 16


@dataclass
class PromptGroups:
    """Rows of a batch grouped by a shared prompt prefix: ``prefixes`` the tokens each group shares (every row keeps
    at least its last prompt token of its own: the first logits come from it); ``group`` (R,) each row's group;
    ``slot`` (R,) the row's rank in its group; ``width`` the most rows of one group. Rows with one prompt (rollouts)
    share all of it but its last token; grading prompts of one question share the rubric and the question."""
    prefixes: list[list[int]]
    group: torch.Tensor
    slot: torch.Tensor
    width: int

    @classmethod
    def of(cls, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> "PromptGroups | None":
        """The groups that save the most prompt tokens read per step (sum over groups of (rows - 1) x shared
        length, each group sharing at least ``MIN_SHARED`` tokens; an exact split of the rows in token order), or
        None when no group has two rows, the rows average fewer than two a group, or a prompt has one token."""
        seqs = [row[m.bool()].tolist() for row, m in zip(input_ids, attention_mask)]
        if min(map(len, seqs)) < 2:  # a one-token prompt has no prefix to keep: a prefix row of padding only
            return None
        order = sorted(range(len(seqs)), key=lambda i: seqs[i])
        adj = [common_prefix_length([seqs[a], seqs[b]]) for a, b in zip(order, order[1:])]
        # best[j]: the most tokens saved by the rows order[:j]; a group is order[i:j], sharing the least common
        # prefix of its neighbours (each capped at the shorter prompt but one token)
        best, cut = [0] * (len(order) + 1), [0] * (len(order) + 1)
        for j in range(1, len(order) + 1):
            best[j], cut[j] = best[j - 1], j - 1  # order[j-1] alone
            length = None
            for i in range(j - 2, -1, -1):
                length = adj[i] if length is None else min(length, adj[i])
                if length < MIN_SHARED:
                    break
                if best[i] + (j - 1 - i) * length > best[j]:
                    best[j], cut[j] = best[i] + (j - 1 - i) * length, i
        runs, j = [], len(order)
        while j > 0:
            runs.append(order[cut[j]:j])
            j = cut[j]
        if len(runs) * 2 > len(seqs) or all(len(r) == 1 for r in runs):
            return None
        runs.sort(key=min)  # groups in order of their first row, so nothing depends on the token order
        group, slot, prefixes = [0] * len(seqs), [0] * len(seqs), []
        for g, run in enumerate(runs):
            rows = sorted(run)
            prefixes.append(seqs[rows[0]][:common_prefix_length([seqs[r] for r in rows])])
            for k, r in enumerate(rows):
                group[r], slot[r] = g, k
        return cls(prefixes=prefixes, group=torch.tensor(group), slot=torch.tensor(slot),
                   width=max(len(r) for r in runs))

    def select(self, keep: torch.Tensor) -> torch.Tensor:
        """Keep the rows ``keep`` (compaction); returns the groups still decoding, renumbered here."""
        group, slot = self.group[keep], self.slot[keep]
        alive = torch.unique(group)  # sorted: the kept groups stay in their order
        renumber = torch.full((len(self.prefixes),), -1, dtype=torch.long)
        renumber[alive] = torch.arange(len(alive))
        self.group, self.slot = renumber[group], slot
        self.prefixes = [self.prefixes[g] for g in alive.tolist()]
        return alive


class SharedPromptCache:
    """The key/value cache of a batch decoding from shared prompt prefixes: per layer each group's prefix states
    once (groups, kv heads, prefix width, head dim), each row's additive padding mask of its group's prefix (rows, 1,
    1, width), and per row a growing layer (`lean_decode.GrowingLayer`) holding the row's own prompt tokens, then its decoded ones.
    Quacks as much of a DynamicCache as the lean loop and `LeanStep` use: ``get_seq_length``,
    ``update`` (the rows' own part) and ``batch_select_indices``; ``attend`` is the step's attention. Built by
    `prefill`."""

    def __init__(self, prompt: list[tuple[torch.Tensor, torch.Tensor]], row_mask: torch.Tensor,
                 groups: PromptGroups, own_layers: list):
        self.prompt, self.row_mask, self.groups, self.layers = prompt, row_mask, groups, own_layers

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.prompt[layer_idx][0].shape[2] + self.layers[layer_idx].filled

    def update(self, key_states, value_states, layer_idx: int, *args, **kwargs):
        return self.layers[layer_idx].update(key_states, value_states)

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        alive = self.groups.select(indices)
        if len(alive) < len(self.prompt[0][0]):  # a group whose rows all finished is read no more
            self.prompt = [(k[alive], v[alive]) for k, v in self.prompt]
        self.row_mask = self.row_mask[indices]
        for layer in self.layers:
            layer.batch_select_indices(indices)

    def attend(self, layer_idx: int, query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
               scaling: float, own_mask: torch.Tensor | None) -> torch.Tensor:
        return shared_prompt_attention(query, *self.prompt[layer_idx], self.row_mask, keys, values, own_mask,
                                       self.groups, scaling)


def prefill(hf, groups: PromptGroups, input_ids: torch.Tensor, attention_mask: torch.Tensor, new_tokens: int,
            make_layer) -> tuple[torch.Tensor, SharedPromptCache, torch.Tensor]:
    """Encode a batch's prompts as `PromptGroups` share them: each group's prefix once (left-padded to one width,
    positions from 0), then every row's own prompt tokens (left-padded) over its group's prefix states, at the
    positions they hold in the row's prompt. Returns (the last prompt token's logits per row, the cache, the 2-D
    mask of the rows' own part, which the loop grows by one column a step). ``make_layer(capacity)``: an empty
    growing cache layer."""
    from transformers import DynamicCache

    seqs = [row[m.bool()].tolist() for row, m in zip(input_ids, attention_mask)]
    device, pad_id = input_ids.device, 0  # padding ids are masked: their value is never read
    ids, mask = left_pad(groups.prefixes, pad_id, device)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    prefix_cache = DynamicCache(config=hf.config)
    hf(input_ids=ids, position_ids=pos, attention_mask=None if mask.all() else mask, cache=prefix_cache,
       use_cache=True, logits_to_keep=1)
    prompt = [(layer.keys, layer.values) for layer in prefix_cache.layers]
    lengths = torch.tensor([len(p) for p in groups.prefixes], device=device)[groups.group]
    own_ids, own_mask = left_pad([s[len(groups.prefixes[g]):] for s, g in zip(seqs, groups.group.tolist())],
                                 pad_id, device)
    own_pos = (lengths[:, None] + own_mask.cumsum(-1) - 1).masked_fill(own_mask == 0, 0)
    rows_cache = DynamicCache(config=hf.config)
    for i, (k, v) in enumerate(prompt):
        rows_cache.update(k[groups.group], v[groups.group], i)
    logits = hf(input_ids=own_ids, position_ids=own_pos, attention_mask=torch.cat([mask[groups.group], own_mask], 1),
                cache=rows_cache, use_cache=True, logits_to_keep=1, return_dict=True).logits
    own_layers = []
    for layer in rows_cache.layers:
        own = make_layer(own_ids.shape[1] + new_tokens)
        own.update(layer.keys[:, :, ids.shape[1]:], layer.values[:, :, ids.shape[1]:])
        own_layers.append(own)
    row_mask = padding_mask(mask, len(mask), mask.shape[1], hf.dtype, "eager")[groups.group]
    return logits, SharedPromptCache(prompt, row_mask, groups, own_layers), own_mask


def shared_prompt_attention(query: torch.Tensor, prompt_keys: torch.Tensor, prompt_values: torch.Tensor,
                            prompt_mask: torch.Tensor, own_keys: torch.Tensor, own_values: torch.Tensor,
                            own_mask: torch.Tensor | None, groups: PromptGroups, scaling: float) -> torch.Tensor:
    """One decoding step's attention output (R, 1, heads, head dim), as eager attention returns it, for queries
    ``query`` (R, heads, 1, head dim) over each row's shared prefix (``prompt_keys`` / ``prompt_values`` of its
    group, masked by the row's additive ``prompt_mask`` (R, 1, 1, width)) followed by its own tokens (``own_keys``
    / ``own_values``: (R, kv heads, T, head dim), masked by the additive ``own_mask`` (R, 1, 1, T) where it has
    padding). Grouped-query heads: query head h reads key head h // (heads / kv heads), as ``repeat_kv`` lays them."""
    rows, heads, _, dim = query.shape
    n_groups, kv_heads, width, _ = prompt_keys.shape
    rep, slots = heads // kv_heads, groups.width
    q = query.reshape(rows, kv_heads, rep, dim)
    # the prompt part: each group's rows in its slots, one product per (group, kv head)
    q_grouped = q.new_zeros((n_groups, slots, kv_heads, rep, dim))
    q_grouped[groups.group, groups.slot] = q
    q_grouped = q_grouped.permute(0, 2, 1, 3, 4).reshape(n_groups, kv_heads, slots * rep, dim)
    s_prompt = torch.matmul(q_grouped, prompt_keys.transpose(2, 3))
    s_prompt = s_prompt.view(n_groups, kv_heads, slots, rep, width).permute(0, 2, 1, 3, 4)[groups.group, groups.slot]
    s_own = torch.matmul(q, own_keys.transpose(2, 3)) * scaling  # (R, kv heads, rep, T)
    if own_mask is not None:
        s_own = s_own + own_mask
    scores = torch.cat([s_prompt * scaling + prompt_mask, s_own], dim=-1)
    probs = torch.nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    p_grouped = probs.new_zeros((n_groups, slots, kv_heads, rep, width))
    p_grouped[groups.group, groups.slot] = probs[..., :width]
    p_grouped = p_grouped.permute(0, 2, 1, 3, 4).reshape(n_groups, kv_heads, slots * rep, width)
    out = torch.matmul(p_grouped, prompt_values).view(n_groups, kv_heads, slots, rep, dim).permute(0, 2, 1, 3, 4)
    out = out[groups.group, groups.slot] + torch.matmul(probs[..., width:], own_values)
    return out.reshape(rows, 1, heads, dim)
