"""`edit-suite run --dry-run` (edit_lib/runner/dry_run.py): Qwen3-8B built on the meta device from
configs/models/qwen3-8b.json, the paper's LoRA (App. B; Table 9 "LoRA as in SFT") attached, parameter counts and
the per-stage memory estimate; nothing executed, nothing downloaded."""
from __future__ import annotations

import dataclasses
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from edit_lib.cli import main
from edit_lib.config import PAPER_LORA_TARGETS, load_profile
from edit_lib.runner.dry_run import MODEL_CONFIGS, dry_run, memory_estimate, meta_model, parameter_counts

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "models" / "qwen3-8b.json"
PAPER_TRAINABLE = 174_587_904  # r = 64 on q, k, v, o, gate, up, down of 36 layers
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    for k, v in OFFLINE.items():
        monkeypatch.setenv(k, v)


@pytest.fixture(scope="module")
def paper_counts():
    os.environ.update(OFFLINE)
    prof = load_profile("paper")
    return parameter_counts(meta_model(CONFIG), prof.sft.lora)


def closed_form_total(c: dict) -> int:
    """Qwen3 parameters by formula: embeddings + L x (q, k, v, o + q_norm, k_norm + gate, up, down + 2 RMSNorms)
    + final norm + lm_head (untied)."""
    H, I, L, V, hd = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"], c["head_dim"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    attn = H * q + 2 * H * kv + q * H + 2 * hd  # q, k, v, o projections (no bias) + per-head q_norm, k_norm
    layer = attn + 3 * H * I + 2 * H
    return V * H + L * layer + H + (0 if c["tie_word_embeddings"] else V * H)


def closed_form_lora(c: dict, r: int) -> int:
    H, I, L, hd = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["head_dim"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    shapes = [(H, q), (H, kv), (H, kv), (q, H), (H, I), (H, I), (I, H)]  # (in, out): A is r x in, B is out x r
    return L * sum(r * (i + o) for i, o in shapes)


def test_config_file_holds_the_8b_values():
    c = json.loads(CONFIG.read_text())
    assert MODEL_CONFIGS["qwen3-8b"] == CONFIG
    assert c["architectures"] == ["Qwen3ForCausalLM"] and c["model_type"] == "qwen3"
    assert (c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]) == (4096, 12288, 36)
    assert (c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]) == (32, 8, 128)
    assert (c["vocab_size"], c["max_position_embeddings"], c["rope_theta"]) == (151936, 40960, 1000000)
    assert c["tie_word_embeddings"] is False and c["torch_dtype"] == "bfloat16"
    assert (c["bos_token_id"], c["eos_token_id"]) == (151643, 151645)


def test_paper_profile_sets_the_app_b_lora():
    lora = load_profile("paper").sft.lora
    assert (lora.r, lora.alpha) == (64, 128)
    assert sorted(lora.target_modules) == sorted(PAPER_LORA_TARGETS)


def test_meta_model_counts_match_the_closed_form(paper_counts):
    c = json.loads(CONFIG.read_text())
    assert paper_counts["total"] == closed_form_total(c) == 8_190_735_360
    assert paper_counts["trainable"] == closed_form_lora(c, 64) == PAPER_TRAINABLE
    assert not paper_counts["tied"] and paper_counts["layers"] == 36


def test_meta_model_has_no_storage():
    model = meta_model(CONFIG)
    assert {p.device.type for p in model.parameters()} == {"meta"}
    assert model.config.rope_parameters["rope_theta"] == 1000000


def test_memory_table_has_a_positive_row_per_model_stage(paper_counts):
    rows = memory_estimate(load_profile("paper"), paper_counts)
    assert [r["stage"] for r in rows] == ["01_base_policy", "02_probing", "03_audit_validation",
                                          "04_counterfactual_selection", "05_edit_sft", "06_rl", "07_evaluation",
                                          "08_rsr_interventions"]
    assert all(r["total"] > r["weights"] > 0 for r in rows)
    rl = rows[5]
    assert rl["probe_copy"] == pytest.approx(rl["weights"]) and rl["kl_ref"] == 0
    assert rl["weights"] == pytest.approx(8_190_735_360 * 2 / 2 ** 30)
    assert rl["lora"] == pytest.approx(PAPER_TRAINABLE * 16 / 2 ** 30)


def test_trl_needs_no_reference_copy_for_a_peft_model():
    """The kl_ref = 0 term: TRL's GRPOTrainer reads the KL reference from the peft model, adapter disabled."""
    from trl import GRPOTrainer
    src = inspect.getsource(GRPOTrainer.__init__)
    i = src.index("elif is_peft_model(model):\n            # If PEFT is used, the reference model is not needed")
    assert "self.ref_model = None" in src[i:i + 300]


@pytest.mark.slow
def test_dry_run_writes_nothing(tmp_path):
    res = dry_run("paper", run_root=str(tmp_path / "runs"))
    assert res["counts"]["trainable"] == PAPER_TRAINABLE and not res["warnings"]
    assert [s["stage"] for s in res["plan"]][0] == "00_data"
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_cli_dry_run_prints_the_count(tmp_path):
    exe = Path(sys.executable).with_name("edit-suite")
    env = {**os.environ, **OFFLINE}
    out = subprocess.run([str(exe), "run", "--profile", "paper", "--dry-run", "--run-root", str(tmp_path / "r")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "174,587,904" in out.stdout and "8,190,735,360" in out.stdout
    assert "ESTIMATE" in out.stdout and "06_rl" in out.stdout
    assert not (tmp_path / "r").exists()


def test_checklist_plan_per_dataset(tmp_path):
    """The dry run says where each dataset's checklist comes from (Sec. 2.2): listed points or free text."""
    from edit_lib.config import load_profile
    from edit_lib.runner.dry_run import checklist_plan, format_checklist_plan
    paper = {r["dataset"]: r for r in checklist_plan(load_profile("paper"))}
    assert set(paper) == {"sas_history", "sas_geography", "sas_physics", "private_biology", "private_physics"}
    for d in ("sas_history", "sas_geography", "sas_physics"):  # the labelled release is not in the repository
        assert paper[d]["checklist"].startswith("free text (reference answer + analysis)") and not paper[d]["read"]
    assert "each question's scheme kind" in paper["private_biology"]["checklist"]
    smoke = {r["dataset"]: r for r in checklist_plan(load_profile("smoke"))}
    assert smoke["synth_sas"]["checklist"].startswith("listed points") and not smoke["synth_sas"]["read"]
    assert smoke["sas_synth"] == dict(dataset="sas_synth", source="sasbench", policy="keep",
                                      checklist="free text: 8 questions", read=True)  # the fixture is read
    lines = format_checklist_plan(list(smoke.values()))
    assert "revision.checklist_failure = 'keep'" in lines[0] and any("sas_synth" in ln for ln in lines)


@pytest.mark.slow
def test_cli_dry_run_gpu_hours_on_a_named_gpu(tmp_path, capsys):
    """`--gpu l40s`: the GPU-hours table names the card, and a stage whose memory estimate exceeds its 48 GB says so
    (06's EDIT-RL update, about 52 GiB); App. B's figures stay on App. B's H200. The CLI's main() in this process
    (the printed output is the property; test_cli_dry_run_prints_the_count runs the installed entry point)."""
    assert main(["run", "--profile", "paper", "--dry-run", "--gpu", "l40s", "--run-root", str(tmp_path / "r")]) == 0
    out = capsys.readouterr()
    time_table = out.out[out.out.index("GPU time per stage, ESTIMATE in GPU-hours on one NVIDIA L40S 48GB"):]
    rl = next(ln for ln in time_table.splitlines() if ln.startswith("  06_rl "))
    first = next(ln for ln in time_table.splitlines() if ln.startswith("  01_base_policy "))
    assert "(over the GPU's memory)" in rl and "(over the GPU's memory)" not in first
    assert "beside App. B (Private-Biology, App. B's counts and GPU: NVIDIA H200 SXM 141GB" in out.out
    assert not (tmp_path / "r").exists()


def test_the_estimate_counts_a_profiles_own_baselines(paper_counts):
    """A ``run.baselines`` file's SFT system (the smoke profile's toy baseline) trains in 05's estimate with
    EDIT-SFT's pool on every dataset and is graded in 07's; the estimate leaves the process's systems as they were."""
    from edit_lib import systems
    from edit_lib.runner.dry_run import PROMPT_TOKENS
    from edit_lib.runner.time_estimate import estimate

    def work(overrides):
        out = estimate(load_profile("paper", overrides), paper_counts, "h200", PROMPT_TOKENS)
        return {s["stage"]: {w.what: w.time for w in s["items"]} for s in out["stages"]}
    a, b = work([]), work(["run.baselines=[tests/fixtures/toy_baseline.py]"])
    datasets = [d.name for d in load_profile("paper").data.datasets]
    sft = {k: v for k, v in b["05_edit_sft"].items() if k not in a["05_edit_sft"]}
    assert sorted(sft) == sorted(f"{ds}: SFT toy_rft" for ds in datasets)
    assert all(v == b["05_edit_sft"][k.replace("toy_rft", "edit_sft")] for k, v in sft.items())
    assert sum(b["07_evaluation"].values()) > sum(a["07_evaluation"].values())  # one more policy graded
    assert "toy_rft" not in systems.BY_NAME and "toy_rft" not in systems.BASELINES


def _wall(profile, gpus):
    from edit_lib.runner.time_estimate import wall_clock, GENERATE, RL_RUNS, SFT, Work
    stages = [dict(stage="06_rl", hours=6.0, items=[Work("d: a", 3.0, RL_RUNS, 3), Work("d: b", 2.0, RL_RUNS, 1),
                                                    Work("d: EDIT-RL calibration", 0.5),
                                                    Work("d: Figure 3 curve a", 0.5, GENERATE)]),
              dict(stage="05_edit_sft", hours=5.0, items=[Work("d: SFT edit_sft", 4.0, SFT),
                                                          Work("d: InT continuations", 1.0, GENERATE)])]
    return {w["stage"]: round(w["wall"], 9) for w in wall_clock(profile, stages, gpus)}


def test_wall_clock_spreads_only_what_the_suite_spreads():
    """Worked by hand: 06's runs of 1, 1, 1 and 2 h (3 seeds of a, one of b) longest first on 2 GPUs end after
    3 h, plus 1 h of calibration and curves on one GPU; with rl.workers 1 they run one after another, over
    rl.processes GPUs each; 05's SFT run divides by sft.processes (at most the GPUs), its generation does not
    (model.generation_workers 1); with generation_workers 0 generation divides by the GPUs, 2 at most by 2."""
    p = load_profile("paper")
    spread = dataclasses.replace(p, model=dataclasses.replace(p.model, generation_workers=0),
                                 rl=dataclasses.replace(p.rl, workers=0))
    assert _wall(spread, 2) == {"06_rl": 3.75, "05_edit_sft": 4.5}  # 3 h of runs + 0.5 + 0.5 / 2; 4 + 1 / 2
    assert _wall(spread, 8) == {"06_rl": 2.5625, "05_edit_sft": 4.125}  # 2 h + 0.5 + 0.5 / 8; 4 + 1 / 8
    capped = dataclasses.replace(spread, model=dataclasses.replace(p.model, generation_workers=2))
    assert _wall(capped, 8)["05_edit_sft"] == 4.5
    sft_units = dataclasses.replace(spread, sft=dataclasses.replace(p.sft, workers=0))
    assert _wall(sft_units, 8)["05_edit_sft"] == 4.125  # one SFT run: one unit, one GPU
    from edit_lib.runner.time_estimate import wall_clock, SFT, Work
    two = [dict(stage="05_edit_sft", hours=3.0, items=[Work("d: SFT a", 2.0, SFT), Work("d: SFT b", 1.0, SFT)])]
    assert [w["wall"] for w in wall_clock(sft_units, two, 8)] == [2.0]  # side by side on the engine
    assert [w["wall"] for w in wall_clock(p, two, 8)] == [3.0]  # one after another (sft.workers 1)
    engine, two = (dataclasses.replace(p, rl=dataclasses.replace(p.rl, workers=w)) for w in (0, 2))
    assert _wall(engine, 2) == {"06_rl": 4.0, "05_edit_sft": 5.0}
    assert _wall(engine, 8) == {"06_rl": 3.0, "05_edit_sft": 5.0}
    assert _wall(two, 8) == {"06_rl": 4.0, "05_edit_sft": 5.0}
    one = dataclasses.replace(p, rl=dataclasses.replace(p.rl, workers=1, processes=4),
                              sft=dataclasses.replace(p.sft, processes=4))
    assert _wall(one, 2) == {"06_rl": 3.5, "05_edit_sft": 3.0}  # 5 h over 2 GPUs + 1 h; 4 h over 2 + 1 h
    assert _wall(one, 8) == {"06_rl": 2.25, "05_edit_sft": 2.0}  # over 4 GPUs each (rl/sft.processes)
    with pytest.raises(ValueError, match="--gpus must be at least 1, got 0"):
        _wall(p, 0)


def test_cli_dry_run_gpus_adds_wall_clock_per_stage(tmp_path, capsys):
    """`--gpus 32`: a wall-clock line per stage, never above its GPU-hours and never below GPU-hours / 32; 06 with
    rl.workers 0 is spread (wall-clock below its GPU-hours); `--gpus 0` exits 2 naming the flag."""
    assert main(["run", "--profile", "paper", "--dry-run", "--gpus", "32", "-p", "rl.workers=0", "--run-root",
                 str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    table = out[out.index("wall-clock per stage on 32 x NVIDIA H100 SXM 80GB"):].splitlines()[2:11]
    rows = {ln.split()[0]: [float(x) for x in ln.split()[1:4]] for ln in table}
    assert set(rows) == {f"0{i}_" + s for i, s in enumerate(
        ["data", "base_policy", "probing", "audit_validation", "counterfactual_selection", "edit_sft", "rl",
         "evaluation", "rsr_interventions", "significance"])} - {"00_data"}
    for stage, (gpu_h, wall, _) in rows.items():
        assert gpu_h / 32 - 0.06 <= wall <= gpu_h + 0.05, stage  # printed to 0.1 h
    assert rows["06_rl"][1] < rows["06_rl"][0] and rows["06_rl"][2] > 1
    assert main(["run", "--profile", "paper", "--dry-run", "--gpus", "0"]) == 2
    assert "--gpus must be at least 1, got 0" in capsys.readouterr().err


# ---------------------------------------------------------------- configs/paper-sas.yaml: the paper on SAS-Bench alone

SAS = ["sas_history", "sas_geography", "sas_physics"]


def test_paper_sas_is_the_paper_profile_on_sas_bench_alone():
    """paper-sas.yaml is paper.yaml with the differences its header names and nothing else."""
    from edit_lib.config import to_dict
    paper, sas = to_dict(load_profile("paper")), to_dict(load_profile("paper-sas"))
    assert [d["name"] for d in sas["data"]["datasets"]] == SAS
    assert sas["data"]["datasets"] == [d for d in paper["data"]["datasets"] if d["name"] in SAS]
    for section, key in (("sft", "effective_batch_by_dataset"), ("rl", "steps_by_dataset"),
                         ("rl", "shaping_by_dataset")):
        assert sas[section][key] == {k: v for k, v in paper[section][key].items() if k in SAS}, key
    for key in ("seed_datasets", "grid_datasets"):
        assert sas["rl"][key] == ["sas_history"] and set(sas["rl"][key]) <= set(SAS)
    assert sas["sft"]["ablation_dataset"] == paper["sft"]["ablation_dataset"] == "sas_history"
    assert sas["rsr"]["datasets"] == [] and paper["rsr"]["datasets"] == ["private_biology"]
    for d in (paper, sas):  # everything else is the paper's
        d["name"] = d["run"]["description"] = d["data"]["datasets"] = d["rsr"]["datasets"] = None
        d["sft"]["effective_batch_by_dataset"] = d["rl"]["steps_by_dataset"] = d["rl"]["shaping_by_dataset"] = None
        d["rl"]["seed_datasets"] = d["rl"]["grid_datasets"] = None
    assert paper == sas


def test_sas_bench_gives_08_nothing_to_edit():
    """paper-sas.yaml's comment: rsr.datasets [] takes the datasets with PTS or LoR questions, and SAS-Bench's
    rubrics are free text, so 08 edits nothing (naming a SAS dataset gives the same, with a warning)."""
    import dataclasses
    from edit_lib.config import DatasetSpec
    from edit_lib.data.registry import build_dataset
    from edit_lib.evaluation.rsr import rsr_targets
    fix = ROOT / "tests" / "fixtures" / "sasbench"
    files = {"sas_history": "1_History_ShortAns.jsonl", "sas_geography": "3_Geography_ShortAns.jsonl"}
    datasets = {n: build_dataset(DatasetSpec(n, "sasbench", {"path": str(fix / f)})) for n, f in files.items()}
    rsr = load_profile("paper-sas").rsr
    assert rsr_targets(rsr, datasets) == ([], [])
    targets, warnings = rsr_targets(dataclasses.replace(rsr, datasets=["sas_history"]), datasets)
    assert targets == [] and len(warnings) == 1 and "free-text rubric" in warnings[0]


@pytest.mark.parametrize("name,n_inputs", [("paper-sas", 3), ("paper", 7)])
def test_paper_profiles_read_their_data_under_the_data_root(name, n_inputs, tmp_path, monkeypatch):
    """Without data the profiles preflight (need_data=False) with one note per input, each under
    $EDIT_SUITE_DATA: nothing is read from inside the repository."""
    from edit_lib.runner.dry_run import checklist_plan
    from edit_lib.runner.dry_run import preflight
    monkeypatch.setenv("EDIT_SUITE_DATA", str(tmp_path / "data root"))
    prof, notes = preflight(name, need_data=False, dry_run=True)
    assert len(notes) == n_inputs and all(f"{tmp_path / 'data root'}/" in n for n in notes), notes
    if name == "paper-sas":
        assert [r["dataset"] for r in checklist_plan(prof)] == SAS
        assert all("sas_bench/" in n for n in notes)


@pytest.mark.slow
def test_cli_dry_run_of_paper_sas_plans_the_three_sas_datasets(tmp_path, monkeypatch, capsys):
    """The CLI's main() in this process, as above: the printed plan is the property."""
    monkeypatch.setenv("EDIT_SUITE_DATA", str(tmp_path / "data"))
    assert main(["run", "--profile", "paper-sas", "--dry-run", "--run-root", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "DRY RUN of profile 'paper-sas'" in out and "174,587,904" in out
    plan = out[out.index("rubric checklist per dataset"):out.index("model: ")].splitlines()[1:]
    assert [ln.split()[0] for ln in plan] == SAS and all("(data not on disk)" in ln for ln in plan)
    notes = [ln for ln in out.splitlines() if ln.startswith("note: input data missing")]
    assert len(notes) == 3 and "private_" not in out
    assert not (tmp_path / "r").exists()
