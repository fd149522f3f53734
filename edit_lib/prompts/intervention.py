"""InT's verification + intervention prompt for grading, and its output format (Sec. 3 Baselines (4); Yang et
al. 2026). The prompt is shared by two rules: InT-SFT's intervention proposals (``edit_lib.baselines.intervention_sft``)
and the self-audit of Table 6 / Figure 4 ("w/o localiser": the policy names the first wrong step itself, as
InT does). It lives with the other prompts so the embedded grader can be taught it
(``edit_lib/embedded/roles.py``); the parser and the leak filter are InT's and live with the baseline.
"""
from __future__ import annotations

from typing import Sequence

from edit_lib.data.schema import Question
from edit_lib.prompts.grading import render_scheme

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
