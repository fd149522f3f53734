"""A batch's common prompt prefix encoded once for generation (``model.prefix_cache``; App. B's decoding unchanged).

Grading prompts of one question share the system prompt, rubric and question and differ only in the answer, so most
of a short greedy grading's cost is the prefill of tokens every row of the batch has in common. `shared_prefix`
runs that prefix once, repeats its key/value cache over the batch, and lays the rows out for HF generate; the
decoded tokens are those of the plain batched call up to floating-point differences (tests/model/test_prefix_cache.py
checks them against per-prompt references). ``edit-suite bench prefix`` measures the ratio.
"""
from __future__ import annotations

from typing import Sequence

import torch


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
