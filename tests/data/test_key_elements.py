"""ASAP's key elements as a count-to-band scheme (edit_lib/data/key_elements.py), the lexical matcher
(edit_lib/data/key_elements.py), the per-question cap of every source (edit_lib/data/records.py) and the
warm-up's mark-balanced sampler (edit_lib/train/warmup.py). The fixture in tests/fixtures/asap_keys is written by
the project in ASAP's format (ASAP's own text may not be redistributed); the real guides are read by path."""
from collections import Counter
from pathlib import Path

import pytest

from edit_lib.data.asap import load_asap, read_rubric
from edit_lib.data.key_elements import (agreement, balanced_agreement, element_keywords, fit_threshold, match_elements,
                                        band_of, parse_key_elements)
from edit_lib.data.schema import DataError, Dataset, FreeTextScheme, LevelScheme, Question, Response
from edit_lib.data.records import cap_per_question, sample_rows

FIX = Path(__file__).parents[1] / "fixtures" / "asap_keys"
REAL = Path(__file__).resolve().parents[3] / "shared" / "data" / "asap_sas"


def _rubric(name="set_05.txt", root=FIX):
    return read_rubric(root / "rubrics" / name, encoding_errors="replace")


def test_the_fixture_guide_becomes_a_count_to_band_scheme_in_its_own_words():
    rub = _rubric()
    s = parse_key_elements(rub.rubric, rub.max_mark)
    assert isinstance(s, LevelScheme) and s.max_mark == 3
    assert [p.text for p in s.points][0] == "Chlorophyll in the chloroplast absorbs light energy."
    assert len(s.points) == 5
    assert {lv.level: (lv.min_points, lv.descriptor) for lv in s.levels} == {
        3: (4, "Four key elements"), 2: (3, "Three key elements"), 1: (1, "One or two key elements")}
    # the guide's mapping: four (or more) -> 3, three -> 2, one or two -> 1, none -> 0
    assert [band_of(s, n) for n in range(6)] == [0, 1, 1, 2, 3, 3]
    assert [s.gold([f"k{i}" for i in range(1, n + 1)]) for n in range(6)] == [0, 1, 1, 2, 3, 3]


def test_a_guide_without_key_elements_stays_free_text_and_bad_bands_name_the_line():
    assert parse_key_elements("Rubric for X\n2 points\nA full answer.\n0 points\nOther", 2) is None
    text = _rubric().rubric
    with pytest.raises(DataError, match="names no count") as e:
        parse_key_elements(text.replace("Three key elements", "A good answer"), 3, where="g.txt")
    assert "g.txt" in str(e.value) and "line" in str(e.value)
    with pytest.raises(DataError, match="do not cover"):
        parse_key_elements(text, 4)
    with pytest.raises(DataError, match="more key elements"):
        parse_key_elements(text.replace("Three key elements", "One key element"), 3)


def test_the_loader_scores_key_element_sets_with_their_scheme_only_when_asked():
    plain = load_asap(FIX, ood_sets=())
    keyed = load_asap(FIX, ood_sets=(), key_elements=True)
    assert isinstance(plain.questions["asap-05"].scheme, FreeTextScheme)
    assert isinstance(keyed.questions["asap-05"].scheme, LevelScheme)
    assert keyed.meta["key_element_sets"] == [5] and plain.meta["key_element_sets"] == []
    assert [r.gold for r in keyed.responses] == [r.gold for r in plain.responses]  # gold stays Score1


@pytest.mark.skipif(not (REAL / "rubrics").is_dir(), reason="real ASAP-SAS rubrics absent (../shared/data/asap_sas)")
def test_the_real_science_guides_parse_as_the_issue_states_them():
    five = _rubric("set_05.txt", REAL)
    six = _rubric("set_06.txt", REAL)
    s5, s6 = parse_key_elements(five.rubric, 3), parse_key_elements(six.rubric, 3)
    assert [band_of(s5, n) for n in range(6)] == [0, 1, 1, 2, 3, 3]   # 4 -> 3, 3 -> 2, 1-2 -> 1
    assert [band_of(s6, n) for n in range(5)] == [0, 1, 2, 3, 3]      # 3 -> 3, 2 -> 2, 1 -> 1
    assert len(s5.points) == 8 and len(s6.points) == 11
    assert all(p.text in five.rubric for p in s5.points)            # the guide's own wording
    for holistic in ("set_10.txt", "set_01.txt", "set_02.txt"):
        r = _rubric(holistic, REAL)
        assert parse_key_elements(r.rubric, r.max_mark) is None


def _scheme():
    rub = _rubric()
    return parse_key_elements(rub.rubric, rub.max_mark)


def test_the_matcher_finds_elements_by_their_keywords_in_one_sentence():
    s = _scheme()
    keys = element_keywords([p.text for p in s.points])
    assert "chlor" in keys[0] and "the" not in keys[0]
    m = match_elements(s, "Chlorophyll absorbs light energy. Plants are nice.", 0.5)
    assert m.present == (1,) and m.evidence == ("Chlorophyll absorbs light energy.",) and m.band == 1
    full = ("Chlorophyll absorbs the light energy in the chloroplast. Water is split and oxygen released. "
            "Carbon dioxide enters through the stomata. Glucose is made in the Calvin cycle.")
    assert match_elements(s, full, 0.5).present == (1, 2, 3, 4) and match_elements(s, full, 0.5).band == 3
    # keywords spread over two sentences do not make one element
    assert match_elements(s, "Chlorophyll is green. It absorbs energy from light.", 0.8).present == ()
    assert all(e in full for e in match_elements(s, full, 0.5).evidence)  # evidence is the answer's own text


def test_agreement_and_the_fitted_threshold_against_a_direct_count():
    s = _scheme()
    ds = load_asap(FIX, ood_sets=(), key_elements=True)
    train = ds.split("train")
    a, g = [r.answer for r in train], [r.gold for r in train]
    for t in (0.34, 0.5, 0.8):
        direct = sum(band_of(s, len(match_elements(s, x, t).present)) == y for x, y in zip(a, g)) / len(a)
        assert agreement(s, a, g, t) == pytest.approx(direct)
        per_mark = {}
        for x, y in zip(a, g):
            per_mark.setdefault(y, []).append(match_elements(s, x, t).band == y)
        assert balanced_agreement(s, a, g, t) == pytest.approx(sum(sum(v) / len(v) for v in per_mark.values()) / 4)
    t, ag = fit_threshold(s, a, g)
    assert ag == max(balanced_agreement(s, a, g, u) for u in (0.2, 0.25, 0.34, 0.5, 0.67))
    assert ag == balanced_agreement(s, a, g, t)


def _ds(n_per_q=(7, 3), splits=("train", "id_test")):
    q = {f"q{i}": Question(f"q{i}", "s", "t", "", FreeTextScheme("r", 3), 3) for i in range(len(n_per_q))}
    rs = [Response(f"q{i}-{sp}-{j}", f"q{i}", f"a{j}", j % 4, sp)
          for i, n in enumerate(n_per_q) for sp in splits for j in range(n)]
    return Dataset("d", q, rs, {})


def test_the_cap_keeps_a_seeded_sample_per_question_and_split_and_records_full_counts():
    ds = cap_per_question(_ds(), 4, seed=1)
    c = Counter((r.question_id, r.split) for r in ds.responses)
    assert c == {("q0", "train"): 4, ("q0", "id_test"): 4, ("q1", "train"): 3, ("q1", "id_test"): 3}
    assert ds.meta["full_counts"]["q0/train"] == 7 and ds.meta["max_per_question"] == 4
    again = cap_per_question(_ds(), 4, seed=1)
    assert [r.id for r in again.responses] == [r.id for r in ds.responses]  # deterministic
    assert [r.id for r in cap_per_question(_ds(), 4, seed=2).responses] != [r.id for r in ds.responses]
    assert len(cap_per_question(_ds(), None, seed=1).responses) == 20
    rows = list(range(10))
    kept = sample_rows(rows, 3, 0, "q", "train")
    assert kept == sorted(kept) and len(kept) == 3  # file order kept
    with pytest.raises(ValueError, match="at least 1"):
        sample_rows(rows, 0, 0, "q", "train")


def test_the_jsonl_source_takes_a_cap_and_rejects_a_bad_one(tmp_path):
    from edit_lib.config import ConfigError, DatasetSpec
    from edit_lib.data.jsonl import write_dataset
    from edit_lib.data.registry import build_dataset
    write_dataset(_ds((9, 9)), tmp_path / "d")
    opts = {"questions": str(tmp_path / "d" / "questions.jsonl"), "responses": str(tmp_path / "d" / "responses.jsonl")}
    full = build_dataset(DatasetSpec(name="d", source="jsonl", options=opts))
    capped = build_dataset(DatasetSpec(name="d", source="jsonl", options={**opts, "max_per_question": 2}))
    assert len(full.responses) == 36 and len(capped.responses) == 8
    assert capped.meta["full_counts"]["q0/train"] == 9
    with pytest.raises(ConfigError, match="max_per_question"):
        build_dataset(DatasetSpec(name="d", source="jsonl", options={**opts, "max_per_question": 0}))


def test_the_balanced_sampler_draws_every_mark_alike_and_counts_repeats():
    from edit_lib.train.warmup import balanced_sample
    rs = [Response(f"r{i}", "q", f"a{i}", g, "train") for i, g in enumerate([0] * 50 + [1] * 10 + [2] * 3 + [3] * 1)]
    out, rep = balanced_sample(rs, 20, seed=0)
    c = Counter(r.gold for r in out)
    assert sum(c.values()) == 20 and set(c.values()) == {5}
    assert rep == {0: [5, 5], 1: [5, 5], 2: [5, 3], 3: [5, 1]}  # [drawn, distinct]
    assert len({r.id for r in out if r.gold == 0}) == 5  # no repeats where the mark has enough answers
    odd, _ = balanced_sample(rs, 22, seed=0)
    assert sorted(Counter(r.gold for r in odd).values()) == [5, 5, 6, 6]
    assert [r.id for r in balanced_sample(rs, 20, seed=0)[0]] == [r.id for r in out]


def test_the_half_mark_dataset_the_readme_uses_loads_with_mark_scale_2_only(tmp_path):
    import half_mark_data
    from edit_lib.config import DatasetSpec
    from edit_lib.data.registry import build_dataset
    q, r = half_mark_data.write(tmp_path, n_per_question=30)
    opts = {"questions": str(q), "responses": str(r)}
    with pytest.raises(DataError, match="mark_scale"):
        build_dataset(DatasetSpec(name="mine", source="jsonl", options=opts))
    ds = build_dataset(DatasetSpec(name="mine", source="jsonl", options={**opts, "mark_scale": 2,
                                                                         "max_per_question": 10}))
    assert ds.meta["mark_scale"] == 2 and {q.max_mark for q in ds.questions.values()} == {6}
    assert any(r.gold % 2 for r in ds.responses)  # half marks, doubled to odd whole marks
    for x in ds.responses:  # gold is the scheme's sum of the points the answer covers
        assert 0 <= x.gold <= 6
    assert Counter(x.split for x in ds.responses)["ood_test"] == 10 and ds.meta["full_counts"]["erosion/ood_test"] == 30
