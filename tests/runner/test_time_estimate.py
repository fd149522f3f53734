"""The dry run's GPU-hours ESTIMATE (edit_lib/runner/time_estimate.py, time_stages.py): the FLOP and bandwidth
arithmetic against hand computations, App. B's figures beside the paper profile's estimate, the `--gpu` flag, and
the comparison with `check-gpu --memory`'s measured phase times (fabricated timings: no GPU here)."""
from __future__ import annotations

import os
import re

import pytest

from edit_lib.cli import main
from edit_lib.config import load_profile
from edit_lib.runner import time_estimate as te
from edit_lib.runner.time_estimate import GPU, Shape

OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
# a tiny model: 1,000 parameters of which an untied 10 x 8 embedding table, 2 layers, 2 query heads x 4
TINY = dict(total=1000, layers=2, hidden=8, intermediate=16, heads=2, kv_heads=1, head_dim=4, vocab=10, tied=False,
            trainable=16)


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    for k, v in OFFLINE.items():
        monkeypatch.setenv(k, v)


def test_shape_drops_only_an_untied_input_embedding():
    m = Shape.of(TINY)
    assert (m.matmul, m.layers, m.d_q, m.lora, m.w) == (920, 2, 8, 16, 2)  # 1,000 - 10 x 8
    assert m.kv_bytes == 2 * 2 * 1 * 4 * 2  # K and V, 2 layers, 1 KV head x 4, bf16
    assert Shape.of(dict(TINY, tied=True)).matmul == 1000  # the shared table is the lm_head's matmul


def test_flops_of_a_tiny_model_by_hand():
    m = Shape.of(TINY)
    # forward, 5 tokens: 2 x 920 x 5 = 9,200 (weights) + 2 x 2 layers x 8 x 25 = 800 (causal attention)
    assert te.forward_flops(m, 5) == 10_000
    assert te.forward_flops(m, 5, n=3) == 30_000
    # LoRA training with checkpointing: 9,200 x 3 (forward, dX backward, recompute) + 800 x 4 (attention's
    # backward is twice its forward) + 6 x 16 x 5 = 480 (the adapters' forward and gradients)
    assert te.train_flops(m, 5) == 27_600 + 3_200 + 480
    assert te.train_flops(m, 5, checkpointing=False) == 18_400 + 2_400 + 480


def test_qwen3_8b_forward_is_two_flops_per_matmul_parameter():
    """8,190,735,360 parameters less the untied 151,936 x 4,096 embedding = 7,568,405,504 in matmuls."""
    m = Shape.of(dict(total=8_190_735_360, layers=36, hidden=4096, intermediate=12288, heads=32, kv_heads=8,
                      head_dim=128, vocab=151_936, tied=False, trainable=174_587_904))
    assert te.forward_flops(m, 1) == 2 * 7_568_405_504 + 2 * 36 * 4096
    assert m.kv_bytes == 147_456  # 2 x 36 x 8 x 128 x 2 bytes
    ratio = te.train_flops(m, 1024) / te.forward_flops(m, 1024)
    assert 3.0 < ratio < 3.1  # the 6 x N rule: 3 forwards (+ attention's larger backward and the adapters)


def test_generation_is_bandwidth_bound_by_hand():
    gpu = GPU("toy", bf16_tflops=1e-6, hbm_tb_s=1e-9, memory_gb=1)  # 1e6 FLOP/s, 1,000 bytes/s
    m = Shape(matmul=100, layers=1, d_q=2, kv_bytes=4, lora=0, w=2)
    # hf: 4 sequences in 2 batches of 2, each batch decodes 5 steps; context 3 + 5/2 = 5.5 tokens on average
    read = 2 * 5 * (100 * 2 + 2 * 4 * 5.5)  # 2,440 bytes: weights once per step + each sequence's KV cache
    prefill = 4 * (2 * 100 * 3 + 2 * 1 * 2 * 9) / (1e6 * 0.35)  # 2,544 FLOPs of prompt forwards
    got = te.generate_seconds(m, gpu, n=4, batch=2, prompt=3, budget=5, mean=2, backend="hf")
    assert got == pytest.approx(prefill + read / (1000 * 0.3))
    # vllm: continuous batching, each sequence runs its mean length (2 steps); context 3 + 1 = 4
    read_v = 2 * 2 * (200 + 2 * 4 * 4)
    got_v = te.generate_seconds(m, gpu, n=4, batch=2, prompt=3, budget=5, mean=2, backend="vllm")
    assert got_v == pytest.approx(prefill + read_v / (1000 * 0.6))
    fast_memory = GPU("toy", bf16_tflops=1e-6, hbm_tb_s=1.0, memory_gb=1)  # compute-bound: the FLOPs decide
    flops = 2 * 5 * 2 * (2 * 100 + 4 * 1 * 2 * 5.5)
    assert te.generate_seconds(m, fast_memory, 4, 2, 3, 5, 2) == pytest.approx(prefill + flops / (1e6 * 0.35))


def test_gpu_names_and_device_names():
    assert te.gpu_named("H200") is te.GPUS["h200"] and te.PAPER_GPU == "h200"
    with pytest.raises(KeyError, match="known: h100, h200, a100, l40s"):
        te.gpu_named("b200")
    assert te.gpu_for_device("NVIDIA H100 80GB HBM3") == "h100"
    assert te.gpu_for_device("NVIDIA A100-SXM4-80GB") == "a100" and te.gpu_for_device("NVIDIA L40S") == "l40s"
    assert te.gpu_for_device("Tesla T4") is None


def test_compare_times_with_fabricated_timings():
    rows = te.compare_times({"a": 2.0, "b": 0.0}, {"a": 1.0, "b": 1.0, "c": 3.0})
    assert rows == [dict(phase="a", measured_s=2.0, estimate_s=1.0, ratio=0.5),
                    dict(phase="b", measured_s=0.0, estimate_s=1.0, ratio=None),
                    dict(phase="c", measured_s=None, estimate_s=3.0, ratio=None)]


def test_check_memory_phase_times_on_a_gpu_with_fabricated_timings(monkeypatch):
    """The path a GPU session takes: the device's name picks the GPU, measured seconds go beside the estimate."""
    import torch

    from edit_lib.tools.check_gpu import SHAPES, phase_times
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "NVIDIA H200")
    prof = load_profile("paper", SHAPES + ["model.device=cuda"])
    counts = dict(TINY, total=10 ** 9, trainable=10 ** 6)
    est = te.check_memory_seconds(prof, counts, 512, te.GPUS["h200"])
    assert list(est) == ["01 sampled rollouts", "01 greedy batch", "02 packed probe forward", "05 LoRA SFT step",
                         "05 greedy batch (adapter)", "06 EDIT-RL step"]
    m = Shape.of(counts)  # one SFT step: 4 pairs of 512 + 256 + 1 tokens, gradient checkpointing on
    assert est["05 LoRA SFT step"] == pytest.approx(te.train_flops(m, 769, 4) / (989e12 * 0.35))
    out = phase_times(prof, counts, 512, "cuda", {k: 4 * v for k, v in est.items()})
    assert out["gpu"] == "h200" and [r["ratio"] for r in out["rows"]] == [0.25] * 6
    cpu = phase_times(prof, counts, 512, "cpu", {k: 1.0 for k in est})
    assert cpu["gpu"].startswith("h100") and all(r["ratio"] is None for r in cpu["rows"])


@pytest.mark.slow
def test_check_memory_times_every_phase_it_estimates():
    """check_memory on a CPU-sized Qwen3: its timed phases are the estimate's (no comparison without CUDA)."""
    from edit_lib.tools.check_gpu import check_memory
    out = check_memory(layers=1, prompt_tokens=48, device="cpu", echo=lambda s: None,
                       config=dict(hidden_size=64, intermediate_size=128, num_attention_heads=2,
                                   num_key_value_heads=1, head_dim=32, vocab_size=1024))
    rows = out["times"]["rows"]
    assert [r["phase"] for r in rows][0] == "01 sampled rollouts" and len(rows) == 6
    assert all(r["estimate_s"] > 0 and r["ratio"] is None for r in rows)


def test_sizes_read_data_on_disk_and_assume_table_8_otherwise():
    from edit_lib.runner.time_estimate import dataset_sizes
    paper = {s["dataset"]: s for s in dataset_sizes(load_profile("paper"))}
    assert paper["private_biology"] == dict(dataset="private_biology", source="assumed: Table 8 (data not on disk)",
                                            train=10159, id_test=1264, ood_test=2087)
    assert paper["sas_history"]["id_test"] == 0 and paper["sas_history"]["ood_test"] == 130
    smoke = {s["dataset"]: s for s in dataset_sizes(load_profile("smoke"))}
    assert smoke["sas_synth"]["source"] == "read from disk" and smoke["sas_synth"]["train"] > 0


def test_sizes_name_data_that_is_there_but_unreadable(monkeypatch):
    from edit_lib.data import registry
    from edit_lib.data.schema import DataError
    from edit_lib.runner.time_estimate import dataset_sizes

    def bad(spec, *a, **k):
        raise DataError("gold mark 9 outside [0, 6]", path=f"{spec.name}.jsonl", line=3, field="gold")
    monkeypatch.setattr(registry, "build_dataset", bad)
    rows = {s["dataset"]: s for s in dataset_sizes(load_profile("paper"))}
    assert rows["private_physics"]["source"] == ("assumed: Table 8 (data not read: private_physics.jsonl, line 3, "
                                                 "field 'gold': gold mark 9 outside [0, 6])")
    assert rows["private_physics"]["train"] == 1573


@pytest.fixture(scope="module")
def paper_dry_run(tmp_path_factory):
    from edit_lib.runner.dry_run import dry_run, format_dry_run
    os.environ.update(OFFLINE)
    res = dry_run("paper", run_root=str(tmp_path_factory.mktemp("runs")))
    return res, format_dry_run(res)


@pytest.mark.slow
def test_probe_estimate_beside_app_b_by_hand(paper_dry_run):
    res, _ = paper_dry_run
    probe = next(r for r in res["time"]["paper"] if r["stage"] == "02_probing")
    # 55,278 incorrect rollouts (App. B) x one packed forward of 1,024 prompt + 512 completion + 6.2 x 8 scaffold
    # tokens = 1,585.6 on an H200 (989 TFLOP/s dense bf16) at MFU 0.35
    S = 1024 + 512 + 6.2 * 8
    hours = 55_278 * (2 * 7_568_405_504 * S + 2 * 36 * 4096 * S ** 2) / (989e12 * 0.35) / 3600
    assert probe["estimate"] == pytest.approx(hours) and probe["paper"] == 2.5
    assert probe["ratio"] == pytest.approx(hours / 2.5)


@pytest.mark.slow
def test_paper_dry_run_prints_gpu_hours_beside_memory_and_app_b(paper_dry_run):
    res, text = paper_dry_run
    assert "GPU time per stage, ESTIMATE in GPU-hours on one NVIDIA H100 SXM 80GB" in text
    assert [s["stage"] for s in res["time"]["stages"]] == [
        "01_base_policy", "02_probing", "03_audit_validation", "04_counterfactual_selection", "05_edit_sft", "06_rl",
        "07_evaluation", "08_rsr_interventions", "09_significance"]
    table = text[text.index("GPU time per stage"):]
    peak = {r["stage"]: r["total"] for r in res["memory"]}
    for s in res["time"]["stages"][:-1]:  # 01-08: the memory estimate's peak and positive hours on one line
        line = next(ln for ln in table.splitlines() if ln.startswith(f"  {s['stage']} "))
        assert re.match(rf"  {s['stage']}\s+{peak[s['stage']]:.1f}\s+{s['hours']:.1f}\s", line) and s["hours"] > 0
    assert res["time"]["stages"][-1]["hours"] == 0  # 09 runs no model
    assert "assumed: Table 8 (data not on disk)" in text and "assumed: prompt 1024 tokens" in text
    row = next(r for r in res["time"]["paper"] if r["stage"] == "02_probing")
    block = text[text.index("beside App. B"):]
    line = next(ln for ln in block.splitlines() if ln.startswith("  02_probing"))
    assert f"{row['estimate']:.1f}h" in line and "2.5h" in line and f"{row['ratio']:.2f}" in line


def test_unknown_gpu_exits_2(tmp_path, capsys):
    assert main(["run", "--profile", "paper", "--dry-run", "--gpu", "b200", "--run-root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "'b200'" in err and "h100" in err and "l40s" in err
    assert not (tmp_path / "paper").exists()
