"""Every profile section checks its own values in ``__post_init__`` (edit_lib/config/), so a bad value is
an error when the profile loads, naming the file and section, before any notebook runs."""
from __future__ import annotations

import dataclasses

import pytest

from edit_lib import config as C
from edit_lib.config import Decoding, ConfigError, load_profile
from edit_lib.systems import SYSTEMS

# one bad value per section: (section class, keyword arguments, what the message names)
BAD = [
    (C.RunConfig, dict(skip_systems=[""]), "skip_systems"),
    (C.DataConfig, dict(on_error="ignore"), "on_error"),
    (C.DataConfig, dict(max_skipped_fraction=1.5), "max_skipped_fraction"),
    (C.WarmupConfig, dict(steps=-1), "steps"),
    (C.ModelConfig, dict(device="gpu"), "device"),
    (C.ModelConfig, dict(generation_backend="sglang"), "generation_backend"),
    (C.ModelConfig, dict(dtype="int8"), "dtype"),
    (C.StepsConfig, dict(rule="sentences"), "rule"),
    (C.LoraConfig, dict(r=0), "r"),
    (C.LoraConfig, dict(dropout=1.0), "dropout"),
    (C.RolloutConfig, dict(n_per_response=0), "n_per_response"),
    (C.RolloutConfig, dict(decoding=C.Decoding(greedy=True)), "decoding.greedy must be false"),
    (C.EvalConfig, dict(decoding=C.Decoding(greedy=True, max_new_tokens=0)), "decoding.max_new_tokens must be >= 1"),
    (C.Decoding, dict(top_p=0.0), "top_p"),
    (C.Decoding, dict(temperature=0.0), "temperature"),
    (C.Decoding, dict(top_k=-1), "top_k"),
    (C.Decoding, dict(greedy="yes"), "greedy"),
    (C.Decoding, dict(max_new_tokens=-1), "max_new_tokens"),
    (C.RevisionConfig, dict(continuation_decoding=C.Decoding(greedy=True)), "continuation_decoding.greedy"),
    (C.RevisionConfig, dict(rewrite_decoding=C.Decoding(max_new_tokens=0)), "rewrite_decoding.max_new_tokens"),
    (C.BeliefCheckConfig, dict(decoding=C.Decoding(greedy=True)), "decoding.greedy"),
    (C.RLConfig, dict(decoding=C.Decoding(greedy=True)), "decoding.greedy"),
    (C.RLConfig, dict(decoding=C.Decoding(max_new_tokens=0)), "decoding.max_new_tokens"),
    (C.EvalConfig, dict(invalid_as="skip"), "invalid_as"),
    (C.AnalysisConfig, dict(behaviour=""), "behaviour"),
    (C.ProbeConfig, dict(read="logits"), "read"),
    (C.ProbeConfig, dict(temperature=0.0), "temperature"),
    (C.AuditConfig, dict(nll_reduction="max"), "nll_reduction"),
    (C.AuditConfig, dict(residual_bandwidth=0.0), "residual_bandwidth"),
    (C.SelectionConfig, dict(budget_n=0), "budget_n"),
    (C.SelectionConfig, dict(percentile=100.0), "percentile"),
    (C.RevisionConfig, dict(checklist_failure="retry"), "checklist_failure"),
    (C.RevisionConfig, dict(n_continuations=0), "n_continuations"),
    (C.BeliefCheckConfig, dict(samples=0), "samples"),
    (C.IntConfig, dict(decoding=C.Decoding(temperature=0.7, greedy=True)), "decoding.greedy"),
    (C.SFTConfig, dict(warmup_ratio=1.0), "warmup_ratio"),
    (C.SFTConfig, dict(effective_batch_by_dataset={"d": 0}), "effective_batch_by_dataset"),
    (C.ShapingConfig, dict(flip_safe_rule="strict"), "flip_safe_rule"),
    (C.ShapingConfig, dict(beta_grid=[]), "beta_grid"),
    (C.ShapingValues, dict(beta_drift=-0.5, gamma=0.1), "beta_drift"),
    (C.RLConfig, dict(rollouts_per_prompt=1), "rollouts_per_prompt"),
    (C.RLConfig, dict(seeds=[]), "seeds"),
    (C.RSRConfig, dict(splits=["dev"]), "splits"),
    (C.SignificanceConfig, dict(ci=1.0), "ci"),
    (C.OpsConfig, dict(report_to="wandb"), "report_to"),
    (C.OpsConfig, dict(resume_every=-1), "resume_every"),
    (C.RLConfig, dict(processes=0), "processes"),
    (C.SFTConfig, dict(processes=0), "processes"),
    (C.SFTConfig, dict(workers=-1), "workers"),
    (C.SFTConfig, dict(workers=0, processes=2), "workers"),
    (C.ModelConfig, dict(hub_commit="abc def"), "hub_commit"),
    (C.ModelConfig, dict(generation_workers=-1), "generation_workers"),
    (C.ModelConfig, dict(generation_workers=2, prefix_cache=True), "generation_workers"),
    (C.ModelConfig, dict(generation_workers=2, device="cuda:1"), "generation_workers"),
    (C.ModelConfig, dict(generation_workers=2, generation_backend="vllm"), "generation_workers"),
]


@pytest.mark.parametrize("cls, kwargs, field", BAD, ids=[f"{c.__name__}.{f}" for c, _, f in BAD])
def test_a_section_rejects_a_bad_value(cls, kwargs, field):
    with pytest.raises(ConfigError, match=field):
        cls(**kwargs)


def test_every_section_with_values_is_checked():
    """Each section class of the profile (nested ones included) appears in BAD with at least one value."""
    def sections(cls):
        out = set()
        for f in dataclasses.fields(cls):
            tp = cls.__dataclass_fields__[f.name].type
            sub = getattr(C, tp, None) if isinstance(tp, str) else tp
            if dataclasses.is_dataclass(sub):
                out |= {sub} | sections(sub)
        return out
    checked = {c for c, _, _ in BAD}
    assert sections(C.Profile) - {C.DatasetSpec} <= checked | {C.ShapingValues}


def test_every_section_builds_from_its_defaults():
    """The defaults pass each section's own checks (every profile file in configs/ goes through the load and the
    preflight in tests/runner/test_preflight.py::test_every_profile_in_configs_passes_the_preflight)."""
    keys = [k for k, _, _ in C.describe()]  # builds every section from its defaults
    assert len(keys) == len(set(keys)) and {"run.seed", "rl.shaping.gamma", "model.warmup.steps"} <= set(keys)


def test_rsr_systems_default_to_the_main_tables_and_are_a_list_of_names():
    """Table 7's and Table 14's columns (App. I) are the main tables' systems, read from edit_lib/systems.py; the
    names themselves are checked by the preflight, which knows the profile's baselines
    (tests/runner/test_preflight.py)."""
    assert C.RSRConfig().systems == ["base", "base_grpo", "base_dgpo", "int_sft", "int_sft_int_rl", "edit_sft",
                                     "edit_sft_edit_rl"] == [s.name for s in SYSTEMS if s.main_column]
    for bad in ([], ["base", ""], "base"):
        with pytest.raises(ConfigError, match="systems must be a non-empty list of system names"):
            C.RSRConfig(systems=bad)


def test_a_bad_value_in_a_file_names_the_file_and_section(tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text("selection:\n  shortlist_k: 0\n")
    with pytest.raises(ConfigError) as e:
        load_profile(str(f))
    assert "mine.yaml.selection" in str(e.value) and "shortlist_k must be >= 1" in str(e.value)
    with pytest.raises(ConfigError, match="rl.shaping: flip_safe_rule"):
        load_profile("smoke", ["rl.shaping.flip_safe_rule=strict"])


def test_revision_section_resolves_its_continuation_budget():
    rev, ro = C.RevisionConfig(), C.RolloutConfig(decoding=Decoding(max_new_tokens=300))
    assert rev.resolved(ro).continuation_decoding.max_new_tokens == 300 and rev.continuation_decoding.max_new_tokens == 0
    own = C.RevisionConfig(continuation_decoding=Decoding(max_new_tokens=50))
    assert own.resolved(ro).continuation_decoding.max_new_tokens == 50


def test_revision_section_sizes_the_free_rewrite_budget():
    """Table 6's "w/o atomic" rewrite (the whole suffix) gets at least the rollouts' budget and the atomic one's."""
    rev = C.RevisionConfig(rewrite_decoding=Decoding(greedy=True, max_new_tokens=256))
    assert rev.resolved(C.RolloutConfig(decoding=Decoding(max_new_tokens=1024))).rewrite_budget(False) == 1024
    short = C.RolloutConfig(decoding=Decoding(max_new_tokens=64))
    assert rev.resolved(short).rewrite_budget(False) == 256  # never below the atomic
    own = C.RevisionConfig(free_rewrite_max_new_tokens=300).resolved(C.RolloutConfig())
    assert own.rewrite_budget(False) == 300 and own.rewrite_budget(True) == 256
    assert rev.rewrite_budget(True) == 256 and rev.free_rewrite_max_new_tokens == 0  # resolved() copies
    with pytest.raises(ValueError, match="pass P.revision.resolved"):
        rev.rewrite_budget(False)
    with pytest.raises(ValueError, match="free_rewrite_max_new_tokens must be >= 0"):
        C.RevisionConfig(free_rewrite_max_new_tokens=-1)
    paper = load_profile("paper")
    assert paper.revision.resolved(paper.rollouts).rewrite_budget(False) == paper.rollouts.decoding.max_new_tokens == 1024


def test_checklist_budget_defaults_to_the_rewrite_budget():
    from edit_lib.config import RevisionConfig, load_profile
    assert RevisionConfig().checklist_budget == RevisionConfig().rewrite_decoding.max_new_tokens == 256
    assert RevisionConfig(checklist_decoding=Decoding(greedy=True, max_new_tokens=900)).checklist_budget == 900
    assert load_profile("paper").revision.checklist_budget == 1024
    with pytest.raises(Exception, match="max_new_tokens must be >= 0"):
        RevisionConfig(checklist_decoding=Decoding(greedy=True, max_new_tokens=-1))


def test_a_decoding_given_in_part_keeps_its_sections_own_values():
    """A profile that sets one decoding value keeps the rest of that section's spec, not the Decoding type's: eval
    stays greedy (App. B), the InT proposals keep T = 0.7 / top-p 0.8; a key written before the one decoding spec
    names where it went."""
    p = load_profile("smoke", ["eval.decoding.max_new_tokens=32", "int_sft.decoding.max_new_tokens=99",
                               "revision.continuation_decoding.temperature=0.5"])
    assert p.eval.decoding == Decoding(greedy=True, max_new_tokens=32)
    assert p.int_sft.decoding == Decoding(temperature=0.7, top_p=0.8, max_new_tokens=99)
    assert p.revision.continuation_decoding == Decoding(temperature=0.5, max_new_tokens=0)
    with pytest.raises(ConfigError, match=r"smoke.yaml.eval: eval.max_new_tokens is now eval.decoding.max_new_tokens"):
        load_profile("smoke", ["eval.max_new_tokens=32"])
    with pytest.raises(ConfigError, match=r"rl: rl.max_completion_tokens is now rl.decoding.max_new_tokens"):
        load_profile("smoke", ["rl.max_completion_tokens=32"])
    with pytest.raises(ConfigError, match=r"smoke.yaml.eval.decoding: unknown key\(s\) \['beams'\]"):
        load_profile("smoke", ["eval.decoding.beams=2"])
    keys = {k: v for k, v, _ in C.describe()}  # `edit-suite profile --keys` documents each section's own defaults
    assert keys["eval.decoding.greedy"] is True and keys["rollouts.decoding.greedy"] is False
    assert (keys["int_sft.decoding.temperature"], keys["revision.checklist_decoding.max_new_tokens"]) == (0.7, 0)
    helps = {k: h for k, _, h in C.describe()}  # and each leaf its section's help, which gives the paper's values
    assert helps["int_sft.decoding.temperature"].startswith("Sampling temperature; how the proposals are sampled")
    assert "T = 0.7" in helps["int_sft.decoding.temperature"] and "T = 0.7" not in helps["rl.decoding.temperature"]
    assert "the rollouts' budget" in helps["revision.continuation_decoding.max_new_tokens"]
