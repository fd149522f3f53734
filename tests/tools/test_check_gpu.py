"""``edit-suite check-gpu`` (edit_lib/tools/check_gpu.py) without a GPU: the seed-spread tolerance, the row
comparison, the per-stage report with peak GPU memory, the committed spread file, and a clear exit without CUDA."""
import json

import pandas as pd
import pytest

from edit_lib.cli import main
from edit_lib.tools.check_gpu import (SPREAD_FILE, compare_numbers, read_spread, seed_spread, stage_report,
                                       token_flips)
from edit_lib.tools.golden import read_golden


def _results(run, stage, tables, **extra):
    f = run / "results" / f"{stage}.json"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps(dict(notebook=stage, tables=tables, **extra)))


def _metrics(qwk, n=12):
    return {"base_metrics": [dict(system="Base", dataset="s", split="ood_test", n=n, n_invalid=1, qwk=qwk, acc=0.5,
                                  within1=0.75, mae=1.5, qwk_pooled=0.3)]}


def test_seed_spread_is_the_range_over_runs_of_numeric_keys(tmp_path):
    runs = []
    for seed, qwk in enumerate([0.2, 0.5, 0.3]):
        run = tmp_path / f"s{seed}"
        _results(run, "01_base_policy", _metrics(qwk))
        runs.append(run)
    _results(runs[2], "05_edit_sft", {"pool_bookkeeping": [dict(dataset="s", pool_size=4)]})
    spread, optional = seed_spread(runs)
    assert spread["01_base_policy/base_metrics/Base/s/ood_test/qwk"] == pytest.approx(0.3)
    assert spread["01_base_policy/base_metrics/Base/s/ood_test/n"] == 0.0
    assert optional == ["05_edit_sft/pool_bookkeeping/s/pool_size"]  # one seed has it, the others do not


def test_numbers_pass_within_the_spread_and_fail_beyond_it():
    golden = {"a/qwk": 0.50, "a/n": 12, "b/label": "x", "c/gone": 1.0}
    spread = {"a/qwk": 0.10, "a/n": 0.0}
    got = compare_numbers({"a/qwk": 0.58, "a/n": 12, "b/label": "x"}, golden, spread, tol=1e-4).set_index("key")
    assert got.loc["a/qwk", "within"] and not got.loc["a/qwk", "exact"]
    assert got.loc["a/n", "within"] and got.loc["a/n", "exact"] and got.loc["b/label", "within"]
    assert not got.loc["c/gone", "within"]  # missing in the run
    assert compare_numbers({}, {"c/gone": 1.0}, {}, 1e-4, optional={"c/gone"}).within.all()  # a seed lacked it too
    far = compare_numbers({"a/qwk": 0.65, "a/n": 13}, golden, spread, tol=1e-4).set_index("key")
    assert not far.loc["a/qwk", "within"] and not far.loc["a/n", "within"]  # zero spread: counts must be equal


class _Tok:
    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": text.split()}


def test_token_flips_counts_diverging_rows_per_generated_token():
    keys = dict(dataset=["d", "d"], response_id=[0, 1], rollout_id=[0, 0])
    ref = pd.DataFrame(dict(keys, text=["a b c d", "e f g h i j"]))
    got = token_flips(ref, ref.assign(text=["a b x y", "e f g h i j"]), _Tok())
    assert got == dict(rows=2, rows_differing=1, generated_tokens=10, flip_rate=0.1)
    with pytest.raises(ValueError, match="different rows"):
        token_flips(ref, ref.iloc[:1], _Tok())


def test_stage_report_reads_seconds_and_peak_gpu_memory(tmp_path):
    _results(tmp_path, "00_data", {}, seconds=4.5)
    _results(tmp_path, "01_base_policy", {}, seconds=30.0, peak_gpu_memory_bytes=3 * 2 ** 20)
    rep = stage_report(tmp_path)
    assert rep == [dict(stage="00_data", seconds=4.5, peak_gpu_mib=None),
                                      dict(stage="01_base_policy", seconds=30.0, peak_gpu_mib=3.0)]


def test_committed_spread_covers_the_golden_numbers():
    """The spread file is made from smoke runs of the same code as the golden file: every numeric golden key has a
    spread entry (else check-gpu would demand bit-equality there) and every entry names a golden key or one that
    some seeds lack (else it is left from an older smoke run). A 10% allowance let a stale file pass (189 keys
    without an entry, 43 left over), so there is none: a refresh that changes the golden keys remakes both."""
    (spread, optional), (golden, _) = read_spread(SPREAD_FILE), read_golden()
    numeric = [k for k, v in golden.items() if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v]
    how = "remake it: `edit-suite check-gpu --spread` from smoke runs under -p run.seed=0, 1, 2"
    assert not [k for k in numeric if k not in spread], f"golden keys without a spread entry; {how}"
    assert not [k for k in spread if k not in golden and k not in optional], f"spread entries left over; {how}"
    assert all(v >= 0 for v in spread.values())


def test_check_gpu_without_cuda_exits_2_with_a_message(tmp_path, capsys, monkeypatch):
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["check-gpu", "--run-root", str(tmp_path), "--arms", "float32"]) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_memory_check_runs_every_phase_on_a_cpu_sized_qwen3():
    """The phases of `check-gpu --memory` (generation, packed probe, a LoRA SFT step, an EDIT-RL step) run on a
    Qwen3 model shrunk to CPU size; the estimate rows are the dry run's own (no measurement without CUDA)."""
    from edit_lib.tools.check_gpu import check_memory
    out = check_memory(layers=1, prompt_tokens=48, device="cpu", echo=lambda s: None,
                       config=dict(hidden_size=64, intermediate_size=128, num_attention_heads=2,
                                   num_key_value_heads=1, head_dim=32, vocab_size=1024))
    assert [r["stage"] for r in out["stages"]] == ["01_base_policy", "02_probing", "05_edit_sft", "06_rl"]
    assert all(r["estimate_gib"] > 0 and r["measured_gib"] is None for r in out["stages"])
    assert out["trainable"] > 0 and out["parameters"] > out["trainable"]


def test_stage_results_record_peak_gpu_memory_only_for_cuda_runs(monkeypatch):
    """runner.stage.gpu_memory: the process's peak for a CUDA run, nothing for model.device = cpu (a library may
    initialise CUDA on a GPU machine all the same) or where CUDA was never used."""
    import torch

    from edit_lib.runner.stage import gpu_memory
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda d: [5, 7][d])
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d: "GPU")
    assert gpu_memory("cuda") == dict(peak_gpu_memory_bytes=7, gpu="GPU")
    assert gpu_memory("cpu") == {}
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    assert gpu_memory("cuda") == {}
