"""The precision of the belief probe's forward passes (Eq. 1-2; App. B reads the probe from the bfloat16 policy).

``probe.dtype = 'model'`` reads the probe in the policy's own dtype (the paper's setting); ``'float32'`` upcasts a
lower-precision policy for the read and casts it back afterwards. A bfloat16 -> float32 -> bfloat16 round trip
is exact, so the policy the read leaves behind is bit for bit the one it found; what the float32 read removes is
the bfloat16 arithmetic of the forward pass (its weights stay the bfloat16-rounded ones). ``edit-suite bench
precision`` measures what bfloat16 moves: beliefs, Alg. 1's picks and the shaping penalty's firings.
"""
from __future__ import annotations

import copy
from contextlib import contextmanager

import torch

READ_DTYPES = {"model": None, "float32": torch.float32}


@contextmanager
def read_precision(model, dtype: str | None):
    """Within the block, ``model``'s floating-point parameters and buffers are in ``dtype`` ('model' or None:
    unchanged; 'float32'); afterwards each tensor is back in its own dtype (exactly: an upcast loses nothing)."""
    if dtype not in (None, *READ_DTYPES):
        raise ValueError(f"probe dtype must be one of {sorted(READ_DTYPES)}, got {dtype!r}")
    target = READ_DTYPES.get(dtype) if dtype else None
    tensors = [t for t in (*model.parameters(), *model.buffers()) if t.is_floating_point()]
    if target is None or all(t.dtype == target for t in tensors):
        yield model
        return
    saved = [(t, t.data) for t in tensors]
    for t in tensors:
        t.data = t.data.to(target)
    try:
        yield model
    finally:
        for t, data in saved:  # the original storage: no second cast, so nothing can round
            t.data = data


def bfloat16_copy(model):
    """A copy of ``model`` with its parameters in bfloat16 and its buffers as they were, as
    ``from_pretrained(dtype=torch.bfloat16)`` loads a checkpoint (the rotary frequencies stay float32)."""
    low = copy.deepcopy(model)
    for p in low.parameters():
        if p.is_floating_point():
            p.data = p.data.to(torch.bfloat16)
    return low
