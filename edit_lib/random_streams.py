"""Named random streams: each sampled quantity that needs a stream apart from ``run.seed``'s draws it from
``stream_seed(run.seed, NAME)``, a ``numpy.random.SeedSequence`` keyed by ``run.seed`` and a stable hash of the name
(SHA-256, the same in every process), so two streams cannot collide by arithmetic and a number names its source.
Every stream, written once (a seed that is ``run.seed`` itself keeps it and is not listed):

* ``CHECKLISTS`` ``revision.checklists``: 04's rubric checklists (Sec. 2.2);
* ``REWRITES`` ``revision.rewrites``: the atomic rewrites, every rule and ablation (App. F, App. J);
* ``CONTINUATIONS`` ``revision.continuations``: the N continuations after each revised prefix (App. F);
* ``MC_BELIEFS`` ``belief_check.mc_beliefs``: 04's Monte-Carlo continuations of the belief check;
* ``INT_PROPOSALS`` ``int.proposals``: 04's InT self-audit proposals (Table 6's InT baseline);
* ``INT_CONTINUATIONS`` ``int.continuations``: 05's continuations after each InT intervention;
* ``CALIBRATION_ROLLOUTS`` ``rl.calibration_rollouts``: 06's rollouts of the frozen initialisation (App. B, Table 9);
* ``RSR_RESPONSES`` ``rsr.responses``: 08's responses regraded under each rubric edit (App. I).
"""
from __future__ import annotations

import hashlib

import numpy as np

CHECKLISTS = "revision.checklists"
REWRITES = "revision.rewrites"
CONTINUATIONS = "revision.continuations"
MC_BELIEFS = "belief_check.mc_beliefs"
INT_PROPOSALS = "int.proposals"
INT_CONTINUATIONS = "int.continuations"
CALIBRATION_ROLLOUTS = "rl.calibration_rollouts"
RSR_RESPONSES = "rsr.responses"
STREAMS = (CHECKLISTS, REWRITES, CONTINUATIONS, MC_BELIEFS, INT_PROPOSALS, INT_CONTINUATIONS, CALIBRATION_ROLLOUTS,
           RSR_RESPONSES)


def name_key(name: str) -> int:
    """The stream name's stable 32-bit key: the first 4 bytes of its UTF-8 SHA-256 (Python's ``hash`` is salted
    per process, so it would give each process another stream)."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:4], "big")


def seeded_subset(items, n: int, seed: int) -> list:
    """``n`` of ``items`` drawn by ``numpy.random.default_rng(seed).choice`` without replacement, in their original
    order; all of them when ``n`` is 0 or at least their number. 01's Phase-1 sample, 06's curve responses and
    08's RSR responses draw this way, so systems are compared on the same rows."""
    items = list(items)
    if not n or n >= len(items):
        return items
    return [items[i] for i in sorted(np.random.default_rng(seed).choice(len(items), size=n, replace=False))]


def stream_seed(seed: int, name: str) -> int:
    """The seed of stream ``name`` (one of ``STREAMS``) under the run's ``seed``: the first 32-bit word of
    ``SeedSequence(entropy=seed, spawn_key=(name_key(name),))``, an int in [0, 2**32) that torch, numpy, pandas'
    ``random_state`` and the row-seeded sampler (``model.generate``) all take."""
    if name not in STREAMS:
        raise ValueError(f"unknown random stream {name!r}; edit_lib/random_streams.py has {list(STREAMS)}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"stream {name!r}: the run's seed must be a non-negative integer, got {seed!r}")
    state = np.random.SeedSequence(entropy=int(seed), spawn_key=(name_key(name),)).generate_state(1, np.uint32)
    return int(state[0])
