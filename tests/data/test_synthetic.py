"""Synthetic rubric world (`data_cards/synthetic_world.md`): determinism, splits, gold, coverage spans, key words,
mark range, single-subject worlds."""
import dataclasses
import re
from collections import Counter

import pytest

from edit_lib.data.synthetic import (MARKED_FAMILIES, concept_bank, ABSENT, COVERED_STATUSES, MARKED_PARAPHRASE,
                                     MISCONCEPTION, PARAPHRASE, VERBATIM, WorldConfig, generate_world, key_words,
                                     question_concepts, world_vocabulary)
from edit_lib.data.schema import LevelScheme, PointsScheme

SCI = WorldConfig(seed=3, shape="science_like", n_questions=10, answers_per_question=40, ood_questions=5)
SAS = WorldConfig(seed=3, shape="sas_like", n_questions=60, answers_per_question=5, ood_questions=20)


@pytest.fixture(scope="module")
def sci():
    return generate_world(SCI)


@pytest.fixture(scope="module")
def sas():
    return generate_world(SAS)


def _sentences(answer):
    return [s for s in answer.split(" . ")] if answer else []


def test_same_seed_identical_different_seed_differs(sci):
    again = generate_world(WorldConfig(**{**SCI.__dict__}))
    assert again.questions == sci.questions and again.responses == sci.responses
    other = generate_world(WorldConfig(**{**SCI.__dict__, "seed": 4}))
    assert other.responses != sci.responses
    assert [q.scheme for q in other.questions.values()] != [q.scheme for q in sci.questions.values()]


def test_science_like_splits(sci):
    split_q = {s: {r.question_id for r in sci.split(s)} for s in ("train", "id_test", "ood_test")}
    assert split_q["ood_test"].isdisjoint(split_q["train"])
    assert split_q["id_test"] <= split_q["train"]  # ID = held-out answers to training questions
    assert len(split_q["train"]) == 10 and len(split_q["ood_test"]) == 5
    assert len(sci.split("id_test")) == 10 * round(40 * 0.2)
    assert len(sci.split("ood_test")) == 5 * 40


def test_sas_like_has_no_id_test_and_disjoint_questions(sas):
    assert sas.split("id_test") == []
    tr = {r.question_id for r in sas.split("train")}
    ood = {r.question_id for r in sas.split("ood_test")}
    assert tr.isdisjoint(ood) and len(tr) == 60 and len(ood) == 20
    assert Counter(r.question_id for r in sas.responses).most_common(1)[0][1] == 5


def test_ood_concepts_seen_in_training(sas, sci):
    for ds in (sas, sci):
        train_concepts = {c for r in ds.split("train") for c in question_concepts(ds, r.question_id)}
        for qid in {r.question_id for r in ds.split("ood_test")}:
            assert set(question_concepts(ds, qid)) <= train_concepts


def test_gold_in_range_and_equals_scheme_gold(sas, sci):
    for ds in (sas, sci):
        for r in ds.responses:
            q = ds.question(r)
            assert 0 <= r.gold <= q.max_mark == q.scheme.max_mark
            assert r.gold == q.scheme.gold([c.point_id for c in r.coverage if c.covered])
            assert [c.point_id for c in r.coverage] == [p.id for p in q.scheme.points]


def test_coverage_spans_verbatim_and_key_word_opens(sci):
    bank = concept_bank()
    for r in sci.responses:
        sents = _sentences(r.answer[:-2]) if r.answer else []
        concepts = question_concepts(sci, r.question_id)
        for cov, cid in zip(r.coverage, concepts):
            c = bank[cid]
            if cov.status == ABSENT:
                assert cov.span is None and not cov.covered
                assert not any(s.split()[0] == c.key for s in sents)
                continue
            assert cov.span in sents and f" {cov.span} ." in f" {r.answer}"
            assert cov.span.split()[0] == c.key
            assert cov.covered == (cov.status in COVERED_STATUSES)
            if cov.status == VERBATIM:
                assert cov.span == c.point_text
            if cov.status == MISCONCEPTION:
                assert cov.span == c.misconception != c.point_text
            if cov.status == MARKED_PARAPHRASE:
                assert cov.family in MARKED_FAMILIES and cov.span.split()[1] in ("basically", "roughly")
            if cov.status == PARAPHRASE:
                assert cov.family is not None and cov.family not in MARKED_FAMILIES
        # every sentence opens with some concept's key word
        keys = set(key_words().values())
        assert all(s.split()[0] in keys for s in sents)


def test_all_statuses_occur_and_words_in_vocabulary(sci):
    statuses = Counter(c.status for r in sci.responses for c in r.coverage)
    assert set(statuses) == {VERBATIM, PARAPHRASE, MARKED_PARAPHRASE, MISCONCEPTION, ABSENT}
    vocab = set(world_vocabulary())
    for q in sci.questions.values():
        text = " ".join([q.text, q.reference_answer] + [p.text for p in q.scheme.points])
        assert set(text.replace(".", " ").split()) <= vocab
    for r in sci.responses:
        assert set(r.answer.replace(".", " ").split()) <= vocab
    assert all(re.fullmatch(r"[a-z]+", w) for w in vocab)  # digits never part of words


def test_concept_bank_words_unique_across_roles():
    bank = concept_bank()
    assert 60 <= len(bank) <= 120
    keys = [c.key for c in bank.values()]
    assert len(set(keys)) == len(keys)
    # a key word never occurs inside another concept's statement words
    others = set().union(*(c.words() - {c.key} for c in bank.values()))
    assert others.isdisjoint(keys)


def test_large_config_has_multidigit_marks_and_both_kinds(sas):
    kinds = Counter(q.scheme.kind for q in sas.questions.values())
    assert kinds["pts"] > 0 and kinds["lor"] > 0
    mm = [q.max_mark for q in sas.questions.values()]
    assert min(mm) >= 2 and max(mm) <= 26 and max(mm) >= 10
    assert any(r.gold >= 10 for r in sas.responses)
    hist = [q.max_mark for q in sas.questions.values() if q.subject == "history"]
    assert min(hist) >= 12


def test_lor_levels_well_formed(sas):
    for q in sas.questions.values():
        if isinstance(q.scheme, LevelScheme):
            lv = sorted(q.scheme.levels, key=lambda x: x.level)
            assert lv[0].min_points == 1 and lv[0].low == 1
            for a, b in zip(lv, lv[1:]):
                assert a.min_points < b.min_points and a.high < b.low
            assert lv[-1].min_points <= len(q.scheme.points)
        else:
            assert isinstance(q.scheme, PointsScheme)
            assert {p.value for p in q.scheme.points} <= {1.0, 2.0, 3.0}


def test_gold_marks_spread():
    ds = generate_world(WorldConfig(seed=1, shape="science_like", n_questions=5, answers_per_question=200,
                                    ood_questions=0))
    for qid in ds.questions:
        golds = {r.gold for r in ds.responses if r.question_id == qid}
        assert 0 in golds and ds.questions[qid].max_mark in golds


def test_bad_config_errors():
    with pytest.raises(ValueError, match="shape"):
        generate_world(WorldConfig(shape="nope"))
    with pytest.raises(ValueError, match="subjects"):
        generate_world(WorldConfig(subjects=("alchemy",)))


def test_single_subject_science_world():
    """A Private-Biology-like dataset: one subject, ID answers to training questions, unseen OOD questions built
    from concepts of that subject only; another subject and seed give a different world."""
    cfg = WorldConfig(seed=1, shape="science_like", n_questions=2, answers_per_question=8, ood_questions=2,
                      id_test_fraction=0.25, subjects=("biology",))
    bio = generate_world(cfg)
    assert {q.subject for q in bio.questions.values()} == {"biology"}
    assert all(qid.startswith("bio-") for qid in bio.questions)
    assert all(c.startswith("biology:") for cs in bio.meta["concepts"].values() for c in cs)
    split_q = {s: {r.question_id for r in bio.split(s)} for s in ("train", "id_test", "ood_test")}
    assert len(split_q["train"]) == 2 and split_q["id_test"] == split_q["train"] and len(split_q["ood_test"]) == 2
    assert [len(bio.split(s)) for s in ("train", "id_test", "ood_test")] == [2 * 6, 2 * 2, 2 * 8]
    phys = generate_world(WorldConfig(**{**cfg.__dict__, "subjects": ("physics",), "seed": 2}))
    assert {q.subject for q in phys.questions.values()} == {"physics"}
    assert not {q.text for q in bio.questions.values()} & {q.text for q in phys.questions.values()}


def test_more_ood_questions_and_answers_leave_the_rest_of_the_world_unchanged():
    """The study profile's held-out sizes: ood_answers_per_question and more ood_questions add responses without
    changing any other question or answer (every draw is seeded by its id)."""
    base = WorldConfig(shape="science_like", n_questions=3, answers_per_question=10, ood_questions=2, seed=4)
    a = generate_world(base)
    b = generate_world(dataclasses.replace(base, ood_questions=3, ood_answers_per_question=25))
    key = lambda r: (r.id, r.split, r.answer, r.gold)  # noqa: E731
    assert {key(r) for r in a.responses} <= {key(r) for r in b.responses}
    assert all(b.questions[q] == a.questions[q] for q in a.questions)
    ood = [r for r in b.responses if r.split == "ood_test"]
    assert len(ood) == 3 * 25 and len([r for r in b.responses if r.split != "ood_test"]) == 3 * 10
    with pytest.raises(ValueError, match="ood_answers_per_question >= 0"):
        generate_world(dataclasses.replace(base, ood_answers_per_question=-1))
