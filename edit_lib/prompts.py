"""Prompts and parsers: grading prompt (with [MASK] variants), probe scaffold, checklist and rewrite prompts.

* Grading prompt: question, mark scheme as text (PTS / LoR / free text), answer, a step-by-step instruction
  and the final-line format. ``mask="rubric"|"answer"`` swaps that section for ``[MASK]`` (Eq. 3 audit). Chat
  models get an instruction asking for one judgement per line (``style="chat"``), so their reasoning segments
  into steps (``segment``, Sec. 2.1); the embedded grader keeps the text its weights were trained on.
* Probe scaffold (Eq. 1): ``Final mark: `` then the mark digits, terminated by ``/``.
* Step segmentation lives in ``segment``; ``split_steps``/``step_boundaries`` here delegate to it.
* Checklist prompt (§2.2, gold mark as privileged input) and rewrite prompt (App. J, Figure 6).
* Real chat models get the tokenizer's chat template (Qwen3: ``enable_thinking=False``); the embedded tiny
  model gets plain text: prompt + ``TINY_SEPARATOR`` + completion.
* Parsers never raise on model output and never return a silent 0: a mark parse carries a status
  (``ok`` / ``no_mark`` / ``out_of_range``) that callers count. Only a malformed rewrite block raises
  ``RewriteParseError``, with a message saying what is wrong.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence

from . import segment as _segment
from .data.schema import FreeTextScheme, LevelScheme, PointsScheme, Question

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
    """Grading prompt (Sec. 2.1); ``mask`` in {None, 'rubric', 'answer'} gives the Eq. 3 audit variants;
    ``style`` picks the task line (``grading_instruction``: 'tiny' for the embedded grader, 'chat' otherwise)."""
    if mask not in (None, "rubric", "answer"):
        raise ValueError(f"mask must be None, 'rubric' or 'answer', got {mask!r}")
    scheme = f"mark scheme: {MASK}" if mask == "rubric" else render_scheme(q)
    ans = MASK if mask == "answer" else answer
    return "\n".join([f"question: {q.text}", scheme, f"answer: {ans}", grading_instruction(q.max_mark, style)])


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


def probe_prefix(partial_completion: str) -> str:
    """Partial chain s_{1:k} followed by the scaffold (Eq. 1): the next tokens are the mark digits."""
    if partial_completion and not partial_completion.endswith("\n"):
        partial_completion += "\n"
    return partial_completion + SCAFFOLD


# ---------------------------------------------------------------- checklist and rewrite prompts

CHECKLIST_TASK = "task: list every point verbatim , say covered or not covered , quote the evidence or none"


def render_checklist_prompt(q: Question, answer: str, gold: int) -> str:
    """Rubric-checklist prompt (§2.2): the gold mark is privileged input, used only for pool construction."""
    return "\n".join([f"question: {q.text}", render_scheme(q), f"answer: {answer}",
                      f"correct mark: {gold}{MARK_TERMINATOR}{q.max_mark}", CHECKLIST_TASK])


REWRITE_SYSTEM = ("SYSTEM: Refine a wrong grading attempt by fixing exactly ONE substep.\n"
                  "The rest of the chain regenerates after the rewrite.")
REWRITE_SYSTEM_FREE = "SYSTEM: Refine a wrong grading attempt from the target substep on."


ATOMIC_SECTION = ("# Atomicity + locality\nserve the same local role as the target step ; emit several atomic "
                  "substeps only when the prefix has already synthesised criteria")
FREE_SECTION = ("# Scope\nrewrite the target step and every step after it up to the final mark line ; the "
                "rewrite replaces all of them")
REWRITE_FORMAT = "# Output format\n<rewrite location=\"i\" span=\"1|2|3\">\nstep 1: first step text\n" \
                 "step 2: optional\n</rewrite>"
FREE_FORMAT = "# Output format\n<rewrite location=\"i\" span=\"n\">\nstep 1: first step text\n" \
              "step n: last step text\n</rewrite>"


def render_rewrite_prompt(q: Question, answer: str, gold: int, attempt_steps: Sequence[str], location: int,
                          hints: Sequence[str], checklist: str | None, atomic: bool = True) -> str:
    """Rule-aware atomic rewriter prompt (App. J, Figure 6): every section of the paper's skeleton.

    Table 6's ablations drop a section: ``checklist=None`` ("w/o checklist") leaves out the per-criterion
    rubric analysis; ``atomic=False`` ("w/o atomic") replaces the atomicity + locality section by a free scope
    (the target and everything after it, any number of sub-steps)."""
    if not 1 <= location <= len(attempt_steps):
        raise ValueError(f"location {location} outside 1..{len(attempt_steps)}")
    attempt = "\n".join(f"step {i}: {s}" for i, s in enumerate(attempt_steps, start=1))
    hint_lines = "\n".join(f"- {h}" for h in hints) or "- none"
    sections = [
        REWRITE_SYSTEM if atomic else REWRITE_SYSTEM_FREE,
        "# Grading task\n" + render_grading_prompt(q, answer),
        f"# Oracle reference\ncorrect mark = {gold} / {q.max_mark}\n"
        "never state the mark digit or its spelled out word",
        "# The full grading attempt\n" + attempt,
        f"# Target for rewriting: Substep {location}\n\"{attempt_steps[location - 1]}\"",
        f"# Diagnostic hints for Substep {location}\n{hint_lines}"]
    if checklist is not None:
        sections.append("# Per-criterion rubric analysis (REFERENCE)\n" + checklist +
                        "\nthis analysis informs the reasoning and is never copied into the output")
    sections += [ATOMIC_SECTION if atomic else FREE_SECTION,
                 "# Style\none claim per step ; match the voice of the chain ; no enumeration markers ; "
                 "no covered or partial verdict labels",
                 REWRITE_FORMAT if atomic else FREE_FORMAT]
    return "\n\n".join(sections)


def render_rewrite_block(location: int, steps: Sequence[str], max_span: int | None = 3) -> str:
    """A rewrite in the output format of the rewrite prompt (1-3 sub-steps replacing step ``location``;
    ``max_span=None`` for the non-atomic form of Table 6's "w/o atomic" ablation)."""
    if not steps or (max_span is not None and len(steps) > max_span):
        raise ValueError(f"a rewrite has 1-{max_span or 'n'} sub-steps, got {len(steps)}")
    body = "\n".join(f"step {i}: {s}" for i, s in enumerate(steps, start=1))
    return f'<rewrite location="{location}" span="{len(steps)}">\n{body}\n</rewrite>'


# ---------------------------------------------------------------- parsers

# Parsers accept both the written form ("step 12: ...", "Final mark: 12/14") and the tokenizer's canonical
# form, where every digit and punctuation character is its own space-separated token ("Final mark : 1 2 / 1 4").
_NUM = r"\d(?: ?\d)*"
_STEP = re.compile(rf"^\s*step\s*({_NUM})\s*:\s?(.*)$", re.IGNORECASE)
# markdown emphasis around the label or the mark ("**Final mark:** 3/5") is allowed: chat models write it
_FINAL = re.compile(rf"final\s+mark\s*[*_]*\s*:\s*[*_]*\s*(-?\s*{_NUM}(?:\s*\.\s*{_NUM})?)", re.IGNORECASE)


def _digits(text: str) -> str:
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
    raw = _digits(hits[-1])
    if "." in raw or not 0 <= int(raw) <= max_mark:
        return MarkParse(None, OUT_OF_RANGE, raw)
    return MarkParse(int(raw), OK, raw)


def parse_marks(completions: Iterable[str], max_marks: Iterable[int]) -> tuple[list[MarkParse], Counter]:
    """Parse many completions; the Counter of statuses is what gets reported (parse failures counted)."""
    parses = [read_final_mark(c, m) for c, m in zip(completions, max_marks, strict=True)]
    return parses, Counter(p.status for p in parses)


class RewriteParseError(ValueError):
    """A rewrite block that does not follow the output format of the rewrite prompt."""


@dataclass(frozen=True)
class RewriteBlock:
    location: int
    span: int
    steps: tuple[str, ...]


_REWRITE = re.compile(r"<\s*rewrite\b([^>]*)>(.*?)<\s*/\s*rewrite\s*>", re.DOTALL)
_ATTR = re.compile(r'(\w+)\s*=\s*"([^"]*)"')


def parse_rewrite(text: str, max_span: int | None = 3) -> RewriteBlock:
    """Parse a ``<rewrite location="i" span="n">`` block (App. J, Figure 6); raises RewriteParseError.
    ``max_span=None`` accepts any number of sub-steps (the "w/o atomic" ablation of Table 6)."""
    m = _REWRITE.search(text)
    if not m:
        raise RewriteParseError("no <rewrite ...>...</rewrite> block found")
    attrs = {k: _digits(v) for k, v in _ATTR.findall(m.group(1))}
    for name in ("location", "span"):
        if name not in attrs:
            raise RewriteParseError(f"rewrite block lacks the {name}=\"...\" attribute")
        if not attrs[name].isdigit():
            raise RewriteParseError(f"{name}={attrs[name]!r} is not a positive integer")
    location, span = int(attrs["location"]), int(attrs["span"])
    if location < 1:
        raise RewriteParseError(f"location must be >= 1, got {location}")
    if span < 1 or (max_span is not None and span > max_span):
        raise RewriteParseError(f"span must be 1..{max_span or 'n'}, got {span}")
    lines = [ln for ln in m.group(2).split("\n") if ln.strip()]
    steps = []
    for ln in lines:
        sm = _STEP.match(ln)
        if not sm:
            raise RewriteParseError(f"line {ln.strip()!r} does not start with 'step N:'")
        if int(_digits(sm.group(1))) != len(steps) + 1:
            raise RewriteParseError(f"sub-steps must be numbered 1..{span}, got step {sm.group(1)}")
        if not sm.group(2).strip():
            raise RewriteParseError(f"sub-step {sm.group(1)} is empty")
        steps.append(sm.group(2).strip())
    if len(steps) != span:
        raise RewriteParseError(f"span={span} but the block holds {len(steps)} sub-steps")
    return RewriteBlock(location, span, tuple(steps))


def apply_rewrite(steps: Sequence[str], block: RewriteBlock) -> list[str]:
    """Replace step ``block.location`` (1-based) by the block's sub-steps; the suffix is dropped, since
    the chain regenerates after the rewrite (App. J, Figure 6)."""
    if block.location > len(steps):
        raise ValueError(f"rewrite location {block.location} beyond the {len(steps)} steps")
    return list(steps[:block.location - 1]) + list(block.steps)


def render_steps(steps: Sequence[str]) -> str:
    """Number step bodies as a completion prefix ('step 1: ...' lines, newline-terminated)."""
    return "".join(f"step {i}: {s}\n" for i, s in enumerate(steps, start=1))
