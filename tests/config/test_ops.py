"""The `ops` section (edit_lib/config/schema.py): how a run is watched and saved. It is in no stage key, every stage
may read it, and its values are checked like every other section's."""
import pytest

import edit_lib.runner.keys as keys
from edit_lib.config import ConfigError, load_profile
from edit_lib.runner.keys import STAGES, ProfileView, UndeclaredSectionError
from edit_lib.runner.stage import NOTEBOOK_DIR, stage_inputs


def test_ops_values_change_no_stage_key():
    plain = load_profile("smoke")
    watched = load_profile("smoke", ["ops.report_to=tensorboard", "ops.resume_every=3"])
    assert watched.ops.report_to == "tensorboard" and watched.ops.resume_every == 3
    memo_a, memo_b = {}, {}  # one per profile, as the runner keeps: each stage's key computed once
    for name in STAGES:
        key_a, inputs_a = stage_inputs(plain, name, NOTEBOOK_DIR, memo_a)
        key_b, _ = stage_inputs(watched, name, NOTEBOOK_DIR, memo_b)
        assert key_a == key_b, name
        assert "ops" not in inputs_a["params"]


def test_a_key_value_beside_ops_still_moves_the_key(monkeypatch):
    """The check above can fail: a value a stage declares moves that stage's key."""
    monkeypatch.setattr(keys, "module_fingerprints", lambda nb, *a: {})  # parameters only: fast
    a = stage_inputs(load_profile("smoke"), "09_significance", NOTEBOOK_DIR)[0]
    b = stage_inputs(load_profile("smoke", ["significance.ci=0.9"]), "09_significance", NOTEBOOK_DIR)[0]
    assert a != b


def test_every_stage_view_reads_ops_but_not_undeclared_sections():
    prof = load_profile("smoke", ["ops.resume_every=2"])
    view = ProfileView(prof, "00_data", STAGES["00_data"].sections)
    assert view.ops.resume_every == 2
    with pytest.raises(UndeclaredSectionError):
        view.rl  # noqa: B018 - 00_data does not declare rl


@pytest.mark.parametrize("override, field", [("ops.report_to=wandb", "report_to"), ("ops.resume_every=-1",
                                                                                      "resume_every")])
def test_bad_ops_values_name_the_field(override, field):
    with pytest.raises(ConfigError, match=f"ops: {field}"):
        load_profile("smoke", [override])
