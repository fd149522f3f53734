"""What a warm-up teaches for every scheme kind (``model.warmup``; a suite's choice for models too small to grade or
write the roles' formats zero-shot, the ``cpu-real`` profile; the paper's Base does both zero-shot, App. B, J).

* The points a judgement can name: LoR (ASAP's key elements among them) and PTS schemes' points, a free-text
  rubric's clauses (``rubric_points``), found by the lexical matcher (``data.key_elements.match_texts``) at a
  threshold fitted per question on training answers; a match *agrees* when its mark is the gold mark, and only
  then does a judgement or a role example name points. Details: book/departures.md, section "A warm-up judgement
  for every scheme kind (edit_lib/train/warmup_roles.py)".
* The Phase-1 role examples (``model.warmup.roles``), each from one training answer whose matched points reach
  its gold mark: ``checklist`` (Sec. 2.2), ``rewrite`` (App. J / Figure 6), ``intervention`` (InT, Sec. 3
  Baselines (4)), ``continuation`` (App. F); an example its role's checker rejects is left out and counted.
  Details: book/departures.md, section "The warm-up's roles (edit_lib/train/warmup_roles.py)".
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from edit_lib.config import WARMUP_ROLES as ROLES
from edit_lib.data.key_elements import _stems, element_keywords, ElementMatch, fit_threshold, match_texts
from edit_lib.data.schema import FreeTextScheme, LevelScheme, PointsScheme, Question, Response, round_half_up
from edit_lib.model.warmup import JUDGEMENT_STEPS, WORDING, judgement, short_label
from edit_lib.prompts.grading import render_scheme
from edit_lib.prompts.rewrite import (render_int_output, render_int_prompt, render_checklist_prompt, render_in_rule,
                                      render_rewrite_block, render_rewrite_prompt, drawn_hints)
from edit_lib.revision.checklist import (Checklist, parse_checklist, clauses, parse_free_checklist, rubric_text,
                                         span_tokens)
from edit_lib.revision.mimicry import detect_mimicry


def rubric_points(q: Question) -> tuple[str, ...]:
    """The point texts a judgement of ``q`` can name (module docstring): a PTS or LoR scheme's points, a
    free-text rubric's clauses; () when there are none (a free-text rubric without text)."""
    if isinstance(q.scheme, (PointsScheme, LevelScheme)):
        return tuple(p.text for p in q.scheme.points)
    if not rubric_text(q):
        return ()
    out, seen = [], set()
    for c in clauses(rubric_text(q)):
        key = tuple(span_tokens(c))
        if key not in seen and _stems(c):
            seen.add(key)
            out.append(c)
    return tuple(out)


def points_mark(q: Question, present: Sequence[int]) -> int:
    """The mark the points ``present`` (1-based indices into ``rubric_points``) reach under ``q``'s scheme
    (module docstring)."""
    s = q.scheme
    if isinstance(s, (PointsScheme, LevelScheme)):
        return s.gold([s.points[i - 1].id for i in present])
    n = len(rubric_points(q))
    if not n:
        return 0
    return round_half_up(q.max_mark * len(present) / n)


def match_answer(q: Question, answer: str, threshold: float) -> ElementMatch:
    """The points of ``q`` that ``answer`` states, their evidence sentences and the mark they reach (``band``)."""
    present, evidence = match_texts(rubric_points(q), answer, threshold)
    return ElementMatch(present, evidence, points_mark(q, present))


def fit_question_threshold(q: Question, answers: Sequence[str], golds: Sequence[int]) -> tuple[float, float]:
    """(threshold, balanced agreement) of ``q``'s matcher on training answers (``key_elements.fit_threshold``)."""
    return fit_threshold(lambda a, t: match_answer(q, a, t).band, answers, golds)


def point_kind(q: Question) -> str:
    """'lor', 'pts' or 'text': the wording a judgement or role example uses for ``q``'s points."""
    return "text" if isinstance(q.scheme, FreeTextScheme) else q.scheme.kind


# ---------------------------------------------------------------- the Phase-1 role examples
# checklist: every point verbatim, covered with the matched sentence as evidence or not covered, then the count line
# (``revision.checklist`` or, for a free-text rubric, ``checklist.verify_free`` verifies it); rewrite: the templated
# judgement's steps (no final line) as the attempt, one step rewritten as one sub-step naming the points found (no
# mark; ``revision.mimicry`` must pass it); intervention: the same attempt verified step by step, its counting step
# the first error and one step naming the points found (InT's leak filter must pass it); continuation: the attempt
# up to a drawn step, replaced by that point step, continued by the template's remaining steps and the gold mark.

def short_evidence(sentence: str, keywords: frozenset[str], max_words: int = 10) -> str:
    """The words of a matched sentence from its first keyword to its last (``element_match``'s stems), at most
    ``max_words``: a whole-word span of the answer, shorter than the sentence the matcher read."""
    words = sentence.split()
    hits = [j for j, w in enumerate(words) if set(_stems(w)) & keywords] or [0]
    return " ".join(words[hits[0]:min(hits[-1] + 1, hits[0] + max_words)])


#: What a role example calls a rubric point, by ``point_kind``.
NOUN = {"lor": "key element", "pts": "marking point", "text": "rubric point"}


def role_checklist(q: Question, match: ElementMatch) -> str:
    """The checklist (Sec. 2.2) of one answer: each rubric point verbatim (``rubric_points``; a
    free-text rubric's as 'point i: ...', ``prompts.rewrite.CHECKLIST_FORMAT_FREE``), covered with the span of the
    sentence the matcher found it in (``short_evidence``), or not covered; then 'covered n of N points'."""
    texts = rubric_points(q)
    keys = element_keywords(list(texts))
    ev = {i: short_evidence(s, keys[i - 1]) for i, s in zip(match.present, match.evidence)}
    sep = ":" if point_kind(q) == "text" else ""
    lines = [f"point {i}{sep} {t} ; {'covered' if i in ev else 'not covered'} ; evidence {ev.get(i, 'none')}"
             for i, t in enumerate(texts, start=1)]
    return "\n".join(lines + [f"covered {len(ev)} of {len(texts)} points"])


def checklist_verifies(q: Question, text: str, answer: str) -> bool:
    """True when ``text`` verifies as ``q``'s checklist: listed points (``checklist.parse_checklist``) or a
    free-text rubric's (``checklist.parse_free_checklist``), as 04 verifies the model's."""
    if point_kind(q) == "text":
        return isinstance(parse_free_checklist(text, rubric_text(q), answer), Checklist)
    return isinstance(parse_checklist(text, [p.text for p in q.scheme.points], answer), Checklist)


def element_step(q: Question, present: Sequence[int]) -> str:
    """One step naming the rubric points found by their words (``short_label``), no index or count (InT's leak
    filter reads any digit equal to the mark as a leak); none found is a step saying so."""
    kind = point_kind(q)
    if not present:
        return WORDING[kind][2]
    texts = rubric_points(q)
    return f"The answer states these {NOUN[kind]}s: " + " ; ".join(short_label(texts[i - 1]) for i in present)


def template_attempt(q: Question) -> list[str]:
    """The attempt the roles repair: the templated judgement's steps (``model.warmup.JUDGEMENT_STEPS``), the
    reasoning steps of a warm-up Base rollout (its final line, with the wrong mark, is not a step)."""
    return [s.format(M=q.max_mark) for s in JUDGEMENT_STEPS]


def role_rewrite(q: Question, r: Response, match: ElementMatch, rng: np.random.Generator) -> tuple[str, str] | None:
    """(rewrite prompt, rewrite block) of one answer (App. J / Figure 6): a drawn step of the templated attempt
    rewritten as one step naming the elements found (``element_step``; one sub-step, since Figure 6 allows several
    only when the prefix has synthesised criteria, which the template's has not); None when the mimicry detector
    rejects it."""
    steps, subs = template_attempt(q), [element_step(q, match.present)]
    k = int(rng.integers(1, len(steps) + 1))
    checklist = role_checklist(q, match)
    if detect_mimicry(subs, r.gold, q.max_mark, steps[:k - 1], r.answer, render_scheme(q), checklist):
        return None
    return (render_rewrite_prompt(q, r.answer, r.gold, steps, k, drawn_hints(rng, harmful=True), checklist),
            render_rewrite_block(k, subs))


def role_intervention(q: Question, r: Response, match: ElementMatch) -> tuple[str, str] | None:
    """(InT prompt, InT output) of one answer (Sec. 3 Baselines (4)): the templated attempt's first two steps
    correct, its counting step the first error, replaced by one step naming the elements found; None when InT's
    leak filter rejects that step."""
    from edit_lib.baselines.intervention_sft import OK, screen
    steps, step, noun = template_attempt(q), element_step(q, match.present), NOUN[point_kind(q)]
    out = render_int_output([(True, ""), (True, ""), (False, f"it names no {noun} of the answer")], 3,
                            f"the count names no {noun}", step)
    if screen(out, len(steps), r.gold).status != OK:
        return None
    return render_int_prompt(q, r.answer, r.gold, steps), out


def role_continuation(q: Question, r: Response, match: ElementMatch, rng: np.random.Generator) -> tuple[str, str]:
    """(revised prefix, continuation) of one answer (App. F: the chain regenerated after a revised step): the
    templated attempt up to a drawn step k, that step replaced by the one naming the elements found
    (``element_step``, the rewrite role's sub-step), one step per line as the template's judgement is written;
    then the template's steps after k and the final line with the gold mark. The warm-up puts the prefix after
    the grading prompt, as 04's continuations do (``revision.generation.continue_prefixes``)."""
    steps = template_attempt(q)
    k = int(rng.integers(1, len(steps) + 1))
    prefix = render_in_rule(steps[:k - 1] + [element_step(q, match.present)], "lines")
    return prefix, "\n".join(judgement(q.max_mark, r.gold).split("\n")[k:])


def role_example(role: str, q: Question, r: Response, threshold: float, rng: np.random.Generator,
                 style: str = "chat") -> tuple[str, str] | str:
    """(prompt, completion) of one answer in one Phase-1 role, or the reason it is left out: ``no_elements``
    (the rubric has no points, ``rubric_match``), ``matcher_disagrees`` (the matched points miss the gold mark) or
    ``checker_rejects`` (the role's own checker rejects the example). ``style``: the policy's prompt style."""
    if not rubric_points(q):
        return "no_elements"
    match = match_answer(q, r.answer, threshold)
    if match.band != r.gold:
        return "matcher_disagrees"
    if role == "checklist":
        text = role_checklist(q, match)
        ok = checklist_verifies(q, text, r.answer)
        out = (render_checklist_prompt(q, r.answer, r.gold, style), text) if ok else None
    elif role == "rewrite":
        out = role_rewrite(q, r, match, rng)
    elif role == "intervention":
        out = role_intervention(q, r, match)
    elif role == "continuation":  # (revised prefix, continuation): warmup_pairs puts the grading prompt first
        return role_continuation(q, r, match, rng)
    else:
        raise ValueError(f"model.warmup.roles: unknown role {role!r} (one of {ROLES})")
    return out if out is not None else "checker_rejects"
