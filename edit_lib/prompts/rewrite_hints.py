"""Diagnostic hint bullets for the rewrite prompt (App. J / Figure 6 "Diagnostic hints for Substep i").

Figure 6 fills this section from the internal-state locator (C1) and elides its wording. The suite writes one
short sentence per measurement the locator made for the target step (Alg. 1 inputs): the belief shift
delta-eps_k (Eq. 2) against the near-tie margin tau, each grounding score (Eq. 3-4) against the dataset-wide
25th percentile p25 (Alg. 1 line 4), and the re-rank promotion (Alg. 1 line 6). The embedded grader learns
these sentences (``edit_lib/embedded/roles.py``).

Details: book/departures.md, section "Diagnostic hints (edit_lib/prompts/rewrite_hints.py)".
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
