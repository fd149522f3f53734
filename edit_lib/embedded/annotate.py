"""External step labels for the audit validation (App. E): grounding vs synthesis.

The paper labels each grading step with a stronger annotator model. Here an annotator is any function
``(step_text) -> "grounding" | "synthesis" | None``. For the synthetic world the label follows from the
teacher's step grammar, which is exactly how the teacher labels its own steps (``teacher.StepLabel.kind``):
a step that judges a marking point against the answer ("point i ... ; answer ... ; credit c") is grounding;
a step that composes earlier judgements (total / count / capped / round / level / mark) is synthesis.
Steps the grammar does not recognise get None and are left out of the test (and counted).
For real data, pass a model-backed annotator with the same signature.
"""
from __future__ import annotations

import re
from typing import Callable

from edit_lib.embedded.tokenizer import canonicalize

Annotator = Callable[[str], "str | None"]

_GROUNDING = re.compile(r"^point\b")
_SYNTHESIS = re.compile(r"^(total|count|capped|round|level|mark)\b")


def synthetic_annotator(step_text: str) -> str | None:
    """Grounding / synthesis label of a step in the synthetic world's grading grammar (App. E analogue)."""
    s = canonicalize(step_text).strip().lower()
    if _GROUNDING.match(s):
        return "grounding"
    if _SYNTHESIS.match(s):
        return "synthesis"
    return None
