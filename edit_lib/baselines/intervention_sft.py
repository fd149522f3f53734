"""InT-SFT baseline (Sec. 3, Baselines (4); App. B, Compute budget): the pure logic, no model calls.

InT (Yang et al. 2026, "intervention training"): the policy reads its own incorrect rollout cut into numbered
sub-steps, names the FIRST critical error and writes one intervention step in its own voice; leak-free
interventions after which some continuation reaches the answer are kept, and the SFT target is
prefix + intervention (never the continuation).

Here: ``split_substeps`` (the numbered sub-steps), ``render_int_prompt`` (grading version of InT's prompt),
``parse_intervention`` (failure reasons, never raises on model output), ``leaked_forms`` / ``screen`` (the
leak filter) and ``sft_completion`` (the SFT target, also the prefix the continuations start from); the
outcome filter over the continuations' marks is EDIT's (``revision.pool.outcome_filter``).

Sub-steps, the leak rule, pool and cost, and departures from the paper and from InT's public code:
book/departures.md, section "InT-SFT (edit_lib/baselines/intervention_sft.py)".
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from edit_lib.prompts.rewrite import render_in_rule
from edit_lib.segment import check_rule, split_steps

# parse outcomes; the order here is the order of the checks in ``parse_intervention``
OK = "ok"
NO_INTERVENTION, NO_FIRST_ERROR = "no_intervention_block", "no_first_error_block"
BAD_INDEX, BEYOND_T = "bad_step_index", "index_beyond_T"
EMPTY, AFTER_ERROR = "empty_intervention", "after_error"
LEAK = "leak"  # dropped by the leak filter (``screen``)
REASONS = (NO_INTERVENTION, NO_FIRST_ERROR, BAD_INDEX, BEYOND_T, EMPTY, AFTER_ERROR, LEAK)

def split_substeps(completion: str, rule: str = "auto") -> list[str]:
    """InT's numbered sub-steps of a grading rollout: the steps s_1..s_T of Sec. 2.1 (book/departures.md)."""
    return split_steps(completion, check_rule(rule))


@dataclass(frozen=True)
class InterventionParse:
    """A parsed proposal: ``status`` is OK or one of REASONS; fields are None where the parse failed."""

    status: str
    location: int | None = None  # the sub-step the intervention replaces (1-based); later ones are dropped
    first_error: int | None = None
    text: str | None = None
    verification: str | None = None  # the log, kept for display (InT does not parse it either)


def _tag(name: str) -> re.Pattern:
    open_ = r"<\s*" + r"\s*_\s*".join(name.split("_"))  # canonical text writes "first _ error"
    close = r"<\s*/\s*" + r"\s*_\s*".join(name.split("_")) + r"\s*>"
    return re.compile(open_ + r'\b([^>]*)>(.*?)' + close, re.DOTALL | re.IGNORECASE)


_VERIFY, _ERROR, _INTERVENTION = _tag("verification"), _tag("first_error"), _tag("intervention")
_STEP_ATTR = re.compile(r'step\s*=\s*"([^"]*)"', re.IGNORECASE)
_LEADING_STEP = re.compile(r"^step\s*\d(?:\s?\d)*\s*:\s*", re.IGNORECASE)


def _index(attrs: str, n_steps: int) -> tuple[int | None, str]:
    m = _STEP_ATTR.search(attrs)
    raw = re.sub(r"\s+", "", m.group(1)) if m else ""
    if not raw.isdigit() or int(raw) < 1:
        return None, BAD_INDEX
    return (int(raw), OK) if int(raw) <= n_steps else (None, BEYOND_T)


def parse_intervention(text: str, n_steps: int) -> InterventionParse:
    """Parse InT's output blocks (Yang et al. 2026) for an attempt of ``n_steps`` = T sub-steps.

    The last block of each kind counts (as in InT's parser). Checks, in order: an intervention block, a
    first-error block, both step indices integers in 1..T, a non-empty intervention, and the intervention
    no later than the first error (InT's self-check 3). Never raises on model output."""
    blocks = _INTERVENTION.findall(text or "")
    if not blocks:
        return InterventionParse(NO_INTERVENTION)
    errors = _ERROR.findall(text)
    if not errors:
        return InterventionParse(NO_FIRST_ERROR)
    verification = _VERIFY.findall(text)
    log = verification[-1][1].strip() if verification else None
    first_error, status = _index(errors[-1][0], n_steps)
    if status != OK:
        return InterventionParse(status, verification=log)
    location, status = _index(blocks[-1][0], n_steps)
    if status != OK:
        return InterventionParse(status, first_error=first_error, verification=log)
    body = _LEADING_STEP.sub("", " ".join(blocks[-1][1].split()))  # one step: one line, no "step N:" marker
    if not body:
        return InterventionParse(EMPTY, location, first_error, None, log)
    if location > first_error:
        return InterventionParse(AFTER_ERROR, location, first_error, body, log)
    return InterventionParse(OK, location, first_error, body, log)


_UNITS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
          "sixteen seventeen eighteen nineteen").split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()


def number_word_pattern(n: int) -> re.Pattern | None:
    """The spelled-out forms of ``n`` (0-99; 'twenty one' / 'twenty-one'); None beyond 99."""
    if not 0 <= n <= 99:
        return None
    if n < 20:
        body = _UNITS[n]
    else:
        tens, unit = _TENS[n // 10 - 2], n % 10
        body = (rf"{tens}[\s-]*{_UNITS[unit]}" if unit else
                rf"{tens}(?![\s-]*(?:{'|'.join(_UNITS[1:10])})\b)")
    return re.compile(rf"\b{body}\b", re.IGNORECASE)


_NUMBER = re.compile(r"(?<![\d.])(\d(?: ?\d)*)(?! ?\d)(\s?\.\s?\d)?")
_FRACTION_AFTER = re.compile(r"^\s*/\s*\d")
_DENOMINATOR = re.compile(r"\d\s*/\s*$")  # "m/M": M is the public maximum, not a stated mark


def leaked_forms(text: str, gold: int, index_words: Iterable[str] = ("point", "step")) -> tuple[str, ...]:
    """The forms in which ``text`` states the gold mark m*: any of 'digit', 'fraction', 'word' (module
    docstring, leak rule; InT drops such interventions, Yang et al. 2026). Empty when it does not leak."""
    forms: set[str] = set()
    index_before = re.compile(rf"\b(?:{'|'.join(map(re.escape, index_words))})\s*$", re.IGNORECASE) \
        if index_words else None
    for m in _NUMBER.finditer(text):
        if m.group(2) or int(m.group(1).replace(" ", "")) != gold:
            continue  # a decimal, or another number
        if _DENOMINATOR.search(text[:m.start()]):
            continue
        if _FRACTION_AFTER.match(text[m.end():]):
            forms.add("fraction")
        elif index_before is None or not index_before.search(text[:m.start()]):
            forms.add("digit")
    word = number_word_pattern(gold)
    if word is not None and word.search(text):
        forms.add("word")
    return tuple(sorted(forms))


def screen(text: str, n_steps: int, gold: int, index_words: Iterable[str] = ("point", "step")
           ) -> InterventionParse:
    """Parse a proposal and apply InT's leak filter: a parsed intervention that states m* gets status LEAK."""
    p = parse_intervention(text, n_steps)
    if p.status == OK and leaked_forms(p.text, gold, index_words):
        return InterventionParse(LEAK, p.location, p.first_error, p.text, p.verification)
    return p


def sft_completion(substeps: Sequence[str], proposal: InterventionParse, rule: str = "markers") -> str:
    """InT's SFT target and the prefix the continuations start from: sub-steps before the intervention's
    location, then the intervention as the next step, in the grader's step format (``rule``: the rollout's
    resolved ``steps.rule``, ``prompts.rewrite.render_in_rule``); no continuation and no final-mark line (Yang et al.
    2026; Sec. 3 Baselines). It is trained without a final EOS (``train.sft.train_sft(eos=False)``), so the
    adapter does not learn to stop before the mark."""
    if proposal.status != OK or proposal.location is None or proposal.text is None:
        raise ValueError(f"only a usable intervention (status 'ok') builds a target, got {proposal.status!r}")
    if proposal.location > len(substeps):
        raise ValueError(f"intervention location {proposal.location} beyond the {len(substeps)} sub-steps")
    return render_in_rule(list(substeps[:proposal.location - 1]) + [proposal.text], rule)
