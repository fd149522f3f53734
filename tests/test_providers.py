"""Named providers a profile value selects (edit_lib/providers.py, runner/keys.py) and the step annotator they
feed (edit_lib/signals/step_labels.py): profile values reach the synthetic world's code, nothing imports it."""
from __future__ import annotations

import json
import random

import pandas as pd
import pytest

from edit_lib import providers
from edit_lib.config import ConfigError, load_profile
from edit_lib.data.schema import DataError, DataFileNotFound
from edit_lib.embedded import annotate, error_analysis as ea
from edit_lib.runner.dry_run import model_counts
from edit_lib.runner.dry_run import check_providers
from edit_lib.signals.audit_summary import annotate as annotate_audit, label_counts
from edit_lib.signals.step_labels import labels_file_annotator, step_annotator


def test_lookup_none_registered_and_unknown():
    assert providers.lookup("annotator", "none") is None
    assert providers.lookup("annotator", "synthetic") is annotate.synthetic_annotator
    with pytest.raises(providers.ProviderError) as e:
        providers.lookup("error_analysis", "synthtic")
    assert "analysis.error_analysis = 'synthtic'" in str(e.value) and "'synthetic'" in str(e.value)
    with pytest.raises(ValueError, match="unknown provider kind"):
        providers.register("annotators", "x", None, module="m")


def test_named_bases_resolve_and_identify_their_weights():
    from edit_lib.embedded.recipe import ASSETS_DIR
    from edit_lib.providers import resolve_base_path, weights_id

    assert resolve_base_path("embedded") == str(ASSETS_DIR)
    assert weights_id("embedded").startswith("embedded:") and weights_id("micro").startswith("micro:")
    assert resolve_base_path("Qwen/Qwen3-8B") == "Qwen/Qwen3-8B" and weights_id("Qwen/Qwen3-8B") == "hub:Qwen/Qwen3-8B"


def test_step_annotator_choices(tmp_path):
    assert step_annotator("none") is None
    assert step_annotator("synthetic")("point 1 ( 1 mark ) : x ; credit 1") == "grounding"
    f = tmp_path / "labels.jsonl"
    f.write_text(json.dumps({"step": "I add the credits.", "label": "synthesis"}) + "\n\n"
                 + json.dumps({"step": "The answer names osmosis.", "label": "grounding"}) + "\n")
    ann = step_annotator(str(f))
    assert [ann(s) for s in ("I add the credits.", " The answer names osmosis.\n", "unknown")] == \
        ["synthesis", "grounding", None]


@pytest.mark.parametrize("rows, line, field", [
    (['{"step": "a", "label": "grounding"}', "not json"], 2, None),
    (['{"label": "grounding"}'], 1, "step"),
    (['{"step": "a", "label": "evidence"}'], 1, "label"),
    (['{"step": "a", "label": "grounding"}', '{"step": "a", "label": "synthesis"}'], 2, "label"),
])
def test_a_bad_labels_file_names_file_line_and_field(tmp_path, rows, line, field):
    f = tmp_path / "labels.jsonl"
    f.write_text("\n".join(rows) + "\n")
    with pytest.raises(DataError) as e:
        labels_file_annotator(f)
    assert (e.value.path, e.value.line, e.value.field) == (str(f), line, field)
    with pytest.raises(DataFileNotFound, match="does not exist"):
        labels_file_annotator(tmp_path / "missing.jsonl")


def test_no_annotator_leaves_every_step_unlabelled():
    audit = pd.DataFrame(dict(dataset="d", response_id="r", rollout_id=0, k=[1, 2], step=["point 1 x", "total 2"]))
    out = annotate_audit(audit, None)
    assert out["label"].isna().all()
    assert label_counts(out)[["label", "steps"]].values.tolist() == [["unlabelled", 2]]


def test_preflight_checks_provider_values(tmp_path):
    check_providers(load_profile("smoke"))
    with pytest.raises(ConfigError, match="analysis.step_annotator = 'synth'"):
        check_providers(load_profile("smoke", ["analysis.step_annotator=synth"]))
    with pytest.raises(ConfigError, match="no such labels file"):
        check_providers(load_profile("smoke", [f"analysis.step_annotator={tmp_path}/labels.jsonl"]))
    with pytest.raises(ConfigError, match="analysis.behaviour"):
        check_providers(load_profile("smoke", ["analysis.behaviour=yes"]))


def test_dry_run_never_builds_a_named_grader(tmp_path, monkeypatch):
    monkeypatch.setenv("EDIT_SUITE_CACHE", str(tmp_path / "cache"))
    counts, how = model_counts(load_profile("smoke"))  # micro, not built in this empty cache
    assert counts is None and "not built yet" in how
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())
    counts, how = model_counts(load_profile("demo"))  # the shipped grader: its config.json on the meta device
    assert counts["total"] > 0 and "meta device" in how


def test_app_h_tables_equal_the_parts():
    from edit_lib.data.synthetic import WorldConfig, generate_world
    from edit_lib.embedded.teacher import teacher_grade
    from edit_lib.segment import segment

    ds = generate_world(WorldConfig(shape="sas_like", n_questions=6, answers_per_question=4, ood_questions=2,
                                    seed=3))
    rows = []
    for i, r in enumerate(ds.responses[:12]):
        q = ds.question(r)
        steps = list(segment(teacher_grade(q, r, random.Random(i), None).completion, "auto").steps)
        for s, shift in (("edit_sft", 0), ("base", 1), ("int_sft", i % 2)):
            rows.append(dict(system=s, dataset=ds.name, response_id=r.id, steps=steps,
                             mark=(r.gold + shift) % (q.max_mark + 1)))
    preds = pd.DataFrame(rows)
    got = ea.app_h_tables(preds, {ds.name: ds})
    c = ea.classify(preds, {ds.name: ds})
    pd.testing.assert_frame_equal(got["apph_error_kinds"], ea.error_kind_shares(c))
    want = pd.concat([ea.disagreements(c, a, b) for a, b in ea.PAIRS], ignore_index=True)
    pd.testing.assert_frame_equal(got["apph_disagreements"], want)
    assert len(got["apph_disagreements"]) >= 2
