"""App. H error kinds: the classifier read from a completion's own steps agrees with the teacher's step labels."""
import random

import pandas as pd

from edit_lib.data.synthetic import WorldConfig, generate_world
from edit_lib.embedded import error_analysis as ea
from edit_lib.embedded.teacher import GROUNDING, SYNTHESIS, ErrorModel, teacher_grade
from edit_lib.segment import segment


def _world():
    return generate_world(WorldConfig(shape="sas_like", n_questions=30, answers_per_question=8, ood_questions=4,
                                      seed=11))


def test_error_kind_agrees_with_the_teachers_labels():
    ds = _world()
    rng = random.Random(0)
    seen = {"synthesis": 0, "evidence": 0, None: 0}
    for r in ds.responses:
        q = ds.question(r)
        g = teacher_grade(q, r, rng, ErrorModel())
        steps = segment(g.completion, "auto").steps
        got = ea.error_kind(q, r, steps, g.final_mark)
        if g.correct:
            want = None
        elif any(s.label.kind == GROUNDING and not s.label.correct for s in g.steps):
            want = "evidence"
        else:
            assert any(s.label.kind == SYNTHESIS and not s.label.correct for s in g.steps)
            want = "synthesis"
        assert got == want, (g.completion, r.coverage)
        seen[want] += 1
    assert seen["synthesis"] > 5 and seen["evidence"] > 5 and seen[None] > 5  # every branch exercised


def test_unreadable_missing_and_duplicate_points():
    ds = _world()
    r = next(x for x in ds.responses if x.gold > 0)
    q = ds.question(r)
    g = teacher_grade(q, r, random.Random(1), None)  # error-free: every credit right
    steps = list(segment(g.completion, "auto").steps)
    wrong = (r.gold + 1) % (q.max_mark + 1)
    assert ea.error_kind(q, r, steps, r.gold) is None
    assert ea.error_kind(q, r, steps, wrong) == "synthesis"
    assert ea.error_kind(q, r, steps, None) == "synthesis"          # a failed parse is a wrong mark
    assert ea.error_kind(q, r, steps[1:], wrong) == "evidence"       # a point never judged
    assert ea.error_kind(q, r, [steps[0]] + steps, wrong) == "evidence"  # a point judged twice
    assert ea.error_kind(q, r, ["the answer is fine"], wrong) == "unreadable"


def test_disagreements_count_each_wrong_mark():
    ds = _world()
    rs = [x for x in ds.responses if x.gold > 0][:3]
    rows = []
    for r in rs:
        q = ds.question(r)
        steps = list(segment(teacher_grade(q, r, random.Random(2), None).completion, "auto").steps)
        rows.append(dict(system="a", dataset=ds.name, response_id=r.id, steps=steps, mark=r.gold))
        rows.append(dict(system="b", dataset=ds.name, response_id=r.id, steps=steps,
                         mark=r.gold if r is rs[0] else (r.gold + 1) % (q.max_mark + 1)))
    c = ea.classify(pd.DataFrame(rows), {ds.name: ds})
    d = ea.disagreements(c, "a", "b").iloc[0]
    assert (d["disagreements"], d["wrong_marks"], d["synthesis_share"]) == (2, 2, 1.0)
    shares = ea.error_kind_shares(c).set_index("system")
    assert shares.loc["b", "wrong"] == 2 and "a" not in shares.index
