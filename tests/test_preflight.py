"""Checks before any notebook (edit_lib/runner/preflight.py) and the CLI's exit codes for them."""
import subprocess
import sys
from pathlib import Path

import pytest

from edit_lib.cli import main
from edit_lib.config import ConfigError
from edit_lib.runner.preflight import check_override_keys, missing_inputs, preflight

EXE = Path(sys.executable).with_name("edit-suite")


def test_an_override_typo_is_the_overrides_error():
    check_override_keys(["probe.temperature=0.5", "data.datasets.synth_sas.options.n_questions=4",
                         "rl.shaping_by_dataset.x.gamma=0.1"])  # lists and free mappings are not looked into
    with pytest.raises(ConfigError, match=r"override 'probe.temprature=0.5': probe has no key 'temprature'"):
        check_override_keys(["probe.temprature=0.5"])
    with pytest.raises(ConfigError, match=r"the profile has no key 'prob'"):
        check_override_keys(["prob.temperature=0.5"])


@pytest.mark.parametrize("override,key", [("sft.ablation_dataset=mine", "sft.ablation_dataset"),
                                          ("rl.datasets=[synth_sas, mine]", "rl.datasets"),
                                          ("rl.seed_datasets=[mine]", "rl.seed_datasets"),
                                          ("rl.grid_datasets=[mine]", "rl.grid_datasets"),
                                          ("rsr.datasets=[mine]", "rsr.datasets")])
def test_cross_references_name_datasets_of_the_profile(override, key):
    preflight("smoke")  # the shipped profile passes
    with pytest.raises(ConfigError, match=rf"{key} names \['mine'\], not a dataset of this profile"):
        preflight("smoke", [override])
    with pytest.raises(ConfigError, match="unknown system"):
        preflight("smoke", ["run.skip_systems=[edit_sfft]"])
    with pytest.raises(ConfigError, match=r"rl.grid_datasets names \['synth_bio'\], which RL does not run on"):
        preflight("smoke", ["rl.grid_datasets=[synth_bio]"])  # smoke's RL runs on synth_sas alone


def test_missing_inputs_stop_a_run_and_are_a_note_of_the_dry_run(tmp_path, capsys):
    prof = tmp_path / "mine.yaml"
    prof.write_text("data:\n  datasets:\n    - name: mine\n      source: jsonl\n      options: {questions: "
                    f"{tmp_path}/q.jsonl, responses: {tmp_path}/r.jsonl}}\nsft:\n  ablation_dataset: mine\n")
    _, notes = preflight(str(prof), need_data=False)
    assert len(notes) == 2 and all("data.datasets.mine (jsonl)" in n for n in notes)
    with pytest.raises(ConfigError, match="input data missing, nothing was run"):
        preflight(str(prof))
    assert main(["run", "--profile", str(prof), "--run-root", str(tmp_path / "runs")]) == 2
    assert "q.jsonl does not exist" in capsys.readouterr().err and not (tmp_path / "runs").exists()
    (tmp_path / "q.jsonl").write_text("")
    assert len(missing_inputs(preflight(str(prof), need_data=False)[0])) == 1


def test_profile_keys_into_a_closed_pipe_ends_quietly():
    out = subprocess.run(f"'{EXE}' profile --keys | head -1", shell=True, capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.startswith("name") and "Traceback" not in out.stderr, out.stderr


def test_an_unknown_source_is_a_preflight_error_listing_the_known_ones(tmp_path, capsys):
    """Caught before any notebook (the dry run and the run alike), not inside 00_data after its kernel started."""
    from edit_lib.data.registry import SOURCES
    prof = tmp_path / "mine.yaml"
    prof.write_text("data:\n  datasets:\n    - {name: mine, source: sas_bench}\nsft:\n  ablation_dataset: mine\n")
    msg = (f"data.datasets.mine.source = 'sas_bench' is not a known data source (did you mean 'sasbench'?); "
           f"known sources: {sorted(SOURCES)}")
    for need_data in (True, False):
        with pytest.raises(ConfigError) as e:
            preflight(str(prof), need_data=need_data)
        assert msg in str(e.value)
    for argv in (["run", "--dry-run"], ["run"]):
        assert main([*argv, "--profile", str(prof), "--run-root", str(tmp_path / "runs")]) == 2
        err = capsys.readouterr().err
        assert msg in err and err.count("\n") == 1, err
    assert not (tmp_path / "runs").exists()
    preflight(str(prof), ["data.datasets.mine.source=synthetic"], need_data=True)  # a known one passes
