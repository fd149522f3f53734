"""Profiles: typed loading, unknown keys, overrides, and the paper profile's App. B / Table 7 values."""
import pytest

from edit_lib.config import ConfigError, Profile, describe, load_profile


@pytest.mark.parametrize("name", ["smoke", "demo", "paper"])
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


def test_paper_profile_has_app_b_and_table7_values():
    p = load_profile("paper")
    assert p.model.name_or_path == "Qwen/Qwen3-8B"
    assert (p.sft.lora.r, p.sft.lora.alpha) == (64, 128)
    assert set(p.sft.lora.target_modules) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                              "down_proj"}
    assert (p.sft.epochs, p.sft.learning_rate, p.sft.lr_scheduler, p.sft.warmup_ratio) == (2, 2e-4, "cosine", 0.1)
    rl = p.rl
    assert (rl.learning_rate, rl.lr_scheduler, rl.warmup_ratio, rl.beta_kl) == (5e-6, "cosine", 0.03, 0.02)
    assert (rl.rollouts_per_prompt, rl.prompts_per_step, rl.temperature, rl.max_completion_tokens) == (8, 4, 1.0, 1024)
    assert rl.seeds == [42, 43, 44]
    assert p.probe.temperature == 0.7 and p.rollouts.n_per_response == 20
    assert p.revision.n_continuations == 4
    table7 = {"private_biology": (0.75, 0.3), "private_physics": (0.5, 0.15), "sas_history": (0.75, 0.05),
              "sas_geography": (0.75, 0.10), "sas_physics": (0.75, 0.10)}
    got = {k: (v["beta_drift"], v["gamma"]) for k, v in rl.shaping_by_dataset.items()}
    assert got == table7


def test_every_field_has_help():
    missing = [k for k, _, h in describe() if not h]
    assert not missing, f"fields without help text: {missing}"
