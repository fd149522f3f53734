"""The format warm-up SFT that becomes Base (model.warmup; edit_lib/model/warmup.py, edit_lib/train/warmup.py), on
the micro grader and the smoke
worlds: the templated judgement parses to the gold mark in several steps, pairs come from the training split only,
the merged checkpoint is cached under a key of everything it was computed from and loaded as Base."""
import dataclasses

import pytest
import torch

from edit_lib.model import warmup as WB
from edit_lib.train import warmup as W
from edit_lib.config import WarmupConfig, load_profile
from edit_lib.data.registry import build_all
from edit_lib.model.policy import Policy, load_policy, load_policy_from_profile
from edit_lib.prompts.grading import read_final_mark
from edit_lib.segment import segment


@pytest.fixture()
def prof(fresh_cache):  # an empty cache but for the session's micro grader: the warm-up starts from nothing
    return load_profile("smoke", ["model.warmup.steps=2", "model.warmup.batch_size=2",
                                  "model.warmup.responses_per_question=2", "model.warmup.lora_r=4"])


def test_the_judgement_parses_to_the_gold_in_several_steps():
    for m, g in [(3, 0), (3, 3), (12, 7)]:
        text = WB.judgement(m, g)
        assert read_final_mark(text, m).mark == g
        assert segment(text, "auto").n_steps == len(WB.JUDGEMENT_STEPS)


@pytest.mark.slow
def test_pairs_come_from_the_training_split_with_a_cap_per_question(prof):
    model, tok, kind = load_policy("micro", prof.model)
    pol = Policy(model=model, tokenizer=tok, kind=kind)
    datasets = build_all(prof)
    pairs, groups, rep = W.warmup_pairs(pol, datasets, prof.model.warmup, seed=0)
    qid = {pol.grading_input(ds.question(r), r.answer): r.question_id
           for ds in datasets.values() for r in ds.split("train")}
    assert groups == [qid[p] for p, _ in pairs]  # each pair's group is its question
    train = {pol.grading_input(ds.question(r), r.answer) for ds in datasets.values() for r in ds.split("train")}
    assert pairs and all(p in train for p, _ in pairs)
    n_q = sum(len({r.question_id for r in ds.split("train")}) for ds in datasets.values())
    assert rep["kept"] == len(pairs) <= 2 * n_q and rep["too_long"] == 0
    lengths = sorted(len(tok(p + c)["input_ids"]) + 1 for p, c in pairs)
    cut = lengths[len(lengths) // 2]  # about half the pairs are longer than this
    _, _, short = W.warmup_pairs(pol, datasets, dataclasses.replace(prof.model.warmup, max_length=cut), seed=0)
    assert 0 < short["too_long"] < short["candidates"]
    assert short["kept"] + short["too_long"] == short["candidates"] == rep["candidates"]  # counted, not lost
    with pytest.raises(ValueError, match="max_length"):
        W.warmup_pairs(pol, datasets, dataclasses.replace(prof.model.warmup, max_length=5), seed=0)


def test_the_warmup_lora_is_rank_r_with_alpha_2r():
    lora = W.warmup_lora(WarmupConfig(lora_r=16, lora_layers=4))
    assert (lora.r, lora.alpha, lora.dropout) == (16, 32, 0.0)


@pytest.mark.slow
def test_the_warmup_base_is_cached_by_key_and_loaded_as_base(prof):
    with pytest.raises(FileNotFoundError, match="01_base_policy trains it"):
        load_policy_from_profile(prof)  # not trained yet: the error names the notebook that trains it
    datasets = build_all(prof)
    out = W.ensure_warmup_base(prof, datasets, progress=False)
    summary = WB.warmup_summary(prof)
    assert (out / "config.json").exists() and summary["steps"] == 2 and summary["pairs"]["kept"] > 0
    stamp = (out / "config.json").stat().st_mtime_ns
    assert W.ensure_warmup_base(prof, datasets, progress=False) == out and (out / "config.json").stat().st_mtime_ns == stamp
    pol = load_policy_from_profile(prof)
    assert pol.name.endswith("+warmup")
    base, _, _ = load_policy("micro", prof.model)
    moved = any(not torch.equal(a, b) for a, b in zip(pol.model.state_dict().values(), base.state_dict().values()))
    assert moved  # the merged adapter changed the weights
    other = load_profile("smoke", ["model.warmup.steps=3", "model.warmup.batch_size=2",
                                   "model.warmup.responses_per_question=2", "model.warmup.lora_r=4"])
    assert WB.warmup_key(other) != WB.warmup_key(prof)  # a changed setting is a different Base
    assert WB.warmup_summary(load_profile("smoke")) is None


def test_training_answers_lift_the_cap_and_keep_only_the_training_split(tmp_path):
    from pathlib import Path
    fix = Path(__file__).parents[1] / "fixtures" / "asap_keys"
    prof = load_profile("cpu-real", [f"data.datasets=[{{name: k, source: asap, options: {{path: {fix}, sets: [5], "
                                     "ood_sets: [], max_per_question: 2, key_elements: true}}]"])
    capped = build_all(prof)["k"]
    full = W.training_answers(prof)["k"]
    assert len(capped.split("train")) == 2 and len(full.responses) == 12
    assert {r.split for r in full.responses} == {"train"}  # the test answers never reach the warm-up
    pool, held = W.split_curve_answers(full, dataclasses.replace(prof.model.warmup, curve_answers=4), seed=0)
    assert len(held) == 4 and not {r.id for r in pool} & {r.id for r in held} and len(pool) + len(held) == 12
    none_held = W.split_curve_answers(full, dataclasses.replace(prof.model.warmup, curve_every=0, guard="off"), seed=0)
    assert none_held[1] == [] and len(none_held[0]) == 12


def test_key_element_judgements_name_elements_only_where_the_matcher_reaches_the_gold():
    from pathlib import Path
    from edit_lib.data.asap import load_asap
    from edit_lib.data.key_elements import match_elements
    ds = load_asap(Path(__file__).parents[1] / "fixtures" / "asap_keys", ood_sets=(), key_elements=True)
    q = ds.questions["asap-05"]
    answer = "Chlorophyll absorbs light energy. Carbon dioxide enters the leaf through the stomata."
    m = match_elements(q.scheme, answer, 0.5)
    text = WB.element_judgement(q, m.band, m)
    assert read_final_mark(text, 3).mark == m.band == 1
    assert "key element 1: Chlorophyll in the chloroplast absorbs light ..." in text and "key element 3:" in text
    assert segment(text, "auto").n_steps == 4  # one line per element, the count, then the final line
    assert WB.element_judgement(q, 2, None) == WB.judgement(3, 2)  # disagreement: the template, no element named
    with pytest.raises(ValueError, match="reaches the gold"):
        WB.element_judgement(q, 3, m)
    pairs, _, rep = W.warmup_pairs(_Tok(), {"k": ds}, WarmupConfig(responses_per_question=8, judgement="key_elements", max_length=4096),
                                seed=0, thresholds={"asap-05": {"threshold": 0.5}})
    assert rep["matcher"]["asap-05"]["pairs"] == 8 and sum("key element" in c for _, c in pairs) \
        == rep["matcher"]["asap-05"]["agree"]
    assert sorted(rep["marks"]["asap-05"]) == [0, 1, 2, 3]


class _Tok:
    """A stand-in policy for pair building: the grading input is the answer, one token per character."""
    tokenizer = staticmethod(lambda text: {"input_ids": list(text)})

    @staticmethod
    def grading_input(q, answer):
        return answer


@pytest.mark.slow
def test_the_warmup_records_its_heldout_curve(fresh_cache):
    prof = load_profile("smoke", ["model.warmup.steps=2", "model.warmup.batch_size=2", "model.warmup.lora_r=4",
                                  "model.warmup.responses_per_question=2", "model.warmup.curve_every=1",
                                  "model.warmup.curve_answers=2", "eval.decoding.max_new_tokens=8",
                                  "model.warmup.mark_weight=4"])
    W.ensure_warmup_base(prof, progress=False)
    curve = WB.warmup_heldout_curve(prof)
    assert curve["step"].tolist() == [0, 1, 2] and (curve["n"] > 0).all()
    # every mark's share beside its gold share, per dataset (the held-out curve per mark)
    assert curve["mark_shares"].str.contains(r"^\w+: .*\(gold \d+%\)").all()
    _, losses, _ = WB.warmup_report(prof)  # the loss and the mark tokens' own loss, one line each
    assert set(losses["system"]) == {"format warm-up", "its mark tokens alone"} and losses["loss"].notna().all()
    assert WB.warmup_summary(prof)["build_seconds"] >= WB.warmup_summary(prof)["seconds"]


def test_the_mark_weight_is_positive_and_one_by_default():
    from edit_lib.config import ConfigError, WarmupConfig
    assert WarmupConfig().mark_weight == 1.0  # TRL's plain completion-only mean unless a profile asks
    with pytest.raises(ConfigError, match="mark_weight must be > 0"):
        WarmupConfig(mark_weight=0)


def test_mark_shares_give_every_mark_beside_its_gold_share_with_a_failed_parse_as_a_mark():
    import pandas as pd

    from edit_lib.train.warmup import mark_shares
    graded = pd.DataFrame({"mark": pd.array([2, 2, None, 1], dtype="Int64"), "gold": [0, 1, 1, 2]})
    assert mark_shares(graded) == "0 0% (gold 25%), 1 25% (50%), 2 50% (25%), unparsed 25% (0%)"
