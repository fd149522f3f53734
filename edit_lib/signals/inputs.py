"""Token-level inputs of the probe (Eq. 1-2) and the audit (Eq. 3) from a policy and a rollout row.

The prompt and the reasoning steps are cut out of ONE tokenisation of ``input text + completion`` by character
offsets, so every step's tokens are exactly those the policy produced in context (a BPE tokenizer can merge
across a boundary if the pieces are tokenised apart). A token belongs to the segment where it starts.
"""
from __future__ import annotations

from dataclasses import dataclass

from edit_lib.data.schema import Question
from edit_lib.model.policy import Policy
from edit_lib.segment import segment
from edit_lib.signals.probe import MarkReadout, mark_readout


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
