"""A profile that ``extends`` another (edit_lib/config/loading.py): the merge rule, cycles, unknown bases,
what `edit-suite profile` shows, and the study profile (demo + its differences) resolving to exactly the values
and stage keys it had when written in full (tests/fixtures/study_flat.yaml)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from edit_lib.cli import main
from edit_lib.config import CONFIG_DIR, ConfigError, lineage, load_profile, to_dict
from edit_lib.config.loading import Replace, merge, read_yaml

FLAT_STUDY = Path(__file__).parents[1] / "fixtures" / "study_flat.yaml"


def _write(folder: Path, name: str, text: str) -> Path:
    f = folder / f"{name}.yaml"
    f.write_text(text)
    return f


def test_merge_nests_mappings_replaces_lists_and_scalars_and_leaves_its_inputs_alone():
    base = {"rl": {"steps": 12, "seeds": [42, 43, 44], "shaping": {"gamma": 0.1, "beta_drift": 0.5}}, "x": 1}
    child = {"rl": {"seeds": [7], "shaping": {"gamma": 0.2}}, "x": None, "y": {"a": 1}}
    assert merge(base, child) == {"rl": {"steps": 12, "seeds": [7], "shaping": {"gamma": 0.2, "beta_drift": 0.5}},
                                  "x": None, "y": {"a": 1}}
    assert base["rl"]["shaping"] == {"gamma": 0.1, "beta_drift": 0.5} and base["rl"]["seeds"] == [42, 43, 44]
    assert merge({"a": [1, {"b": 1}]}, {"a": {"b": 2}}) == {"a": {"b": 2}}  # a mapping over a list replaces it


def test_a_mapping_tagged_replace_takes_the_base_mappings_place(tmp_path):
    """``!replace`` gives a mapping whole (a ``*_by_dataset`` map for fewer datasets than the base's); untagged, the
    same map merges into the base's and keeps its other datasets, which the profile's checks then refuse."""
    assert merge({"m": {"a": 1, "b": 2}}, {"m": Replace(c=3)}) == {"m": {"c": 3}}
    assert type(merge({}, {"m": Replace(c=Replace(d=1))})["m"]["c"]) is dict  # plain dicts out, at any depth
    own = "data:\n  datasets:\n    - {name: sas_history, source: sasbench, options: {path: x.jsonl}}\n" \
          "rl:\n  steps_by_dataset: !replace {sas_history: 20}\n  shaping_by_dataset: !replace {}\n" \
          "  seed_datasets: [sas_history]\n" \
          "  grid_datasets: [sas_history]\nrsr: {datasets: []}\n"
    sft = "sft:\n  effective_batch_by_dataset: %s{sas_history: 8}\n"
    prof = load_profile(_write(tmp_path, "mine", "extends: paper\n" + own + sft % "!replace "))
    assert prof.rl.steps_by_dataset == {"sas_history": 20} and prof.sft.effective_batch_by_dataset == {"sas_history": 8}
    with pytest.raises(ConfigError, match=r"effective_batch_by_dataset names unknown dataset\(s\) \['private_biology'"):
        load_profile(_write(tmp_path, "merged", "extends: paper\n" + own + sft % ""))
    assert read_yaml(_write(tmp_path, "alone", "m: !replace {a: 1}\n")) == {"m": {"a": 1}}


def test_paper_sas_is_paper_plus_only_its_differences():
    """configs/paper-sas.yaml extends paper.yaml (tests/runner/test_dry_run.py checks what it resolves to)."""
    raw = read_yaml(CONFIG_DIR / "paper-sas.yaml")
    assert raw["extends"] == "paper" and "model" not in raw and "significance" not in raw
    assert isinstance(raw["sft"]["effective_batch_by_dataset"], Replace)


def test_a_child_is_its_base_plus_its_differences_with_its_own_name(tmp_path):
    _write(tmp_path, "parent", "name: parent_run\nrun: {seed: 3, description: parent}\n"
                               "rl: {steps: 30, seeds: [1, 2, 3], datasets: [synth_sas]}\n"
                               "data:\n  datasets:\n    - {name: synth_sas, source: synthetic}\n")
    child = _write(tmp_path, "child", "extends: parent\nrun: {description: child}\nrl: {seeds: [9]}\n")
    prof = load_profile(child)
    assert prof.name == "child"  # never inherited: the child's own name or its file's stem
    assert (prof.run.seed, prof.run.description) == (3, "child")
    assert (prof.rl.steps, prof.rl.seeds, prof.rl.datasets) == (30, [9], ["synth_sas"])
    assert load_profile(child, ["rl.seeds=[5, 6]"]).rl.seeds == [5, 6]  # overrides come after the merge
    grandchild = _write(tmp_path, "grandchild", "extends: child.yaml\nrl: {steps: 2}\n")
    g = load_profile(grandchild)
    assert (g.name, g.run.seed, g.run.description, g.rl.steps, g.rl.seeds) == ("grandchild", 3, "child", 2, [9])
    assert lineage(grandchild) == [grandchild, tmp_path / "child.yaml", tmp_path / "parent.yaml"]


def test_a_name_is_looked_up_beside_the_file_then_in_configs(tmp_path):
    mine = _write(tmp_path, "mine", "extends: smoke\nrun: {seed: 11}\n")
    assert lineage(mine) == [mine, CONFIG_DIR / "smoke.yaml"]
    assert to_dict(load_profile(mine)) == to_dict(load_profile("smoke", ["run.seed=11", "name=mine"]))
    _write(tmp_path, "smoke", "run: {seed: 5}\n")  # a smoke.yaml beside it comes first
    assert lineage(mine) == [mine, tmp_path / "smoke.yaml"]


def test_a_cycle_is_an_error_naming_every_file_of_it(tmp_path):
    a = _write(tmp_path, "a", "extends: b\n")
    b = _write(tmp_path, "b", "extends: a\n")
    with pytest.raises(ConfigError) as e:
        load_profile(a)
    assert str(e.value) == f"{b}: extends makes a cycle: {a} -> {b} -> {a}"
    me = _write(tmp_path, "me", "extends: me.yaml\n")
    with pytest.raises(ConfigError, match="extends makes a cycle"):
        load_profile(me)


def test_an_unknown_or_missing_base_is_a_clear_error_and_exit_2(tmp_path, capsys):
    orphan = _write(tmp_path, "orphan", "extends: demoo\n")
    with pytest.raises(ConfigError) as e:
        load_profile(orphan)
    msg = str(e.value)
    assert msg.startswith(f"{orphan}: extends 'demoo', but there is no profile of that name")
    assert str(CONFIG_DIR / "demoo.yaml") in msg and "'demo'" in msg  # where it looked, and what exists
    assert main(["profile", "--profile", str(orphan)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("edit-suite profile: ") and "extends 'demoo'" in err and "\n" not in err
    lost = _write(tmp_path, "lost", "extends: sub/gone.yaml\n")
    with pytest.raises(ConfigError, match=f"extends 'sub/gone.yaml', but {tmp_path / 'sub' / 'gone.yaml'} does "):
        load_profile(lost)
    with pytest.raises(ConfigError, match=r"extends must name one profile .*got \['demo'\]"):
        load_profile(_write(tmp_path, "listed", "extends: [demo]\n"))


def test_an_error_from_a_merged_value_names_the_files_it_came_from(tmp_path):
    _write(tmp_path, "base", "selection: {shortlist_k: 0}\n")
    with pytest.raises(ConfigError, match=r"kid.yaml.selection: shortlist_k must be >= 1, got 0 \(kid.yaml extends base.yaml\)"):
        load_profile(_write(tmp_path, "kid", "extends: base\n"))


def test_the_profile_command_shows_what_a_profile_extends(capsys):
    assert main(["profile", "--profile", "study"]) == 0
    out = capsys.readouterr()
    assert out.err.strip() == "extends: demo (configs/demo.yaml)"
    assert yaml.safe_load(out.out)["name"] == "study"  # stdout stays the profile's JSON
    assert main(["profile", "--profile", "demo"]) == 0 and capsys.readouterr().err == ""


def test_the_study_is_demo_plus_only_its_differences():
    study, demo = (yaml.safe_load((CONFIG_DIR / f"{n}.yaml").read_text()) for n in ("study", "demo"))
    assert study.pop("extends") == "demo"

    def same_as_demo(node, base, path=""):
        out = []
        for k, v in node.items():
            if isinstance(v, dict) and isinstance(base.get(k), dict):
                out += same_as_demo(v, base[k], f"{path}{k}.")
            elif k in base and base[k] == v:
                out.append(f"{path}{k}")
        return out
    assert same_as_demo(study, demo) == [], "study.yaml restates values it inherits from demo.yaml"


def _studies():
    study, flat = load_profile("study"), load_profile(FLAT_STUDY)
    assert flat.name == "study_flat" and lineage(FLAT_STUDY) == [FLAT_STUDY]
    flat.name = "study"
    return study, flat


def test_the_study_resolves_to_the_values_it_had_before_it_extended_demo():
    from edit_lib.runner.keys import STAGES, hashed_params

    study, flat = _studies()
    assert to_dict(study) == to_dict(flat)
    for name, st in STAGES.items():  # the profile values each stage's key hashes
        assert hashed_params(study, st.sections) == hashed_params(flat, st.sections), name


@pytest.mark.slow
def test_the_study_has_the_stage_keys_it_had_before_it_extended_demo():
    from edit_lib.runner.keys import STAGES
    from edit_lib.runner.stage import available_stages, stage_key

    study, flat = _studies()
    names = available_stages()
    assert set(names) == set(STAGES)
    memo_a, memo_b = {}, {}
    for s in names:  # the key hashes the declared values, upstream keys, library modules and weights
        assert stage_key(study, s, memo_a) == stage_key(flat, s, memo_b), s
