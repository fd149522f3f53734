"""Prefix-shared LoRA SFT: the warm-up Base's trainer (``model.warmup``, ``train.warmup``).

Every batch holds pairs of one question, whose grading prompts share their text up to the answer (the chat task
line stands before it, ``prompts.grading.render_grading_prompt``). The batch is one ``SegmentTree``: the shared
token prefix once as the root, each pair's remainder (answer, completion, EOS) a child under App. B's block
attention mask with matching positions (``signals.packing``), so every pair sees exactly the tokens a plain pass
would. The loss is TRL's completion-only loss (Sec. 2.2; ``train.sft``): the mean cross-entropy over every
completion token and the EOS of the batch, logits computed for those rows only; ``mark_weight`` (a suite choice)
weighs the final line's mark tokens in that mean, whose own loss is recorded apart (``mark_tokens``). One optimiser
step per batch: AdamW, App. B's schedule (10% linear warm-up, then cosine, as ``train.sft``), gradients clipped
to norm 1 (TRL's default).
LoRA may be restricted to the last ``lora_layers`` decoder layers, so the backward pass stops there. A batch
whose packed sequence would pass ``PACK_TOKENS`` is cut into several packs, each a tree of its own, whose
token-weighted losses give the batch's mean (attention grows with the square of a pack's tokens).
``bench packed-sft`` measures the speed against one plain pass per pair.
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import get_cosine_schedule_with_warmup

from edit_lib.config import LoraConfig
from edit_lib.model.hf import attach_lora, count_parameters
from edit_lib.model.policy import Policy
from edit_lib.prompts.grading import MARK_TERMINATOR, SCAFFOLD
from edit_lib.signals.packing import SegmentTree, collate, model_pad_id
from edit_lib.train.sft import SFTResult


#: A packed sequence's token cap: a larger batch is cut into packs (``batch_packs``); a batch within it trains as
#: one pack, bit for bit as before the cap existed (book/records/performance.md: the cpu-real batches' lengths).
PACK_TOKENS = 4096


def encode_pair(tokenizer, prompt: str, completion: str) -> tuple[list[int], list[int]]:
    """(prompt ids, completion ids + EOS): the prompt and the completion tokenised apart, as TRL's
    prompt-completion datasets are (``train.sft.sft_dataset``)."""
    p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    c = tokenizer(completion, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return list(p), list(c)


def mark_tokens(tokenizer, completion: str) -> list[int]:
    """The indices of the completion's tokens (tokenised alone, as ``encode_pair``) that hold the mark of its final
    line ('Final mark: m/M', ``prompts.grading.format_final_line``); none when it ends in no final line (a Phase-1
    role's output). A template judgement carries its information in the mark alone (Sec. 2.1's final line), one of
    its ~40 tokens: the warm-up records these tokens' loss apart (``train_packed``)."""
    last = completion.rsplit("\n", 1)[-1]
    if not last.startswith(SCAFFOLD) or MARK_TERMINATOR not in last:
        return []
    start = len(completion) - len(last) + len(SCAFFOLD)
    end = len(completion) - len(last) + last.index(MARK_TERMINATOR)
    enc = tokenizer(completion, add_special_tokens=False, return_offsets_mapping=True)
    marks = [i for i, (a, b) in enumerate(enc["offset_mapping"]) if a < end and b > start and b > a]
    if not marks:
        raise ValueError(f"mark_tokens: no token holds the mark {completion[start:end]!r}")
    return marks


def completion_weights(marks: Sequence[int], n_tokens: int, mark_weight: float) -> list[float] | None:
    """The loss weight of each of a completion's ``n_tokens`` tokens (its EOS included, ``encode_pair``):
    ``mark_weight`` on its final line's mark tokens (``marks``, from ``mark_tokens``), 1 on every other; None (the
    plain mean) when ``mark_weight`` is 1 or it has no final line."""
    if mark_weight == 1.0 or not marks:
        return None
    return [mark_weight if i in marks else 1.0 for i in range(n_tokens)]


def pair_tree(encoded: Sequence[tuple[list[int], list[int]]]) -> tuple[SegmentTree, list[tuple[int, int]]]:
    """One batch as a tree (App. B block mask): the longest token prefix all pairs share as the root, each
    pair's remainder a child. Returns the tree and the (packed index, target) of every completion token."""
    if any(not p for p, _ in encoded):
        raise ValueError("pair_tree: every pair needs a non-empty prompt (its first completion token is predicted "
                         "from the prompt's last one)")
    full = [p + c for p, c in encoded]
    n = min(len(p) for p, _ in encoded)  # the shared root never reaches into a completion
    lcp = 0
    while lcp < n and all(f[lcp] == full[0][lcp] for f in full):
        lcp += 1
    tree = SegmentTree()
    root = tree.add(full[0][:lcp])
    targets: list[tuple[int, int]] = []
    for (p, c), f in zip(encoded, full):
        sid = tree.add(f[lcp:], root)
        targets += list(zip(tree.pred_indices(sid)[-len(c):], c))
    return tree, targets


def packed_length(encoded: Sequence[tuple[list[int], list[int]]]) -> int:
    """The tokens of ``pair_tree(encoded)``: the shared root once plus every pair's remainder."""
    tree, _ = pair_tree(encoded)
    return len(tree)


def batch_packs(encoded: Sequence[tuple[list[int], list[int]]], cap: int = PACK_TOKENS) -> list[list[int]]:
    """The batch's pair indices in consecutive packs, each as many pairs as fit within ``cap`` packed tokens (a
    pair longer than ``cap`` alone); one pack holding every pair when the whole batch fits."""
    if packed_length(encoded) <= cap:  # the usual case: one tree, no pair-by-pair search
        return [list(range(len(encoded)))]
    packs: list[list[int]] = []
    for i in range(len(encoded)):
        if packs and packed_length([encoded[j] for j in packs[-1] + [i]]) <= cap:
            packs[-1].append(i)
        else:
            packs.append([i])
    return packs


def _pack_weights(encoded, weights, pack: Sequence[int]) -> list[float] | None:
    """The token weights of the pairs ``pack`` in ``pair_tree``'s target order (1 for a pair without weights), or
    None when no pair has any."""
    if weights is None or all(weights[i] is None for i in pack):
        return None
    return [w for i in pack for w in (weights[i] if weights[i] is not None else [1.0] * len(encoded[i][1]))]


def _pack_marks(encoded, marks, pack: Sequence[int]) -> list[int]:
    """The target indices (``pair_tree``'s order) of the mark tokens of the pairs ``pack``."""
    out, off = [], 0
    for i in pack:
        out += [off + j for j in (marks[i] if marks is not None else [])]
        off += len(encoded[i][1])
    return out


def backward_batch(model, encoded: Sequence[tuple[list[int], list[int]]], cap: int = PACK_TOKENS,
                   weights: Sequence[list[float] | None] | None = None,
                   marks: Sequence[list[int]] | None = None, mark_ce: list | None = None) -> float:
    """Backpropagate the batch's mean completion-token loss (Sec. 2.2; each pack under App. B's block mask) and
    return it. One pack: ``packed_loss`` of the whole batch; several (``batch_packs``): each pack's mean weighted by
    its share of the batch's targets, backpropagated in turn, so the gradients add up to the whole batch's (up to
    rounding) and each pack's graph is freed. ``weights[i]``: pair i's token weights (``completion_weights``), the
    mean then weighted by them; ``marks[i]``: its mark tokens (``mark_tokens``), whose cross-entropies are
    appended to ``mark_ce``."""
    tree, targets = pair_tree(encoded)
    if len(tree) <= cap:  # one pack: the whole batch's tree, built once
        every = range(len(encoded))
        loss = packed_loss(model, tree, targets, _pack_weights(encoded, weights, every),
                           _pack_marks(encoded, marks, every), mark_ce)
        loss.backward()
        return float(loss.detach())
    every = _pack_weights(encoded, weights, range(len(encoded)))
    n_targets, total = (len(targets) if every is None else sum(every)), 0.0
    for pack in batch_packs(encoded, cap):
        tree, targets = pair_tree([encoded[i] for i in pack])
        w = _pack_weights(encoded, weights, pack)
        part = packed_loss(model, tree, targets, w, _pack_marks(encoded, marks, pack), mark_ce) * \
            ((len(targets) if w is None else sum(w)) / n_targets)
        part.backward()
        total += float(part.detach())
    return total


def packed_loss(model, tree: SegmentTree, targets: list[tuple[int, int]], weights: Sequence[float] | None = None,
                marks: Sequence[int] = (), mark_ce: list | None = None) -> torch.Tensor:
    """Mean cross-entropy of the completion tokens of one packed batch (one forward pass, logits only at the
    rows that predict a target); with ``weights`` (one per target) their weighted mean. The cross-entropies of the
    targets ``marks`` (indices) are appended to ``mark_ce`` as floats, outside the graph."""
    dtype = next(model.parameters()).dtype
    device = next(model.parameters()).device
    ids, pos, mask = collate([tree], model_pad_id(model), dtype, device)
    keep = torch.tensor([[i for i, _ in targets]], device=device)
    tgt = torch.tensor([t for _, t in targets], device=device)
    logits = model(input_ids=ids, position_ids=pos, attention_mask=mask, logits_to_keep=keep,
                   use_cache=False).logits[0]
    if mark_ce is not None and len(marks):
        with torch.no_grad():
            idx = torch.tensor(list(marks), device=device)
            mark_ce += torch.nn.functional.cross_entropy(logits[idx].float(), tgt[idx], reduction="none").tolist()
    if weights is None:
        return torch.nn.functional.cross_entropy(logits.float(), tgt)
    w = torch.tensor(weights, dtype=torch.float32, device=device)
    return (torch.nn.functional.cross_entropy(logits.float(), tgt, reduction="none") * w).sum() / w.sum()


def group_batches(groups: Sequence[str], batch_size: int | Callable[[str], int], seed: int) -> list[list[int]]:
    """Pair indices cut into batches of one group (question) each, ``batch_size`` pairs (or ``batch_size(group)``)
    or the group's remainder (never dropped), in a seeded order that interleaves the groups."""
    rng = np.random.default_rng(seed)
    by: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        by.setdefault(g, []).append(i)
    batches = []
    for g in sorted(by):
        idx = [by[g][j] for j in rng.permutation(len(by[g]))]
        size = batch_size(g) if callable(batch_size) else batch_size
        batches += [idx[k:k + size] for k in range(0, len(idx), size)]
    return [batches[j] for j in rng.permutation(len(batches))]


def warmup_steps(steps: int, ratio: float = 0.1) -> int:
    """App. B's warm-up length: ``ratio`` of the steps, rounded up (as transformers' ``warmup_ratio``)."""
    return math.ceil(ratio * steps)


def lora_on_layers(model, lora: LoraConfig, last: int):
    """``model`` wrapped with a fresh LoRA (App. B's projections, ``model.hf.attach_lora``), on its last ``last``
    decoder layers only (0 = every layer)."""
    n = int(model.config.num_hidden_layers)
    if last < 0 or last > n:
        raise ValueError(f"model.warmup.lora_layers must be 0..{n} (the model's layers), got {last}")
    return attach_lora(model, lora, list(range(n - last, n)) if last else None)


def train_packed(policy: Policy, pairs: Sequence[tuple[str, str]], groups: Sequence[str], *, steps: int,
                 batch_size: int | Callable[[str], int], learning_rate: float, lora: LoraConfig, lora_layers: int = 0,
                 seed: int = 0, out_dir: str | Path | None = None, progress: bool = True,
                 on_step: Callable[[torch.nn.Module, int], None] | None = None,
                 batches: Sequence[Sequence[int]] | None = None, mark_weight: float = 1.0) -> SFTResult:
    """LoRA SFT of ``policy`` for exactly ``steps`` optimiser steps on (prompt input, completion) pairs, one
    group (``groups[i]``: the question of pair i) per batch, cycling through the seeded batches (module
    docstring; ``batches``, when given, is the order itself: ``batch_size`` then goes unused). ``mark_weight``:
    the final line's mark tokens weigh this much in the loss (``completion_weights``; 1 = TRL's plain mean). The loss
    curve holds each step's (weighted) loss and, where the batch has final lines, the mean loss of their mark tokens
    alone (``mark_loss``).
    ``on_step(model, step)`` runs at step 0 and after every step (the held-out curve). The adapter
    is saved in ``out_dir`` when given; ``result.policy`` is the trained peft model in eval mode."""
    if len(groups) != len(pairs) or not pairs:
        raise ValueError(f"train_packed: {len(pairs)} pairs and {len(groups)} groups (one group per pair, "
                         "at least one pair)")
    torch.manual_seed(seed)
    tok = policy.tokenizer
    encoded = [encode_pair(tok, p, c) for p, c in pairs]
    marks = [mark_tokens(tok, c) for _, c in pairs]
    weights = [completion_weights(m, len(c), mark_weight) for m, (_, c) in zip(marks, encoded)]
    if all(w is None for w in weights):
        weights = None
    model = lora_on_layers(policy.model, lora, lora_layers)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=learning_rate, weight_decay=0.0)
    sched = get_cosine_schedule_with_warmup(opt, warmup_steps(steps), steps)  # the schedule TRL's SFT runs
    batches = group_batches(groups, batch_size, seed) if batches is None else [list(b) for b in batches]
    curve, t0 = [], time.perf_counter()
    if on_step is not None:
        on_step(model, 0)
    model.train()
    bar = tqdm(range(steps), disable=not progress, desc="warm-up")
    for step in bar:
        batch = batches[step % len(batches)]
        ce: list[float] = []
        loss = backward_batch(model, [encoded[i] for i in batch], weights=None if weights is None else
                              [weights[i] for i in batch], marks=[marks[i] for i in batch], mark_ce=ce)
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        curve.append({"step": step + 1, "loss": loss, **({"mark_loss": float(np.mean(ce))} if ce else {})})
        bar.set_postfix(loss=f"{curve[-1]['loss']:.3f}")
        if on_step is not None:
            on_step(model, step + 1)
            model.train()
    seconds = time.perf_counter() - t0
    model.eval()
    if out_dir is not None:
        model.save_pretrained(str(out_dir))
    return SFTResult(adapter_dir=Path(out_dir) if out_dir else Path(), loss_curve=curve, seconds=seconds,
                     steps=steps, trainable_parameters=count_parameters(model, trainable_only=True),
                     total_parameters=count_parameters(model),
                     policy=Policy(model=model, tokenizer=tok, kind=policy.kind, name=f"{policy.name}+warmup"))
