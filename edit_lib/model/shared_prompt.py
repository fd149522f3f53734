"""Rows that decode from one prompt read its keys and values once (lean decoding's shared-prompt attention).

App. B samples several completions per prompt: 01's rollouts (``rollouts.n_per_response``), 04's N continuations
of one revised prefix, 06's GRPO group of eight. Decoded as a plain batch, every row holds its own copy of the
prompt's key/value cache and reads all of it at every step, and on the small grader a step's attention over that
cache is bound by memory (``edit-suite bench bound``). Here the prompt is encoded once per group of identical rows
(`PromptGroups`), its keys and values are kept once per group (`SharedPromptCache`), and a step's attention
(`shared_prompt_attention`) multiplies each group's queries by its prompt's keys together, one matrix product per
group instead of one vector product per row, then joins the scores of the row's own decoded tokens before one
softmax: the same attention (Qwen3's eager formula: scaled dot products, the prompt's padding masked, float32
softmax), in another order of floating-point operations, so a row's logits may differ from the plain batch's in
their last digits (tests/model/test_lean_decode.py bounds them; ``edit-suite compare --conclusions`` judges the
runs). ``edit-suite bench decoding`` measures the ratio.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

#: fewest rows per distinct prompt, on average over a batch, for which the prompt is shared (below it, as before)
MIN_ROWS_PER_PROMPT = 2


@dataclass
class PromptGroups:
    """Which distinct prompt each row of a batch decodes from: ``first`` (U,) a row of each distinct prompt, in
    order of first appearance; ``group`` (R,) each row's distinct prompt; ``slot`` (R,) the row's rank among its
    prompt's rows; ``width`` the most rows of one prompt."""
    first: torch.Tensor
    group: torch.Tensor
    slot: torch.Tensor
    width: int

    @classmethod
    def of(cls, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> "PromptGroups | None":
        """The groups of identical rows (ids and mask) of a batch, or None when the rows average fewer than
        ``MIN_ROWS_PER_PROMPT`` per distinct prompt."""
        key = torch.cat([input_ids, attention_mask.to(input_ids.dtype)], dim=1)
        _, inverse = torch.unique(key, dim=0, return_inverse=True)
        # number the distinct prompts in order of first appearance, so that the groups do not depend on unique's sort
        order, group = {}, []
        for g in inverse.tolist():
            group.append(order.setdefault(g, len(order)))
        if len(order) * MIN_ROWS_PER_PROMPT > len(group):
            return None
        group_t = torch.tensor(group, dtype=torch.long)
        seen, slot, first = [0] * len(order), [], [0] * len(order)
        for row, g in enumerate(group):
            if seen[g] == 0:
                first[g] = row
            slot.append(seen[g])
            seen[g] += 1
        return cls(first=torch.tensor(first, dtype=torch.long), group=group_t,
                   slot=torch.tensor(slot, dtype=torch.long), width=max(seen))

    def select(self, keep: torch.Tensor) -> torch.Tensor:
        """Keep the rows ``keep`` (compaction); returns the distinct prompts still decoding, renumbered here."""
        group, slot = self.group[keep], self.slot[keep]
        alive = torch.unique(group)  # sorted: the kept prompts stay in their order
        renumber = torch.full((len(self.first),), -1, dtype=torch.long)
        renumber[alive] = torch.arange(len(alive))
        self.group, self.slot, self.first = renumber[group], slot, self.first[alive]
        return alive


class SharedPromptCache:
    """The key/value cache of a batch decoding from shared prompts: per layer the prompt's states once per distinct
    prompt (U, kv heads, prompt width, head dim) with its additive padding mask (U, 1, 1, width), and a
    `GrowingLayer` per row for the decoded tokens. Quacks as much of a DynamicCache as the lean loop and
    `lean_forward.LeanStep` use: ``get_seq_length``, ``update`` (the decoded part) and ``batch_select_indices``.
    ``own_layers``: one empty growing layer per model layer (`lean_decode.GrowingLayer`)."""

    def __init__(self, prompt_cache, prompt_mask: torch.Tensor, groups: PromptGroups, own_layers: list, dtype):
        self.prompt = [(layer.keys, layer.values) for layer in prompt_cache.layers]
        self.width = self.prompt[0][0].shape[2]
        self.mask = torch.where(prompt_mask.bool(), torch.zeros((), dtype=dtype),
                                torch.finfo(dtype).min)[:, None, None, :]
        self.groups = groups
        self.layers = own_layers

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.width + self.layers[layer_idx].filled

    def update(self, key_states, value_states, layer_idx: int, *args, **kwargs):
        return self.layers[layer_idx].update(key_states, value_states)

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        alive = self.groups.select(indices)
        if len(alive) < len(self.mask):  # a prompt whose rows all finished is read no more
            self.prompt = [(k[alive], v[alive]) for k, v in self.prompt]
            self.mask = self.mask[alive]
        for layer in self.layers:
            layer.batch_select_indices(indices)

    def attend(self, layer_idx: int, query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
               scaling: float) -> torch.Tensor:
        return shared_prompt_attention(query, *self.prompt[layer_idx], self.mask, keys, values, self.groups, scaling)


def shared_prompt_attention(query: torch.Tensor, prompt_keys: torch.Tensor, prompt_values: torch.Tensor,
                            prompt_mask: torch.Tensor, own_keys: torch.Tensor, own_values: torch.Tensor,
                            groups: PromptGroups, scaling: float) -> torch.Tensor:
    """One decoding step's attention output (R, 1, heads, head dim), as eager attention returns it, for queries
    ``query`` (R, heads, 1, head dim) over each row's prompt (``prompt_keys`` / ``prompt_values`` of its group, masked
    by ``prompt_mask``) followed by its own decoded tokens (``own_keys`` / ``own_values``: (R, kv heads, T, head
    dim)). Grouped-query heads: query head h reads key head h // (heads / kv heads), as ``repeat_kv`` lays them."""
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
    s_own = torch.matmul(q, own_keys.transpose(2, 3))  # (R, kv heads, rep, T)
    scores = torch.cat([s_prompt * scaling + prompt_mask[groups.group], s_own * scaling], dim=-1)
    probs = torch.nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    p_grouped = probs.new_zeros((n_groups, slots, kv_heads, rep, width))
    p_grouped[groups.group, groups.slot] = probs[..., :width]
    p_grouped = p_grouped.permute(0, 2, 1, 3, 4).reshape(n_groups, kv_heads, slots * rep, width)
    out = torch.matmul(p_grouped, prompt_values).view(n_groups, kv_heads, slots, rep, dim).permute(0, 2, 1, 3, 4)
    out = out[groups.group, groups.slot] + torch.matmul(probs[..., width:], own_values)
    return out.reshape(rows, 1, heads, dim)
