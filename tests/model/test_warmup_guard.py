"""The warm-up's budget guard (model.warmup.guard; edit_lib/model/warmup.py): the rule on fabricated curves
(the flat and the degenerate case, the last point, a mid-warm-up dip that recovers), its profile checks and cache
key, and a deliberately degenerate Base (one that gives every answer mark 0) stopping a warm-up at the first judged
curve point, before its last step, with nothing saved."""
import dataclasses
import json

import pandas as pd
import pytest

from edit_lib.config import ConfigError, WarmupConfig, load_profile
from edit_lib.model import warmup as WB
from edit_lib.model.generate import _rows_frame
from edit_lib.train import warmup as W
from edit_lib.model.warmup import WarmupGuardStop, judged, point_verdict, verdict


def curve(steps, qwks, shares=None):
    shares = shares or [0.3] * len(steps)
    return [dict(step=s, qwk=q, top_share=t, top_mark="set5: mark 3", gold_share=0.3, n=48)
            for s, q, t in zip(steps, qwks, shares)]


def cfg(**kw):
    return WarmupConfig(**{"steps": 96, "curve_every": 32, "guard": "warn", **kw})


def test_a_flat_low_curve_fires_after_its_last_step_with_the_numbers():
    # a bring-your-own run: 0.000 / 0.058 / 0.049 at steps 32 / 64 / 96, one mark on 91% of the gradings
    pts = curve([0, 32, 64, 96], [0.0, 0.0, 0.058, 0.049], [0.5, 0.9, 0.91, 0.91])
    msg = verdict(pts, cfg())
    assert msg and "after its last step" in msg and "0.049" in msg and "guard_min_qwk=0.3" in msg
    assert "91%" in msg and "set5: mark 3" in msg and "48 held-out answers" in msg
    assert verdict(pts, cfg(guard="off")) is None


def test_a_dip_that_recovers_is_not_judged_before_three_quarters_of_the_warmup():
    # 0.290 / 0.132 / 0.554 / 0.608 at 32 / 64 / 96 / 112: step 64 is low and falling, but not judged
    c = cfg(steps=112, guard="stop")
    pts = curve([0, 32, 64, 96, 112], [0.0, 0.290, 0.132, 0.554, 0.608])
    assert [judged(p["step"], c) for p in pts] == [False, False, False, True, True]
    assert all(point_verdict(p, q, c) is None for q, p in zip(pts, pts[1:]))
    assert point_verdict(pts[2], pts[1], cfg(steps=112, guard_after=0.5))  # judged from half-way it would fire


def test_a_judged_point_before_the_end_fires_only_when_low_and_flat_or_degenerate():
    c = cfg(steps=100, curve_every=25)
    prev = dict(step=50, qwk=0.10, top_share=0.3)
    assert "rose +0.010 since step 50" in point_verdict(dict(step=75, qwk=0.11, top_share=0.3, n=9), prev, c)
    assert point_verdict(dict(step=75, qwk=0.25, top_share=0.3, n=9), prev, c) is None  # low but rising
    assert "takes 80%" in point_verdict(dict(step=75, qwk=0.25, top_share=0.8, n=9), prev, c)  # rising, degenerate
    assert point_verdict(dict(step=75, qwk=0.35, top_share=0.8, n=9), prev, c) is None  # grades: judged at the end
    assert "takes 70%" in point_verdict(dict(step=100, qwk=0.5, top_share=0.7, n=9), prev, c)  # the end: over at all
    assert point_verdict(dict(step=100, qwk=0.5, top_share=0.6, n=9), prev, c) is None
    # skewed gold: 70% of the answers earn that mark, so giving it to 68% is not degenerate
    assert point_verdict(dict(step=100, qwk=0.5, top_share=0.68, gold_share=0.7, n=9), prev, c) is None
    assert "than its 50% of the gold marks + guard_share_margin=10%" in point_verdict(
        dict(step=100, qwk=0.5, top_share=0.68, gold_share=0.5, n=9), prev, c)
    # ASAP's held-out answers (2026-11-29): gold 75% mark 0, a Base at QWK 0.815 gave it 79% (one answer of 24 more)
    assert point_verdict(dict(step=100, qwk=0.815, top_share=0.79, gold_share=0.75, n=24), prev, c) is None
    assert "takes 86%" in point_verdict(dict(step=100, qwk=0.815, top_share=0.86, gold_share=0.75, n=24), prev, c)
    strict = cfg(steps=100, curve_every=25, guard_share_margin=0.0)  # the rule before the margin
    assert "takes 79%" in point_verdict(dict(step=100, qwk=0.815, top_share=0.79, gold_share=0.75, n=24), prev, strict)
    assert "nan" in point_verdict(dict(step=100, qwk=float("nan"), top_share=1.0, n=9), prev, c)  # one mark: no QWK


def test_the_guard_is_checked_and_left_out_of_the_warmup_key(fresh_cache):
    with pytest.raises(ConfigError, match="curve_every"):
        WarmupConfig(steps=4, guard="stop")
    with pytest.raises(ConfigError, match="'off', 'warn' or 'stop'"):
        WarmupConfig(guard="halt")
    with pytest.raises(ConfigError, match="guard_max_mark_share"):
        WarmupConfig(guard_max_mark_share=1.5)
    WarmupConfig(guard="stop")  # no warm-up: nothing to judge, nothing to refuse
    base = ["model.warmup.steps=4", "model.warmup.curve_every=2"]
    keys = {WB.warmup_key(load_profile("smoke", base + extra)) for extra in (
        [], ["model.warmup.guard=stop"], ["model.warmup.guard=warn", "model.warmup.guard_min_qwk=0.5"])}
    assert len(keys) == 1  # the guard decides whether 01 goes on, never the weights
    assert WB.warmup_key(load_profile("smoke", base + ["model.warmup.curve_every=1"])) not in keys


class MarksZero:
    """A deliberately degenerate Base's engine: every grading ends 'Final mark: 0'."""
    calls = 0

    def generate(self, prompts, cfg, ids=None, progress=True, parse=None):
        MarksZero.calls += 1
        ids = list(range(len(prompts))) if ids is None else list(ids)
        return _rows_frame([dict(prompt_index=i, response_id=ids[i], rollout_id=r, text="Nothing earns a mark.\n"
                                 "Final mark: 0", n_tokens=8, n_prompt_tokens=10, finished=True)
                            for i in range(len(prompts)) for r in range(cfg.n)], parse)


@pytest.mark.slow  # a micro-grader warm-up of two steps with its held-out curve: ~15 s
def test_a_degenerate_base_stops_the_warmup_at_its_first_judged_point(fresh_cache, monkeypatch):
    import edit_lib.model.policy as pol

    real = pol.Policy
    monkeypatch.setattr(pol, "Policy", lambda **kw: real(**kw, engine=MarksZero()))
    prof = load_profile("smoke", ["model.warmup.steps=4", "model.warmup.batch_size=2", "model.warmup.lora_r=4",
                                  "model.warmup.responses_per_question=2", "model.warmup.curve_every=1",
                                  "model.warmup.curve_answers=2", "model.warmup.guard=stop",
                                  "model.warmup.guard_after=0.5", "eval.decoding.max_new_tokens=8"])
    with pytest.raises(WarmupGuardStop, match=r"at step 2 of 4: held-out QWK \S+ is below .*takes 100% of the held-out "
                                              r"gradings.*01 stops here.*model.warmup.guard=warn"):
        W.prepare_base(prof, {})
    assert MarksZero.calls and not (WB.warmup_dir(prof) / "config.json").exists()  # steps 3 and 4 never ran


def test_warn_carries_the_verdict_of_a_finished_curve_as_a_caveat_and_stop_raises_on_it(fresh_cache):
    prof = load_profile("smoke", ["model.warmup.steps=4", "model.warmup.curve_every=2", "model.warmup.guard=warn"])
    folder = WB.warmup_dir(prof)
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")  # a cached warm-up Base (its weights are not read here)
    (folder / "warmup_summary.json").write_text(json.dumps({"heldout_curve": curve([0, 2, 4], [0.0, 0.1, 0.12],
                                                                                   [0.4, 0.7, 0.75])}))
    (caveat,) = WB.warmup_guard_caveats(prof)
    assert caveat.startswith("warm-up Base: model.warmup.guard: the warm-up Base after its last step") and "75%" in caveat
    table = WB.warmup_heldout_curve(prof)
    assert table["top_share"].tolist() == [0.4, 0.7, 0.75] and set(table["top_mark"]) == {"set5: mark 3"}
    assert table["gold_share"].tolist() == [0.3] * 3
    stop = dataclasses.replace(prof, model=dataclasses.replace(
        prof.model, warmup=dataclasses.replace(prof.model.warmup, guard="stop")))
    assert WB.warmup_guard_caveats(stop) == []  # stop never carries on with a caveat ...
    with pytest.raises(WarmupGuardStop, match="after its last step"):  # ... it stops 01 with the cached Base kept
        W.prepare_base(stop, {})
    assert (folder / "config.json").exists()
    assert WB.warmup_guard_caveats(load_profile("smoke", ["model.warmup.steps=4", "model.warmup.curve_every=2"])) == []


def test_the_top_mark_counts_a_failed_parse_as_a_mark_and_compares_with_the_gold():
    from edit_lib.model.warmup import top_mark
    graded = pd.DataFrame({"mark": pd.array([2, 2, None, 2, 0], dtype="Int64"), "gold": [2, 0, 1, 1, 0]})
    assert top_mark(graded, "d") == dict(top_share=0.6, top_mark="d: mark 2", gold_share=0.2)
    unparsed = pd.DataFrame({"mark": pd.array([None, None, 1], dtype="Int64"), "gold": [1, 1, 1]})
    assert top_mark(unparsed, "d")["top_mark"] == "d: mark unparsed"


def test_a_warmup_key_that_moved_while_01_ran_stops_01_naming_both_folders(fresh_cache, monkeypatch):
    """The warm-up key hashes the code on disk: a Base saved under one key and looked up under another (code or
    data edited while the warm-up trained) stops 01 with both folders named, not a missing summary's TypeError."""
    prof = load_profile("smoke", ["model.warmup.steps=4", "model.warmup.curve_every=2", "model.warmup.guard=stop"])
    old = WB.warmup_dir(prof).with_name("micro-0123456789abcdef")
    monkeypatch.setattr(W, "ensure_warmup_base", lambda profile, datasets: old)
    with pytest.raises(RuntimeError, match=rf"saved as {old.name}, but its key now gives "
                                           rf"{WB.warmup_dir(prof).name}: the library's code or the data changed"):
        W.prepare_base(prof, {})
