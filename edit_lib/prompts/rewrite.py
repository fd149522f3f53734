"""The rubric-checklist prompt (Sec. 2.2, gold mark as privileged input), the rewrite prompt (App. J, Figure 6)
and the parser of the rewrite block it asks for. A malformed block raises ``RewriteParseError`` with a message
saying what is wrong; every other parser of model output is in ``prompts.grading`` and never raises.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from edit_lib.data.schema import FreeTextScheme, Question
from edit_lib.prompts.grading import MARK_TERMINATOR, STEP_LINE, digits, render_grading_prompt, render_scheme

CHECKLIST_TASK = "task: list every point verbatim , say covered or not covered , quote the evidence or none"


CHECKLIST_FORMAT = ("format:\npoint 1 <the point verbatim> ; covered ; evidence <words of the answer>\n"
                    "point 2 <the point verbatim> ; not covered ; evidence none\ncovered 1 of 2 points")


# a free-text point may start with a number ("600 m ..."): the colon keeps it apart from the index, which the
# normal form would otherwise join to it ("point 6 600" -> "point 6600")
CHECKLIST_FORMAT_FREE = ("format:\npoint 1: <words of the rubric> ; covered ; evidence <words of the answer>\n"
                         "point 2: <words of the rubric> ; not covered ; evidence none\ncovered 1 of 2 points")
CHECKLIST_TASK_FREE = ("task: list every marking point , quoting its words from the reference answer or the mark "
                       "scheme , say covered or not covered , quote the evidence or none")


def render_checklist_prompt(q: Question, answer: str, gold: int, style: str = "tiny") -> str:
    """Rubric-checklist prompt (§2.2): the gold mark is privileged input, used only for pool construction.
    ``style`` 'chat' adds the output format (``CHECKLIST_FORMAT``, as InT's prompt shows its own; suite's choice:
    the paper does not print this prompt). A free-text rubric (SAS-Bench) lists no points: a chat prompt then
    shows the reference answer beside the rubric and asks for the marking points quoted from either
    (``CHECKLIST_TASK_FREE``; ``revision.free_text_checklist`` verifies them as spans of that text). The tiny
    grader keeps the prompt its shipped weights were trained on, for either kind of rubric."""
    free = isinstance(q.scheme, FreeTextScheme) and style == "chat"
    ref = [f"reference answer: {q.reference_answer.strip()}"] if free and q.reference_answer.strip() else []
    return "\n".join([f"question: {q.text}", render_scheme(q), *ref, f"answer: {answer}",
                      f"correct mark: {gold}{MARK_TERMINATOR}{q.max_mark}",
                      CHECKLIST_TASK_FREE if free else CHECKLIST_TASK]
                     + ([CHECKLIST_FORMAT_FREE if free else CHECKLIST_FORMAT] if style == "chat" else []))


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
    attrs = {k: digits(v) for k, v in _ATTR.findall(m.group(1))}
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
        sm = STEP_LINE.match(ln)
        if not sm:
            raise RewriteParseError(f"line {ln.strip()!r} does not start with 'step N:'")
        if int(digits(sm.group(1))) != len(steps) + 1:
            raise RewriteParseError(f"sub-steps must be numbered 1..{span}, got step {sm.group(1)}")
        if not sm.group(2).strip():
            raise RewriteParseError(f"sub-step {sm.group(1)} is empty")
        steps.append(sm.group(2).strip())
    if len(steps) != span:
        raise RewriteParseError(f"span={span} but the block holds {len(steps)} sub-steps")
    return RewriteBlock(location, span, tuple(steps))


def render_in_rule(steps: Sequence[str], rule: str, start: int = 1) -> str:
    """Step bodies written as the grader writes them under a resolved ``steps.rule`` (Sec. 2.1; edit_lib/segment.py):
    'markers' numbers them from ``start`` ('step k: ...' lines), 'lines' puts one per line, 'paragraphs' one per
    paragraph. A revised prefix is written so (App. J; InT's prefix + intervention): in the chain's own format."""
    if rule == "markers":
        return "".join(f"step {start + i}: {s}\n" for i, s in enumerate(steps))
    if rule not in ("lines", "paragraphs"):
        raise ValueError(f"render_in_rule needs a resolved rule (markers, lines, paragraphs), got {rule!r}")
    sep = "\n\n" if rule == "paragraphs" else "\n"
    return "".join(f"{s}{sep}" for s in steps)
