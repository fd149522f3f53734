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
    rs = _write(tmp_path / "responses.jsonl", [  # the pipeline needs a train and an evaluation split
        {"id": "r1", "question_id": "q1", "answer": "bile", "gold": 1, "split": "train"},
        {"id": "r2", "question_id": "q1", "answer": "bile, glycogen", "gold": 2, "split": "ood_test"}])
    assert main(["data", "validate", str(rs), "--questions", str(qs)]) == 0
    assert "2" in capsys.readouterr().out


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


def test_run_with_an_unknown_skipped_system_stops_before_any_notebook(tmp_path, capsys):
    assert main(["run", "--profile", "smoke", "--run-root", str(tmp_path), "-p", "run.skip_systems=[dgpo]"]) == 2
    assert "run.skip_systems: unknown system(s) ['dgpo']" in capsys.readouterr().err
    assert not (tmp_path / "smoke").exists()  # nothing ran


def test_profile_file_and_missing_file(tmp_path, capsys):
    from edit_lib.config import CONFIG_DIR

    f = tmp_path / "mine.yaml"
    f.write_text((CONFIG_DIR / "smoke.yaml").read_text())
    assert main(["profile", "--profile", str(f)]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "mine"
    assert main(["run", "--profile", str(tmp_path / "absent.yaml"), "--run-root", str(tmp_path / "runs")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["profile", "--profile", str(tmp_path / "absent.yaml")]) == 2


def test_build_grader_never_overwrites_by_accident(tmp_path, capsys):
    import edit_lib.embedded.build as build

    called = []
    build.build_grader, real = (lambda *a, **k: called.append(a)), build.build_grader
    try:
        assert main(["build-grader", "--replace-shipped", "--out", str(tmp_path / "g")]) == 2
        assert "--replace-shipped" in capsys.readouterr().err
        (tmp_path / "mine").mkdir()
        (tmp_path / "mine" / "notes.txt").write_text("keep me")
        assert main(["build-grader", "--out", str(tmp_path / "mine")]) == 2
        assert "not a grader build" in capsys.readouterr().err
    finally:
        build.build_grader = real
    assert not called and (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def test_book_refuses_to_build_inside_its_sources(tmp_path, capsys):
    from edit_lib.book.build import BOOK_DIR

    nbs = tmp_path / "runs" / "smoke" / "notebooks"
    nbs.mkdir(parents=True)
    (nbs / "00_data.ipynb").write_text("{}")
    assert main(["book", "--profile", "smoke", "--run-root", str(tmp_path / "runs"), "--out", str(BOOK_DIR)]) == 2
    assert "source folder" in capsys.readouterr().err
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x.txt").write_text("x")
    assert main(["book", "--profile", "smoke", "--run-root", str(tmp_path / "runs"),
                 "--out", str(tmp_path / "other")]) == 2
    assert "not a book build folder" in capsys.readouterr().err


def _pyproject_version() -> str:
    import tomllib
    from pathlib import Path

    return tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]["version"]


def test_version_prints_the_package_version(capsys, monkeypatch):
    import importlib.metadata as metadata

    import pytest

    with pytest.raises(SystemExit) as ex:
        main(["--version"])
    assert ex.value.code == 0 and capsys.readouterr().out == f"edit-suite {_pyproject_version()}\n"

    def not_installed(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", lambda name: "9.9.9" if name == "edit-suite" else "0")
    with pytest.raises(SystemExit):  # installed: the installed distribution's version comes first
        main(["--version"])
    assert capsys.readouterr().out == "edit-suite 9.9.9\n"
    monkeypatch.setattr(metadata, "version", not_installed)
    with pytest.raises(SystemExit):  # not installed (a source checkout on PYTHONPATH): pyproject.toml's
        main(["--version"])
    assert capsys.readouterr().out == f"edit-suite {_pyproject_version()}\n"


def _run_help(capsys) -> str:
    import pytest

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    return "".join(capsys.readouterr().out.split())  # argparse wraps lines, also at a name's hyphen


def test_run_help_lists_the_profiles_in_configs(capsys, monkeypatch, tmp_path):
    import edit_lib.config.loading as loading

    names = sorted(f.stem for f in loading.CONFIG_DIR.glob("*.yaml"))
    assert {"smoke", "demo", "paper", "study", "cpu-real"} <= set(names)
    assert f"({','.join(names)})" in _run_help(capsys)
    for name in ("alpha", "beta-2"):  # read from the folder when the parser is built, not a list in cli.py
        (tmp_path / f"{name}.yaml").write_text("run: {}\n")
    (tmp_path / "notes.txt").write_text("not a profile")
    monkeypatch.setattr(loading, "CONFIG_DIR", tmp_path)
    assert "configs/(alpha,beta-2)" in _run_help(capsys)


def test_exits_maps_the_first_matching_type_and_lets_others_pass():
    """``cli.exits``: the one place a handler's exceptions become exit codes; the first listed type that matches
    wins, a KeyError's message is its text unquoted, and an exception it does not list is not swallowed."""
    import pytest
    from edit_lib.cli import CommandFailed, exits

    with pytest.raises(CommandFailed) as e:
        with exits({FileNotFoundError: 2, OSError: 1}, "x"):
            raise FileNotFoundError("no such run")
    assert (e.value.code, str(e.value), e.value.command) == (2, "no such run", "x")
    with pytest.raises(CommandFailed) as e:
        with exits({(KeyError, ValueError): 3}):
            raise KeyError("rl has no key 'nope'")
    assert (e.value.code, str(e.value), e.value.command) == (3, "rl has no key 'nope'", None)
    with pytest.raises(TypeError):
        with exits({ValueError: 2}):
            raise TypeError("a bug, not a usage error")


def test_main_prints_a_failed_command_as_one_line(tmp_path, capsys):
    assert main(["sweep", "-p", "rl.steps=1"]) == 2
    assert capsys.readouterr().err == "edit-suite sweep: give exactly one -p KEY=V1,V2,... (got 0: [])\n"
