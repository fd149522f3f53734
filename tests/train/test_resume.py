"""Resume inside a run and TensorBoard (edit_lib/train/sft.py, the profile's ``ops`` section; no recipe change).

Kill and resume: a run with ``ops.resume_every = 4`` is killed just after its state of step 4 is saved (a callback
raising in ``on_save``), then run again from a freshly loaded model; it must end with the adapter an uninterrupted
run of the same 8 steps (GRPO, EDIT-RL, DGPO on the micro grader, 6 prompts: 3 steps per epoch, so step 4 is inside
the second epoch) or 6 steps (SFT, 12 pairs, 3 steps per epoch) ends with. Tolerance: none. Measured on CPU, every
adapter tensor is bit-equal (max |difference| 0.0) and every per-step log entry (rewards, completion lengths,
token counts, KL, loss, grad norm) is equal, so the resumed rollouts sample the same tokens. That needs
``resume.SamplerEpochs``: without it TRL's prompt sampler restarts its permutation sequence, the resumed GRPO run
draws other prompts from step 5 on (other token counts and rewards) and its adapter differs by about 6e-6.
"""
import dataclasses
import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from transformers import TrainerCallback

from edit_lib.config import Decoding, LoraConfig, OpsConfig, ProbeConfig, RLConfig, SFTConfig
from edit_lib.data.synthetic import WorldConfig, generate_world
from edit_lib.train import sft as resume
from edit_lib.train.rl import rl_dataset, train_rl_arm
from micro import micro_policy as _micro  # the shared micro grader (tests/micro.py)
from test_rl import DS, world  # noqa: F401 - the same tiny world as the RL tests (a module fixture)

torch.set_num_threads(1)
RL = dataclasses.replace(RLConfig(), rollouts_per_prompt=2, prompts_per_step=2, decoding=Decoding(max_new_tokens=128),
                         warmup_ratio=0.0, steps=200)
LORA = LoraConfig(r=8, alpha=16)
TIMING_KEYS = {"step_time"}  # the only per-step log values allowed to differ


class KillAfterSave(TrainerCallback):
    """Stands for a crash right after the resumable state of step ``at`` is on disk."""

    def __init__(self, at: int):
        self.at = at

    def on_save(self, args, state, control, **kw):
        if state.global_step == self.at:
            raise KeyboardInterrupt(f"killed after the save at step {self.at}")


def _adapter(folder):
    return load_file(str(folder / "adapter_model.safetensors"))


def _assert_same_adapter(a, b):
    assert a.keys() == b.keys()
    diff = {k: float((a[k] - b[k]).abs().max()) for k in a if not torch.equal(a[k], b[k])}
    assert not diff, f"adapter tensors differ (max |difference| per tensor): {diff}"


def _steps(log_history):
    return [{k: v for k, v in e.items() if k not in TIMING_KEYS} for e in log_history if "loss" in e]


def _rl_kwargs(arm):
    if arm == "edit_rl":
        return dict(frozen_probe_policy=_micro(), probe_cfg=ProbeConfig(batch_size=4), shaping={DS: (0.5, 0.1)})
    if arm == "dgpo":
        from edit_lib.baselines.dgpo import DGPOTrainer
        return dict(trainer_cls=DGPOTrainer)
    return {}


def _rl(world, out, arm, ops, steps=8, seed=0, callbacks=()):
    policy = _micro()
    return train_rl_arm(policy, rl_dataset(policy, world), RL, LORA, out, DS, seed,
                        "grpo" if arm == "dgpo" else arm, max_steps=steps, callbacks=callbacks, ops=ops,
                        **_rl_kwargs(arm))


@pytest.mark.slow
@pytest.mark.parametrize("arm", ["grpo", "edit_rl", "dgpo"])
def test_a_killed_rl_run_resumes_to_the_uninterrupted_adapter(tmp_path, world, arm):
    ref = _rl(world, tmp_path / "ref", arm, OpsConfig(resume_every=0))
    assert not (tmp_path / "ref" / resume.RESUME_DIR).exists()  # resume_every = 0: no state written
    assert any(v.abs().sum() > 0 for k, v in _adapter(tmp_path / "ref").items() if "lora_B" in k)  # it trained
    ops = OpsConfig(resume_every=4)
    with pytest.raises(KeyboardInterrupt):
        _rl(world, tmp_path / "run", arm, ops, callbacks=[KillAfterSave(4)])
    assert [p.name for p in (tmp_path / "run" / resume.RESUME_DIR).glob("checkpoint-*")] == ["checkpoint-4"]
    assert not (tmp_path / "run" / "rl_summary.json").exists()
    res = _rl(world, tmp_path / "run", arm, ops)
    summary = json.loads((tmp_path / "run" / "rl_summary.json").read_text())
    assert summary["resumed_from_step"] == 4 and summary["steps"] == 8 and res.steps == 8
    assert res.seconds_per_step == pytest.approx(res.seconds / 4)  # this process timed steps 5-8 only
    assert not (tmp_path / "run" / resume.RESUME_DIR).exists()  # deleted once the run is done
    _assert_same_adapter(_adapter(tmp_path / "ref"), _adapter(tmp_path / "run"))
    assert _steps(res.log_history) == _steps(ref.log_history)  # same rollouts, rewards and losses at every step
    assert json.loads((tmp_path / "ref" / "rl_summary.json").read_text())["resumed_from_step"] is None


@pytest.mark.slow
def test_a_killed_sft_run_resumes_to_the_uninterrupted_adapter(tmp_path):
    from edit_lib.embedded.teacher import teacher_grade
    from edit_lib.prompts.grading import render_grading_prompt
    from edit_lib.train.sft import train_sft
    pol = _micro()
    w = generate_world(WorldConfig(shape="sas_like", n_questions=4, answers_per_question=3, ood_questions=0, seed=3))
    rng = np.random.default_rng(0)
    pairs = [(pol.input_text(render_grading_prompt(w.question(r), r.answer)),
              teacher_grade(w.question(r), r, rng, None).completion) for r in w.responses[:12]]
    cfg = SFTConfig(lora=LoraConfig(r=4, alpha=8), epochs=2, learning_rate=1e-3, warmup_ratio=0.1,
                    effective_batch_size=4, per_device_batch_size=2)  # 3 steps per epoch, 6 in all

    def run(out, ops, callbacks=()):
        return train_sft(_micro(), pairs, cfg, tmp_path / out, seed=0, progress=False, ops=ops, callbacks=callbacks)

    ref = run("ref", OpsConfig(resume_every=0))
    assert ref.steps == 6 and not (tmp_path / "ref" / resume.RESUME_DIR).exists()
    with pytest.raises(KeyboardInterrupt):
        run("run", OpsConfig(resume_every=4), [KillAfterSave(4)])
    res = run("run", OpsConfig(resume_every=4))
    summary = json.loads((tmp_path / "run" / "sft_summary.json").read_text())
    assert summary["resumed_from_step"] == 4 and res.steps == 6
    assert not (tmp_path / "run" / resume.RESUME_DIR).exists()
    _assert_same_adapter(_adapter(tmp_path / "ref"), _adapter(tmp_path / "run"))
    assert res.loss_curve == ref.loss_curve


@pytest.mark.slow
def test_a_state_of_other_inputs_or_half_written_is_never_resumed(tmp_path, world):
    ops = OpsConfig(resume_every=1)
    with pytest.raises(KeyboardInterrupt):
        _rl(world, tmp_path / "a", "grpo", ops, steps=2, callbacks=[KillAfterSave(1)])
    (tmp_path / "a" / resume.RESUME_DIR / "checkpoint-1" / "optimizer.pt").unlink()  # killed mid-save
    _rl(world, tmp_path / "a", "grpo", ops, steps=2)
    assert json.loads((tmp_path / "a" / "rl_summary.json").read_text())["resumed_from_step"] is None
    with pytest.raises(KeyboardInterrupt):
        _rl(world, tmp_path / "b", "grpo", ops, steps=2, callbacks=[KillAfterSave(1)])
    with pytest.warns(UserWarning, match=r"saved under other inputs \(differs in \['data_seed', 'seed'\]\)"):
        res = _rl(world, tmp_path / "b", "grpo", ops, steps=2, seed=1)
    assert res.steps == 2
    assert json.loads((tmp_path / "b" / "rl_summary.json").read_text())["resumed_from_step"] is None


@pytest.mark.slow
def test_tensorboard_writes_events_in_the_given_folder(tmp_path, world):
    """ops.report_to = tensorboard: a 2-step GRPO run writes its events (tensorboardX) in log_dir, nothing under
    the adapter folder; with resume_every = 0 no resume folder either. Without log_dir, in <out_dir>/tensorboard."""
    ops = OpsConfig(report_to="tensorboard")
    policy = _micro()
    res = train_rl_arm(policy, rl_dataset(policy, world), RL, LORA, tmp_path / "out", DS, 0, "grpo", max_steps=2,
                       ops=ops, log_dir=tmp_path / "tb" / "06_rl" / "base_grpo")
    events = list((tmp_path / "tb" / "06_rl" / "base_grpo").glob("events.out.tfevents.*"))
    assert res.steps == 2 and len(events) == 1 and events[0].stat().st_size > 0
    assert not list((tmp_path / "out").rglob("events.out.tfevents.*"))
    assert not (tmp_path / "out" / resume.RESUME_DIR).exists()
    # a caller outside a stage (the pilot, the launcher) passes no log_dir: the events go beside its output
    train_rl_arm(_micro(), rl_dataset(policy, world), RL, LORA, tmp_path / "x", DS, 0, "grpo", max_steps=1, ops=ops)
    assert len(list((tmp_path / "x" / "tensorboard").glob("events.out.tfevents.*"))) == 1


def test_resume_args_follow_ops_resume_every(tmp_path):
    assert resume.resume_args(tmp_path, 0) == dict(output_dir=str(tmp_path), save_strategy="no")
    assert resume.resume_args(tmp_path, 50) == dict(output_dir=str(tmp_path / "resume"), save_strategy="steps",
                                                    save_steps=50, save_total_limit=1, save_only_model=False)
    with pytest.raises(ValueError, match="ops.resume_every must be an integer >= 0, got -1"):
        resume.resume_args(tmp_path, -1)
    assert resume.step_of(tmp_path / "resume" / "checkpoint-120") == 120 and resume.step_of(None) is None


def test_the_run_loops_pass_ops_and_log_folders(tmp_path, monkeypatch):
    """05 (sft_runs.train_all) and 06 (rl_runs.run_one) hand the profile's ops section and the run's TensorBoard
    folder (<log_root>/<system>/<dataset>[/seed<n>]) to the trainers; a finished run's left-over state is deleted."""
    from edit_lib.config import load_profile
    from edit_lib.train import rl_runs, sft_runs
    prof = load_profile("smoke", ["ops.report_to=tensorboard", "ops.resume_every=3"])
    seen = {}

    def fake_sft(policy, pairs, cfg, out, **kw):
        seen["sft"] = kw
        raise StopIteration

    monkeypatch.setattr(sft_runs, "train_sft", fake_sft)
    monkeypatch.setattr(sft_runs, "load_policy_from_profile", lambda profile: None)
    with pytest.raises(StopIteration):
        sft_runs.train_all({("edit_sft", "d"): [("p", "c")]}, prof, tmp_path / "a", log_root=tmp_path / "tb05")
    assert seen["sft"]["ops"] == prof.ops and seen["sft"]["log_dir"] == tmp_path / "tb05" / "edit_sft" / "d"

    def fake_rl(policy, rows, *a, **kw):
        seen["rl"] = kw
        (out / "rl_summary.json").write_text("{}")
        (out / "adapter_config.json").write_text("{}")

    monkeypatch.setattr(rl_runs, "train_rl_arm", fake_rl)
    monkeypatch.setattr(rl_runs, "load_init", lambda profile, adapter, frozen=False: None)
    monkeypatch.setattr(rl_runs, "rl_dataset", lambda policy, ds: [])
    out = tmp_path / "run"
    out.mkdir()
    row = dict(system="base_grpo", init="base", arm="grpo", trainer="grpo", dataset="d", seed=7, init_adapter="",
               out_dir=str(out), skip="")
    assert rl_runs.run_one(prof, row, {"d": None}, None, progress=False, log_root=tmp_path / "tb06").status == "trained"
    assert seen["rl"]["ops"] == prof.ops and seen["rl"]["log_dir"] == tmp_path / "tb06" / "base_grpo" / "d" / "seed7"
    (out / resume.RESUME_DIR / "checkpoint-3").mkdir(parents=True)  # killed between summary and deletion
    assert rl_runs.run_one(prof, row, {"d": None}, None, progress=False).status == "reused"
    assert not (out / resume.RESUME_DIR).exists()
