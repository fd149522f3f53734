"""Posterior belief probe (Eq. 1-2): the grader's belief over the final mark at every step boundary.

At boundary k (k = 0: prompt only) the marking scaffold is appended to ``prompt + s_1..s_k`` and the probability
of each valid mark m in 0..M_q is read off the model. Two reads (``probe.read``):

* ``next_token`` (Eq. 1 exactly, the default): one softmax at temperature tau over the next-token logits of the
  valid marks; a question with two-token marks (M_q >= 10 when digits split) falls back to ``sequence``;
* ``sequence``: every mark is scored as its EXACT continuation ``tokens(str(m)) + terminator``.

``probe_rollouts`` packs every boundary into ONE forward pass per rollout (App. B "Compute budget"; see
``packing``); ``probe_rollouts_naive`` is the test/benchmark reference; ``mark_readout`` picks the mark tokens.

``probe.dtype`` (``read_precision``): the policy's own dtype (the paper's bfloat16) or float32 (an exact round
trip). Formulas, departures: book/departures.md, section "Posterior belief probe (edit_lib/signals/probe.py)".
"""
from __future__ import annotations

import copy
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch

from edit_lib.data.schema import Question
from edit_lib.model.policy import Policy
from edit_lib.segment import segment
from edit_lib.signals.packing import SegmentTree, is_ids, plain_logprobs, token_logprobs


@dataclass
class ProbeResult:
    """Probe output for one rollout with T steps and marks 0..M."""

    log_scores: np.ndarray  # (T+1, M+1) unnormalised log p(mark's token(s) | prefix_k, scaffold) at temperature
    probs: np.ndarray  # (T+1, M+1) p_k(m), Eq. 1
    expected: np.ndarray  # (T+1,) expected mark m_hat_k
    gold: float | None = None
    eps: np.ndarray | None = None  # (T+1,) |m_hat_k - m*|
    delta_eps: np.ndarray | None = None  # (T,) delta_eps[k-1] = eps_{k-1} - eps_k, Eq. 2 for k = 1..T
    read: str | None = None  # 'next_token' (Eq. 1 exactly) or 'sequence' (book/departures.md)

    @property
    def n_steps(self) -> int:
        return self.probs.shape[0] - 1

    @property
    def mark_mass(self) -> np.ndarray:
        """(T+1,) probability the model puts on any valid mark (before Eq. 1's normalisation over marks)."""
        return np.exp(self.log_scores).sum(axis=1)


def belief_from_scores(log_scores, gold=None) -> ProbeResult:
    """Posterior belief probe (Eq. 1-2): normalise log scores over marks, expected mark, eps_k and delta eps_k."""
    log_scores = np.asarray(log_scores, dtype=np.float64)
    z = log_scores - log_scores.max(axis=1, keepdims=True)  # log-sum-exp shift: scores can be ~1e-30
    probs = np.exp(z)
    probs /= probs.sum(axis=1, keepdims=True)
    expected = probs @ np.arange(probs.shape[1], dtype=np.float64)
    if gold is None:
        return ProbeResult(log_scores, probs, expected)
    eps = np.abs(expected - float(gold))
    return ProbeResult(log_scores, probs, expected, float(gold), eps, eps[:-1] - eps[1:])


def mark_continuations(tokenizer, scaffold_text: str, max_mark: int, terminator: str = "/"):
    """Posterior belief probe (Eq. 1): token ids of the scaffold and of every mark continuation ``str(m)+terminator``.

    Each continuation is cut out of ``tokenize(scaffold_text + str(m) + terminator)`` so it is exactly what the
    model would emit after the scaffold. Raises if the tokenizer merges across the scaffold/mark boundary (the
    scaffold tokens are then not a prefix) or if two continuations are prefixes of each other (e.g. no terminator),
    since the probe would then double-count probability mass.
    """
    def enc(text):
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])

    scaffold = enc(scaffold_text)
    seqs = []
    for m in range(int(max_mark) + 1):
        full = enc(scaffold_text + str(m) + terminator)
        if full[:len(scaffold)] != scaffold:
            raise ValueError(
                f"tokenizer merges the scaffold {scaffold_text!r} with the mark {m!r}: the scaffold tokens are not a "
                "prefix of scaffold+mark; end the scaffold with a separator the tokenizer keeps apart (e.g. ': ')")
        seq = full[len(scaffold):]
        if not seq:
            raise ValueError(f"mark {m} tokenises to nothing after the scaffold")
        seqs.append(seq)
    for i, a in enumerate(seqs):
        for j, b in enumerate(seqs):
            if i != j and b[:len(a)] == a:
                raise ValueError(f"continuation of mark {i} is a prefix of mark {j}'s: use a terminator that the "
                                 "tokenizer keeps separate from the digits")
    return scaffold, seqs


READS = ("next_token", "sequence")


@dataclass(frozen=True)
class MarkReadout:
    """What the probe reads for a question with marks 0..M_q (Eq. 1): scaffold ids, the token sequence of every
    mark, and the read they implement ('next_token': one token per mark; 'sequence': digits + terminator)."""

    scaffold: list
    marks: list
    read: str


def single_token_marks(tokenizer, scaffold_text: str, max_mark: int) -> list[int] | None:
    """Posterior belief probe (Eq. 1): the next token t_m of every mark 0..M_q right after the scaffold, or None
    when some mark spans several tokens (digit-split tokenizers from M_q >= 10) or two marks share a token."""
    def enc(text):
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])

    scaffold = enc(scaffold_text)
    ids = []
    for m in range(int(max_mark) + 1):
        full = enc(scaffold_text + str(m))
        if full[:len(scaffold)] != scaffold or len(full) != len(scaffold) + 1:
            return None
        ids.append(full[-1])
    return ids if len(set(ids)) == len(ids) else None


def mark_readout(tokenizer, scaffold_text: str, max_mark: int, terminator: str = "/",
                 read: str = "next_token") -> MarkReadout:
    """Posterior belief probe (Eq. 1): the tokens to score for each mark under ``read`` (see the module
    docstring). 'next_token' uses the marks' single next tokens when every mark is one token, else falls back
    to 'sequence' (recorded in ``MarkReadout.read``)."""
    if read not in READS:
        raise ValueError(f"probe.read must be one of {READS}, got {read!r}")
    scaffold, seqs = mark_continuations(tokenizer, scaffold_text, max_mark, terminator)
    if read == "next_token":
        single = single_token_marks(tokenizer, scaffold_text, max_mark)
        if single is not None:
            return MarkReadout(scaffold, [[t] for t in single], "next_token")
    return MarkReadout(scaffold, seqs, "sequence")


def read_of(mark_seqs) -> str:
    """'next_token' when every mark is scored by one token (Eq. 1 exactly), else 'sequence'."""
    return "next_token" if all(len(m) == 1 for m in mark_seqs) else "sequence"


# ---------------------------------------------------------------------------------------------------------------
# input normalisation: one rollout or a list of rollouts

def _ids(x) -> list[int]:
    return [int(t) for t in x]


def _normalise(prompt_ids, steps_ids, scaffold_ids, mark_seqs, gold):
    single = is_ids(prompt_ids)
    prompts = [prompt_ids] if single else list(prompt_ids)
    steps = [steps_ids] if single else list(steps_ids)
    n = len(prompts)
    if len(steps) != n:
        raise ValueError("prompt_ids and steps_ids describe different numbers of rollouts")
    scaffolds = [scaffold_ids] * n if is_ids(scaffold_ids) else list(scaffold_ids)
    marks = [mark_seqs] * n if is_ids(mark_seqs[0]) else list(mark_seqs)
    golds = [gold] * n if gold is None or np.ndim(gold) == 0 else list(gold)
    if not (len(scaffolds) == len(marks) == len(golds) == n):
        raise ValueError("per-rollout scaffold_ids / mark_seqs / gold must have one entry per rollout")
    rollouts = [(_ids(p), [_ids(s) for s in st], _ids(sc), [_ids(m) for m in mk], g)
                for p, st, sc, mk, g in zip(prompts, steps, scaffolds, marks, golds)]
    for p, _, sc, _, _ in rollouts:
        if not p or not sc:
            raise ValueError("prompt and scaffold must be non-empty (the first mark token needs a predictor)")
    return single, rollouts


# ---------------------------------------------------------------------------------------------------------------
# packed: one forward pass per rollout

def build_probe_tree(prompt, steps, scaffold, mark_seqs):
    """Posterior belief probe (Eq. 1), packed (App. B): prompt, s_1..s_T, then per boundary a scaffold + mark trie.

    Returns the tree and, per boundary k and mark m, the list of query slots whose log-probs sum to score_k(m).
    Marks sharing a prefix ("1" of 10..19) share trie nodes, so each distinct (prefix, token) is scored once.
    """
    tree = SegmentTree()
    node = tree.add(prompt)
    boundary = [node]
    for s in steps:  # a chain: s_k sees the prompt and s_<k, exactly as in the rollout
        node = tree.add(s, node)
        boundary.append(node)
    queries, slots = [], []
    for b_seg in boundary:
        sc = tree.add(scaffold, b_seg)  # positions continue right after s_k
        trie, slot = {(): sc}, {}  # token prefix -> segment id / query slot
        per_mark = []
        for seq in mark_seqs:
            path = []
            for t in range(len(seq)):
                key = tuple(seq[:t + 1])
                if key not in trie:
                    seg = tree.add([seq[t]], trie[key[:-1]])
                    trie[key] = seg
                    queries.append((tree.pred_indices(seg)[0], seq[t]))
                    slot[key] = len(queries) - 1
                path.append(slot[key])
            per_mark.append(path)
        slots.append(per_mark)
    return tree, queries, slots


def probe_rollouts(model, prompt_ids, steps_ids, scaffold_ids, mark_seqs, gold=None, temperature: float = 0.7,
                   batch_size: int = 4, dtype: str | None = None):
    """Posterior belief probe (Eq. 1-2), packed: ONE forward pass per rollout, ``batch_size`` rollouts per call
    (App. B "Compute budget").

    A rollout is ``prompt_ids`` (token ids) plus ``steps_ids`` (T lists of token ids); pass lists of them for
    several rollouts (``scaffold_ids``/``mark_seqs``/``gold`` may then be shared or per rollout). ``mark_seqs``
    comes from ``mark_readout`` (one token per mark: the next-token read of Eq. 1; digits + terminator: the
    sequence read). Every factor uses softmax(logits / temperature) (paper: 0.7). ``dtype`` ('model' / None, or
    'float32': ``probe.dtype``) is the precision of the forward passes (``read_precision``).
    Returns a ``ProbeResult`` (or a list of them for a list of rollouts).
    """
    single, rollouts = _normalise(prompt_ids, steps_ids, scaffold_ids, mark_seqs, gold)
    results = []
    bs = max(1, int(batch_size))
    with read_precision(model, dtype):
        for i in range(0, len(rollouts), bs):
            chunk = rollouts[i:i + bs]
            built = [build_probe_tree(p, st, sc, mk) for p, st, sc, mk, _ in chunk]
            lps = token_logprobs(model, [b[0] for b in built], [b[1] for b in built], temperature)
            for (_, _, slots), lp, (*_, mk, g) in zip(built, lps, chunk):
                scores = np.array([[lp[path].sum() for path in per_mark] for per_mark in slots])
                res = belief_from_scores(scores, g)
                res.read = read_of(mk)
                results.append(res)
    return results[0] if single else results


@torch.no_grad()
def _next_token_logprobs(model, ids: list[int], temperature: float) -> np.ndarray:
    """log softmax(logits / temperature) of the token after ``ids`` (a plain HF call), over the whole vocab."""
    device = next(model.parameters()).device
    logits = model(input_ids=torch.tensor([ids], dtype=torch.long, device=device), use_cache=False).logits
    return torch.log_softmax(logits[0, -1].double() / temperature, dim=-1).cpu().numpy()


def probe_rollouts_naive(model, prompt_ids, steps_ids, scaffold_ids, mark_seqs, gold=None,
                         temperature: float = 0.7, **_):
    """Posterior belief probe (Eq. 1-2), reference with plain HF calls: for the next-token read (one token per
    mark) one pass per boundary whose last logits give every mark (Eq. 1 as written); for the sequence read one
    pass per boundary and per mark."""
    single, rollouts = _normalise(prompt_ids, steps_ids, scaffold_ids, mark_seqs, gold)
    results = []
    for prompt, steps, scaffold, marks, g in rollouts:
        next_token = read_of(marks) == "next_token"
        scores = np.zeros((len(steps) + 1, len(marks)))
        prefix = list(prompt)
        for k in range(len(steps) + 1):
            if k:
                prefix = prefix + steps[k - 1]
            if next_token:
                scores[k] = _next_token_logprobs(model, prefix + scaffold, temperature)[[m[0] for m in marks]]
                continue
            for m, seq in enumerate(marks):
                lp = plain_logprobs(model, prefix + scaffold + seq, temperature)
                scores[k, m] = float(lp[-len(seq):].sum())
        res = belief_from_scores(scores, g)
        res.read = read_of(marks)
        results.append(res)
    return results[0] if single else results


READ_DTYPES = {"model": None, "float32": torch.float32}


# ---------------------------------------------------------------- the read's precision (probe.dtype)

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


# ---------------------------------------------------------------- token-level inputs of the probe and the audit
# The prompt and the reasoning steps are cut out of ONE tokenisation of ``input text + completion`` by character
# offsets, so every step's tokens are exactly those the policy produced in context (a BPE tokenizer can merge across a
# boundary if the pieces are tokenised apart). A token belongs to the segment where it starts (Eq. 1-3's inputs).

@dataclass
class RolloutTokens:
    prompt_ids: list[int]
    steps_ids: list[list[int]]


def segment_ids(tokenizer, text: str, cuts: list[int]) -> list[list[int]]:
    """Token ids of ``text`` split at character offsets ``cuts`` (ascending, inside the text)."""
    enc = tokenizer(text, add_special_tokens=True, return_offsets_mapping=True)
    edges = list(cuts) + [len(text) + 1]
    segs: list[list[int]] = [[] for _ in range(len(cuts) + 1)]
    j = 0
    for tok, (start, end) in zip(enc["input_ids"], enc["offset_mapping"]):
        if end == start == 0 and j == 0:  # special tokens (BOS) belong to the prompt
            segs[0].append(tok)
            continue
        while j < len(cuts) and start >= edges[j]:
            j += 1
        segs[j].append(tok)
    return segs


def rollout_tokens(policy: Policy, input_text: str, completion: str, rule: str = "auto") -> RolloutTokens:
    """Prompt ids and the T step id lists of a rollout (steps s_1..s_T of Sec. 2.1 cut by ``rule``, the profile's
    ``steps.rule``; the final-mark line excluded). The probe (Eq. 1) and the audit (Eq. 3) read these."""
    bounds = segment(completion, rule).bounds  # completion[:bounds[k]] holds s_1..s_k
    text = input_text + completion[:bounds[-1]]
    cuts = [len(input_text) + b for b in bounds[:-1]]
    segs = segment_ids(policy.tokenizer, text, cuts)
    return RolloutTokens(prompt_ids=segs[0], steps_ids=segs[1:])


def masked_contexts(policy: Policy, q: Question, answer: str) -> tuple[list[int], list[int]]:
    """Token ids of the rubric-masked and the answer-masked context (Eq. 3)."""
    def ids(mask):
        return list(policy.tokenizer(policy.grading_input(q, answer, mask=mask), add_special_tokens=True)["input_ids"])
    return ids("rubric"), ids("answer")


def probe_readout(policy: Policy, scaffold: str, terminator: str, max_mark: int,
                  read: str = "next_token") -> MarkReadout:
    """Scaffold ids and the tokens scored for every mark 0..M_q under ``read`` (Eq. 1; ``probe.mark_readout``)."""
    return mark_readout(policy.tokenizer, scaffold, max_mark, terminator, read)


def probe_input(policy: Policy, cfg, readouts: dict, input_text: str, completion: str, max_mark: int,
                rule: str = "auto") -> tuple[RolloutTokens, MarkReadout]:
    """One rollout's inputs to the packed probe (Eq. 1-2): its ``rollout_tokens`` and the ``probe_readout`` of its
    M_q under the probe section ``cfg``, made once per M_q into ``readouts``."""
    if max_mark not in readouts:
        readouts[max_mark] = probe_readout(policy, cfg.scaffold, cfg.terminator, max_mark, cfg.read)
    return rollout_tokens(policy, input_text, completion, rule), readouts[max_mark]
