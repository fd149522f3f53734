"""`edit-suite data validate` and the loaders agree on what the pipeline needs (issue 7): splits, empty files,
strict UTF-8 with a BOM allowed, exit codes, half marks (`mark_scale`), skipped records, the data root."""
import json
import shutil
from pathlib import Path

import pytest

from edit_lib.cli import main
from edit_lib.config import ConfigError, DatasetSpec, load_profile
from edit_lib.data.asap import load_asap
from edit_lib.data.schema import DataError, DataFileNotFound, SkipReport, reason_of
from edit_lib.data.jsonl import load_dataset, read_questions, read_responses, write_dataset
from edit_lib.data.registry import build_all, build_dataset, load_built
from edit_lib.data.registry import DATA_ENV, FALLBACK, data_root, resolve_path
from edit_lib.data.sasbench import load_sasbench
from edit_lib.data.validate import check_path

FIX = Path(__file__).parents[1] / "fixtures"
NATIVE = FIX / "native"
Q = dict(id="q1", subject="Biology", text="Name two functions of the liver.", reference_answer="", max_mark=2,
         scheme={"kind": "pts", "points": [{"id": "p1", "text": "bile", "value": 1},
                                           {"id": "p2", "text": "glycogen", "value": 1}]})


def _r(i, split="train", gold=1, **kw):
    return dict(id=f"r{i}", question_id="q1", answer="bile", gold=gold, split=split, **kw)


def _write(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def _pair(tmp_path: Path, responses, questions=(Q,)) -> tuple[Path, Path]:
    return _write(tmp_path / "questions.jsonl", questions), _write(tmp_path / "responses.jsonl", responses)


def _jsonl_spec(qp: Path, rp: Path, name="mine", **opts) -> DatasetSpec:
    return DatasetSpec(name=name, source="jsonl", options=dict(questions=str(qp), responses=str(rp), **opts))


# ---------------------------------------------------------------- splits the pipeline needs

def test_dataset_without_train_split_is_a_named_error_in_validate_and_build(tmp_path, capsys):
    qp, rp = _pair(tmp_path, [_r(1, "id_test"), _r(2, "ood_test")])
    with pytest.raises(DataError, match="no 'train' responses") as e:
        check_path(tmp_path).summary
    assert e.value.field == "split" and "found: id_test 1, ood_test 1" in str(e.value)
    assert main(["data", "validate", str(rp), "--questions", str(qp)]) == 1
    assert "no 'train' responses" in capsys.readouterr().err
    with pytest.raises(DataError, match="dataset 'mine' has no 'train' responses"):
        build_dataset(_jsonl_spec(qp, rp))


def test_dataset_without_evaluation_split_is_an_error(tmp_path):
    qp, rp = _pair(tmp_path, [_r(1), _r(2)])
    with pytest.raises(DataError, match="no evaluation split"):
        build_dataset(_jsonl_spec(qp, rp))
    with pytest.raises(DataError, match="no evaluation split"):
        check_path(rp, fmt="responses").summary


def test_bad_dataset_leaves_no_artifact(tmp_path):
    (tmp_path / "good").mkdir()
    (tmp_path / "bad").mkdir()
    good = _pair(tmp_path / "good", [_r(1), _r(2, "ood_test")])
    bad = _pair(tmp_path / "bad", [_r(1, "ood_test")])
    prof = load_profile("smoke")
    prof.data.datasets = [_jsonl_spec(*good, name="good"), _jsonl_spec(*bad, name="bad")]
    out = tmp_path / "artifacts"
    with pytest.raises(DataError, match="'bad' has no 'train'"):
        build_all(prof, out_dir=out)
    assert not out.exists() or not any(out.rglob("*"))  # nothing written, not even the good dataset
    prof.data.datasets = prof.data.datasets[:1]
    build_all(prof, out_dir=out)
    assert sorted(p.name for p in out.iterdir()) == ["good"]  # no temporary folder left
    assert list(load_built(out)) == ["good"]


def test_write_dataset_failure_keeps_the_previous_copy(tmp_path, monkeypatch):
    ds = load_dataset(NATIVE / "questions.jsonl", NATIVE / "responses.jsonl", name="fixture")
    write_dataset(ds, tmp_path / "d")
    before = {p.name: p.read_bytes() for p in (tmp_path / "d").iterdir()}
    import edit_lib.data.jsonl as jl

    def boom(_rows):
        raise RuntimeError("disk full")
    monkeypatch.setattr(jl, "response_to_dict", boom)
    ds.questions = dict(list(ds.questions.items())[:2])  # a different dataset replaces it, and fails half-way
    with pytest.raises(RuntimeError):
        write_dataset(ds, tmp_path / "d")
    assert {p.name: p.read_bytes() for p in (tmp_path / "d").iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]


# ---------------------------------------------------------------- empty files

@pytest.mark.parametrize("name,content", [("responses.jsonl", ""), ("responses.jsonl", "\n  \n"), ("responses.csv", ""),
                                          ("responses.csv", "id,question_id,answer,gold,split\n")])
def test_empty_responses_file_is_an_error(tmp_path, capsys, name, content):
    p = tmp_path / name
    p.write_text(content)
    with pytest.raises(DataError, match="no records|empty CSV") as e:
        read_responses(p, None)
    assert name in str(e.value)
    with_questions = ["--format", "responses", "--questions", str(NATIVE / "questions.jsonl")]
    for extra in ([], ["--format", "responses"], with_questions):
        assert main(["data", "validate", str(p), *extra]) == 1
        assert name in capsys.readouterr().err


def test_empty_questions_file_is_an_error(tmp_path):
    qp, rp = _pair(tmp_path, [_r(1), _r(2, "ood_test")], questions=[])
    with pytest.raises(DataError, match="no records"):
        read_questions(qp)
    with pytest.raises(DataError, match="questions.jsonl.*no records"):
        build_dataset(_jsonl_spec(qp, rp))


# ---------------------------------------------------------------- encoding

def test_invalid_utf8_names_file_line_and_byte_offset(tmp_path, capsys):
    good = json.dumps(_r(1)).encode()
    bad = json.dumps(_r(2, answer_note="x")).encode().replace(b'"bile"', b'"caf\xe9"')
    p = tmp_path / "responses.jsonl"
    p.write_bytes(good + b"\n" + bad + b"\n")
    offset = len(good) + 1 + bad.index(b"\xe9")
    with pytest.raises(DataError) as e:
        read_responses(p, None)
    assert e.value.line == 2 and f"byte offset {offset}" in str(e.value) and "responses.jsonl" in str(e.value)
    assert "0xe9" in str(e.value) and "UTF-8" in str(e.value)
    with pytest.raises(DataError, match="UTF-8"):  # the skip mode does not hide it either
        read_responses(p, None, on_error="skip", report=SkipReport())
    assert main(["data", "validate", str(p)]) == 1
    assert "line 2" in capsys.readouterr().err
    c = tmp_path / "responses.csv"
    c.write_bytes(b"id,question_id,answer,gold,split\nr1,q1,ok,1,train\nr2,q1,\"a\nb \xff\",1,train\n")
    with pytest.raises(DataError, match="byte 0xff") as e:
        read_responses(c, None)
    assert e.value.line == 4


def test_bom_is_accepted_in_jsonl_and_csv(tmp_path):
    rows = [_r(1), _r(2, "ood_test")]
    j = tmp_path / "r.jsonl"
    j.write_bytes(b"\xef\xbb\xbf" + "".join(json.dumps(r) + "\n" for r in rows).encode())
    c = tmp_path / "r.csv"
    c.write_bytes(b"\xef\xbb\xbfid,question_id,answer,gold,split\nr1,q1,bile,1,train\nr2,q1,bile,1,ood_test\n")
    assert read_responses(j, None) == read_responses(c, None)
    assert read_responses(j, None)[0].id == "r1"
    assert check_path(j).summary.startswith("OK") and check_path(c).summary.startswith("OK")
    q = tmp_path / "questions.jsonl"
    q.write_bytes(b"\xef\xbb\xbf" + json.dumps(Q).encode() + b"\n")
    assert list(read_questions(q)) == ["q1"]


def test_asap_strict_utf8_and_counted_replacement(tmp_path):
    root = shutil.copytree(FIX / "asap_mini", tmp_path / "asap")
    p = root / "set_01" / "train.csv"
    p.write_bytes(p.read_bytes().replace(b"more", b"m\xf6re", 1))
    with pytest.raises(DataError, match="encoding_errors: replace") as e:
        load_asap(root, ood_sets=())
    assert "train.csv" in str(e.value) and e.value.line is not None
    ds = load_asap(root, ood_sets=(), encoding_errors="replace")
    assert ds.meta["replaced_bytes"] == 1 and ds.meta["replaced_bytes_at"] == [f"{p}:{e.value.line}"]
    assert sum("\ufffd" in r.answer for r in ds.responses) == 1
    assert load_asap(FIX / "asap_mini", ood_sets=()).meta["replaced_bytes"] == 0


# ---------------------------------------------------------------- command line: exit codes

def test_unknown_format_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["data", "validate", str(NATIVE / "responses.jsonl"), "--format", "bogus"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "usage:" in err and "invalid choice: 'bogus'" in err and "Traceback" not in err


def test_missing_data_file_and_missing_questions_file_exit_alike(tmp_path, capsys):
    codes = [main(["data", "validate", str(tmp_path / "nope.jsonl")]),
             main(["data", "validate", str(NATIVE / "responses.jsonl"), "--questions", str(tmp_path / "noq.jsonl")]),
             main(["data", "validate", str(tmp_path), "--format", "dataset"])]
    err = capsys.readouterr().err
    codes.append(main(["data", "validate", str(NATIVE / "responses.jsonl"), "--mark-scale", "0"]))
    err += capsys.readouterr().err
    assert codes == [2, 2, 2, 2], err
    assert "nope.jsonl" in err and "noq.jsonl" in err
    with pytest.raises(DataFileNotFound):
        build_dataset(_jsonl_spec(tmp_path / "nope_q.jsonl", NATIVE / "responses.jsonl"))


def test_exit_codes_are_documented_in_help(capsys):
    with pytest.raises(SystemExit) as e:
        main(["data", "validate", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert all(f"  {c}  " in out for c in "012") and "usage error" in out and "invalid" in out


# ---------------------------------------------------------------- half marks: mark_scale

HALF_Q = dict(Q, id="q1", max_mark=2.5, scheme={"kind": "pts", "points": [
    {"id": "p1", "text": "bile", "value": 1.5}, {"id": "p2", "text": "glycogen", "value": 1}]})
LOR_Q = dict(id="q2", subject="Physics", text="Explain.", max_mark=3.5, scheme={
    "kind": "lor", "points": [{"id": "a", "text": "a"}, {"id": "b", "text": "b"}],
    "levels": [{"level": 1, "descriptor": "some", "low": 1, "high": 2, "min_points": 1, "step": 0.5},
               {"level": 2, "descriptor": "all", "low": 2.5, "high": 3.5, "min_points": 2}]})


def test_mark_scale_doubles_half_marks_and_keeps_the_original_scale(tmp_path):
    qp, rp = _pair(tmp_path, [_r(1, gold=1.5), _r(2, "ood_test", gold=2.5),
                              dict(_r(3, "id_test", gold=0.5), question_id="q2")], questions=[HALF_Q, LOR_Q])
    ds = build_dataset(_jsonl_spec(qp, rp, mark_scale=2))
    assert [r.gold for r in ds.responses] == [3, 5, 1]
    q1, q2 = ds.questions["q1"], ds.questions["q2"]
    assert (q1.max_mark, q1.scheme.max_mark, [p.value for p in q1.scheme.points]) == (5, 5, [3.0, 2.0])
    assert q1.scheme.gold(["p1"]) == 3  # 1.5 marks on the doubled scale
    assert q2.max_mark == 7 and [(lv.low, lv.high, lv.step) for lv in q2.scheme.levels] == [(2, 4, 1), (5, 7, 2)]
    assert q2.scheme.gold(["a"]) == 2 and q2.scheme.gold(["a", "b"]) == 5  # 1 and 2.5 marks, doubled
    assert ds.meta["mark_scale"] == 2 and ds.meta["original_max_marks"] == {"q1": 2.5, "q2": 3.5}
    write_dataset(ds, tmp_path / "out")  # the built artifact keeps the scale; reading it back does not rescale
    back = load_built(tmp_path)["out"]
    assert [r.gold for r in back.responses] == [3, 5, 1] and back.meta["mark_scale"] == 2
    assert back.meta["original_max_marks"] == {"q1": 2.5, "q2": 3.5}
    assert "mark_scale 2" in check_path(tmp_path, mark_scale=2).summary
    assert main(["data", "validate", str(rp), "--questions", str(qp), "--mark-scale", "2"]) == 0


def test_half_mark_without_mark_scale_names_the_option(tmp_path, capsys):
    qp, rp = _pair(tmp_path, [_r(1), _r(2, "ood_test", gold=1.5)])
    with pytest.raises(DataError, match="not an integer: 1.5.*mark_scale") as e:
        build_dataset(_jsonl_spec(qp, rp))
    assert (e.value.line, e.value.field) == (2, "gold") and "responses.jsonl" in str(e.value)
    assert main(["data", "validate", str(rp), "--questions", str(qp)]) == 1
    assert "mark_scale" in capsys.readouterr().err
    qh = _write(tmp_path / "qh.jsonl", [HALF_Q])
    with pytest.raises(DataError, match="mark_scale") as e:
        read_questions(qh)
    assert e.value.field == "max_mark"


def test_mark_not_a_multiple_of_the_scale_names_file_line_and_field(tmp_path):
    qp, rp = _pair(tmp_path, [_r(1, gold=0.5), _r(2, "ood_test", gold=1.25)])
    with pytest.raises(DataError, match=r"1.25 is not a multiple of 1/2 \(mark_scale=2\)") as e:
        load_dataset(qp, rp, mark_scale=2)
    assert (e.value.line, e.value.field) == (2, "gold") and str(rp) in str(e.value)
    assert [r.gold for r in load_dataset(qp, rp, mark_scale=4).responses] == [2, 5]
    c = tmp_path / "r.csv"
    c.write_text("id,question_id,answer,gold,split\nr1,q1,x,1.5,train\nr2,q1,x,0.3,ood_test\n")
    with pytest.raises(DataError, match="not a multiple") as e:
        read_responses(c, None, mark_scale=2)
    assert (e.value.line, e.value.field) == (3, "gold")
    with pytest.raises(ConfigError, match="mark_scale must be an integer"):
        build_dataset(_jsonl_spec(qp, rp, mark_scale=1.5))


# ---------------------------------------------------------------- skipped records

def test_skip_mode_reports_every_dropped_record_with_reasons_and_counts(tmp_path, capsys):
    rows = [_r(1), _r(2, gold=9), "{broken", _r(4, gold=7), _r(5, split="dev"), _r(6, "ood_test"), _r(7, gold=1.5)]
    qp, rp = _pair(tmp_path, rows)
    prof = load_profile("smoke")
    prof.data.on_error = "skip"
    prof.data.datasets = [_jsonl_spec(qp, rp)]
    ds = build_all(prof)["mine"]
    rep = ds.meta["skip_report"]
    assert [r.id for r in ds.responses] == ["r1", "r6"]
    assert ds.meta["n_records"] == rep.n_records == 1 + 7 and ds.meta["skipped"] == len(rep) == 5
    assert [(e.line, e.field) for e in rep.skipped] == [(2, "gold"), (3, "<record>"), (4, "gold"), (5, "split"),
                                                        (7, "gold")]
    counts = rep.reason_counts()
    assert counts["gold: gold mark N outside [N, N]"] == 2 and sum(counts.values()) == 5 and len(counts) == 4
    assert reason_of(rep.skipped[3]) == "split: unknown split N (expected one of (N, N, N))"
    text = ds.meta["skipped_report"]
    assert text.startswith("5 records skipped (of 8 read)") and "    2 x gold: gold mark N outside" in text
    assert all(str(e) in text for e in rep.skipped)
    # the command line: every record checked, count per reason, the first few records, exit 1
    assert main(["data", "validate", str(rp), "--questions", str(qp), "--on-error", "skip"]) == 1
    out = capsys.readouterr()
    assert out.out.startswith("without the skipped records: responses") and "OK" not in out.out
    assert "5 records skipped" in out.err and "2 x gold" in out.err
    assert "first 5:" in out.err and "line 7" in out.err


def test_raise_mode_datasets_carry_record_counts_too():
    prof = load_profile("smoke")
    source = {d.name: d.source for d in prof.data.datasets}
    for name, ds in build_all(prof).items():
        # a synthetic world counts its questions and answers; a SAS-Bench file one record per answer
        records = len(ds.responses) + (len(ds.questions) if source[name] == "synthetic" else 0)
        assert ds.meta["n_records"] == records > 0
        assert len(ds.meta["skip_report"]) == 0 and ds.meta["skipped_report"] == "0 records skipped"


def test_asap_skip_mode(tmp_path):
    root = shutil.copytree(FIX / "asap_mini", tmp_path / "asap")
    p = root / "set_01" / "train.csv"
    p.write_text(p.read_text().replace("2,1,0,0,more", "2,1,9,0,more"))
    with pytest.raises(DataError, match="Score1"):
        load_asap(root, ood_sets=())
    ds = load_asap(root, ood_sets=(), on_error="skip")
    full = load_asap(FIX / "asap_mini", ood_sets=())
    assert len(ds.responses) == len(full.responses) - 1 and ds.meta["skipped"] == 1
    assert ds.meta["n_records"] == full.meta["n_records"] == len(full.responses) + len(full.questions)


# ---------------------------------------------------------------- the data root

def test_data_root_from_environment_with_fallback(tmp_path, monkeypatch):
    monkeypatch.delenv(DATA_ENV, raising=False)
    assert data_root() == FALLBACK and FALLBACK == Path(__file__).resolve().parents[3] / "shared" / "data"
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    assert data_root() == tmp_path
    assert resolve_path("$EDIT_SUITE_DATA/asap_sas") == tmp_path / "asap_sas"
    assert resolve_path("${EDIT_SUITE_DATA}/x.jsonl") == tmp_path / "x.jsonl"
    assert resolve_path("tests/fixtures") == Path(__file__).resolve().parents[1] / "fixtures"  # repository-relative


def test_real_data_defaults_to_the_data_root_and_path_wins(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    spec = DatasetSpec(name="asap", source="asap", options=dict(ood_sets=[1]))
    with pytest.raises(DataFileNotFound, match=f"{DATA_ENV}") as e:
        build_dataset(spec)
    assert str(tmp_path / "asap_sas") in str(e.value)
    shutil.copytree(FIX / "asap_mini", tmp_path / "asap_sas")
    spec.options = dict(ood_sets=[])  # one set: train + id_test
    assert len(build_dataset(spec).responses) == 6
    spec.options = dict(ood_sets=[], path=str(FIX / "asap_mini"), max_per_question=1)
    assert build_dataset(spec).meta["source"] == str(FIX / "asap_mini")
    with pytest.raises(DataFileNotFound, match=DATA_ENV):
        build_dataset(DatasetSpec(name="sas", source="sasbench", options={}))
    shutil.copytree(FIX / "sasbench", tmp_path / "sas_bench")
    assert len(build_dataset(DatasetSpec(name="sas", source="sasbench", options={})).responses) == 30


def test_sasbench_mark_scale_scales_total_gold_and_step_labels(tmp_path):
    src = (FIX / "sasbench" / "1_History_ShortAns.jsonl").read_text().splitlines()
    rec = json.loads(src[0])
    rec["manual_label"] = rec["manual_label"] + 0.5
    p = tmp_path / "1_History_ShortAns.jsonl"
    p.write_text(json.dumps(rec) + "\n" + "\n".join(src[1:]) + "\n")
    with pytest.raises(DataError, match="mark_scale") as e:
        load_sasbench(p)
    assert (e.value.line, e.value.field) == (1, "manual_label")
    plain = load_sasbench(FIX / "sasbench" / "1_History_ShortAns.jsonl")
    ds = load_sasbench(p, mark_scale=2)
    assert ds.responses[0].gold == 2 * plain.responses[0].gold + 1
    assert [r.gold for r in ds.responses[1:]] == [2 * r.gold for r in plain.responses[1:]]
    q = ds.question(ds.responses[0])
    assert q.max_mark == 2 * plain.question(plain.responses[0]).max_mark and ds.meta["original_max_marks"][q.id] == 12
    assert [s["label"] for s in ds.meta["step_labels"]] == [2 * s["label"] for s in plain.meta["step_labels"]]
