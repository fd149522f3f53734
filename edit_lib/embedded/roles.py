"""The noisy teacher's other roles: every text the policy writes in Phase 1 besides grading (Sec. 2.2, App. J,
Table 6, Sec. 3 Baselines (4)). The embedded grader learns them all from this one teacher, with the error
model of ``teacher.ErrorModel`` (data card: ``data_cards/synthetic_world.md``, "Roles the grader learns").

Roles: checklist (Sec. 2.2), rewrite (App. J / Figure 6), rewrite without checklist and non-atomic rewrite
(Table 6 "w/o checklist", "w/o atomic"), and verification + intervention (InT, Sec. 3 Baselines (4); also the
self-audit of Table 6 "w/o localiser"). Hints in the training rewrites come from
``edit_lib.prompts.rewrite``.

Details: book/departures.md, section "The noisy teacher's roles (edit_lib/embedded/roles.py)".
"""
from __future__ import annotations

from edit_lib.data.schema import LevelScheme, Question, Response
from edit_lib.data.synthetic import MISCONCEPTION
from edit_lib.prompts.rewrite import render_int_output, render_rewrite_block, drawn_hints
from edit_lib.embedded.teacher import GROUNDING, SYNTHESIS, V_WRONG, ErrorModel, GradedReasoning, Step, _check, _judge, \
    _synthesis, teacher_grade


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
    the error-free teacher (the data card's table; ``python -m edit_lib.embedded.roles`` prints it). A rewrite
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
