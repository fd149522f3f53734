"""Profiles: typed loading, unknown keys, overrides, typed per-dataset settings, the field helper, and the paper
profile's App. A / App. B / Table 9 values."""
import dataclasses

import pytest
import yaml

from edit_lib.config import (CONFIG_DIR, ConfigError, LoraConfig, Profile, ShapingConfig, ShapingValues, describe,
                             from_dict, help_field, load_profile)
from edit_lib.data.registry import build_dataset


@pytest.mark.parametrize("name", sorted(f.stem for f in CONFIG_DIR.glob("*.yaml")))  # every shipped profile
def test_profiles_load(name):
    prof = load_profile(name)
    assert isinstance(prof, Profile) and prof.name == name
    assert prof.data.datasets, "every profile names at least one dataset"


def test_unknown_key_lists_valid_keys(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("rollouts:\n  n_per_respons: 3\n")
    with pytest.raises(ConfigError) as e:
        load_profile(bad)
    assert "n_per_respons" in str(e.value) and "n_per_response" in str(e.value)
    with pytest.raises(ConfigError, match="valid keys"):
        load_profile("smoke", ["nonsense.key=1"])


def test_wrong_type_is_an_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("rollouts:\n  n_per_response: many\n")
    with pytest.raises(ConfigError, match="expected int"):
        load_profile(bad)


def test_an_exponent_without_a_dot_is_a_float_where_a_float_is_expected(tmp_path):
    """YAML 1.1 reads 3e-4 as a string; a float key takes it as the number written, nothing else does."""
    prof = load_profile("smoke", ["rl.learning_rate=3e-4", "probe.temperature=1E0"])
    assert prof.rl.learning_rate == 3e-4 and prof.probe.temperature == 1.0
    f = tmp_path / "mine.yaml"
    f.write_text("sft:\n  learning_rate: 2e-5\n")
    assert load_profile(f).sft.learning_rate == 2e-5
    with pytest.raises(ConfigError, match="expected float"):
        load_profile("smoke", ["rl.learning_rate=fast"])
    with pytest.raises(ConfigError, match="expected int"):
        load_profile("smoke", ["rollouts.n_per_response=1e3"])


def test_overrides_parse_yaml_values_and_address_datasets_by_name():
    prof = load_profile("smoke", ["rollouts.n_per_response=7", "probe.temperature=0.5"])
    assert prof.rollouts.n_per_response == 7 and prof.probe.temperature == 0.5
    name = prof.data.datasets[0].name
    prof2 = load_profile("smoke", [f"data.datasets.{name}.options.seed=99"])
    assert prof2.data.datasets[0].options["seed"] == 99
    with pytest.raises(ConfigError, match="no list element"):
        load_profile("smoke", ["data.datasets.nope.options.seed=1"])


def test_unknown_profile_names_known_ones():
    with pytest.raises(ConfigError, match="known profiles"):
        load_profile("no-such-profile")


def test_paper_profile_has_app_b_and_table9_values():
    p = load_profile("paper")
    assert p.model.name_or_path == "Qwen/Qwen3-8B"
    assert (p.sft.lora.r, p.sft.lora.alpha) == (64, 128)
    assert set(p.sft.lora.target_modules) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                              "down_proj"}
    assert (p.sft.epochs, p.sft.learning_rate, p.sft.lr_scheduler, p.sft.warmup_ratio) == (2, 2e-4, "cosine", 0.1)
    rl = p.rl
    assert (rl.learning_rate, rl.lr_scheduler, rl.warmup_ratio, rl.beta_kl) == (5e-6, "cosine", 0.03, 0.02)
    assert (rl.rollouts_per_prompt, rl.prompts_per_step, rl.decoding.temperature, rl.decoding.max_new_tokens) == \
        (8, 4, 1.0, 1024)
    assert (rl.decoding.greedy, rl.decoding.top_p, rl.decoding.top_k) == (False, 1.0, 0)  # Table 9: whole vocabulary
    assert p.eval.decoding.greedy and p.eval.decoding.max_new_tokens == 1024  # App. B: one greedy completion
    assert (p.rollouts.decoding.temperature, p.rollouts.decoding.max_new_tokens) == (1.0, 1024)
    assert rl.seeds == [42, 43, 44]
    assert p.probe.temperature == 0.7 and p.rollouts.n_per_response == 20
    assert p.revision.n_continuations == 4
    # Table 9's lower block fixed for SAS-Bench's datasets; the Private-Science places (a user's own files) are
    # calibrated (App. B)
    table9 = {"sas_history": (0.75, 0.05), "sas_geography": (0.75, 0.10), "sas_physics": (0.75, 0.10)}
    assert all(isinstance(v, ShapingValues) for v in rl.shaping_by_dataset.values())
    assert {k: (v.beta_drift, v.gamma) for k, v in rl.shaping_by_dataset.items()} == table9
    for name, (beta, gamma) in table9.items():  # the accessor merges them into rl.shaping
        s = rl.shaping_for(name)
        assert isinstance(s, ShapingConfig) and (s.beta_drift, s.gamma) == (beta, gamma)
        assert s.calibrate == rl.shaping.calibrate and not rl.calibrates(name)
    assert rl.calibrates("private_biology") and rl.calibrates("private_physics")
    # Table 9 / App. B: 500 RL steps on Private-Science, 200 on SAS; SFT effective batch 32 / 8 (App. B)
    science, sas = ("private_biology", "private_physics"), ("sas_history", "sas_geography", "sas_physics")
    assert rl.steps_by_dataset == {**{n: 500 for n in science}, **{n: 200 for n in sas}}
    assert p.sft.effective_batch_by_dataset == {**{n: 32 for n in science}, **{n: 8 for n in sas}}
    assert [rl.steps_for(n) for n in sas + science] == [200, 200, 200, 500, 500]
    assert [p.sft.effective_batch_for(n) for n in sas + science] == [8, 8, 8, 32, 32]


def test_paper_profile_datasets_are_the_papers():
    """App. A, Table 8: SAS History / Geography / Physics (OOD question counts 26 / 6 / 5) and Private-Science as
    two datasets, Biology and Physics."""
    p = load_profile("paper")
    specs = {d.name: d for d in p.data.datasets}
    assert list(specs) == ["sas_history", "sas_geography", "sas_physics", "private_biology", "private_physics"]
    ood = {n: specs[n].options["n_ood_questions"] for n in ("sas_history", "sas_geography", "sas_physics")}
    assert ood == {"sas_history": 26, "sas_geography": 6, "sas_physics": 5}
    assert all(specs[n].source == "sasbench" for n in ood)
    assert [specs[n].source for n in ("private_biology", "private_physics")] == ["jsonl", "jsonl"]
    assert "biology" in specs["private_biology"].options["questions"]
    assert "physics" in specs["private_physics"].options["questions"]


@pytest.mark.parametrize("name", ["smoke", "demo"])
def test_embedded_profiles_have_biology_and_physics_as_two_datasets(name):
    """The Private-Science analogue is two single-subject worlds with ID and OOD splits (>= 2 OOD questions) and
    different seeds, so per-dataset tables have a Biology and a Physics row and the worlds are not copies."""
    p = load_profile(name)
    specs = {d.name: d for d in p.data.datasets}
    # the smoke profile adds the SAS-Bench-schema dataset with a free-text rubric (tests/fixtures/sasbench_synth)
    assert set(specs) == {"synth_sas", "synth_bio", "synth_phys"} | ({"sas_synth"} if name == "smoke" else set())
    assert specs["synth_bio"].options["subjects"] == ["biology"]
    assert specs["synth_phys"].options["subjects"] == ["physics"]
    seeds = [specs[n].options.get("seed", p.run.seed) for n in specs if specs[n].source == "synthetic"]
    assert len(set(seeds)) == len(seeds), seeds
    built = {n: build_dataset(specs[n], seed=p.run.seed) for n in ("synth_bio", "synth_phys")}
    for ds in built.values():
        splits = {s: {r.question_id for r in ds.split(s)} for s in ("train", "id_test", "ood_test")}
        assert splits["id_test"] and splits["id_test"] <= splits["train"]
        assert len(splits["ood_test"]) >= 2 and splits["ood_test"].isdisjoint(splits["train"])
        assert len({q.subject for q in ds.questions.values()}) == 1
    bio, phys = built["synth_bio"], built["synth_phys"]
    assert {q.subject for q in bio.questions.values()} == {"biology"}
    assert {q.subject for q in phys.questions.values()} == {"physics"}
    assert not ({r.answer for r in bio.responses} & {r.answer for r in phys.responses}) - {""}  # "": all absent


def test_demo_science_worlds_keep_the_former_size():
    """01 samples rollouts for every training response: the two worlds together stay about the size of the one
    science world they replace (720 training responses, 1,350 in all) so the demo's time budget holds."""
    p = load_profile("demo")
    sizes = {}
    for d in p.data.datasets:
        if d.name in ("synth_bio", "synth_phys"):
            ds = build_dataset(d, seed=p.run.seed)
            sizes[d.name] = (len(ds.split("train")), len(ds.responses))
    train, total = sum(s[0] for s in sizes.values()), sum(s[1] for s in sizes.values())
    assert 0.85 * 720 <= train <= 1.05 * 720 and 0.85 * 1350 <= total <= 1.05 * 1350, sizes
    assert sizes["synth_bio"][0] > sizes["synth_phys"][0]  # Biology is the larger, as in Table 8


def _profile_with(tmp_path, text):
    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump(yaml.safe_load((CONFIG_DIR / "smoke.yaml").read_text()) | yaml.safe_load(text)))
    return f


def test_per_dataset_keys_are_checked_against_the_datasets(tmp_path):
    ok = _profile_with(tmp_path, "rl: {shaping_by_dataset: {synth_bio: {beta_drift: 0.5, gamma: 0.2}},"
                                 " steps_by_dataset: {synth_sas: 3}}\n"
                                 "sft: {effective_batch_by_dataset: {synth_phys: 4}}")
    p = load_profile(ok)
    assert p.rl.shaping_by_dataset == {"synth_bio": ShapingValues(beta_drift=0.5, gamma=0.2)}
    assert (p.rl.shaping_for("synth_bio").gamma, p.rl.shaping_for("synth_sas").gamma) == (0.2, p.rl.shaping.gamma)
    assert (p.rl.steps_for("synth_sas"), p.rl.steps_for("synth_bio")) == (3, p.rl.steps)
    assert (p.sft.effective_batch_for("synth_phys"), p.sft.effective_batch_for("synth_sas")) == (4, 32)
    for section, bad in [("rl", "shaping_by_dataset: {synth_biology: {beta_drift: 0.5, gamma: 0.2}}"),
                         ("rl", "steps_by_dataset: {synth_science: 3}"),
                         ("sft", "effective_batch_by_dataset: {synth: 4}")]:
        with pytest.raises(ConfigError) as e:
            load_profile(_profile_with(tmp_path, f"{section}: {{{bad}}}"))
        msg = str(e.value)
        assert "unknown dataset" in msg and "synth_bio" in msg and "synth_phys" in msg and "synth_sas" in msg
    with pytest.raises(ConfigError, match="unknown dataset"):  # an override typo too
        load_profile("smoke", ["rl.steps_by_dataset.synth_bi=3"])


def test_per_dataset_values_are_typed(tmp_path):
    with pytest.raises(ConfigError, match="missing key.*gamma"):
        load_profile(_profile_with(tmp_path, "rl: {shaping_by_dataset: {synth_bio: {beta_drift: 0.5}}}"))
    with pytest.raises(ConfigError, match=r"unknown key.*gama"):
        load_profile(_profile_with(tmp_path, "rl: {shaping_by_dataset: {synth_bio: {beta_drift: 0.5, gama: 1}}}"))
    with pytest.raises(ConfigError, match="synth_sas: expected int"):
        load_profile(_profile_with(tmp_path, "rl: {steps_by_dataset: {synth_sas: many}}"))
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_profile(_profile_with(tmp_path, "rl: {shaping_by_dataset: {synth_bio: 0.5}}"))


def test_help_field_defaults_copies_and_required():
    @dataclasses.dataclass
    class C:
        need: int = help_field(help="required")
        items: list = help_field([1, 2], "copied per instance")
        lora: LoraConfig = help_field(help="nested", factory=LoraConfig)

    a, b = C(need=1), C(need=2)
    a.items.append(3)
    a.lora.target_modules.append("x")
    assert b.items == [1, 2] and "x" not in b.lora.target_modules and "x" not in LoraConfig().target_modules
    assert all(f.metadata["help"] for f in dataclasses.fields(C))
    with pytest.raises(TypeError):
        C()
    with pytest.raises(ConfigError, match="missing key"):
        from_dict(C, {})
    assert from_dict(C, {"need": 5}).need == 5


def test_every_field_has_help():
    missing = [k for k, _, h in describe() if not h]
    assert not missing, f"fields without help text: {missing}"
