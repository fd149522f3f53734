"""Locality constraint of atomic revision (Sec. 2.2, App. J / Figure 6)."""
import random

import pytest

from edit_lib.data.synthetic import WorldConfig, generate_world
from edit_lib.embedded.annotate import synthetic_annotator
from edit_lib.embedded.teacher import ErrorModel, teacher_grade, teacher_rewrite
from edit_lib.prompts.rewrite import RewriteBlock, parse_rewrite
from edit_lib.revision.generation import check_locality

CHAIN = ["point 1 a b ; answer a b ; matches ; credit 1",
         "point 2 c d ; answer none ; missing ; credit 0",
         "point 3 e f ; answer e g ; wording differs ; credit 0",
         "total 1 + 0 + 0 = 1"]
G3 = "point 3 e f ; answer e g ; same meaning ; credit 1"
G2 = "point 2 c d ; answer none ; missing ; credit 0"


def blk(loc, *steps):
    return RewriteBlock(loc, len(steps), tuple(steps))


def test_local_grounding_rewrite():
    assert check_locality(CHAIN, blk(3, G3), 3, synthetic_annotator) == (True, "")


def test_synthesis_target_may_restate_judgements_first():
    b = blk(4, G3, "total 1 + 0 + 1 = 2")
    assert check_locality(CHAIN, b, 4, synthetic_annotator) == (True, "")


@pytest.mark.parametrize("block,target,reason", [
    (blk(2, G3), 3, "location_mismatch"),
    (blk(3, G3, G2, G3, G2), 3, "span_count"),
    (RewriteBlock(3, 2, (G3,)), 3, "span_count"),
    (blk(3, "total 1 + 0 + 1 = 2"), 3, "role_changed"),  # grounding target rewritten as synthesis
    (blk(3, "total 1 + 0 + 1 = 2", G3), 3, "role_changed"),  # grounding target: every sub-step grounding
    (blk(4, "total 1 + 0 + 1 = 2", G3), 4, "role_changed"),  # last sub-step must keep the target's role
    (blk(3, "the third point is fine"), 3, "role_unknown"),
    (blk(7, G3), 7, "target_out_of_range"),
])
def test_rejections(block, target, reason):
    assert check_locality(CHAIN, block, target, synthetic_annotator) == (False, reason)


def test_prefix_must_be_unchanged():
    b = blk(3, G3)
    ok_rev = CHAIN[:2] + list(b.steps)
    assert check_locality(CHAIN, b, 3, synthetic_annotator, revised=ok_rev) == (True, "")
    bad = [CHAIN[0], "point 2 c d ; answer none ; missing ; credit 1", G3]
    assert check_locality(CHAIN, b, 3, synthetic_annotator, revised=bad) == (False, "prefix_changed")
    assert check_locality(CHAIN, b, 3, synthetic_annotator, revised=ok_rev + ["extra"]) == (False, "prefix_changed")


def test_unknown_target_role_applies_count_rule_only():
    chain = ["some free text judgement", "another one"]
    assert check_locality(chain, blk(1, "x", "y", "z"), 1, synthetic_annotator) == (True, "")
    assert check_locality(chain, blk(1, "x"), 1, None) == (True, "")
    assert check_locality(chain, blk(2, "x"), 1, None) == (False, "location_mismatch")


def test_every_teacher_rewrite_is_local():
    ds = generate_world(WorldConfig(seed=8, shape="science_like", n_questions=8, answers_per_question=20))
    rng, n = random.Random(0), 0
    for r in ds.responses:
        q = ds.question(r)
        g = teacher_grade(q, r, rng, ErrorModel())
        steps = [s.text for s in g.reasoning_steps]
        for k in range(1, len(steps) + 1):
            b = parse_rewrite(teacher_rewrite(q, r, g, k))
            assert check_locality(steps, b, k, synthetic_annotator, steps[:k - 1] + list(b.steps)) == (True, ""), (r.id, k)
            n += 1
    assert n > 100


def test_max_span_bounds_the_sub_steps():
    """``revision.max_span`` (Sec. 2.2: 1-3 sub-steps) reaches the locality rule."""
    from edit_lib.prompts.rewrite import RewriteBlock
    from edit_lib.revision.generation import check_locality
    original = ["a holds", "b holds", "total 2"]
    block = RewriteBlock(location=2, span=3, steps=("b holds", "c holds", "d holds"))
    assert check_locality(original, block, 2, max_span=2) == (False, "span_count")
    assert check_locality(original, block, 2, max_span=3)[1] != "span_count"
