"""``attn_implementation: sdpa_blocks``: SDPA that skips the key columns a block of queries never sees.

App. B's block attention mask (``signals.packing``) lays a shared prefix out once and each continuation beside
the others, so a continuation's queries see the prefix and themselves, not their siblings. PyTorch's CPU SDPA
with an explicit mask still multiplies every query with every key; on a warm-up batch of 16 answers most of
that work lands on masked columns. This kernel cuts the queries into blocks at the rows where a new segment
starts (a row that cannot see the row before it), merges neighbouring segments up to ``BLOCK_ROWS`` queries,
and runs transformers' SDPA on each block with only the key columns some query of the block may see (a slice
when they are contiguous, a gather otherwise). The softmax of every query is over the same allowed keys, so
the output equals the plain kernel's up to float rounding (tested against it, forward and gradients); a mask
that is absent, per head or broadcast over the queries, and a query block shorter than ``MIN_QUERY_ROWS``
(decoding), go to the plain kernel unchanged.
``edit-suite bench packed-sft`` reports the ratio. Register with ``register()`` before a model is loaded.
"""
from __future__ import annotations

import weakref

import torch

NAME = "sdpa_blocks"
#: the most queries of one block when several short segments are merged (a longer segment is cut into blocks of it)
BLOCK_ROWS = 128
#: queries below this go to the plain kernel (a decoding step has one)
MIN_QUERY_ROWS = 64


def allowed(mask: torch.Tensor) -> torch.Tensor:
    """A boolean (B, Q, K) view of an attention mask: True where a query may see a key (bool masks as given; an
    additive float mask allows where it is above half its dtype's minimum). Masks shared by all heads only."""
    if mask.shape[1] != 1:
        raise ValueError(f"{NAME}: the mask must be shared by all heads (B, 1, Q, K), got {tuple(mask.shape)}")
    m = mask[:, 0]
    return m if m.dtype == torch.bool else m > torch.finfo(m.dtype).min / 2


def query_blocks(allow: torch.Tensor, block_rows: int = BLOCK_ROWS) -> list[tuple[int, int]]:
    """Row ranges [start, end) covering the Q queries: cut where a row cannot see the row before it (a segment
    starts, in every batch row) and wherever a block would pass ``block_rows``; neighbouring short segments share
    a block up to ``block_rows`` rows."""
    Q, K = allow.shape[1], allow.shape[2]
    off = K - Q  # keys before the first query (a cache)
    r = torch.arange(1, Q)
    sees_prev = allow[:, r, r - 1 + off].all(0) if Q > 1 else torch.ones(0, dtype=torch.bool)
    starts = [0] + (torch.nonzero(~sees_prev).flatten() + 1).tolist() + [Q]
    blocks: list[tuple[int, int]] = []
    for a, b in zip(starts[:-1], starts[1:]):
        if blocks and b - blocks[-1][0] <= block_rows:
            blocks[-1] = (blocks[-1][0], b)  # merge a short segment into the open block
            continue
        blocks += [(s, min(s + block_rows, b)) for s in range(a, b, block_rows)]
    return blocks


def _columns(allow_rows: torch.Tensor) -> slice | torch.Tensor:
    """The key columns some query of the block (``allow_rows``: (B, rows, K)) may see: a slice when contiguous,
    else an index tensor."""
    cols = torch.nonzero(allow_rows.any(dim=(0, 1))).flatten()
    if cols.numel() == 0:  # every query masked everywhere: keep one column, so SDPA sees the same empty row
        return slice(0, 1)
    lo, hi = int(cols[0]), int(cols[-1]) + 1
    return slice(lo, hi) if hi - lo == cols.numel() else cols


_PLAN: dict = {}


def block_plan(mask: torch.Tensor) -> list[tuple[int, int, slice | torch.Tensor]]:
    """(start, end, key columns) of every query block of ``mask`` (``query_blocks``, ``_columns``). Every layer of
    a forward pass gets the same mask tensor, so the last plan is kept for that very tensor (a weak reference and
    its version counter: a new or modified mask gets a new plan). An inference-mode tensor has no version counter,
    so its plan is made anew for every layer."""
    ref, version, plan = _PLAN.get("last", (None, -1, None))
    if ref is not None and ref() is mask and not mask.is_inference() and version == mask._version:
        return plan
    allow = allowed(mask)
    plan = [(a, b, _columns(allow[:, a:b])) for a, b in query_blocks(allow)]
    if not mask.is_inference():
        _PLAN["last"] = (weakref.ref(mask), mask._version, plan)
    return plan


def _take(x: torch.Tensor, cols, dim: int) -> torch.Tensor:
    return x[(slice(None),) * dim + (cols,)] if isinstance(cols, slice) else x.index_select(dim, cols)


def sdpa_blocks_forward(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None,
                        is_causal=None, **kwargs):
    """transformers' attention-function interface (query/key/value as (B, heads, len, dim)); returns
    ((B, Q, heads, dim), None) as the SDPA function it wraps."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    Q = query.shape[2]
    plain = (not isinstance(attention_mask, torch.Tensor) or Q < MIN_QUERY_ROWS
             or attention_mask.shape[1] != 1 or attention_mask.shape[-2] != Q)  # per-head, or broadcast over queries
    if plain:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    outs = []
    for a, b, cols in block_plan(attention_mask):
        mask = _take(attention_mask[:, :, a:b], cols, 3)
        out, _ = sdpa_attention_forward(module, query[:, :, a:b], _take(key, cols, 2), _take(value, cols, 2), mask,
                                        dropout=dropout, scaling=scaling, is_causal=False, **kwargs)
        outs.append(out)
    return torch.cat(outs, dim=1), None


def register() -> str:
    """Make ``attn_implementation='sdpa_blocks'`` loadable (the attention function and SDPA's mask builder under
    the name); idempotent. Returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask
    AttentionInterface.register(NAME, sdpa_blocks_forward)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, sdpa_mask)
    return NAME
