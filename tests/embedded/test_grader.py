"""Tests for edit_lib.embedded (recipe, build) and the policy loader: micro build from scratch + cache, recipe hashing, the shipped embedded grader."""
import dataclasses
import json

import pytest
import torch

from edit_lib.data.synthetic import WorldConfig, generate_world
from edit_lib.model.generate import SamplingConfig, generate
from edit_lib.embedded.build import build_grader, build_grader_cli
from edit_lib.embedded.recipe import ASSETS_DIR, embedded_recipe, micro_cache_dir, micro_recipe, recipe_hash
from edit_lib.model.policy import load_policy
from edit_lib.prompts.grading import read_final_mark, render_grading_prompt, tiny_text

torch.set_num_threads(1)  # robust when other processes share the 2 cores (oversubscription is 10-50x slower)


def _prompts(ds, responses):
    return [tiny_text(render_grading_prompt(ds.question(r), r.answer)) for r in responses]


def test_recipe_hash():
    r = embedded_recipe()
    assert recipe_hash(r) == recipe_hash(embedded_recipe()) != recipe_hash(micro_recipe())
    assert recipe_hash(dataclasses.replace(r, seed=1)) != recipe_hash(r)
    knob = dataclasses.replace(r, pretrain=dataclasses.replace(r.pretrain, progress=False, threads=1))
    assert recipe_hash(knob) == recipe_hash(r)  # run-time knobs are not part of the recipe


@pytest.mark.slow
def test_build_path_from_scratch(tmp_path):
    """The micro recipe cut to a few steps: the whole build path (tokenizer, model, pretrain, save, summary)."""
    r = micro_recipe()
    r = dataclasses.replace(r, pretrain=dataclasses.replace(r.pretrain, max_steps=4, progress=False))
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(3)  # the caller's own count: the build pins the recipe's, then gives the caller's back
    try:
        path = build_grader(r, tmp_path / "g", accept=True, threads=1)
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)
    for f in ("model.safetensors", "config.json", "tokenizer.json", "recipe.json", "recipe_hash.txt",
              "train_log.jsonl", "build_summary.json"):
        assert (path / f).exists(), f
    summary = json.loads((path / "build_summary.json").read_text())
    assert summary["recipe_hash"] == recipe_hash(r) == (path / "recipe_hash.txt").read_text().strip()
    assert summary["steps"] == 4 and summary["tokens"] > 0 and summary["threads"] == 1
    assert "acceptance" in summary and summary["acceptance"]["ood_greedy"]["n"] == 4
    _, _, kind = load_policy(str(path))  # a built grader folder loads by path too
    assert kind == "tiny"


def test_micro_policy_is_built_once_and_cached():
    """load_policy('micro') builds the full micro recipe into the cache (shared with the smoke run) once."""
    model, tok, kind = load_policy("micro")
    path = micro_cache_dir()
    assert kind == "tiny" and json.loads((path / "build_summary.json").read_text())["recipe_hash"] == \
        recipe_hash(micro_recipe())
    assert micro_recipe().pretrain.threads == 2  # pinned: the golden file depends on the build's floats
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    load_policy("micro")
    assert (path / "model.safetensors").stat().st_mtime_ns == stamp  # cache hit, no rebuild
    ds = generate_world(WorldConfig(shape="sas_like", n_questions=2, answers_per_question=2, ood_questions=0))
    df = generate(model, tok, _prompts(ds, ds.responses), SamplingConfig.evaluation(max_new_tokens=24),
                  progress=False)
    assert len(df) == 4 and df["text"].map(lambda t: isinstance(t, str)).all()


def test_shipped_grader_is_current():
    """The shipped weights were built from today's `embedded` recipe (the hash written beside them)."""
    expected = recipe_hash(embedded_recipe())
    f = ASSETS_DIR / "recipe_hash.txt"
    shipped = f.read_text().strip() if f.exists() else None
    assert shipped == expected and (ASSETS_DIR / "model.safetensors").exists(), (f"edit_lib/embedded/assets/grader was built from recipe {shipped}, the embedded recipe is now {expected}: "
                "rebuild it with `edit-suite build-grader`")


def test_shipped_grader_size_and_summary():
    size = sum(f.stat().st_size for f in ASSETS_DIR.rglob("*") if f.is_file())
    assert size <= 20 * 2**20
    summary = json.loads((ASSETS_DIR / "build_summary.json").read_text())
    assert summary["n_params"] < 2_000_000 and "acceptance" in summary


def test_shipped_grader_grades_parseably():
    model, tok, kind = load_policy("embedded")
    assert kind == "tiny"
    ds = generate_world(WorldConfig(shape="sas_like", n_questions=10, answers_per_question=2, ood_questions=0,
                                    seed=7))
    rs = ds.responses[:20]
    df = generate(model, tok, _prompts(ds, rs), SamplingConfig.evaluation(max_new_tokens=384, batch_size=20),
                  progress=False)
    marks = [read_final_mark(t, ds.question(r).max_mark) for t, r in zip(df["text"], rs)]
    assert sum(m.status == "ok" for m in marks) >= 0.9 * len(rs)


def test_unknown_recipe():
    with pytest.raises(ValueError, match="unknown grader recipe"):
        build_grader_cli(recipe="nope")
