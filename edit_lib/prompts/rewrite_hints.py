"""Diagnostic hint bullets for the rewrite prompt (App. J / Figure 6 "Diagnostic hints for Substep i").

Figure 6 fills this section from the internal-state locator (C1) and elides its wording. The suite writes one
short sentence per measurement the locator made for the target step (Alg. 1 inputs):

* the belief shift delta-eps_k (Eq. 2) against the near-tie margin tau:
  - delta-eps_k < -tau (the shortlist criterion fired): "the expected mark moves away at this substep by
    {|delta-eps_k|} marks";
  - delta-eps_k > tau: "the expected mark moves to the correct mark at this substep by {delta-eps_k} marks";
  - otherwise (near tie): "the expected mark moves by {|delta-eps_k|} marks at this substep";
* each grounding score (Eq. 3-4) against the dataset-wide 25th percentile p25 (Alg. 1 line 4), with X the
  section it measures (rubric for G^rho, answer for G^a, prefix for residualised G~^p):
  - below: "the judgement of this substep may not be from the X : {value} below {p25}";
  - otherwise: "the judgement of this substep is from the X : {value} not below {p25}";
* when the re-rank promoted the step (all three below p25, Alg. 1 line 6): "this substep is first to check :
  the rubric , the answer and the prefix are below".

Numbers are written with two decimals. The embedded grader learns these sentences: its training rewrites
carry hints built by this module from drawn values (``edit_lib/embedded/roles.py``), so every word is in its
vocabulary (the test suite checks this). A NaN signal (not measured, e.g. a random-rule pick without an
audit) gives no sentence; a step picked without the localiser (the self-audit rule) gets no hints at all.
"""
from __future__ import annotations

import math

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
