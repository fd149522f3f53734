"""A profile file that is not valid YAML (edit_lib/config/loading.py): a ConfigError naming file, line and column,
and exit 2 with one line from every command that loads a profile (edit_lib/cli.py), never a PyYAML traceback."""
import subprocess
import sys
from pathlib import Path

import pytest

from edit_lib.cli import main
from edit_lib.config import ConfigError, load_profile

EXE = Path(sys.executable).with_name("edit-suite")
TAB = "run:\n  seed: 1\nrollouts:\n\tn_per_response: 3\n"  # a tab indents line 4
BRACKET = "run:\n  seed: 1\nrl:\n  seeds: [42, 43\nprobe:\n  temperature: 0.7\n"  # '[' opened on line 4, never closed


@pytest.fixture
def tab_file(tmp_path):
    f = tmp_path / "tabbed.yaml"
    f.write_text(TAB)
    return f


def test_a_tab_names_the_file_line_and_column(tab_file):
    with pytest.raises(ConfigError) as e:
        load_profile(tab_file)
    msg = str(e.value)
    assert f"{tab_file}:4:1: invalid YAML:" in msg and "'\\t'" in msg and "not tabs" in msg
    assert "\n" not in msg


def test_an_unclosed_bracket_names_where_it_was_noticed_and_where_it_opened(tmp_path):
    f = tmp_path / "bracket.yaml"
    f.write_text(BRACKET)
    with pytest.raises(ConfigError) as e:
        load_profile(f)
    msg = str(e.value)
    assert msg.startswith(f"{f}:5:6: invalid YAML: expected ',' or ']'"), msg  # 'probe:' read inside the list
    assert "while parsing a flow sequence at line 4, column 10" in msg and "\n" not in msg


def test_an_override_value_that_is_not_yaml_names_the_override():
    with pytest.raises(ConfigError, match=r"override 'rl.seeds=\[42, 43': its value is not valid YAML"):
        load_profile("smoke", ["rl.seeds=[42, 43"])


def test_a_profile_that_loads_is_unchanged_by_the_check(tmp_path):
    f = tmp_path / "fine.yaml"
    f.write_text(TAB.replace("\t", "  "))
    assert load_profile(f).rollouts.n_per_response == 3


@pytest.mark.parametrize("argv", [
    ["run", "--dry-run"], ["run"], ["profile"], ["book"], ["readme"], ["bench", "suite"],
    ["export", "--system", "base", "--dataset", "synth_sas"], ["pilot", "rl-seeds"]],
    ids=lambda a: " ".join(a))
def test_every_command_that_loads_a_profile_exits_2_with_one_line(argv, tab_file, tmp_path, capsys):
    extra = {"book": ["--out", str(tmp_path / "book")], "readme": ["--readme", str(tmp_path / "README.md")],
             "export": ["--out", str(tmp_path / "export")]}.get(argv[0], [])
    root = [] if argv[0] == "profile" else ["--run-root", str(tmp_path / "runs")]
    assert main([*argv, "--profile", str(tab_file), *root, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("edit-suite ") and f"{tab_file}:4:1: invalid YAML" in err and "\n" not in err, err
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_the_console_script_exits_2_without_a_traceback(tab_file, tmp_path):
    out = subprocess.run([str(EXE), "run", "--profile", str(tab_file), "--dry-run", "--run-root", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.strip().count("\n") == 0 and f"{tab_file}:4:1: invalid YAML" in out.stderr
