"""06's planning and reporting helpers (edit_lib/train/rl_runs.py, rl_runs.py): the run
plan, adapter discovery, checkpoint listing, KL / JSD against scipy, the Table 10 terciles."""
import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import jensenshannon
from scipy.stats import entropy

from edit_lib.config import RLConfig, RunConfig
from edit_lib.data.synthetic import WorldConfig, generate_world
from edit_lib.train import calibration as cal
from edit_lib.train import rl_runs
from edit_lib.train.calibration import calibration_subset, CalibRollout


def _profile(skip_systems=(), **rl):
    return SimpleNamespace(rl=RLConfig(**rl), run=RunConfig(skip_systems=list(skip_systems)))


def test_plan_seeds_the_table4_pair_and_skips_missing_inits(tmp_path):
    p = _profile(seeds=[42, 43, 44], datasets=["b"])
    plan = rl_runs.plan_runs(p, {"a": 0, "b": 0}, {"edit_sft": {"b": "/x/edit"}}, tmp_path)
    assert set(plan["dataset"]) == {"b"}
    counts = plan.groupby("system").size().to_dict()
    assert counts == {"base_dgpo": 1, "base_edit_rl": 1, "base_grpo": 1, "edit_sft_edit_rl": 3, "edit_sft_grpo": 3,
                      "int_sft_int_rl": 1}
    int_row = plan[plan.system == "int_sft_int_rl"].iloc[0]
    assert int_row.skip.startswith("no int_sft adapter for b") and int_row.init_adapter == ""
    sft = plan[plan.system == "edit_sft_edit_rl"]
    assert (sft.init_adapter == "/x/edit").all() and sft.seed.tolist() == [42, 43, 44] and (sft.skip == "").all()
    assert plan[plan.system == "base_dgpo"].trainer.item() == "dgpo"
    with pytest.raises(ValueError, match="rl.datasets names"):
        rl_runs.plan_runs(_profile(datasets=["zz"]), {"a": 0}, {}, tmp_path)
    with pytest.raises(ValueError, match="seeds must be a non-empty list"):  # the rl section rejects it
        _profile(seeds=[])


def test_plan_runs_each_system_where_a_table_reads_it(tmp_path):
    """Tables 1-3's four RL systems on every RL dataset (first seed); Table 4's pair with every seed only on
    rl.seed_datasets; the grid's Base+EDIT-RL and EDIT-SFT+GRPO only on rl.grid_datasets."""
    p = _profile(seeds=[42, 43, 44], datasets=[], seed_datasets=["a", "c"], grid_datasets=["a"])
    plan = rl_runs.plan_runs(p, {"a": 0, "b": 0, "c": 0}, {"edit_sft": {d: f"/x/{d}" for d in "abc"}}, tmp_path)
    runs = {d: g.groupby("system").seed.apply(list).to_dict() for d, g in plan.groupby("dataset")}
    first = [42]
    assert runs["a"] == {"base_dgpo": first, "base_edit_rl": first, "base_grpo": first, "edit_sft_edit_rl": [42, 43, 44],
                         "edit_sft_grpo": [42, 43, 44], "int_sft_int_rl": first}
    assert runs["b"] == {"base_dgpo": first, "base_grpo": first, "edit_sft_edit_rl": first, "int_sft_int_rl": first}
    assert runs["c"] == {**runs["b"], "edit_sft_edit_rl": [42, 43, 44], "edit_sft_grpo": [42, 43, 44]}
    assert rl_runs.grid_datasets(p, {"a": 0, "b": 0, "c": 0}) == ["a"]
    every = _profile(datasets=["b", "c"])  # empty lists: every RL dataset
    assert rl_runs.seed_datasets(every, {"a": 0, "b": 0, "c": 0}) == ["b", "c"]
    with pytest.raises(ValueError, match=r"rl.grid_datasets names \['a'\], which RL does not run on"):
        rl_runs.plan_runs(_profile(datasets=["b"], grid_datasets=["a"]), {"a": 0, "b": 0}, {}, tmp_path)


def test_plan_lists_the_systems_a_profile_skips_as_not_run(tmp_path):
    from edit_lib.systems import NOT_RUN
    plan = rl_runs.plan_runs(_profile(skip_systems=["base_dgpo", "edit_sft_grpo"], seeds=[42, 43], datasets=["a"]),
                             {"a": 0}, {"edit_sft": {"a": "/x/edit"}}, tmp_path)
    skipped = plan[plan.skip == NOT_RUN]
    assert sorted(set(skipped.system)) == ["base_dgpo", "edit_sft_grpo"] and len(skipped) == 3  # grpo: both seeds
    assert (plan[plan.system == "edit_sft_edit_rl"].skip == "").all()   # the others still run
    with pytest.raises(ValueError, match="run.skip_systems: unknown system"):
        rl_runs.plan_runs(_profile(skip_systems=["dgpo"]), {"a": 0}, {}, tmp_path)


def test_saved_adapters_and_checkpoints(tmp_path):
    for s, d in (("edit_sft", "a"), ("int_sft", "a"), ("edit_sft", "b")):
        (tmp_path / s / d).mkdir(parents=True)
        (tmp_path / s / d / "adapter_config.json").write_text("{}")
    (tmp_path / "int_sft" / "b").mkdir()  # no adapter: an empty pool
    found = rl_runs.saved_adapters(tmp_path)
    assert found == {"edit_sft": {"a": str(tmp_path / "edit_sft/a"), "b": str(tmp_path / "edit_sft/b")},
                     "int_sft": {"a": str(tmp_path / "int_sft/a")}}
    run = tmp_path / "run"
    for step in (5, 10):
        (run / "checkpoints" / f"step-{step:05d}").mkdir(parents=True)
    (run / "rl_summary.json").write_text(json.dumps({"steps": 12}))
    assert [s for s, _ in rl_runs.checkpoints(run)] == [5, 10, 12]
    (run / "rl_summary.json").write_text(json.dumps({"steps": 10}))
    assert [s for s, _ in rl_runs.checkpoints(run)] == [5, 10]  # the final step is already a checkpoint


def test_kl_and_jsd_match_scipy():
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(5), size=4), rng.dirichlet(np.ones(5), size=4)
    kl, jsd = rl_runs.kl_jsd(p, q)
    assert np.allclose(kl, [entropy(a, b) for a, b in zip(p, q)])
    assert np.allclose(jsd, [jensenshannon(a, b) ** 2 for a, b in zip(p, q)])
    kl0, jsd0 = rl_runs.kl_jsd(p, p)
    assert np.allclose(kl0, 0) and np.allclose(jsd0, 0)


def test_divergence_summary_terciles():
    per = pd.DataFrame(dict(response_id=["a"] * 4 + ["b"] * 3, k=[0, 1, 2, 3, 0, 1, 2], n_steps=[3] * 4 + [2] * 3))
    per["u"] = per.k / per.n_steps
    per["tercile"] = ["early" if u <= 1 / 3 else "mid" if u <= 2 / 3 else "late" for u in per.u]
    per["kl"], per["jsd"] = np.arange(7.0), np.arange(7.0) / 10
    s = rl_runs.divergence_summary(per)
    assert s["rollouts"] == 2 and s["boundaries"] == 7 and s["kl"] == 3.0
    assert s["jsd_early"] == pytest.approx(np.mean([0.0, 0.1, 0.4])) and s["jsd_late"] == pytest.approx(np.mean([0.3, 0.6]))
    assert s["jsd_mid"] == pytest.approx(np.mean([0.2, 0.5]))


def test_drawn_responses_are_the_calibration_subset_groups():
    ds = generate_world(WorldConfig(shape="sas_like", n_questions=6, answers_per_question=5, ood_questions=0, seed=2))
    drawn = cal.drawn_responses(ds, 0.1, seed=3)
    rows = [CalibRollout(group=r.id, r_out=1.0, correct=True, max_mark=2.0, gold=1.0, m_hat=(1.0,))
            for r in ds.split("train")]
    assert drawn == {r.group for r in calibration_subset(rows, 0.1, seed=3)}
    assert len(drawn) == int(np.ceil(0.1 * len(ds.split("train"))))


@pytest.mark.slow
def test_runs_on_the_engine_equal_one_process_runs_of_the_same_threads(tmp_path):
    """rl.workers = 2: the runs still to train go to the engine's units (1 thread each, the named Base passed as
    its folder); each adapter equals the same run trained here with the unit's profile, and a second call
    reuses them."""
    import torch
    from safetensors.torch import load_file

    from edit_lib.config import load_profile
    from edit_lib.runner.keys import register_all, STAGES, ProfileView
    register_all()
    world = generate_world(WorldConfig(shape="sas_like", n_questions=3, answers_per_question=2, ood_questions=0,
                                       seed=1))
    datasets = {world.name: world}
    P = load_profile("smoke", ["rl.workers=2", "rl.steps=1", "rl.checkpoint_every=0", "rl.decoding.max_new_tokens=24",
                               "model.torch_threads=2", "rl.datasets=[]"])  # every dataset: the world
    P = ProfileView(P, "06_rl", STAGES["06_rl"].sections)  # what the notebook passes (pickled to the workers)
    plan = rl_runs.plan_runs(P, datasets, {}, tmp_path / "par")
    plan = plan[plan.system.isin(["base_grpo", "base_dgpo"])]
    out = rl_runs.run_plan(P, plan, datasets, {})
    assert {o.status for o in out.values()} == {"trained"}
    assert rl_runs.worker_profile(P).model.torch_threads == 1
    assert rl_runs.worker_profile(P).model.name_or_path.endswith(tuple("0123456789abcdef"))  # the micro folder
    torch_threads = torch.get_num_threads()
    try:
        for r in plan.to_dict("records"):
            ref = dict(r, out_dir=str(tmp_path / "seq" / r["system"]))
            rl_runs.run_one(rl_runs.worker_profile(P), ref, datasets, None, progress=False)
            a = load_file(f"{r['out_dir']}/adapter_model.safetensors")
            b = load_file(f"{ref['out_dir']}/adapter_model.safetensors")
            assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), r["system"]
    finally:
        torch.set_num_threads(torch_threads)
    again = rl_runs.run_plan(P, plan, datasets, {})
    assert {o.status for o in again.values()} == {"reused"}


def test_a_float32_probe_casts_the_frozen_copy_once(tmp_path, monkeypatch):
    """probe.dtype = float32 on a bfloat16 policy: run_one hands EDIT-RL a frozen probe already in float32 (so the
    shaping reward's per-read upcast has nothing to do), and leaves the trained policy in bfloat16."""
    import torch

    from edit_lib.config import load_profile
    from edit_lib.runner.keys import register_all
    register_all()
    seen = {}

    def fake_train(policy, rows, *a, frozen_probe_policy=None, **kw):
        seen.update(policy=next(policy.model.parameters()).dtype,
                    frozen={t.dtype for t in frozen_probe_policy.model.parameters()})
        out = tmp_path / "run"
        (out / rl_runs.SUMMARY_FILE).write_text("{}")
        (out / "adapter_config.json").write_text("{}")

    monkeypatch.setattr(rl_runs, "train_rl_arm", fake_train)
    world = generate_world(WorldConfig(shape="sas_like", n_questions=2, answers_per_question=2, ood_questions=0))
    row = dict(system="base_edit_rl", init="base", arm="edit_rl", trainer="grpo", dataset=world.name, seed=0,
               init_adapter="", out_dir=str(tmp_path / "run"), skip="")
    (tmp_path / "run").mkdir()
    for dtype, frozen in (("float32", {torch.float32}), ("model", {torch.bfloat16})):
        P = load_profile("smoke", ["model.dtype=bfloat16", f"probe.dtype={dtype}"])
        for f in (tmp_path / "run").iterdir():
            f.unlink()
        rl_runs.run_one(P, row, {world.name: world}, {world.name: (1.0, 0.1)}, progress=False)
        assert seen == dict(policy=torch.bfloat16, frozen=frozen), dtype


def test_dgpo_weight_spread_says_when_dgpo_reduces_to_grpo():
    near = [{"dgpo/weight_max": 1.03, "dgpo/weight_min": 0.98, "dgpo/weight_absdev_mean": 0.01},
            {"dgpo/weight_max": 1.04, "dgpo/weight_min": 0.97, "dgpo/weight_absdev_mean": 0.02}, {"loss": 0.1}]
    s = rl_runs.dgpo_weight_spread(near)
    assert s == dict(dgpo_weight_max=1.04, dgpo_weight_min=0.97, dgpo_weight_absdev_max=0.02, dgpo_near_uniform=True)
    far = near + [{"dgpo/weight_max": 1.9, "dgpo/weight_min": 0.4, "dgpo/weight_absdev_mean": 0.3}]
    assert rl_runs.dgpo_weight_spread(far)["dgpo_near_uniform"] is False
    grpo = rl_runs.dgpo_weight_spread([{"loss": 0.1, "kl": 0.0}])
    assert grpo["dgpo_near_uniform"] is None and np.isnan(grpo["dgpo_weight_max"])
