"""The warm-up's judgement and Phase-1 role examples for every scheme kind (edit_lib/train/warmup.py):
LoR as before (ASAP's key elements), PTS from the listed points (the half-mark
example, tests/half_mark_data.py) and free text from the rubric's clauses (tests/free_text_data.py). Marks are
checked against the schemes' own ``gold`` and a hand count; every role example against the checker the suite
applies to the model's own output of that role."""
from __future__ import annotations

import dataclasses
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from edit_lib.baselines.intervention_sft import OK, screen
from edit_lib.config import ConfigError, WarmupConfig
from edit_lib.data.asap import load_asap
from edit_lib.data.key_elements import match_elements
from edit_lib.data.jsonl import load_dataset
from edit_lib.data.schema import DataError, FreeTextScheme
from edit_lib.model import warmup as WB
from edit_lib.prompts.grading import read_final_mark
from edit_lib.prompts.rewrite import parse_rewrite
from edit_lib.revision.checklist import Checklist, parse_checklist, parse_free_checklist, rubric_text
from edit_lib.revision.generation import check_locality
from edit_lib.revision.mimicry import detect_mimicry
from edit_lib.segment import segment
from edit_lib.train import warmup as M
from edit_lib.train import warmup as W
from edit_lib.train import warmup as R

import free_text_data
import half_mark_data
from test_warmup_roles import _Pol as _Tok  # the stand-in policy of the role tests


@pytest.fixture(scope="module")
def half(tmp_path_factory):
    q, r = half_mark_data.write(tmp_path_factory.mktemp("half"), n_per_question=60)
    return load_dataset(q, r, mark_scale=2)


@pytest.fixture(scope="module")
def free(tmp_path_factory):
    q, r = free_text_data.write(tmp_path_factory.mktemp("free"), n_per_question=60)
    return load_dataset(q, r, mark_scale=2)


def _train(ds):
    """The dataset with its training answers only, as the warm-up sees it (``train.warmup.training_answers``)."""
    return dataclasses.replace(ds, responses=ds.split("train"))


def _agreeing(ds, qid):
    q = ds.questions[qid]
    rs = [r for r in ds.split("train") if r.question_id == qid]
    t, _ = M.fit_question_threshold(q, [r.answer for r in rs], [r.gold for r in rs])
    return q, t, [r for r in rs if M.match_answer(q, r.answer, t).band == r.gold]


def test_pts_marks_are_the_sum_of_the_found_points_values(half):
    q = half.questions["heart"]  # values 0.5, 1, 0.5, 1 -> 1, 2, 1, 2 at mark_scale 2; max 6
    vals = [int(p.value) for p in q.scheme.points]
    assert vals == [1, 2, 1, 2] and M.rubric_points(q) == tuple(p.text for p in q.scheme.points)
    for present in [(), (1,), (2, 4), (1, 2, 3, 4), (3,)]:
        assert M.points_mark(q, present) == sum(vals[i - 1] for i in present)
    answer = "Blood enters the right atrium from the body. The left ventricle pumps blood to the body."
    m = M.match_answer(q, answer, 0.5)
    assert m.present == (1, 4) and m.band == 3 and len(m.evidence) == 2


def test_free_text_points_are_the_rubrics_clauses_once_and_marks_follow_the_share(free):
    q = free.questions["photosynthesis"]
    assert isinstance(q.scheme, FreeTextScheme) and q.max_mark == 10
    pts = M.rubric_points(q)  # reference and rubric hold the same five statements: each clause once
    assert len(pts) == 5 and pts[0] == "Chlorophyll in the leaves absorbs light energy"
    for n in range(6):
        assert M.points_mark(q, tuple(range(1, n + 1))) == 2 * n
    q3 = dataclasses.replace(q, reference_answer="", scheme=FreeTextScheme("Osmosis; diffusion of water.", 5), max_mark=5)
    assert M.rubric_points(q3) == ("Osmosis", "diffusion of water")
    for n, want in [(0, 0), (1, 3), (2, 5)]:  # 5 x 1/2 = 2.5 rounds half up
        f = Fraction(5 * n, 2)
        assert M.points_mark(q3, tuple(range(1, n + 1))) == want == int(f + Fraction(1, 2))
    blank = dataclasses.replace(q, reference_answer="", scheme=FreeTextScheme("", 10))
    assert M.rubric_points(blank) == () and M.points_mark(blank, ()) == 0


def test_lor_matches_are_asaps_key_element_matches():
    ds = load_asap(Path(__file__).parents[1] / "fixtures" / "asap_keys", ood_sets=(), key_elements=True)
    for q in ds.questions.values():
        for r in ds.split("train"):
            if r.question_id == q.id:
                assert M.match_answer(q, r.answer, 0.5) == match_elements(q.scheme, r.answer, 0.5)


@pytest.mark.parametrize("kind", ["pts", "text"])
def test_point_judgements_name_points_only_where_the_matcher_reaches_the_gold(kind, half, free):
    ds, qid = (half, "enzyme") if kind == "pts" else (free, "volcano")
    q, t, agreeing = _agreeing(ds, qid)
    cfg = WarmupConfig(responses_per_question=24, judgement="points", max_length=10**5)
    thresholds = W.fit_thresholds({"k": _train(ds)})
    assert thresholds[qid]["threshold"] == t
    pairs, groups, rep = W.warmup_pairs(_Tok(), {"k": ds}, cfg, seed=0, thresholds=thresholds)
    mine = [c for (_, c), g in zip(pairs, groups) if g == qid]
    named = [c for c in mine if " states " in c]
    assert rep["matcher"][qid]["pairs"] == len(mine) == 24 and len(named) == rep["matcher"][qid]["agree"] > 0
    for c in mine:
        gold = read_final_mark(c, q.max_mark).mark
        assert gold is not None
        if c in named:
            assert c.startswith(WB.WORDING[kind][0].format(N=len(M.rubric_points(q))))
            assert segment(c, "auto").n_steps == c.count("\n")  # a step a line, then the final line
        else:
            assert c == WB.judgement(q.max_mark, gold)
    r = agreeing[0]
    m = M.match_answer(q, r.answer, t)
    text = WB.element_judgement(q, r.gold, m, M.rubric_points(q), kind)
    assert [ln for ln in text.split("\n") if "states" in ln and ":" in ln] == [
        WB.WORDING[kind][1].format(i=i, label=WB.short_label(M.rubric_points(q)[i - 1])) for i in m.present]
    key_only = dataclasses.replace(cfg, judgement="key_elements")  # LoR only: these schemes keep the template
    pairs, _, rep = W.warmup_pairs(_Tok(), {"k": ds}, key_only, seed=0, thresholds=thresholds)
    assert not any(" states " in c for _, c in pairs) and not rep["matcher"]


@pytest.mark.parametrize("kind", ["pts", "text"])
def test_every_role_example_passes_its_checker_for_pts_and_free_text(kind, half, free):
    ds, qid = (half, "circuit") if kind == "pts" else (free, "diffusion")
    q, t, agreeing = _agreeing(ds, qid)
    assert len(agreeing) >= 5
    rng = np.random.default_rng(0)
    for r in agreeing:
        m = M.match_answer(q, r.answer, t)
        prompt, text = R.role_example("checklist", q, r, t, rng)
        cl = parse_free_checklist(text, rubric_text(q), r.answer) if kind == "text" else \
            parse_checklist(text, list(M.rubric_points(q)), r.answer)
        assert isinstance(cl, Checklist) and tuple(it.index for it in cl.items if it.covered) == m.present
        assert M.points_mark(q, m.present) == r.gold and f"correct mark: {r.gold}" in prompt
        if kind == "text":
            assert "reference answer:" in prompt  # the free-text checklist prompt 04 writes
        prompt, text = R.role_example("rewrite", q, r, t, rng)
        block, steps = parse_rewrite(text), R.template_attempt(q)
        assert check_locality(steps, block, block.location) == (True, "")
        assert detect_mimicry(block.steps, r.gold, q.max_mark) == []
        assert block.steps == (R.element_step(q, m.present),)
        assert R.NOUN[kind] in block.steps[0] or not m.present
        prompt, text = R.role_example("intervention", q, r, t, rng)
        p = screen(text, len(steps), r.gold)
        assert p.status == OK and p.location == p.first_error == 3
        prefix, cont = R.role_example("continuation", q, r, t, rng)
        assert read_final_mark(prefix + cont, q.max_mark).mark == r.gold


def test_the_warmup_writes_roles_for_every_scheme_kind_and_counts_the_rest(half, free):
    cfg = WarmupConfig(responses_per_question=4, role_responses_per_question=6, max_length=10**5,
                       roles=["grading", "checklist", "rewrite", "intervention"])
    for ds in (half, free):
        pools = {"k": _train(ds)}
        thresholds = W.fit_thresholds(pools)
        assert set(thresholds) == {q for q in ds.questions if any(r.question_id == q for r in ds.split("train"))}
        pairs, groups, rep = W.warmup_pairs(_Tok(), pools, cfg, seed=0, thresholds=thresholds)
        for role in ("checklist", "rewrite", "intervention"):
            rr = rep["roles"][role]
            assert rr["kept"] == sum(g.endswith("/" + role) for g in groups) > 0
            assert rr["matcher_disagrees"] > 0 and "no_elements" not in rr


def test_the_free_text_example_has_half_marks_and_every_mark(tmp_path):
    q, r = free_text_data.write(tmp_path, n_per_question=105)
    ds = load_dataset(q, r, mark_scale=2)
    assert len(ds.responses) == 630 and len(ds.questions) == 6
    assert {x.gold for x in ds.responses} == set(range(11))  # 0..5 in halves, every one present
    assert {x.split for x in ds.responses if x.question_id == "circuit"} == {"ood_test"}
    with pytest.raises(DataError, match="gold"):
        load_dataset(q, r)  # halves need mark_scale: 2


def test_the_judgement_option_is_checked():
    assert WarmupConfig(judgement="points").judgement == "points"
    with pytest.raises(ConfigError, match="judgement"):
        WarmupConfig(judgement="clauses")
