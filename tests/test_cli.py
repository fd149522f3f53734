"""The command line: validate exits non-zero naming line and field; profile listing; unknown notebook."""
import json


from edit_lib.cli import main

Q = {"id": "q1", "subject": "Biology", "text": "Name two functions of the liver.", "reference_answer": "",
     "max_mark": 2, "scheme": {"kind": "pts", "points": [{"id": "p1", "text": "bile", "value": 1},
                                                          {"id": "p2", "text": "glycogen", "value": 1}]}}


def _write(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_validate_malformed_jsonl_names_line_and_field(tmp_path, capsys):
    qs = _write(tmp_path / "questions.jsonl", [Q])
    rs = _write(tmp_path / "responses.jsonl", [
        {"id": "r1", "question_id": "q1", "answer": "bile", "gold": 1, "split": "train"},
        {"id": "r2", "question_id": "q1", "answer": "bile and glycogen", "gold": 7, "split": "train"},
    ])
    assert main(["data", "validate", str(rs), "--questions", str(qs)]) != 0
    err = capsys.readouterr().err
    assert "responses.jsonl" in err and "line 2" in err and "gold" in err


def test_validate_missing_field_and_bad_json(tmp_path, capsys):
    rs = _write(tmp_path / "responses.jsonl", [
        {"id": "r1", "question_id": "q1", "answer": "x", "gold": 1, "split": "train"},
        {"id": "r2", "question_id": "q1", "answer": "x", "gold": 1},
    ])
    assert main(["data", "validate", str(rs), "--format", "responses"]) != 0
    err = capsys.readouterr().err
    assert "line 2" in err and "split" in err
    bad = _write(tmp_path / "broken.jsonl", [json.dumps(Q), '{"id": "q2", "subject": '])
    assert main(["data", "validate", str(bad), "--format", "questions"]) != 0
    assert "line 2" in capsys.readouterr().err


def test_validate_good_file_exits_zero(tmp_path, capsys):
    qs = _write(tmp_path / "questions.jsonl", [Q])
    rs = _write(tmp_path / "responses.jsonl", [{"id": "r1", "question_id": "q1", "answer": "bile", "gold": 1,
                                               "split": "train"}])
    assert main(["data", "validate", str(rs), "--questions", str(qs)]) == 0
    assert "1" in capsys.readouterr().out


def test_profile_keys_lists_help(capsys):
    assert main(["profile", "--keys"]) == 0
    out = capsys.readouterr().out
    assert "probe.temperature" in out and "App. B" in out


def test_run_bad_arguments_are_clear_errors(capsys):
    assert main(["run", "--profile", "smoke", "--only", "99_nope"]) == 2
    assert "unknown notebook" in capsys.readouterr().err
    assert main(["run", "--profile", "smoke", "-p", "probe.temprature=0.5"]) == 2
    err = capsys.readouterr().err
    assert "temprature" in err and "valid keys" in err
