"""The grading prompt (with [MASK] variants), the probe scaffold and the parser of the final mark.

* Grading prompt: question, mark scheme as text (PTS / LoR / free text), answer, a step-by-step instruction
  and the final-line format. ``mask="rubric"|"answer"`` swaps that section for ``[MASK]`` (Eq. 3 audit). Chat
  models get an instruction asking for one judgement per line (``style="chat"``), so their reasoning segments
  into steps (``segment``, Sec. 2.1); the embedded grader keeps the text its weights were trained on.
* Probe scaffold (Eq. 1): ``Final mark: `` then the mark digits, terminated by ``/``.
* Step segmentation lives in ``segment``; ``split_steps``/``step_boundaries`` here delegate to it.
* Checklist and rewrite prompts live in ``prompts.rewrite``.
* Real chat models get the tokenizer's chat template (Qwen3: ``enable_thinking=False``); the embedded tiny
  model gets plain text: prompt + ``TINY_SEPARATOR`` + completion.
* Parsers never raise on model output and never return a silent 0: a mark parse carries a status
  (``ok`` / ``no_mark`` / ``out_of_range``) that callers count.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from edit_lib import segment as _segment
from edit_lib.data.schema import FreeTextScheme, LevelScheme, PointsScheme, Question

MASK = "[MASK]"
SCAFFOLD = "Final mark: "  # the probe scaffold (Eq. 1): mark digits follow, then MARK_TERMINATOR
MARK_TERMINATOR = "/"
TINY_SEPARATOR = "\nreasoning:\n"
GRADER_SYSTEM = "You are a strict examiner. Grade the answer against the mark scheme, step by step."
OK, NO_MARK, OUT_OF_RANGE = "ok", "no_mark", "out_of_range"


def format_number(x: float) -> str:
    """Marks as written in text: integers without a decimal point, halves as '1.5'."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def format_final_line(mark: int, max_mark: int) -> str:
    """The final line, e.g. 'Final mark: 7/12' (scaffold + digits + terminator + M_q)."""
    return f"{SCAFFOLD}{mark}{MARK_TERMINATOR}{max_mark}"


# ---------------------------------------------------------------- grading prompt

def render_scheme(q: Question) -> str:
    """The mark scheme as text: PTS points with values (and cap), LoR points and level bands, or the rubric."""
    s = q.scheme
    if isinstance(s, PointsScheme):
        lines = [f"mark scheme: points , total {q.max_mark}"]
        for i, p in enumerate(s.points, start=1):
            lines.append(f"point {i} ( {format_number(p.value)} {'mark' if p.value == 1 else 'marks'} ): {p.text}")
        if s.cap is not None:
            lines.append(f"cap {format_number(s.cap)}")
        return "\n".join(lines)
    if isinstance(s, LevelScheme):
        lines = [f"mark scheme: levels , total {q.max_mark}"]
        lines += [f"point {i}: {p.text}" for i, p in enumerate(s.points, start=1)]
        for lv in sorted(s.levels, key=lambda x: x.level):
            lines.append(f"level {lv.level} {lv.descriptor}: from {lv.min_points} points , marks {lv.low} to "
                         f"{lv.high} , {lv.step} per extra point")
        return "\n".join(lines)
    if isinstance(s, FreeTextScheme):
        return f"mark scheme: rubric , total {q.max_mark}\n{s.text}"
    raise TypeError(f"unknown scheme type {type(s).__name__}")


def grading_instruction(max_mark: int, style: str = "tiny") -> str:
    """The task line of the grading prompt. 'tiny': the embedded grader's fixed text (its shipped weights were
    trained on it). 'chat': asks a chat model for one judgement per line and the final line that the probe
    scaffold (Eq. 1) and ``read_final_mark`` read, so its reasoning segments into steps (Sec. 2.1)."""
    if style == "tiny":
        return (f"task: judge each point step by step , add the credits , then write "
                f"{SCAFFOLD}mark{MARK_TERMINATOR}{max_mark}")
    if style == "chat":
        return (f"Task: grade the answer against the mark scheme step by step. Write one judgement per line: for "
                f"each marking point (or level descriptor), one line that says whether the answer meets it, "
                f"quotes the evidence or says none, and gives the credit; then one line that adds up the "
                f"credits. No headings and no blank lines. The last line must be exactly "
                f"'{SCAFFOLD}m{MARK_TERMINATOR}{max_mark}', where m is a whole number from 0 to {max_mark}.")
    raise ValueError(f"grading prompt style must be 'tiny' or 'chat', got {style!r}")


def render_grading_prompt(q: Question, answer: str, mask: str | None = None, style: str = "tiny") -> str:
    """Grading prompt (Sec. 2.1: question, mark scheme, answer); ``mask`` in {None, 'rubric', 'answer'} gives the
    Eq. 3 audit variants; ``style`` picks the task line (``grading_instruction``: 'tiny' for the embedded grader,
    'chat' otherwise). The chat task line stands before the answer (suite's choice): every prompt of one question
    then shares its text up to the answer, which the warm-up's prefix-shared training lays out once
    (``train.packed_sft``); the tiny grader keeps the order its shipped weights were trained on."""
    if mask not in (None, "rubric", "answer"):
        raise ValueError(f"mask must be None, 'rubric' or 'answer', got {mask!r}")
    scheme = f"mark scheme: {MASK}" if mask == "rubric" else render_scheme(q)
    ans = f"answer: {MASK if mask == 'answer' else answer}"
    task = grading_instruction(q.max_mark, style)
    return "\n".join([f"question: {q.text}", scheme] + ([task, ans] if style == "chat" else [ans, task]))


def tiny_text(prompt: str, completion: str = "") -> str:
    """Plain-text form for the embedded tiny model: prompt, fixed separator, completion."""
    return prompt + TINY_SEPARATOR + completion


def chat_text(tokenizer, prompt: str, system: str | None = GRADER_SYSTEM, completion: str | None = None) -> str:
    """Chat-template form for real models; Qwen3 thinking is switched off (enable_thinking=False)."""
    msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    if completion is not None:
        msgs.append({"role": "assistant", "content": completion})
    return tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=completion is None,
                                         enable_thinking=False)


# ---------------------------------------------------------------- parsers

# Parsers accept both the written form ("step 12: ...", "Final mark: 12/14") and the tokenizer's canonical
# form, where every digit and punctuation character is its own space-separated token ("Final mark : 1 2 / 1 4").
_NUM = r"\d(?: ?\d)*"
STEP_LINE = re.compile(rf"^\s*step\s*({_NUM})\s*:\s?(.*)$", re.IGNORECASE)
# markdown emphasis around the label or the mark ("**Final mark:** 3/5") is allowed: chat models write it
_FINAL = re.compile(rf"final\s+mark\s*[*_]*\s*:\s*[*_]*\s*(-?\s*{_NUM}(?:\s*\.\s*{_NUM})?)", re.IGNORECASE)


def digits(text: str) -> str:
    return re.sub(r"\s+", "", text)


def split_steps(completion: str, rule: str = "auto") -> list[str]:
    """Reasoning step bodies s_1..s_T of a completion (Sec. 2.1; ``rule`` as in ``segment``; final line excluded)."""
    return _segment.split_steps(completion, rule)


def step_boundaries(completion: str, rule: str = "auto") -> list[int]:
    """Character offsets of the step boundaries k = 0..T (Eq. 1): completion[:b_k] holds steps s_1..s_k."""
    return _segment.step_boundaries(completion, rule)


@dataclass(frozen=True)
class MarkParse:
    """A parsed final mark: ``mark`` is None unless status is 'ok'."""

    mark: int | None
    status: str  # ok | no_mark | out_of_range
    raw: str | None = None


def read_final_mark(completion: str, max_mark: int) -> MarkParse:
    """The last 'Final mark: m' of a completion; m must be an integer in [0, M_q] (Eq. 1 support).

    A missing mark is 'no_mark'; a negative, fractional or too large one is 'out_of_range'.
    """
    hits = _FINAL.findall(completion)
    if not hits:
        return MarkParse(None, NO_MARK)
    raw = digits(hits[-1])
    if "." in raw or not 0 <= int(raw) <= max_mark:
        return MarkParse(None, OUT_OF_RANGE, raw)
    return MarkParse(int(raw), OK, raw)


