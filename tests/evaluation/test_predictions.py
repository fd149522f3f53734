"""07's per-policy prediction cache (edit_lib/evaluation/predictions.py): reused only on identical inputs, the forced
read in its own columns, and 01's Base gradings of the evaluation splits reused by 07 row for row (issue 40)."""
from dataclasses import replace

import pandas as pd
import pytest

from edit_lib.artifacts import folder_digest
from edit_lib.config import load_profile
from edit_lib.data.synthetic import WorldConfig, generate_world
from edit_lib.evaluation import predictions as ev
from edit_lib.model.policy import load_policy_from_profile
from edit_lib.systems import Graded

BASE_MODELS = {"micro": ("smoke", ["eval.decoding.max_new_tokens=32", "eval.batch_size=4"]),  # the micro grader
               "embedded": ("demo", ["eval.decoding.max_new_tokens=32", "eval.batch_size=4"]),  # the shipped tiny grader
               # cpu-real's departure: failed parses (a budget too short for the final line) get the forced read,
               # which 01 used to read 8 rows at a time over every split and 07 eval.batch_size rows per split
               "micro-forced": ("smoke", ["eval.decoding.max_new_tokens=6", "eval.batch_size=4", "eval.forced_read=true"]),
               # cpu-real's prefix cache: each batch's common prompt prefix encoded once, rows in token order
               "micro-prefix": ("smoke", ["eval.decoding.max_new_tokens=32", "eval.batch_size=4", "model.prefix_cache=true"])}


def _world(seed=5):
    """Splits interleaved in response order (train, id_test and ood_test): 01 must give its rows back in order."""
    return generate_world(WorldConfig(shape="science_like", n_questions=2, answers_per_question=5, ood_questions=1,
                                      id_test_fraction=0.4, seed=seed))


def _plain(df):
    """A graded table with ``steps`` as lists (a parquet round trip reads them back as arrays)."""
    df = df.reset_index(drop=True).copy()
    df["steps"] = df["steps"].map(list)
    return df


def _base(ds):
    return Graded("base", ds.name, None, None, None)


# ------------------------------------------------------------------ 01 grades the Base; 07 reuses it

@pytest.mark.slow  # grades 15 responses three times on each grader
@pytest.mark.parametrize("model", sorted(BASE_MODELS))
def test_01s_base_grading_is_greedy_splits_and_07_reuses_it_row_for_row(tmp_path, model, micro_grader):
    name, overrides = BASE_MODELS[model]
    prof = load_profile(name, overrides=overrides)
    ds = _world()
    datasets = {ds.name: ds}
    policy = load_policy_from_profile(prof)
    # 01 before: every split graded in one call per dataset; 01 now: the evaluation splits one at a time, cached
    before = ev.greedy_splits(policy, datasets, prof.eval, prof.run.seed, prof.steps.rule, prof.probe)
    cache01 = ev.PredictionCache(tmp_path / "cache", prof, "w", "c", folder_digest)
    now = ev.base_greedy(cache01, policy, datasets, prof.run.seed)
    assert (cache01.hits, cache01.misses) == (0, 2) and len(list((tmp_path / "cache").glob("*.parquet"))) == 2
    pd.testing.assert_frame_equal(now, before)  # the same rows, order, texts, marks and columns: 01's tables hold
    # 07 on the same run: the Base's two splits come from 01's entries, never loading a policy
    cache07 = ev.PredictionCache(tmp_path / "cache", prof, "w", "c", folder_digest)
    reused = cache07.predict_all([_base(ds)], datasets)
    assert (cache07.hits, cache07.misses) == (2, 0)
    fresh = ev.PredictionCache(tmp_path / "fresh", prof, "w", "c", folder_digest)
    graded = fresh.predict_splits(_base(ds), ds, progress=False)  # 07 grading the Base itself, as before
    assert fresh.misses == 2
    pd.testing.assert_frame_equal(_plain(reused), _plain(graded))
    assert reused["split"].tolist() == ["id_test"] * 4 + ["ood_test"] * 5
    # a 01 run resumed from the cache gives the same table again
    again = ev.base_greedy(ev.PredictionCache(tmp_path / "cache", prof, "w", "c", folder_digest), policy, datasets,
                           prof.run.seed)
    pd.testing.assert_frame_equal(_plain(again), _plain(before))


@pytest.mark.slow  # grades the Base five times
def test_07_grades_afresh_when_its_key_is_not_01s(tmp_path, micro_grader):
    """01's entries are reused only under 07's exact key: another evaluation budget or prefix cache grades anew."""
    name, overrides = BASE_MODELS["micro"]
    prof = load_profile(name, overrides=overrides)
    ds = _world()
    policy = load_policy_from_profile(prof)
    ev.base_greedy(ev.PredictionCache(tmp_path / "cache", prof, "w", "c", folder_digest), policy, {ds.name: ds},
                   prof.run.seed)
    for change in ("eval.decoding.max_new_tokens=16", "model.prefix_cache=true"):
        other = load_profile(name, overrides=[*overrides, change])
        cache07 = ev.PredictionCache(tmp_path / "cache", other, "w", "c", folder_digest)
        got = cache07.predict_splits(_base(ds), ds, progress=False)
        assert (cache07.hits, cache07.misses) == (0, 2), change
        want = ev.PredictionCache(tmp_path / change, other, "w", "c", folder_digest).predict_splits(
            _base(ds), ds, progress=False)
        pd.testing.assert_frame_equal(_plain(got), _plain(want))
        if "max_new_tokens" in change:  # graded under its own budget, not read from 01's 32-token entries
            assert got["n_tokens"].max() <= 16


@pytest.mark.slow  # samples the Base twice
def test_a_sampled_evaluation_caches_nothing_for_07(tmp_path, micro_grader):
    """eval.greedy off: 01 samples (seeded by run.seed), which is not 07's greedy grading; nothing is shared."""
    name, overrides = BASE_MODELS["micro"]
    prof = load_profile(name, overrides=[*overrides, "eval.decoding.greedy=false", "eval.decoding.max_new_tokens=12"])
    ds = _world()
    policy = load_policy_from_profile(prof)
    cache = ev.PredictionCache(tmp_path / "cache", prof, "w", "c", folder_digest)
    got = ev.base_greedy(cache, policy, {ds.name: ds}, prof.run.seed)
    want = ev.greedy_splits(policy, {ds.name: ds}, prof.eval, prof.run.seed, prof.steps.rule, prof.probe)
    pd.testing.assert_frame_equal(got, want)
    assert cache.misses == 0 and not list((tmp_path / "cache").glob("*.parquet"))


def test_the_key_covers_everything_a_prediction_is_computed_from(tmp_path):
    """One change at a time, each must give another key (module docstring: what a prediction is computed from)."""
    ds = _world()
    rs = ds.split("ood_test")

    def key(overrides=(), weights="w", code="c", g=None, data=ds, responses=rs):
        prof = load_profile("smoke", overrides=list(overrides))
        return ev.PredictionCache(tmp_path / "k", prof, weights, code, folder_digest).key(g or _base(data), data,
                                                                                          responses)
    k = key()
    assert key() == k  # deterministic
    changed = {
        "weights": key(weights="w2"), "grading code": key(code="c2"),
        "responses": key(responses=rs[:-1]),
        "dataset": key(data=_world(seed=6), responses=_world(seed=6).split("ood_test")),
        "eval budget": key(["eval.decoding.max_new_tokens=7"]), "eval batch": key(["eval.batch_size=3"]),
        "eval greedy": key(["eval.decoding.greedy=false"]), "step rule": key(["steps.rule=lines"]),
        "forced read": key(["eval.forced_read=true"]), "prefix cache": key(["model.prefix_cache=true"]),
        "dtype": key(["model.dtype=bfloat16"]), "threads": key(["model.torch_threads=1"]),
        "warm-up": key(["model.warmup.steps=3"]), "model": key(["model.name_or_path=embedded"]),
    }
    forced = key(["eval.forced_read=true"])
    changed["forced read's scaffold"] = key(["eval.forced_read=true", "probe.scaffold=The mark is"])
    assert changed.pop("forced read's scaffold") != forced
    assert key(["probe.scaffold=The mark is"]) == k  # without the forced read the probe grades nothing here
    assert not [what for what, other in changed.items() if other == k]
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "w.bin").write_bytes(b"one")
    ka = key(g=Graded("edit_sft", ds.name, None, str(adapter), None))
    assert ka != k
    (adapter / "w.bin").write_bytes(b"two")
    assert key(g=Graded("edit_sft", ds.name, None, str(adapter), None)) != ka  # a retrained adapter
    assert key(responses=[*rs[:-1], replace(rs[-1], answer=rs[-1].answer + " and more")]) != k  # an edited answer
    q = ds.questions[rs[0].question_id]
    edited = replace(ds, questions={**ds.questions, q.id: replace(q, text=q.text + " Explain.")})
    assert key(data=edited) != k  # an edited question (its prompt changes)


def test_the_key_names_a_warm_up_base_by_its_own_key_and_nothing_it_does_not_use(tmp_path, monkeypatch):
    """A warm-up Base is what its warm-up key names (code, data, values): a new key grades afresh even where every
    profile value is the same; values that change no graded weights (a warm-up that does not train, a separate
    reviser's) move no key."""
    from edit_lib.model import warmup as wu
    ds = _world()
    rs = ds.split("ood_test")

    def key(*overrides):
        prof = load_profile("smoke", overrides=list(overrides))
        return ev.PredictionCache(tmp_path / "k", prof, "w", "c", folder_digest).key(_base(ds), ds, rs)
    plain = key()
    assert key("model.warmup.role_steps=5", "model.warmup.curve_every=7") == plain  # no warm-up trains
    on = ("model.warmup.steps=3", "model.warmup.role_model=separate", "model.warmup.roles=[grading, rewrite]")
    k = key(*on)
    assert k != plain
    assert key(*on, "model.warmup.role_steps=5") == k  # the reviser grades nothing
    assert key(*on, "model.warmup.guard_max_mark_share=0.9") == k  # nor does the guard
    assert key(*on, "model.warmup.lora_r=4") != k  # the Base's own values do
    monkeypatch.setattr(wu, "warmup_key", lambda profile: "another-warm-up-code")
    assert key(*on) != k  # warm-up code or data changed: the Base's weights may differ
    assert key() == plain  # without a warm-up its key is not read


def test_the_grading_code_is_every_module_the_grading_runs():
    """The default code fingerprint covers generation, parsing, the forced read and this module's batching."""
    from edit_lib.fingerprints import closure
    files = closure(set(ev.GRADING_CODE))
    for f in ("edit_lib/model/generate.py", "edit_lib/model/rollouts.py", "edit_lib/prompts/grading.py",
              "edit_lib/evaluation/predictions.py", "edit_lib/signals/probe.py", "edit_lib/evaluation/predictions.py"):
        assert f in files, f


# ------------------------------------------------------------------ the prediction cache (micro grader)

def test_prediction_cache_reuses_only_identical_inputs(tmp_path):
    prof = load_profile("smoke")
    ds = generate_world(WorldConfig(shape="sas_like", n_questions=4, answers_per_question=2, ood_questions=2, seed=1))
    responses = ds.split("ood_test")[:3]
    policy = load_policy_from_profile(prof)
    calls = []

    def loader():
        calls.append(1)
        return policy

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "w.bin").write_bytes(b"one")
    g = Graded("base", ds.name, None, None, None)
    cache = ev.PredictionCache(tmp_path / "cache", prof, "weights-a", "code-a", folder_digest)
    first = cache.predict(g, ds, responses, progress=False, policy=loader)
    again = cache.predict(g, ds, responses, progress=False, policy=loader)
    assert len(calls) == 1 and (cache.hits, cache.misses) == (1, 1)
    pd.testing.assert_frame_equal(first, again)
    assert first["response_id"].tolist() == [r.id for r in responses] and first["system"].eq("base").all()
    assert list(first.columns) == ["system", "seed", *ev.PRED_COLUMNS]
    k = cache.key(g, ds, responses)
    assert cache.key(g, ds, responses[:2]) != k                                    # other responses
    ga = Graded("x", ds.name, 1, str(adapter), None)
    ka = cache.key(ga, ds, responses)
    (adapter / "w.bin").write_bytes(b"two")
    assert cache.key(ga, ds, responses) != ka                                      # retrained adapter
    other = ev.PredictionCache(tmp_path / "cache", prof, "weights-b", "code-a", folder_digest)
    assert other.key(g, ds, responses) != k                                        # other base weights
    prof.eval.decoding.max_new_tokens += 1
    assert cache.key(g, ds, responses) != k                                        # other decoding budget


def test_prediction_cache_adds_the_forced_read_in_its_own_columns(tmp_path):
    """eval.forced_read in 07: failed parses get ``forced_mark`` (argmax p_T, forced_read.py), ``mark`` and
    ``parse_status`` stay the parser's, and the flag and the probe's scaffold are part of the cache key."""
    from edit_lib.evaluation.predictions import forced_marks
    prof = load_profile("smoke", overrides=["eval.decoding.max_new_tokens=6"])  # too short for a final line: parses fail
    ds = generate_world(WorldConfig(shape="sas_like", n_questions=3, answers_per_question=2, ood_questions=1, seed=3))
    responses = ds.split("ood_test")[:2]
    policy = load_policy_from_profile(prof)
    g = Graded("base", ds.name, None, None, None)
    cache = ev.PredictionCache(tmp_path / "cache", prof, "w", "c", folder_digest)
    k_off = cache.key(g, ds, responses)
    plain = cache.predict(g, ds, responses, progress=False, policy=lambda: policy)
    assert "forced_mark" not in plain
    prof.eval.forced_read = True
    k_on = cache.key(g, ds, responses)
    got = cache.predict(g, ds, responses, progress=False, policy=lambda: policy)
    assert k_on != k_off and cache.misses == 2
    failed = got["parse_status"] != "ok"
    assert failed.any(), "the 6-token budget should leave parses failed"
    pd.testing.assert_series_equal(got["mark"], plain["mark"])               # the parse is untouched
    assert (got.loc[failed, "mark_source"] == "forced").all() and got.loc[~failed, "forced_mark"].isna().all()
    expect = forced_marks(policy, ds, got[failed], prof.probe, prof.steps.rule, progress=False)
    assert got.loc[failed, "forced_mark"].astype(int).tolist() == expect    # the same read, recomputed apart
    prof.probe.scaffold = "Mark: "
    assert cache.key(g, ds, responses) != k_on                               # the read's scaffold is in the key
