"""The noisy teacher of the synthetic world: graded reasoning, and every other text the policy writes in Phase 1.

Graded reasoning (the rollout format of §3): one grounding step per marking point (point text, the answer
sentence copied word for word or "none", a verdict, the credit), then synthesis steps (adding credits; for
LoR choosing the level, then the mark in its band), then the final line ``Final mark: m/M``, which is also
the probe scaffold of Eq. 1. Every step carries the "external step label" of App. E (grounding / synthesis /
final) plus correct-or-erroneous, error type and marking point id. The error model gives the paper's failure
types: rejecting a correct paraphrase because of its wording (Fig. 1; frequent for the marked families so a
student model learns it systematically), crediting a misconception, miscounting credits, choosing the wrong LoR
band. Errors propagate: later steps compute from what earlier steps wrote.

The other roles, with the same error model: checklist (Sec. 2.2), rewrite (App. J / Figure 6), rewrite without
checklist and non-atomic rewrite (Table 6), verification + intervention (InT, Sec. 3 Baselines (4); also Table 6's
self-audit); hints come from ``edit_lib.prompts.rewrite``. Details: book/departures.md, section
"The noisy teacher's roles (edit_lib/embedded/teacher.py)".
"""
from __future__ import annotations

from dataclasses import dataclass, field

from edit_lib.data.schema import LevelScheme, PointsScheme, Question, Response, round_half_up
from edit_lib.data.synthetic import ABSENT, MARKED_PARAPHRASE, MISCONCEPTION, PARAPHRASE, VERBATIM
from edit_lib.prompts.grading import format_final_line, format_number
from edit_lib.prompts.rewrite import drawn_hints, render_int_output, render_rewrite_block


GROUNDING, SYNTHESIS, FINAL = "grounding", "synthesis", "final"
WORDING_MISMATCH, CREDIT_MISCONCEPTION = "wording_mismatch", "credit_misconception"
MISCOUNT, WRONG_BAND = "miscount", "wrong_band"

# verdict words of a grounding step
V_MATCH, V_SAME, V_WORDING, V_WRONG, V_MISSING = "matches", "same meaning", "wording differs", "contradicts", "missing"
TEMPLATE_TEXT = (f"point answer none credit total capped at round to count level below points needs band mark "
                 f"checklist covered not evidence of {V_MATCH} {V_SAME} {V_WORDING} {V_WRONG} {V_MISSING} x")


@dataclass
class ErrorModel:
    """Error rates of the noisy teacher (paper's failure types, Fig. 1 and §1); all per opportunity."""

    p_reject_marked: float = field(default=0.8, metadata={
        "help": "P(reject a MARKED_PARAPHRASE for its wording): the Fig. 1 wording-mismatch error, systematic"})
    p_reject_paraphrase: float = field(default=0.05, metadata={
        "help": "P(reject a plain paraphrase for its wording)"})
    p_credit_misconception: float = field(default=0.15, metadata={
        "help": "P(credit a misconception sentence as if it stated the point)"})
    p_miscount: float = field(default=0.05, metadata={
        "help": "P(the credit-adding synthesis step is off by one)"})
    p_wrong_band: float = field(default=0.1, metadata={
        "help": "P(an LoR level step picks an adjacent level instead of the reached one)"})

    @classmethod
    def none(cls) -> "ErrorModel":
        """An error-free teacher (reproduces the gold mark exactly)."""
        return cls(0.0, 0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class StepLabel:
    """External step label (App. E): kind, whether the step's own judgement is right, error type, point."""

    kind: str  # grounding | synthesis | final
    correct: bool = True
    error: str | None = None
    point_id: str | None = None
    status: str | None = None  # coverage status of the judged point (grounding steps)
    role: str | None = None  # synthesis role: total | cap | round | count | level | mark


@dataclass(frozen=True)
class Step:
    text: str  # the step body, without the "step N: " prefix
    label: StepLabel


@dataclass
class GradedReasoning:
    """One teacher rollout: labelled steps (the final line last) and its final mark."""

    question_id: str
    response_id: str
    steps: list[Step]
    final_mark: int
    max_mark: int
    gold: int

    @property
    def reasoning_steps(self) -> list[Step]:
        return [s for s in self.steps if s.label.kind != FINAL]

    @property
    def correct(self) -> bool:
        return self.final_mark == self.gold

    @property
    def completion(self) -> str:
        """The rollout text: numbered steps, then the final-mark line."""
        lines = [f"step {i + 1}: {s.text}" for i, s in enumerate(self.reasoning_steps)]
        return "\n".join(lines + [format_final_line(self.final_mark, self.max_mark)])


def _uniform(rng) -> float:
    return float(rng.random())  # random.Random and numpy Generator both provide .random()


def _pick(rng, options: list):
    return options[min(int(_uniform(rng) * len(options)), len(options) - 1)]


# ---------------------------------------------------------------- grounding

def _judge(i: int, point, cov, lor: bool, rng, errors: ErrorModel | None) -> tuple[Step, float]:
    """One grounding step (§3 rollout; App. E 'grounding'): returns the step and the credit it writes."""
    worth = 1.0 if lor else point.value
    error = None
    if cov.status == ABSENT:
        verdict, credit = V_MISSING, 0.0
    elif cov.status == VERBATIM:
        verdict, credit = V_MATCH, worth
    elif cov.status in (PARAPHRASE, MARKED_PARAPHRASE):
        p = 0.0 if errors is None else (errors.p_reject_marked if cov.status == MARKED_PARAPHRASE
                                        else errors.p_reject_paraphrase)
        if p and _uniform(rng) < p:
            verdict, credit, error = V_WORDING, 0.0, WORDING_MISMATCH
        else:
            verdict, credit = V_SAME, worth
    elif cov.status == MISCONCEPTION:
        if errors is not None and errors.p_credit_misconception and _uniform(rng) < errors.p_credit_misconception:
            verdict, credit, error = V_SAME, worth, CREDIT_MISCONCEPTION
        else:
            verdict, credit = V_WRONG, 0.0
    else:
        raise ValueError(f"unknown coverage status {cov.status!r}")
    text = f"point {i} {point.text} ; answer {cov.span or 'none'} ; {verdict} ; credit {format_number(credit)}"
    label = StepLabel(GROUNDING, error is None, error, point.id, cov.status)
    return Step(text, label), credit


# ---------------------------------------------------------------- synthesis

def _miscount(rng, true: float, hi: float) -> float:
    options = [v for v in (true - 1, true + 1) if 0 <= v <= hi]
    return _pick(rng, options) if options else true


def _pts_synthesis(s: PointsScheme, credits: list[float], rng, errors) -> tuple[list[Step], int]:
    """Add the credits, apply the cap, round half-up at the end (PTS; App. I rounding rule)."""
    true = sum(credits)
    total, err = true, None
    if errors is not None and errors.p_miscount and _uniform(rng) < errors.p_miscount:
        total = _miscount(rng, true, sum(p.value for p in s.points))
        err = MISCOUNT if total != true else None
    terms = " + ".join(format_number(c) for c in credits)
    steps = [Step(f"total {terms} = {format_number(total)}", StepLabel(SYNTHESIS, err is None, err, role="total"))]
    if s.cap is not None and total > s.cap:
        total = s.cap
        steps.append(Step(f"capped at {format_number(total)}", StepLabel(SYNTHESIS, role="cap")))
    mark = round_half_up(total)
    if mark != total:
        steps.append(Step(f"round {format_number(total)} to {mark}", StepLabel(SYNTHESIS, role="round")))
    return steps, mark


def _lor_synthesis(s: LevelScheme, credits: list[float], rng, errors) -> tuple[list[Step], int]:
    """Count covered points, choose the level reached, then the mark inside its band (LoR)."""
    true = int(sum(credits))
    count, err = true, None
    if errors is not None and errors.p_miscount and _uniform(rng) < errors.p_miscount:
        count = int(_miscount(rng, true, len(s.points)))
        err = MISCOUNT if count != true else None
    terms = " + ".join(format_number(c) for c in credits)
    steps = [Step(f"count {terms} = {count}", StepLabel(SYNTHESIS, err is None, err, role="count"))]
    ordered = sorted(s.levels, key=lambda lv: lv.level)
    reached = s.level_of(count)
    idx = 0 if reached is None else ordered.index(reached) + 1  # 0 = level 0 (no credit)
    err = None
    if errors is not None and errors.p_wrong_band and _uniform(rng) < errors.p_wrong_band:
        idx = _pick(rng, [j for j in (idx - 1, idx + 1) if 0 <= j <= len(ordered)])
        err = WRONG_BAND
    if idx == 0:
        steps.append(Step(f"level 0 below {ordered[0].min_points} points",
                          StepLabel(SYNTHESIS, err is None, err, role="level")))
        steps.append(Step("mark 0", StepLabel(SYNTHESIS, role="mark")))
        return steps, 0
    lv = ordered[idx - 1]
    steps.append(Step(f"level {lv.level} {lv.descriptor} needs {lv.min_points} points ; band {lv.low} to {lv.high}",
                      StepLabel(SYNTHESIS, err is None, err, role="level")))
    extra = count - lv.min_points
    if extra < 0:  # only after a wrong band choice: the band's floor
        mark, text = lv.low, f"mark {lv.low}"
    else:
        raw = lv.low + lv.step * extra
        mark = min(raw, lv.high)
        text = f"mark {lv.low} + {lv.step} x {extra} = {raw}" + (f" capped at {lv.high}" if raw > lv.high else "")
    steps.append(Step(text, StepLabel(SYNTHESIS, role="mark")))
    return steps, mark


def _synthesis(q: Question, credits: list[float], rng, errors) -> tuple[list[Step], int]:
    if isinstance(q.scheme, PointsScheme):
        return _pts_synthesis(q.scheme, credits, rng, errors)
    return _lor_synthesis(q.scheme, credits, rng, errors)


def _check(q: Question, r: Response) -> None:
    if not isinstance(q.scheme, (PointsScheme, LevelScheme)):
        raise TypeError(f"question {q.id}: the teacher needs a PTS or LoR scheme, got {q.scheme.kind!r}")
    if [c.point_id for c in r.coverage] != [p.id for p in q.scheme.points]:
        raise ValueError(f"response {r.id}: coverage does not list the scheme's points in order")


def teacher_grade(question: Question, response: Response, rng, errors: ErrorModel | None = ErrorModel()
                  ) -> GradedReasoning:
    """Graded reasoning with labelled steps (step labels of App. E; errors of Fig. 1).

    ``errors=ErrorModel.none()`` (or None) gives the error-free teacher, whose final mark is the gold mark.
    """
    _check(question, response)
    lor = isinstance(question.scheme, LevelScheme)
    steps, credits = [], []
    for i, (p, cov) in enumerate(zip(question.scheme.points, response.coverage), start=1):
        step, credit = _judge(i, p, cov, lor, rng, errors)
        steps.append(step)
        credits.append(credit)
    synth, mark = _synthesis(question, credits, rng, errors)
    mark = max(0, min(mark, question.max_mark))
    steps += synth
    steps.append(Step(format_final_line(mark, question.max_mark), StepLabel(FINAL)))
    return GradedReasoning(question.id, response.id, steps, mark, question.max_mark, response.gold)


def teacher_checklist(question: Question, response: Response) -> str:
    """Rubric checklist (§2.2): every point verbatim, covered or not, with the quoted evidence span.

    Written from the coverage ground truth, with the gold mark as privileged input: correct by construction
    (a mismatch between coverage and gold raises).
    """
    _check(question, response)
    covered = [c.point_id for c in response.coverage if c.covered]
    if question.scheme.gold(covered) != response.gold:
        raise ValueError(f"response {response.id}: coverage gives {question.scheme.gold(covered)}, gold is {response.gold}")
    lines = []
    for i, (p, c) in enumerate(zip(question.scheme.points, response.coverage), start=1):
        verdict = "covered" if c.covered else "not covered"
        note = f" ; {V_WRONG}" if c.status == MISCONCEPTION else ""
        lines.append(f"point {i} {p.text} ; {verdict} ; evidence {c.span or 'none'}{note}")
    lines.append(f"covered {len(covered)} of {len(question.scheme.points)} points")
    return "\n".join(lines)


def teacher_rewrite(question: Question, response: Response, reasoning: GradedReasoning, location: int,
                    rng=None, errors: ErrorModel | None = None, atomic: bool = True) -> str:
    """Rewrite of reasoning step ``location`` (1-based) (§2.2, App. J, Figure 6; module docstring).

    Atomic (default): 1-3 sub-steps in place of the target. A grounding target becomes its re-judged form; a
    synthesis target serves the same role, recomputed from corrected inputs; erroneous steps before it (at
    most two) are re-stated first, the case where the paper allows several sub-steps (the prefix already
    synthesised criteria). ``errors`` (with ``rng``) re-judges with the teacher's noise (no checklist);
    None re-judges from the ground truth (checklist given). ``atomic=False`` rewrites the target and every
    reasoning step after it (Table 6 "w/o atomic"). ``reasoning`` must be a teacher rollout (its labels say
    which steps are erroneous).
    """
    rs = reasoning.reasoning_steps
    if not 1 <= location <= len(rs):
        raise ValueError(f"location {location} outside 1..{len(rs)} (the final line is not rewritable)")
    lor = isinstance(question.scheme, LevelScheme)
    points, covs = question.scheme.points, response.coverage
    idx_of = {p.id: k for k, p in enumerate(points)}
    target = rs[location - 1]
    prefix_errors = [s for s in rs[:location - 1] if not s.label.correct][:2]
    scope = [target] if atomic else rs[location - 1:]
    fixed = sorted({s.label.point_id for s in prefix_errors + scope if s.label.kind == GROUNDING}, key=idx_of.get)
    rejudged = {pid: _judge(idx_of[pid] + 1, points[idx_of[pid]], covs[idx_of[pid]], lor, rng, errors)
                for pid in fixed}
    credits = [rejudged[s.label.point_id][1] if s.label.point_id in rejudged else float(s.text.rsplit(" ", 1)[1])
               for s in rs if s.label.kind == GROUNDING]  # as written in the chain, the fixed points re-judged
    synth, _ = _synthesis(question, credits, rng, errors)
    by_role = {s.label.role: s for s in synth}

    def corrected(step: Step) -> Step:
        if step.label.kind == GROUNDING:
            return rejudged[step.label.point_id][0]
        return by_role.get(step.label.role, synth[-1])

    new = [corrected(s) for s in prefix_errors]
    if atomic:
        new.append(corrected(target))
    else:
        new += [corrected(s) for s in scope if s.label.kind == GROUNDING]
        roles = [s.label.role for s in synth]
        start = roles.index(target.label.role) if target.label.kind == SYNTHESIS and target.label.role in roles \
            else 0
        new += synth[start:]
    return render_rewrite_block(location, [s.text for s in new], max_span=3 if atomic else None)


def teacher_intervention(question: Question, response: Response, reasoning: GradedReasoning, rng,
                         errors: ErrorModel | None = ErrorModel()) -> tuple[str, int | None]:
    """InT's verification log, first critical error and intervention (Sec. 3 Baselines (4); the self-audit of
    Table 6 reads its first error): the teacher's own noisy grading against the attempt (module docstring).
    Returns the text in ``prompts.rewrite.render_int_output``'s format and the first-error step (None: none found)."""
    for _ in range(4):  # guided by the reference: the first own grading that reaches the gold mark
        g = teacher_grade(question, response, rng, errors)
        if g.correct:
            break
    own = g.reasoning_steps
    verdicts, first = [], None
    for i, s in enumerate(reasoning.reasoning_steps):
        mine = own[i].text if i < len(own) else None
        ok = mine == s.text
        verdicts.append((ok, "" if ok else (mine or "no such step")))
        if not ok and first is None:
            first = i + 1
    if first is None:
        return render_int_output(verdicts, None, "none", ""), None
    return render_int_output(verdicts, first, reasoning.reasoning_steps[first - 1].text, own[first - 1].text
                             if first - 1 < len(own) else ""), first


def training_hints(step: Step, rng, tie_margin: float = 0.05) -> list[str]:
    """Diagnostic hints for a training rewrite (App. J / Figure 6) in the locator's own sentences on drawn values
    (``rewrite.drawn_hints``): a harmful belief shift for an erroneous target, a small one otherwise. The
    values carry no information the checklist does not; the grader learns the sentences, not a shortcut."""
    return drawn_hints(rng, not step.label.correct, tie_margin)


def role_error_rates(n_questions: int = 60, answers_per_question: int = 6, seed: int = 0,
                     errors: ErrorModel | None = None) -> list[dict]:
    """How often each role of the teacher is wrong on the incorrect rollouts of a fresh SAS-like world, against
    the error-free teacher (the data card's table; ``python -m edit_lib.embedded.teacher`` prints it). A rewrite
    is wrong when its last sub-step differs from the error-free teacher's step there; a diagnosis is right
    when it names the attempt's first erroneous step."""
    import numpy as np

    from edit_lib.data.synthetic import WorldConfig, generate_world
    errors = errors or ErrorModel()
    world = generate_world(WorldConfig(shape="sas_like", n_questions=n_questions,
                                       answers_per_question=answers_per_question, ood_questions=0, seed=seed))
    rng = np.random.default_rng(seed)
    counts = {k: 0 for k in ("attempts", "rewrite_wrong", "rewrite_nc_wrong", "diag_exact", "diag_other",
                             "diag_none")}
    none = ErrorModel.none()
    for r in world.responses:
        q = world.question(r)
        g = teacher_grade(q, r, rng, errors)
        if g.correct:
            continue
        rs = g.reasoning_steps
        first = next(i for i, s in enumerate(rs, start=1) if not s.label.correct)
        counts["attempts"] += 1
        truth = _last_substep(teacher_rewrite(q, r, g, first, rng, none))  # the error-free re-judgement
        counts["rewrite_wrong"] += _last_substep(teacher_rewrite(q, r, g, first)) != truth
        counts["rewrite_nc_wrong"] += _last_substep(teacher_rewrite(q, r, g, first, rng, errors)) != truth
        _, named = teacher_intervention(q, r, g, rng, errors)
        counts["diag_exact" if named == first else "diag_none" if named is None else "diag_other"] += 1
    n = max(counts["attempts"], 1)
    return [
        dict(role="grading", input="rubric, answer", error="per opportunity: the ErrorModel rates", rate=None),
        dict(role="checklist", input="rubric, answer, gold mark", error="wrong coverage", rate=0.0),
        dict(role="rewrite (checklist + hints)", input="+ checklist", error="repair differs from the truth",
             rate=counts["rewrite_wrong"] / n),
        dict(role="rewrite without checklist", input="gold mark, no checklist", error="repair differs from the truth",
             rate=counts["rewrite_nc_wrong"] / n),
        dict(role="non-atomic rewrite", input="+ checklist", error="repair differs from the truth",
             rate=counts["rewrite_wrong"] / n),  # the same re-judgement, written to the end of the chain
        dict(role="InT diagnosis / self-audit", input="gold mark, no checklist", error="names another step",
             rate=counts["diag_other"] / n),
        dict(role="InT diagnosis / self-audit", input="gold mark, no checklist", error="finds no wrong step",
             rate=counts["diag_none"] / n),
        dict(role="(incorrect attempts measured)", input="", error="", rate=float(counts["attempts"])),
    ]


def _last_substep(block: str) -> str:
    from edit_lib.prompts.rewrite import parse_rewrite
    return parse_rewrite(block, max_span=None).steps[-1]


if __name__ == "__main__":
    for row in role_error_rates():
        rate = "" if row["rate"] is None else f"{row['rate']:.3f}"
        print(f"| {row['role']} | {row['input']} | {row['error']} | {rate} |")
