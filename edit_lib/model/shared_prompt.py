"""Rows that share a prompt prefix read its keys and values once (lean decoding's shared-prompt attention).

App. B samples several completions per prompt (01's rollouts, ``rollouts.n_per_response``; 04's N continuations of
one revised prefix; 06's GRPO group of eight), and grades many answers to one question, whose prompts share the
rubric and the question. Decoded as a plain batch, every row holds its own copy of that prefix's key/value cache
and reads all of it at every step; on the small grader a step's attention over the cache is bound by memory
(``edit-suite bench bound``). Here the rows are grouped by the prefix they share (`PromptGroups`: the split that
saves the most prompt tokens read per step), each group's prefix is encoded once and kept once (`prefill`,
`SharedPromptCache`), and a step's attention (`shared_prompt_attention`) multiplies a group's queries by its
prefix's keys together, one matrix product per group instead of one vector product per row, then joins the scores
of the row's own tokens (the rest of its prompt, then its decoded ones) before one softmax. It is the same
attention (Qwen3's eager formula: scaled dot products, padding masked, float32 softmax) summed in another order,
so a row's logits may differ from the plain batch's in their last digits: tests/model/test_shared_prompt.py bounds
them and ``edit-suite compare --conclusions`` judges the runs. ``edit-suite bench decoding`` measures the ratio.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from edit_lib.model.lean_forward import padding_mask
from edit_lib.model.prefix_cache import common_prefix_length, left_pad

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
    Quacks as much of a DynamicCache as the lean loop and `lean_forward.LeanStep` use: ``get_seq_length``,
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
