"""Checks before any notebook (edit_lib/runner/dry_run.py) and the CLI's exit codes for them."""
import subprocess
import sys
from pathlib import Path

import pytest

from edit_lib.cli import main
from edit_lib.config import CONFIG_DIR, ConfigError
from edit_lib.runner.dry_run import check_override_keys, missing_inputs, preflight

EXE = Path(sys.executable).with_name("edit-suite")


def test_an_override_typo_is_the_overrides_error():
    check_override_keys(["probe.temperature=0.5", "data.datasets.synth_sas.options.n_questions=4",
                         "rl.shaping_by_dataset.x.gamma=0.1"])  # lists and free mappings are not looked into
    with pytest.raises(ConfigError, match=r"override 'probe.temprature=0.5': probe has no key 'temprature'"):
        check_override_keys(["probe.temprature=0.5"])
    with pytest.raises(ConfigError, match=r"the profile has no key 'prob'"):
        check_override_keys(["prob.temperature=0.5"])
    check_override_keys(["rollouts.decoding.temperature=0.5", "revision.continuation_decoding.max_new_tokens=9"])
    with pytest.raises(ConfigError, match=r"rl.max_completion_tokens is now rl.decoding.max_new_tokens"):
        check_override_keys(["rl.max_completion_tokens=64"])  # a key from before the one decoding spec


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
    preflight("smoke", ["rsr.systems=[base, toy_rft]"])  # a baseline the profile adds (run.baselines) may be named
    with pytest.raises(ConfigError, match=r"rsr.systems names \['edit_rl'\], not a system of edit_lib/systems.py"):
        preflight("smoke", ["rsr.systems=[base, edit_rl]"])
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
    msg = ("data.datasets.mine.source = 'sas_bench' names no data source (did you mean 'sasbench'?); known: "
           + ", ".join(map(repr, SOURCES)))
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


def _no_cuda():
    import torch
    return not torch.cuda.is_available()


@pytest.mark.parametrize("text, message", [
    ("# nothing but a comment\n", "the profile file is empty; begin it with `extends: demo`"),
    ("run: {seed: 3}\n", "the profile names no dataset (data.datasets)"),
    ("extends: smoke\nmodel: {name_or_path: /nowhere/my-model}\n",
     "model.name_or_path = '/nowhere/my-model': no such folder, and not a hub model id"),
    ("extends: smoke\nsft: {effective_batch_size: 30, per_device_batch_size: 8}\n",
     "sft.per_device_batch_size=8 does not divide the effective batch 30 on 1 device(s)"),
    pytest.param("extends: smoke\nmodel: {device: cuda}\n",
                 "model.device = 'cuda', but this machine has no CUDA device",
                 marks=pytest.mark.skipif(not _no_cuda(), reason="this machine has CUDA")),
])
def test_a_bad_profile_is_refused_before_any_notebook_with_one_line(tmp_path, capsys, text, message):
    """Held-out bad profiles a new user wrote, each of which once reached a notebook (exit 1 with a traceback
    from pandas, transformers or TRL): exit 2, one line naming the key or the file, nothing run."""
    prof = tmp_path / "mine.yaml"
    prof.write_text(text)
    assert main(["run", "--profile", str(prof), "--run-root", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / "runs").exists()


def test_a_hub_id_and_a_named_base_pass_and_the_dry_run_plans_cuda_on_any_machine(capsys):
    preflight("smoke", ["model.name_or_path=Qwen/Qwen3-8B"], need_data=False)  # a hub id: looked up when loaded
    preflight("smoke", ["model.name_or_path=embedded"])
    preflight("smoke", ["model.device=cuda"], dry_run=True)


# ------------------------------------------------------------------ every profile in configs/

def shipped_profiles(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.yaml"))


def check_profile_file(path: Path) -> list[str]:
    """``path`` through the load and every check of the preflight that needs no data (overrides, types, each
    section's own checks, ``extends``, sources, cross-references, systems, providers); the input files absent on
    this machine are returned, not an error (the paper profiles read the user's data)."""
    prof, missing = preflight(str(path), need_data=False, dry_run=True)  # the paper profiles need CUDA to run
    assert prof.name == path.stem
    synthetic = [f"data.datasets.{d.name} (" for d in prof.data.datasets if d.source == "synthetic"]
    assert not [m for m in missing if m.startswith(tuple(synthetic))], missing  # a generated world needs no file
    return missing


def test_the_walk_finds_every_shipped_profile():
    assert {"smoke", "demo", "study", "paper", "paper-sas", "cpu-real"} <= {p.stem for p in shipped_profiles(
        CONFIG_DIR)}


@pytest.mark.parametrize("path", shipped_profiles(CONFIG_DIR), ids=lambda p: p.stem)
def test_every_profile_in_configs_passes_the_preflight(path):
    missing = check_profile_file(path)
    if missing:  # every other check passed above; only the input files could not be looked at
        pytest.skip(f"{path.name} passed every check but its input files, absent here: {'; '.join(missing)}")
    preflight(str(path), need_data=True, dry_run=True)


def test_the_walk_fails_on_a_broken_profile_in_a_copy_of_configs(tmp_path):
    for p in shipped_profiles(CONFIG_DIR):
        (tmp_path / p.name).write_text(p.read_text())
    for p in shipped_profiles(tmp_path):  # the copy passes (study extends the copied demo beside it)
        check_profile_file(p)
    broken = {"typo_dataset": ("extends: demo\nrsr: {datasets: [synth_bioo]}\n",  # loads; preflight refuses
                               "typo_dataset: rsr.datasets names ['synth_bioo'], not a dataset of this profile"),
              "typo_key": ("extends: study\nrl: {seed: 1}\n", "typo_key.yaml.rl: unknown key(s) ['seed']"),
              "typo_base": ("extends: demoo\n", "extends 'demoo', but there is no profile of that name"),
              "typo_system": ("extends: demo\nrsr: {systems: [base, edit_rl]}\n", "known: ['base'")}
    for name, (text, message) in broken.items():
        f = tmp_path / f"{name}.yaml"
        f.write_text(text)
        with pytest.raises(ConfigError) as e:
            for p in shipped_profiles(tmp_path):
                check_profile_file(p)
        assert message in str(e.value), (name, str(e.value))
        f.unlink()
