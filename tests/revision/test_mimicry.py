"""Checklist-mimicry detector (App. J / Figure 6): structure copies, gold leaks as digit and word, derived
totals allowed; the leak rule's false-positive rate on correct teacher rewrites stays under a bound."""
import random
import re

import pandas as pd
import pytest

from edit_lib.data.synthetic import WorldConfig, generate_world
from edit_lib.embedded.teacher import ErrorModel, teacher_checklist, teacher_grade, teacher_rewrite
from edit_lib.embedded.tokenizer import canonicalize
from edit_lib.prompts.rewrite import parse_rewrite
from edit_lib.prompts.grading import render_scheme
from edit_lib.revision.mimicry import REASONS, detect_mimicry, gold_leaks, gold_word, gold_word_counts, quoted_texts
from edit_lib.revision.checklist import norm

PREFIX = ["point 1 a b ; answer a b ; matches ; credit 2",
          "point 2 c d ; answer c e ; wording differs ; credit 0",
          "point 3 e f ; answer e f ; matches ; credit 3"]
SCHEME = "mark scheme: points , total 9\npoint 1 ( 2 marks ): a b\npoint 2 ( 4 marks ): c d\npoint 3 ( 3 marks ): e f"
ANSWER = "a b . c e . e f ."
GOLD, MAX = 9, 9


def det(*steps, prefix=PREFIX, gold=GOLD, checklist=None):
    return detect_mimicry(steps, gold, MAX, prefix, ANSWER, SCHEME, checklist)


def test_clean_grounding_and_derived_total_pass():
    assert det("point 2 c d ; answer c e ; same meaning ; credit 4") == []
    # the total equals the gold mark, but it is the sum of credits written above and in the rewrite
    assert det("point 2 c d ; answer c e ; same meaning ; credit 4", "total 2 + 4 + 3 = 9") == []
    assert det("total 2 + 4 + 3 = 9", prefix=PREFIX[:1] + ["point 2 c d ; answer c e ; same meaning ; credit 4"]
               + PREFIX[2:]) == []


@pytest.mark.parametrize("step,reason", [
    ("the correct mark is 9", "gold_labelled"),
    ("final mark : 9", "gold_labelled"),
    ("total 9", "gold_labelled"),
    ("so the answer earns 9 marks", "gold_labelled"),
    ("total 2 + 0 + 3 = 9", "gold_labelled"),          # equation does not hold
    ("total 2 + 5 + 2 = 9", "gold_labelled"),          # 5 is written nowhere in the chain or the scheme
    ("the answer deserves 9 / 9", "gold_fraction"),
    ("it earns 9 out of 9", "gold_fraction"),
    ("the answer deserves nine", "gold_word"),
    ("point 2 c d ; covered ; evidence c e", "verdict_label"),
    ("point 2 is partially met by c e", "verdict_label"),
    ("point 2 c d ; not covered ; evidence none", "checklist_line"),
    ("covered 3 of 3 points", "checklist_line"),
    ("( 1 ) a b is right ( 2 ) c e is right", "enumeration"),
    ("(a) c e has the meaning of c d", "enumeration"),
    ("1) c e has the meaning of c d", "enumeration"),
    ("point 1 a b and point 2 c d both hold", "multi_point"),
    ("points 1 and 2 hold", "multi_point"),
])
def test_each_reason(step, reason):
    prefix = [] if "= 9" in step and "0 +" not in step else PREFIX
    assert reason in det(step, prefix=prefix), det(step, prefix=prefix)


def test_every_reason_is_returned_and_ordered():
    bad = "point 1 a b ; covered ; evidence a b ( 1 ) point 2 c d ; the correct mark is 9 , it earns nine , 9 / 9"
    got = det(bad, checklist="point 1 a b ; covered ; evidence a b")
    assert got == ["verdict_label", "checklist_line", "checklist_copy", "enumeration", "multi_point",
                   "gold_word", "gold_fraction", "gold_labelled"] == list(REASONS)


def test_canonical_form_reads_like_written_form():
    steps = ["the correct mark is 1 2", "it earns 1 2 / 1 4", "total 5 + 7 = 1 2"]
    written = ["the correct mark is 12", "it earns 12/14", "total 5 + 7 = 12"]
    for s, w in zip(steps, written):
        assert gold_leaks(s, 12, 14, [5, 7]) == gold_leaks(w, 12, 14, [5, 7])
    assert gold_leaks("the correct mark is 12", 12, 14) == ["gold_labelled"]
    assert gold_leaks("total 5 + 7 = 12", 12, 14, [5, 7]) == []


def test_number_equal_to_gold_elsewhere_is_not_a_leak():
    assert gold_leaks("point 9 x y ; answer none ; missing ; credit 0", 9, 12) == []
    assert gold_leaks("round 8.5 to 9", 9, 12) == []
    assert gold_leaks("capped at 9", 9, 12) == []
    assert gold_leaks("mark 9", 8, 12) == []  # not the gold
    # a number word quoted from the answer is evidence, not a leak
    assert gold_leaks("point 1 x ; answer three cells ; matches ; credit 1", 3, 5, quoted="three cells") == []


def test_word_leak_independent_of_context():
    assert gold_leaks("one claim : the mark is three", 3, 5, [3]) == ["gold_word"]
    assert gold_leaks("the mark is zero", 0, 5) == ["gold_word"]
    assert gold_leaks("zero", 0, 5) == [] and gold_word("zero", 0, rule="old")  # a bare word is no longer a mark


# grader sentences where the gold mark's word is an ordinary word: a leak under the old rule only
ORDINARY = [("one of the points is met by c e", 1), ("the answer gives zero evidence for c d", 0),
            ("only one of the two cells is named", 1), ("it gets one of the terms right", 1),
            ("no one reading c e would take it for c d", 1), ("step 2 : one part of c d is missing", 1),
            ("zero change in the wording ; c e means c d", 0)]
# the word used as a mark: a leak under both rules (written form; the canonical form reads alike)
AS_MARK = [("award one mark for c e", 1), ("so the answer earns zero marks", 0), ("final mark : one / four", 1),
           ("it earns one out of four", 1), ("the score is zero", 0), ("total = one", 1), ("it deserves one", 1),
           ("the answer scores zero here", 0), ("one point for point 2", 1), ("mark of one", 1)]


@pytest.mark.parametrize("step,gold", ORDINARY)
def test_gold_word_ordinary_use_passes_new_rule(step, gold):
    assert not gold_word(step, gold) and not gold_word(canonicalize(step), gold)
    assert gold_word(step, gold, rule="old")
    assert "gold_word" not in gold_leaks(step, gold, 4)


@pytest.mark.parametrize("step,gold", AS_MARK)
def test_gold_word_as_mark_fails_both_rules(step, gold):
    for s in (step, canonicalize(step)):
        assert gold_word(s, gold) and gold_word(s, gold, rule="old"), s
    assert "gold_word" in gold_leaks(step, gold, 4)
    assert not gold_word(step, gold + 2)  # only the gold mark's word is a leak


def test_gold_word_digits_and_quoted_text():
    # the digit form is the other rules' business: no word, so no gold_word
    assert gold_leaks("final mark : 1 / 4", 1, 4) == ["gold_fraction", "gold_labelled"]
    assert gold_leaks(canonicalize("final mark: 1/4"), 1, 4) == ["gold_fraction", "gold_labelled"]
    assert not gold_word("award 1 mark", 1)
    # a word quoted from the answer or scheme is evidence under either rule; a point index is not a mark
    assert not gold_word("award one mark", 1, quoted="one mark per cell")
    assert not gold_word("award one mark", 1, quoted="one cell", rule="old")
    assert not gold_word("point 2 one of c d", 1) and gold_word("credit 2 one", 1)
    with pytest.raises(ValueError):
        gold_word("one", 1, rule="both")


def _rewrites(rows):
    cols = ["dataset", "response_id", "gold", "sub_steps", "reasons"]
    return pd.DataFrame(rows, columns=cols)


def test_gold_word_counts_old_and_new_from_one_table():
    rw = _rewrites([
        ("a", "r1", 1, ["one of the points is met"], ["gold_word"]),          # old only, its only reason
        ("a", "r2", 1, ["award one mark", "c e"], ["gold_word"]),             # both
        ("a", "r3", 0, ["zero evidence", "( 1 ) c e"], ["enumeration"]),      # old only, another reason
        ("a", "r4", 2, ["one of the points"], []),                            # gold 2: neither
        ("a", "r5", 1, [], ["rewrite_parse"]),                                # not parsed: outside the count
        ("b", "r1", 1, ["one mark"], ["gold_word"]),                          # quoted below: neither
        ("b", "r2", 0, ["the mark is zero"], ["gold_word", "gold_labelled"]),  # both, not alone
    ])
    got = gold_word_counts(rw, {("b", "r1"): "one mark per cell"}).set_index(["dataset", "rule"])
    assert got.loc[("a", "old")].tolist() == [3, 1 + 1, 4]  # rejected, only_reason (r1, r2), rewrites
    assert got.loc[("a", "new")].tolist() == [1, 1, 4]
    assert got.loc[("b", "old")].tolist() == got.loc[("b", "new")].tolist() == [1, 0, 2]
    # without the quoted texts the word of b/r1 counts
    assert gold_word_counts(rw).set_index(["dataset", "rule"]).loc[("b", "new"), "rejected"] == 2
    assert list(gold_word_counts(rw).columns) == ["dataset", "rule", "rejected", "only_reason", "rewrites"]


def test_quoted_texts_are_what_the_detector_reads():
    ds = generate_world(WorldConfig(seed=3, shape="sas_like", n_questions=2, answers_per_question=2))
    r = ds.responses[0]
    quoted = quoted_texts({"w": ds}, pd.DataFrame([("w", r.id)], columns=["dataset", "response_id"]))
    assert quoted == {("w", r.id): f"{r.answer}\n{render_scheme(ds.question(r))}"}


# Bound on the leak rule's false-positive rate over correct teacher rewrites (every step of every incorrect
# noisy-teacher rollout of two synthetic worlds, rewritten by the error-free teacher). The documented false
# positive is the LoR "mark 0" step; 1% overall and 3% among rewrites that state the gold number in a
# synthesis sub-step are the bounds, fixed before measuring.
FP_BOUND_ALL, FP_BOUND_GOLD_BEARING = 0.01, 0.03


@pytest.mark.slow
def test_leak_false_positive_rate_on_teacher_rewrites(capsys):
    n = n_gold_bearing = fp = 0
    other = set()
    for shape in ("sas_like", "science_like"):
        ds = generate_world(WorldConfig(seed=5, shape=shape, n_questions=20, answers_per_question=30))
        rng = random.Random(1)
        for r in ds.responses:
            q = ds.question(r)
            g = teacher_grade(q, r, rng, ErrorModel())
            if g.correct:
                continue
            steps = [s.text for s in g.reasoning_steps]
            checklist, scheme = teacher_checklist(q, r), render_scheme(q)
            for k in range(1, len(steps) + 1):
                b = parse_rewrite(teacher_rewrite(q, r, g, k))
                subs = b.steps if k % 2 else tuple(canonicalize(s) for s in b.steps)  # both text forms
                reasons = detect_mimicry(subs, r.gold, q.max_mark, steps[:k - 1], r.answer, scheme, checklist)
                n += 1
                n_gold_bearing += any(not s.startswith("point") and
                                      re.search(rf"(?<![\w.]){r.gold}(?![\w.])", norm(s)) for s in b.steps)
                fp += bool({"gold_word", "gold_fraction", "gold_labelled"} & set(reasons))
                other |= set(reasons) - {"gold_word", "gold_fraction", "gold_labelled"}
    with capsys.disabled():
        print(f"\n[mimicry leak FP] {fp}/{n} correct teacher rewrites = {fp / n:.4f}; among the {n_gold_bearing} "
              f"that state the gold number in a synthesis sub-step: {fp / n_gold_bearing:.4f}")
    assert n > 2000 and n_gold_bearing > 200
    assert other == set()  # teacher rewrites never copy the checklist's structure
    assert fp / n < FP_BOUND_ALL and fp / n_gold_bearing < FP_BOUND_GOLD_BEARING
