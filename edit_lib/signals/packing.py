"""Pack a tree of token segments into one causal-LM forward pass.

App. B ("Compute budget") obtains the posterior at every step boundary in a single forward pass by appending one
scaffold per boundary under a block attention mask with matching position indices. This module is the shared
machinery for that trick (used by the probe and by the grounding audit):

* a ``SegmentTree`` lays segments out left to right; a segment sees every token of its ancestor segments and the
  earlier tokens of itself, and its positions continue right after its parent's last position, so each branch is
  numerically the same sequence a plain causal pass would see;
* ``collate`` turns several trees into padded ``input_ids``/``position_ids`` and an ADDITIVE float 4D mask
  ``(B, 1, L, L)`` (0 = attend, ``finfo(dtype).min`` = blocked). transformers 5.x returns any 4D mask as-is
  (``masking_utils._preprocess_mask_arguments``) and eager attention *adds* it to the scores, so a boolean mask
  would be added as 0/1 and silently attend everywhere; the float form is correct for eager and sdpa alike;
* ``token_logprobs`` runs the model once and gathers log p(target | prefix) for requested (index, token) pairs,
  projecting only the needed rows through the LM head (``logits_to_keep`` as a 2D index tensor).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch


@dataclass
class SegmentTree:
    """Block-mask packing (App. B "Compute budget"): token segments with parent links, laid out in insertion order
    (parents always precede children)."""

    tokens: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    seg_of: list[int] = field(default_factory=list)  # segment id of every packed token
    parent: list[int] = field(default_factory=list)  # -1 for a root
    start: list[int] = field(default_factory=list)
    stop: list[int] = field(default_factory=list)
    next_pos: list[int] = field(default_factory=list)  # position the first child token gets
    last_idx: list[int] = field(default_factory=list)  # packed index of the last token on root..seg, -1 if none

    def add(self, toks, parent: int = -1) -> int:
        """Append a segment of ``toks`` continuing ``parent`` (-1: a new root at position 0); return its id."""
        toks = [int(t) for t in toks]
        sid = len(self.parent)
        if parent >= sid:
            raise ValueError("parent must be added before its children")
        pos0 = 0 if parent < 0 else self.next_pos[parent]
        self.parent.append(parent)
        self.start.append(len(self.tokens))
        self.tokens.extend(toks)
        self.positions.extend(range(pos0, pos0 + len(toks)))
        self.seg_of.extend([sid] * len(toks))
        self.stop.append(len(self.tokens))
        self.next_pos.append(pos0 + len(toks))
        # An empty segment (e.g. an empty step) is transparent: its "last token" is its parent's.
        inherited = -1 if parent < 0 else self.last_idx[parent]
        self.last_idx.append(len(self.tokens) - 1 if toks else inherited)
        return sid

    def __len__(self) -> int:
        return len(self.tokens)

    def pred_indices(self, sid: int) -> list[int]:
        """Packed index whose logits predict each token of segment ``sid`` (-1 if nothing precedes it)."""
        first = self.last_idx[self.parent[sid]] if self.parent[sid] >= 0 else -1
        return [first] + list(range(self.start[sid], self.stop[sid] - 1)) if self.stop[sid] > self.start[sid] else []

    def allowed(self) -> np.ndarray:
        """Boolean (L, L): query i may attend key j iff seg(j) is an ancestor-or-self of seg(i) and j <= i."""
        n_seg = len(self.parent)
        is_anc = np.zeros((n_seg, n_seg), dtype=bool)  # is_anc[s, a]: a is ancestor-or-self of s
        for s in range(n_seg):
            p = self.parent[s]
            if p >= 0:
                is_anc[s] = is_anc[p]  # parents precede children, so their row is complete
            is_anc[s, s] = True
        seg = np.asarray(self.seg_of, dtype=np.int64)
        L = len(seg)
        return is_anc[seg[:, None], seg[None, :]] & np.tri(L, L, dtype=bool)


def is_ids(x) -> bool:
    """True for a flat token-id sequence (list/array/1D tensor of ints): one rollout's input, not a list of them."""
    if hasattr(x, "ndim"):
        return x.ndim == 1
    return len(x) == 0 or isinstance(x[0], (int, np.integer))


def collate(trees: list[SegmentTree], pad_id: int, dtype: torch.dtype, device=None):
    """Right-pad trees into ``input_ids``/``position_ids`` (B, L) and an additive float mask (B, 1, L, L).

    Padding queries attend only to themselves so no softmax row is empty (no NaN); real tokens never see padding.
    """
    L = max(len(t) for t in trees)
    B = len(trees)
    ids = torch.full((B, L), int(pad_id), dtype=torch.long)
    pos = torch.zeros((B, L), dtype=torch.long)
    allow = np.zeros((B, L, L), dtype=bool)
    for b, t in enumerate(trees):
        n = len(t)
        ids[b, :n] = torch.tensor(t.tokens, dtype=torch.long)
        pos[b, :n] = torch.tensor(t.positions, dtype=torch.long)
        allow[b, :n, :n] = t.allowed()
        allow[b, np.arange(n, L), np.arange(n, L)] = True
    mask = torch.full((B, 1, L, L), torch.finfo(dtype).min, dtype=dtype)
    mask.masked_fill_(torch.from_numpy(allow)[:, None], 0.0)
    return ids.to(device), pos.to(device), mask.to(device)


def model_pad_id(model) -> int:
    """A token id safe for padding (masked out anyway): the config's pad id, else eos, else 0."""
    cfg = model.config
    for name in ("pad_token_id", "eos_token_id"):
        v = getattr(cfg, name, None)
        if isinstance(v, (list, tuple)):
            v = v[0] if v else None
        if v is not None:
            return int(v)
    return 0


@torch.no_grad()
def token_logprobs(model, trees: list[SegmentTree], queries: list[list[tuple[int, int]]],
                   temperature: float = 1.0) -> list[np.ndarray]:
    """Single-pass scoring (App. B): log softmax(logits/temperature)[target] at packed index ``idx`` for every
    (idx, target) in ``queries[b]``.

    One forward pass over all ``trees`` (one batch row each) with the block mask and tree positions.
    """
    dtype = next(model.parameters()).dtype
    device = next(model.parameters()).device
    ids, pos, mask = collate(trees, model_pad_id(model), dtype, device)
    width = max(1, max(len(q) for q in queries))
    keep = torch.zeros((len(trees), width), dtype=torch.long)
    tgt = torch.zeros((len(trees), width), dtype=torch.long)
    for b, q in enumerate(queries):
        if q:
            keep[b, :len(q)] = torch.tensor([i for i, _ in q])
            tgt[b, :len(q)] = torch.tensor([t for _, t in q])
    if (keep < 0).any():
        raise ValueError("a queried token has no preceding token to predict it from")
    out = model(input_ids=ids, position_ids=pos, attention_mask=mask, logits_to_keep=keep.to(device),
                use_cache=False)
    logits, tgt = out.logits, tgt.to(device)
    got = torch.empty(tgt.shape, dtype=torch.float64)
    step = 256  # float32 copies of (rows, vocab) logits are the memory peak with a 150k vocab: chunk them
    for j in range(0, width, step):
        z = logits[:, j:j + step].float() / temperature
        picked = z.gather(-1, tgt[:, j:j + step, None])[..., 0] - torch.logsumexp(z, dim=-1)
        got[:, j:j + step] = picked.double().cpu()
    got = got.numpy()
    return [got[b, :len(q)] for b, q in enumerate(queries)]


@torch.no_grad()
def plain_logprobs(model, ids: list[int], temperature: float = 1.0) -> torch.Tensor:
    """Reference path: a plain HF call (no custom mask, default positions); returns (len(ids)-1,) log p(ids[t+1])."""
    device = next(model.parameters()).device
    x = torch.tensor([ids], dtype=torch.long, device=device)
    logits = model(input_ids=x, use_cache=False).logits[0, :-1].float()
    logp = torch.log_softmax(logits / temperature, dim=-1)
    return logp.gather(-1, x[0, 1:, None])[:, 0].double().cpu()
