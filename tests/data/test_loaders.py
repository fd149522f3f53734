"""Loaders (App. A): native JSONL/CSV schema, ASAP-SAS, SAS-Bench, and ``data validate``."""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from edit_lib.data.asap import DEFAULT_OOD_SETS, load_asap, read_rubric
from edit_lib.data.schema import Coverage, DataError, Dataset, Response
from edit_lib.data.jsonl import load_dataset, read_questions, read_responses, write_dataset
from edit_lib.data.registry import DATA_ENV, data_root
from edit_lib.data.sasbench import (PAPER_QUESTION_COUNTS, load_sasbench, load_sasbench_unlabelled,
                                    ood_question_counts, question_id)
from edit_lib.data.validate import check_path, detect_format

FIX = Path(__file__).parents[1] / "fixtures"
NATIVE = FIX / "native"
SHARED = data_root()  # $EDIT_SUITE_DATA, else ../shared/data beside the repository
ASAP = SHARED / "asap_sas"
SAS_UNLABELLED = SHARED / "sas_bench_unlabelled"

SCIENCE_SETS = (1, 2, 5, 6, 10)  # ASAP's science and biology sets (data_cards/asap_sas.md)


def summary_of(path, *args, **kw) -> str:
    """What `edit-suite data validate` prints for ``path``."""
    return check_path(path, *args, **kw).summary


def _absent(what: Path, card: str) -> str:
    return (f"real data absent: {what}; set {DATA_ENV} to the folder that holds {what.name}/ "
            f"(layout in data_cards/{card})")

Q_OK = (NATIVE / "questions.jsonl").read_text().splitlines()[0]  # bio-q1, pts, max_mark 2
R_OK = json.dumps(dict(id="r0", question_id="bio-q1", answer="bile", gold=1, split="train"))


def _bad(err: pytest.ExceptionInfo, fname: str, line: int, fld: str) -> None:
    msg = str(err.value)
    assert fname in msg and f"line {line}" in msg and f"'{fld}'" in msg, msg
    assert (err.value.line, err.value.field) == (line, fld)


def _q(**kw) -> str:
    d = json.loads(Q_OK)
    d.update(kw)
    return json.dumps({k: v for k, v in d.items() if v is not ...})


def _r(**kw) -> str:
    d = json.loads(R_OK)
    d.update(kw)
    return json.dumps({k: v for k, v in d.items() if v is not ...})


# ---------------------------------------------------------------- native format

def test_native_jsonl_and_csv_agree():
    a = load_dataset(NATIVE / "questions.jsonl", NATIVE / "responses.jsonl")
    b = load_dataset(NATIVE / "questions.csv", NATIVE / "responses.csv")
    assert a.questions == b.questions and a.responses == b.responses
    assert [q.scheme.kind for q in a.questions.values()] == ["pts", "lor", "text"]
    assert a.questions["phy-q1"].max_mark == 4 and a.questions["chem-q1"].scheme.max_mark == 2
    assert a.responses[2].answer == "More resistance, less current,\nbecause I = V/R."
    assert {r.split for r in a.responses} == {"train", "id_test", "ood_test"} and a.meta["skipped"] == 0
    a.validate()


def test_csv_rubric_column_makes_free_text_scheme():
    qs = read_questions(NATIVE / "questions_rubric.csv")
    q = qs["chem-q1"]
    assert q.scheme.kind == "text" and q.scheme.max_mark == 2 and q.scheme.text.startswith("1 mark: ions")


BAD_QUESTIONS = [  # (line 2 of a questions file, field, message fragment)
    ('{"id": "q2", "subject": ', "<record>", "invalid JSON"),
    ("[1, 2]", "<record>", "JSON object"),
    (_q(id="q2", text=...), "text", "missing field"),
    (_q(id="q2", subject=5), "subject", "expected a string"),
    (_q(id="q2", max_mark="2"), "max_mark", "expected an integer"),
    (_q(id="q2", max_mark=2.5), "max_mark", "not an integer"),
    (_q(id="q2", max_mark=0), "max_mark", ">= 1"),
    (_q(id="q2", max_mark=3), "max_mark", "implies max mark 2"),
    (_q(id="q2", scheme=...), "scheme", "missing field"),
    (_q(id="q2", scheme={"kind": "bands"}), "scheme", "unknown scheme kind"),
    (_q(id="q2", scheme={"kind": "pts"}), "scheme", "lacks key 'points'"),
    (_q(id="q2", scheme={"kind": "pts", "points": [{"id": "a", "text": "x", "value": 1},
                                                    {"id": "a", "text": "y", "value": 1}]}),
     "scheme.points", "duplicate"),
    (_q(id="q2", scheme={"kind": "text", "text": "r", "max_mark": 5}), "max_mark", "implies max mark 5"),
    (Q_OK, "id", "duplicate question id"),
]


@pytest.mark.parametrize("line,fld,frag", BAD_QUESTIONS)
def test_bad_question_record(tmp_path, line, fld, frag):
    p = tmp_path / "my_questions.jsonl"
    p.write_text(Q_OK + "\n" + line + "\n")
    with pytest.raises(DataError, match=frag) as e:
        read_questions(p)
    _bad(e, "my_questions.jsonl", 2, fld)


BAD_RESPONSES = [  # (line 3 of a responses file; line 2 is blank and must still count)
    ("{oops}", "<record>", "invalid JSON"),
    (_r(id="r1", answer=...), "answer", "missing field"),
    (_r(id="r1", answer=7), "answer", "expected a string"),
    (_r(id="r1", gold=1.5), "gold", "not an integer"),
    (_r(id="r1", gold="1"), "gold", "expected an integer"),
    (_r(id="r1", gold=True), "gold", "expected an integer"),
    (_r(id="r1", gold=3), "gold", r"outside \[0, 2\]"),
    (_r(id="r1", gold=-1), "gold", "negative"),
    (_r(id="r1", split="test"), "split", "unknown split"),
    (_r(id="r1", question_id="nope"), "question_id", "unknown question id"),
    (R_OK, "id", "duplicate response id"),
]


@pytest.mark.parametrize("line,fld,frag", BAD_RESPONSES)
def test_bad_response_record(tmp_path, line, fld, frag):
    qs = read_questions(NATIVE / "questions.jsonl")
    p = tmp_path / "my_responses.jsonl"
    p.write_text(R_OK + "\n\n" + line + "\n")
    with pytest.raises(DataError, match=frag) as e:
        read_responses(p, qs)
    _bad(e, "my_responses.jsonl", 3, fld)


def test_bad_csv_rows_report_the_starting_line(tmp_path):
    qs = read_questions(NATIVE / "questions.jsonl")
    p = tmp_path / "resp.csv"
    p.write_text('id,question_id,answer,gold,split\nr1,bio-q1,"two\nline answer",1,train\n'
                 'r2,bio-q1,ok,abc,train\n')
    with pytest.raises(DataError, match="not an integer") as e:
        read_responses(p, qs)
    _bad(e, "resp.csv", 4, "gold")
    p.write_text("id,question_id,answer,gold,split\nr1,bio-q1,ok,1,train,extra\n")
    with pytest.raises(DataError, match="6 cells") as e:
        read_responses(p, qs)
    _bad(e, "resp.csv", 2, "<row>")
    q = tmp_path / "q.csv"
    q.write_text('id,subject,text,reference_answer,scheme,max_mark\nq1,Bio,t,r,"{bad json",2\n')
    with pytest.raises(DataError, match="invalid JSON in cell") as e:
        read_questions(q)
    _bad(e, "q.csv", 2, "scheme")


def test_skip_mode_counts_and_keeps_good_records(tmp_path):
    qp, rp = tmp_path / "q.jsonl", tmp_path / "r.jsonl"
    qp.write_text(Q_OK + "\n" + _q(id="q2", max_mark=3) + "\n")
    rp.write_text("\n".join([R_OK, "{bad", _r(id="r2", gold=9), _r(id="r3", question_id="q2"),
                             _r(id="r4", gold=2), R_OK]) + "\n")
    ds = load_dataset(qp, rp, on_error="skip")
    assert list(ds.questions) == ["bio-q1"] and [r.id for r in ds.responses] == ["r0", "r4"]
    assert ds.meta["skipped"] == 5 == len(ds.meta["skip_report"])
    fields = [(e.line, e.field) for e in ds.meta["skip_report"].skipped]
    assert fields == [(2, "max_mark"), (2, "<record>"), (3, "gold"), (4, "question_id"), (6, "id")]
    assert "5 records skipped" in ds.meta["skip_report"].summary()
    with pytest.raises(ValueError, match="report"):
        read_questions(qp, on_error="skip")
    with pytest.raises(DataError):
        load_dataset(qp, rp)


def test_write_then_load_round_trip(tmp_path):
    ds = load_dataset(NATIVE / "questions.jsonl", NATIVE / "responses.jsonl", name="fixture")
    cov = (Coverage("p1", "paraphrase", "makes bile", True, "bile-1"), Coverage("p2", "absent"))
    ds.responses.append(Response("r6", "bio-q1", "makes bile", 1, "train", cov))
    ds.meta["note"] = "kept"
    qp, rp = write_dataset(ds, tmp_path / "a")
    back = load_dataset(qp, rp)
    assert back.name == "fixture" and back.meta["note"] == "kept"
    assert back.questions == ds.questions and back.responses == ds.responses
    write_dataset(back, tmp_path / "b")
    for f in ("questions.jsonl", "responses.jsonl", "meta.json"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()


# ---------------------------------------------------------------- ASAP-SAS

def _rows(path: Path) -> int:
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        return sum(1 for _ in csv.DictReader(f))


def test_asap_fixture_folder():
    ds = load_asap(FIX / "asap_mini", ood_sets=())
    q = ds.questions["asap-01"]
    assert (q.max_mark, q.subject, q.scheme.kind) == (3, "Science", "text")
    assert q.text.startswith("Prompt\u2014Mini Acid Rain") and "Rubric for" not in q.text
    assert q.reference_answer == "How much vinegar was used.\nWhat size the samples were."
    assert [len(ds.split(s)) for s in ("train", "id_test", "ood_test")] == [4, 2, 0]
    assert ds.responses[0].answer.endswith("container size\nand the sample size.")
    ood = load_asap(FIX / "asap_mini", ood_sets=(1,), ood_answers="test")
    assert [r.split for r in ood.responses] == ["ood_test"] * 2


@pytest.mark.parametrize("fname,old,new,line,fld", [
    ("train.csv", "2,1,0,0,more", "2,1,4,0,more", 4, "Score1"),
    ("train.csv", "2,1,0,0,more", "2,7,0,0,more", 4, "EssaySet"),
    ("train.csv", "2,1,0,0,more", "x2,1,0,0,more", 4, "Id"),
    ("test.csv", "6,1,I don't know,0", "6,1,I don't know,", 3, "Score1"),
    ("val.csv", "Score2,EssayText", "Score2,Text", 1, "EssayText"),
])
def test_asap_malformed_rows(tmp_path, fname, old, new, line, fld):
    root = shutil.copytree(FIX / "asap_mini", tmp_path / "asap")
    p = root / "set_01" / fname
    text = p.read_text()
    assert old in text
    p.write_text(text.replace(old, new))
    with pytest.raises(DataError) as e:
        load_asap(root)
    _bad(e, fname, line, fld)


def test_asap_val_csv_is_optional(tmp_path):
    root = shutil.copytree(FIX / "asap_mini", tmp_path / "asap")
    n_val = _rows(root / "set_01" / "val.csv")
    (root / "set_01" / "val.csv").unlink()
    ds = load_asap(root, ood_sets=())
    assert n_val > 0 and len(ds.split("train")) == 4 - n_val and len(ds.split("id_test")) == 2
    (root / "set_01" / "train.csv").unlink()
    with pytest.raises(FileNotFoundError, match="train.csv"):
        load_asap(root, ood_sets=())


def test_asap_rubric_without_range(tmp_path):
    p = tmp_path / "set_01.txt"
    p.write_text((FIX / "asap_mini/rubrics/set_01.txt").read_text().replace("Rubric range:\n0-3", "Rubric:\nfour"))
    with pytest.raises(DataError, match="Rubric range"):
        read_rubric(p)


@pytest.fixture(scope="module")
def asap():
    if not ASAP.is_dir():
        pytest.skip(_absent(ASAP, "asap_sas.md"))
    return load_asap(ASAP)


def test_asap_real_questions(asap: Dataset):
    assert len(asap.questions) == 10
    for s in range(1, 11):
        q = asap.questions[f"asap-{s:02d}"]
        rng = read_rubric(ASAP / "rubrics" / f"set_{s:02d}.txt").header["Rubric range"]
        assert q.max_mark == int(rng.split("-")[1]) == (3 if s in (1, 2, 5, 6) else 2)
        assert q.text and "Rubric for" not in q.text and q.scheme.text
        assert bool(q.reference_answer) == (s in SCIENCE_SETS), s
    assert {q.subject for q in asap.questions.values()} == {"Science", "Biology", "English", "English Language Arts"}
    assert asap.meta["replaced_bytes"] == 0  # read as strict UTF-8: this copy has no invalid bytes
    asap.validate()
    asap.check_splits()


def test_asap_real_splits_and_counts(asap: Dataset):
    by = {s: {r.question_id for r in asap.split(s)} for s in ("train", "id_test", "ood_test")}
    ood = {f"asap-{s:02d}" for s in DEFAULT_OOD_SETS}
    assert by["ood_test"] == ood and by["train"] == by["id_test"] == set(asap.questions) - ood
    counts = {}
    for r in asap.responses:
        counts[r.question_id, r.split] = counts.get((r.question_id, r.split), 0) + 1
    for s in range(1, 11):
        n = {f: _rows(ASAP / f"set_{s:02d}" / f"{f}.csv") for f in ("train", "val", "test")}
        qid = f"asap-{s:02d}"
        if s in DEFAULT_OOD_SETS:
            assert counts[qid, "ood_test"] == sum(n.values())
        else:
            assert (counts[qid, "train"], counts[qid, "id_test"]) == (n["train"] + n["val"], n["test"])
    assert len({r.id for r in asap.responses}) == len(asap.responses)
    assert [len(asap.split(s)) for s in ("train", "id_test", "ood_test")] == [13608, 4080, 4579]


def test_asap_real_subsample_and_filters():
    if not ASAP.is_dir():
        pytest.skip(_absent(ASAP, "asap_sas.md"))
    a = load_asap(ASAP, subjects=["science"], max_per_question=20, seed=3)
    b = load_asap(ASAP, subjects=["science"], max_per_question=20, seed=3)
    c = load_asap(ASAP, subjects=["science"], max_per_question=20, seed=4)
    assert sorted(a.questions) == [f"asap-{s:02d}" for s in SCIENCE_SETS]
    assert a.responses == b.responses and a.responses != c.responses
    assert len(a.responses) == 20 * (3 * 2 + 2) and a.meta["full_counts"]["asap-05/ood_test"] == 2393
    t = load_asap(ASAP, sets=[5, 6], ood_sets=(5,), ood_answers="test")
    assert len(t.split("ood_test")) == _rows(ASAP / "set_05" / "test.csv")


# ---------------------------------------------------------------- SAS-Bench labelled (fixtures)

def test_sasbench_labelled_fixture():
    ds = load_sasbench(FIX / "sasbench")
    assert len(ds.questions) == 15 and len(ds.responses) == 30
    assert ds.meta["ood_questions"] == {"History": 2, "Geography": 1}
    r = ds.responses[0]
    assert r.answer == "(1) Cause one of event 0, answer 0.\n(2) Cause two of event 0." and r.gold == 3
    q = ds.question(r)
    assert (q.max_mark, q.subject, q.scheme.kind) == (12, "History", "text") and q.scheme.max_mark == 12
    assert q.id == question_id("History", q.text)
    steps = [s for s in ds.meta["step_labels"] if s["response_id"] == r.id]
    assert [(s["step"], s["label"], s["errors"]) for s in steps] == [(0, 2, []), (1, 1, ["incomplete answer"])]
    assert all(r.answer[s["start"]:s["end"]] == s["text"] for s in steps)
    assert {s.split for s in ds.responses} == {"train", "ood_test"}
    ds.validate()


def test_sasbench_splits_question_disjoint_and_seeded():
    a, b, c = (load_sasbench(FIX / "sasbench", seed=s) for s in (0, 0, 1))
    split_of = {}
    for r in a.responses:
        assert split_of.setdefault(r.question_id, r.split) == r.split  # one split per question
    assert [r.split for r in a.responses] == [r.split for r in b.responses]
    assert [r.split for r in a.responses] != [r.split for r in c.responses]
    e = load_sasbench(FIX / "sasbench", ood_counts={"History": 5}, subjects=["History"])
    assert len({r.question_id for r in e.split("ood_test")}) == 5 and len(e.questions) == 10
    f = load_sasbench(FIX / "sasbench" / "1_History_ShortAns.jsonl", n_ood_questions=5)
    assert [r.split for r in f.responses] == [r.split for r in e.responses]
    with pytest.raises(ValueError, match="one subject"):
        load_sasbench(FIX / "sasbench", n_ood_questions=3)


def test_sasbench_paper_counts():
    n = {s: sum(v) for s, v in PAPER_QUESTION_COUNTS.items()}
    assert ood_question_counts(n) == {"History": 26, "Geography": 6, "Physics": 5}
    assert ood_question_counts(n, ood_fraction=0.5) == {"History": 26, "Geography": 6, "Physics": 5}
    assert ood_question_counts({"History": 10}, ood_fraction=0.5) == {"History": 5}


def test_sasbench_malformed_record(tmp_path):
    bad = FIX / "sasbench_bad"
    with pytest.raises(DataError, match=r"outside \[0, 12\]") as e:
        load_sasbench(bad)
    _bad(e, "1_History_ShortAns.jsonl", 3, "manual_label")
    ds = load_sasbench(bad, on_error="skip")
    assert ds.meta["skipped"] == 1 and len(ds.responses) == 3 and len(ds.questions) == 2
    p = tmp_path / "2_Physics_ShortAns.jsonl"
    lines = (FIX / "sasbench" / "1_History_ShortAns.jsonl").read_text().splitlines()[:2]
    other = json.loads(lines[1])
    other["total"] = 15
    p.write_text(lines[0] + "\n" + json.dumps(other) + "\n")
    with pytest.raises(DataError, match="earlier record") as e:
        load_sasbench(p)
    _bad(e, p.name, 2, "total")
    rec = json.loads(lines[0])
    rec["steps"][1]["label"] = "two"
    p.write_text(json.dumps(rec) + "\n")
    with pytest.raises(DataError) as e:
        load_sasbench(p)
    _bad(e, p.name, 1, "steps[1].label")


def test_sasbench_unlabelled_real():
    if not SAS_UNLABELLED.is_dir():
        pytest.skip(_absent(SAS_UNLABELLED, "sas_bench.md"))
    u = load_sasbench_unlabelled(SAS_UNLABELLED)
    assert u.has_gold is False and not hasattr(u, "responses")
    n = {}
    for q in u.questions.values():
        n[q.subject] = n.get(q.subject, 0) + 1
    assert n == {s: sum(v) for s, v in PAPER_QUESTION_COUNTS.items()}
    marks = {s: sorted({q.max_mark for q in u.questions.values() if q.subject == s}) for s in n}
    assert (marks["Geography"], marks["History"][0], marks["History"][-1]) == ([10], 11, 26)
    assert (marks["Physics"][0], marks["Physics"][-1]) == (5, 20)
    bad = [a for a in u.answers if a.source == "bad_student_answer"]
    assert len(bad) == 5 * len(u.questions) and all(a.question_id in u.questions for a in u.answers)


# ---------------------------------------------------------------- validate

def test_validate_native(tmp_path):
    assert detect_format(NATIVE / "questions.jsonl") == "questions"
    assert detect_format(NATIVE / "responses.csv") == "responses"
    s = summary_of(NATIVE / "responses.jsonl")
    assert s.startswith("OK") and "structure only" in s and "5 responses" in s
    s = summary_of(NATIVE / "responses.jsonl", questions=NATIVE / "questions.jsonl")
    assert "structure only" not in s
    assert "3 questions" in summary_of(NATIVE / "questions.csv")
    write_dataset(load_dataset(NATIVE / "questions.jsonl", NATIVE / "responses.jsonl"), tmp_path / "d")
    assert "ood_test" in summary_of(tmp_path / "d") and detect_format(tmp_path / "d") == "dataset"
    p = tmp_path / "r.jsonl"
    p.write_text(R_OK + "\n" + _r(id="r9", split="dev") + "\n")
    with pytest.raises(DataError) as e:
        summary_of(p)
    _bad(e, "r.jsonl", 2, "split")
    p.write_text(_r(gold=3) + "\n" + _r(id="r9", split="ood_test") + "\n")  # a train and an evaluation split
    assert "structure only" in summary_of(p)  # gold range needs the questions
    with pytest.raises(DataError, match="gold"):
        summary_of(p, fmt="responses", questions=NATIVE / "questions.jsonl")
    with pytest.raises(FileNotFoundError, match="no such file"):  # a usage error, not invalid data
        summary_of(tmp_path / "missing.jsonl")


def test_validate_other_formats():
    assert detect_format(FIX / "sasbench") == "sasbench"
    assert "train" in summary_of(FIX / "sasbench")
    assert detect_format(FIX / "asap_mini") == "asap"
    with pytest.raises(DataError, match="manual_label"):
        summary_of(FIX / "sasbench_bad")
    if SAS_UNLABELLED.is_dir():
        assert "NO gold" in summary_of(SAS_UNLABELLED)


def test_private_science_card_example_loads(tmp_path):
    card = (Path(__file__).resolve().parents[2] / "data_cards" / "private_science.md").read_text()
    blocks = [b.split("```")[0].strip() for b in card.split("```json\n")[1:]]
    (tmp_path / "questions.jsonl").write_text(blocks[0] + "\n")
    (tmp_path / "responses.jsonl").write_text(blocks[1] + "\n")
    ds = load_dataset(tmp_path / "questions.jsonl", tmp_path / "responses.jsonl")
    assert ds.responses[0].gold == 1 and ds.questions["bio-q1"].scheme.gold(["p1"]) == 1
