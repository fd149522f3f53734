"""The revision's prompts: the rubric checklist (Sec. 2.2, gold mark as privileged input), the rewrite prompt (App.
J, Figure 6) with its diagnostic hints and the parser of the rewrite block it asks for, and InT's verification +
intervention prompt (Sec. 3 Baselines (4); Yang et al. 2026). A malformed rewrite block raises
``RewriteParseError`` saying what is wrong; every other parser of model output is in ``prompts.grading`` and never
raises. The prompts live together so that the embedded grader can be taught them (``edit_lib/embedded/teacher.py``).
"""
from __future__ import annotations

import math
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
    (``CHECKLIST_TASK_FREE``; ``revision.checklist`` verifies them as spans of that text). The tiny
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


# ---------------------------------------------------------------- diagnostic hints (Figure 6)
# Figure 6 fills "Diagnostic hints for Substep i" from the internal-state locator (C1) and elides its wording. The
# suite writes one short sentence per measurement the locator made for the target step (Alg. 1 inputs): the belief
# shift delta-eps_k (Eq. 2) against the near-tie margin tau, each grounding score (Eq. 3-4) against the
# dataset-wide 25th percentile p25 (Alg. 1 line 4), and the re-rank promotion (Alg. 1 line 6). Details:
# book/departures.md, section "Diagnostic hints (edit_lib/prompts/rewrite.py)".

SECTIONS = (("G_rho", "rubric"), ("G_a", "answer"), ("G_p_tilde", "prefix"))


def _num(x: float) -> str:
    return f"{x:.2f}"


def belief_hint(delta_eps: float, tie_margin: float) -> str | None:
    """The belief-shift sentence (Eq. 2, Alg. 1 lines 1-2; wording in the module docstring)."""
    if delta_eps is None or not math.isfinite(delta_eps):
        return None
    if delta_eps < -tie_margin:
        return f"the expected mark moves away at this substep by {_num(-delta_eps)} marks"
    if delta_eps > tie_margin:
        return f"the expected mark moves to the correct mark at this substep by {_num(delta_eps)} marks"
    return f"the expected mark moves by {_num(abs(delta_eps))} marks at this substep"


def grounding_hint(section: str, value: float, p25: float) -> str | None:
    """One grounding-score sentence (Eq. 3-4 against the dataset-wide 25th percentile, Alg. 1 line 4)."""
    if value is None or not math.isfinite(value) or not math.isfinite(p25):
        return None
    if value < p25:
        return f"the judgement of this substep may not be from the {section} : {_num(value)} below {_num(p25)}"
    return f"the judgement of this substep is from the {section} : {_num(value)} not below {_num(p25)}"


PROMOTED = "this substep is first to check : the rubric , the answer and the prefix are below"


def diagnostic_hints(delta_eps: float, signals: dict, p25: dict, promoted: bool,
                     tie_margin: float) -> list[str]:
    """Hint bullets for the rewrite prompt (App. J / Figure 6) from what the locator measured for one step:
    ``signals`` and ``p25`` map G_rho, G_a, G_p_tilde to the step's value and the dataset's 25th percentile
    (``selection.dataset_percentiles``); ``promoted`` is w_k of Alg. 1; ``tie_margin`` is tau."""
    missing = [k for k, _ in SECTIONS if k not in signals or k not in p25]
    if missing:
        raise KeyError(f"diagnostic_hints: signals/p25 lack {missing}")
    out = [belief_hint(delta_eps, tie_margin)]
    out += [grounding_hint(sec, float(signals[k]), float(p25[k])) for k, sec in SECTIONS]
    if promoted:
        out.append(PROMOTED)
    return [h for h in out if h]


def drawn_hints(rng, harmful: bool, tie_margin: float = 0.05) -> list[str]:
    """Hint bullets for a training rewrite (App. J / Figure 6) on drawn values, the sentences a grader learns to
    read: a harmful belief shift for an erroneous target (``harmful``), a small one otherwise, and grounding scores
    around drawn 25th percentiles. The values carry no information; the embedded grader's recipe and the
    ``cpu-real`` warm-up's role examples both draw them here."""
    keys = [k for k, _ in SECTIONS]
    delta = -float(rng.uniform(0.06, 1.5)) if harmful else float(rng.normal(0.0, 0.3))
    p25 = {k: float(rng.normal(-0.3, 0.3)) for k in keys}
    sig = {k: p25[k] + float(rng.normal(0.2, 0.5)) for k in keys}
    return diagnostic_hints(delta, sig, p25, all(sig[k] < p25[k] for k in keys), tie_margin)


# ---------------------------------------------------------------- InT's prompt
# Shared by two rules: InT-SFT's intervention proposals (``edit_lib.baselines.intervention_sft``) and the
# self-audit of Table 6 / Figure 4 ("w/o localiser": the policy names the first wrong step itself, as InT does);
# the parser and the leak filter are InT's and live with the baseline.

INT_TASK = ("task: judge each step of the attempt against the mark scheme and the answer , one claim per "
            "step : correct or wrong , and the evidence . state the first critical error : the first wrong step the "
            "rest of the chain never makes correct . then write one step , same voice as the attempt ; this "
            "step replaces the first wrong step or a step before this one , and the rest regenerates after this "
            "step . never state the correct mark as a digit or a spelled out word . when no step is wrong , "
            "the intervention has no text .")
INT_FORMAT = ("format:\n<verification>\nstep 1: correct or wrong , evidence\n</verification>\n"
              "<first_error step=\"i\">the error</first_error>\n"
              "<intervention step=\"i\">the step</intervention>")


def render_int_prompt(q: Question, answer: str, gold: int, substeps: Sequence[str]) -> str:
    """InT's verification + intervention prompt for grading (Yang et al. 2026; Sec. 3 Baselines): question,
    rubric, answer, the gold mark as the reference, the grader's own attempt as numbered sub-steps."""
    if not substeps:
        raise ValueError("the attempt has no sub-steps: nothing to verify")
    if not 0 <= gold <= q.max_mark:
        raise ValueError(f"gold mark {gold} outside 0..{q.max_mark} for question {q.id!r}")
    attempt = "\n".join(f"step {i}: {s}" for i, s in enumerate(substeps, start=1))
    return "\n".join([f"question: {q.text}", render_scheme(q), f"answer: {answer}",
                      f"reference: correct mark = {gold} / {q.max_mark}", "attempt:", attempt,
                      INT_TASK, INT_FORMAT])


def render_int_output(verdicts: Sequence[tuple[bool, str]], first_error: int | None, error: str,
                      intervention: str) -> str:
    """The output format of ``render_int_prompt``: one verification line per sub-step (``(correct,
    evidence)``; an empty evidence is left out), the first critical error and the intervention (both at ``first_error``; with no wrong step,
    ``first_error`` None, the blocks name step 1 and the intervention is empty, as the task says)."""
    lines = [f"step {i}: {'correct' if ok else 'wrong'}" + (f" , {ev}" if ev else "")
             for i, (ok, ev) in enumerate(verdicts, start=1)]
    at = first_error or 1
    return "\n".join(["<verification>", *lines, "</verification>",
                      f'<first_error step="{at}">{error}</first_error>',
                      f'<intervention step="{at}">{intervention}</intervention>'])
