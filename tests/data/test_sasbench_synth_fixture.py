"""The smoke profile's SAS-Bench-schema dataset (tests/fixtures/sasbench_synth): the committed file is what its
generator writes, it loads through the `sasbench` source with a question-disjoint split, and its free-text rubric
holds every marking point's wording (so a checklist can quote them, Sec. 2.2)."""
import sys
from pathlib import Path

from edit_lib.config import load_profile
from edit_lib.data.registry import build_dataset
from edit_lib.data.schema import FreeTextScheme
from edit_lib.data.synthetic import generate_world
from edit_lib.revision.checklist import is_span, rubric_text

FIXTURES = Path(__file__).parents[1] / "fixtures"
sys.path.insert(0, str(FIXTURES))
import make_sasbench_synth as gen  # noqa: E402


def test_fixture_is_the_generators_output():
    assert gen.OUT.read_text(encoding="utf-8") == gen.render(), \
        "tests/fixtures/sasbench_synth is stale: run python tests/fixtures/make_sasbench_synth.py"


def test_smoke_loads_it_through_the_sasbench_source_question_disjoint():
    spec = next(s for s in load_profile("smoke").data.datasets if s.name == "sas_synth")
    assert spec.source == "sasbench"
    ds = build_dataset(spec, seed=0)
    splits = {}
    for r in ds.responses:
        splits.setdefault(r.question_id, set()).add(r.split)
    assert all(len(s) == 1 for s in splits.values())  # App. A: SAS questions are split, not answers
    assert sorted(s.pop() for s in splits.values()).count("ood_test") == 2 == ds.meta["ood_questions"]["History"]
    assert all(isinstance(q.scheme, FreeTextScheme) for q in ds.questions.values())
    world = generate_world(gen.WORLD)
    by_text = {q.text: q for q in world.questions.values()}
    for q in ds.questions.values():  # every marking point of the world is a span of the free-text rubric
        assert all(is_span(rubric_text(q), p.text) for p in by_text[q.text].scheme.points)
    gold = {(r.question_id, r.answer): r.gold for r in world.responses}
    assert sorted(r.gold for r in ds.responses) == sorted(gold.values())
