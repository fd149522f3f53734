"""`edit-suite bench` (edit_lib/tools/bench.py): the one table of benchmarks behind the CLI's choices, help,
dispatch and errors; `Comparison`, the harness that times a benchmark's arms and checks them; `bench suite`: per-stage wall times of a run, grouped as the time budget is, with the time
split of stages run with `--time-split`."""
import json

import pytest

from edit_lib.cli import main
from edit_lib.tools.bench import (BENCHMARKS, Benchmark, Comparison, bench_suite, benchmark, choices_help,
                                  format_suite, run_bench)


def test_bench_suite_groups_and_totals(tmp_path):
    res = tmp_path / "smoke" / "results"
    res.mkdir(parents=True)
    times = {"00_data": 6.0, "01_base_policy": 60.0, "04_counterfactual_selection": 30.0, "07_evaluation": 12.0,
             "09_significance": 6.0}
    for name, sec in times.items():
        payload = dict(key="k", seconds=sec - 1, runner_seconds=sec, reused_stale=name == "04_counterfactual_selection")
        (res / f"{name}.json").write_text(json.dumps(payload))
    out = bench_suite("smoke", tmp_path)
    assert [r["stage"] for r in out["stages"]] == list(times)
    groups = {g["group"]: g["minutes"] for g in out["groups"]}
    assert groups == {"00-03": pytest.approx(1.1), "04": pytest.approx(0.5), "07-09": pytest.approx(0.3)}
    assert out["total_minutes"] == pytest.approx(114 / 60, abs=0.01) and out["within_budget"]
    assert "reused stale" in format_suite(out)


def test_bench_suite_without_a_run_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="edit-suite run --profile smoke"):
        bench_suite("smoke", tmp_path)


# ---------------------------------------------------------------- the one list of benchmarks (tools.bench)

def _bench_parser_choices() -> list[str]:
    """The benchmark names the CLI's ``bench`` subcommand accepts, read off its parser."""
    import argparse

    from edit_lib.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return list(next(a for a in sub.choices["bench"]._actions if a.dest == "what").choices)


def test_the_cli_offers_exactly_the_registered_benchmarks():
    assert _bench_parser_choices() == list(BENCHMARKS)
    assert {"probe", "audit", "shaping", "suite", "precision"} <= set(BENCHMARKS)
    assert all(f"{name}: {b.help}" in choices_help() for name, b in BENCHMARKS.items())


def test_an_unknown_benchmark_names_every_registered_one(tmp_path, capsys):
    with pytest.raises(ValueError) as e:
        benchmark("nope")
    assert "'nope'" in str(e.value) and all(name in str(e.value) for name in BENCHMARKS)
    with pytest.raises(ValueError, match="'nope' names no benchmark of `edit-suite bench`"):
        run_bench("nope", tmp_path)
    with pytest.raises(SystemExit):  # argparse refuses it before any benchmark runs, listing the choices
        main(["bench", "nope"])
    err = capsys.readouterr().err
    assert "'nope'" in err and all(f"'{name}'" in err for name in BENCHMARKS)


def test_every_registered_benchmark_resolves_to_its_function():
    for name, b in BENCHMARKS.items():
        assert callable(b.load()) and b.load().__name__ == b.function.split(":")[1], name
        assert b.reads_run == (name in ("suite", "precision")), name
        if b.reads_run:
            assert b.load_formatter().__name__ == b.formatter.split(":")[1], name


def _fake_standalone() -> dict:
    return {"speedup": 3.0}


def _fake_of_a_run(profile, run_root) -> dict:
    return {"profile": profile, "root": str(run_root), "stages": 2}


def _fake_show(result: dict) -> str:
    return f"fake table of {result['profile']}"


def test_the_cli_dispatches_through_the_registry(tmp_path, capsys, monkeypatch):
    """A benchmark added to the table is a CLI choice at once and runs through it: a standalone one writes its
    JSON with the machine facts, one of a run writes ``<name>_<profile>.json`` and prints its formatter's text."""
    import torch

    monkeypatch.setitem(BENCHMARKS, "fake", Benchmark(_fake_standalone, "a fake standalone benchmark"))
    monkeypatch.setitem(BENCHMARKS, "fake-run", Benchmark(_fake_of_a_run, "a fake one of a run", _fake_show))
    threads = torch.get_num_threads()
    try:
        assert main(["bench", "fake", "--run-root", str(tmp_path)]) == 0
    finally:
        torch.set_num_threads(threads)  # run_bench sets 2 threads for the benchmarks
    out = json.loads((tmp_path / "bench" / "fake.json").read_text())
    assert out["speedup"] == 3.0 and out["bench"] == "fake" and "torch" in out
    assert json.loads(capsys.readouterr().out)["speedup"] == 3.0
    assert main(["bench", "fake-run", "--profile", "smoke", "--run-root", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "bench" / "fake-run_smoke.json").read_text())["stages"] == 2
    assert capsys.readouterr().out.strip() == "fake table of smoke"


def test_bench_suite_shows_the_time_split_of_timed_stages(tmp_path):
    """A stage run with --time-split gets its four parts beside its seconds (text and JSON); a stage whose timing
    file describes another run (another key) or that has none gets none."""
    from edit_lib.runner.time_split import timing_file

    run = tmp_path / "smoke"
    (run / "results").mkdir(parents=True)
    for name, key, sec in (("00_data", "a", 6.0), ("01_base_policy", "b", 60.0), ("02_probing", "c", 9.0)):
        (run / "results" / f"{name}.json").write_text(json.dumps(dict(key=key, seconds=sec - 1, runner_seconds=sec)))
    split = dict(forward_seconds=21.5, generation_seconds=30.3, training_seconds=0.0, other_seconds=8.2,
                 calls=dict(forward=40, generate=2, backward=0, optimizer_step=0), workers=1,
                 worker_process_seconds=12.0, worker_forward_seconds=5.0, worker_generation_seconds=4.0,
                 worker_training_seconds=0.0, wall_seconds=60.0)
    timing_file(run, "01_base_policy").parent.mkdir()
    timing_file(run, "01_base_policy").write_text(json.dumps(dict(split, key="b")))
    timing_file(run, "02_probing").write_text(json.dumps(dict(split, key="old", wall_seconds=9.0)))
    out = bench_suite("smoke", tmp_path)
    rows = {r["stage"]: r for r in out["stages"]}
    assert {k: rows["01_base_policy"][k] for k in split if k != "wall_seconds"} == {
        k: v for k, v in split.items() if k != "wall_seconds"}
    assert "forward_seconds" not in rows["00_data"] and "forward_seconds" not in rows["02_probing"]
    text = format_suite(out).splitlines()
    assert text[1].split() == ["stage", "seconds", "forward", "generate", "train", "other", "workers"]
    line = next(ln for ln in text if ln.startswith("01_base_policy"))
    assert line.split() == ["01_base_policy", "60.0", "21.5", "30.3", "0.0", "8.2", "12.0"]
    assert next(ln for ln in text if ln.startswith("00_data")).split() == ["00_data", "6.0"]
    assert "edit-suite run --time-split" in text[-1]
    assert "forward" not in format_suite(dict(out, stages=[rows["00_data"]]))  # no stage timed: no columns


def test_bound_counts_a_tokens_flop_and_cache_bytes():
    """`bench bound`'s per-token counts against the model's shapes written out by hand (a Qwen3 of hidden 16,
    4 heads of 8, 2 key/value heads, MLP 32, 3 layers, vocabulary 50, untied head)."""
    from transformers import AutoModelForCausalLM, Qwen3Config

    from edit_lib.tools.bench_generation import bandwidth_gbs, matmul_gflops, per_token
    cfg = Qwen3Config(hidden_size=16, num_attention_heads=4, num_key_value_heads=2, head_dim=8, intermediate_size=32,
                      num_hidden_layers=3, vocab_size=50, tie_word_embeddings=False)
    model = AutoModelForCausalLM.from_config(cfg)
    per_layer = 16 * 32 + 2 * (16 * 16) + 32 * 16 + 3 * (16 * 32)  # q, k and v, o, gate up down
    flop, kv = per_token(model, context=10)
    assert flop == 2 * (3 * per_layer + 16 * 50) + 3 * 2 * 2 * 4 * 8 * 10
    assert kv == 3 * 2 * 2 * 8 * 10 * 4
    assert matmul_gflops(8, [(16, 32)], inner=2) > 0 and bandwidth_gbs(mb=4) > 0


class _Clock:
    """A fake ``time.perf_counter``: an arm 'takes' the seconds it adds, so the harness's arithmetic is checked
    without timing anything."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_comparison_interleaves_arms_and_divides_the_baseline(monkeypatch):
    """Each round runs every arm in declaration order; ``min`` keeps each arm's fastest round and ``median`` its
    median; ratios are the baseline's seconds over the arm's; the kept output is that of the fastest round."""
    from edit_lib.tools import bench

    clock = _Clock()
    monkeypatch.setattr(bench.time, "perf_counter", clock)
    calls, costs = [], {"naive": iter([6.0, 4.0, 5.0]), "fast": iter([1.0, 2.0, 0.5])}

    def arm(name):
        def run():
            cost = next(costs[name])
            clock.now += cost
            calls.append(name)
            return (name, cost)
        return run
    comparison = Comparison({"naive": arm("naive"), "fast": arm("fast")}, repeats=3, shapes=dict(rows=7))
    out = comparison.run()
    assert calls == ["naive", "fast"] * 3
    assert out["rows"] == 7 and out["naive_s"] == 4.0 and out["fast_s"] == 0.5 and out["ratio_fast"] == 8.0
    assert comparison.outputs == {"naive": ("naive", 4.0), "fast": ("fast", 0.5)}
    costs.update(naive=iter([6.0, 4.0, 5.0]), fast=iter([1.0, 2.0, 0.5]))
    out = Comparison({"naive": arm("naive"), "fast": arm("fast")}, repeats=3, statistic="median").run()
    assert out["naive_s"] == 5.0 and out["fast_s"] == 1.0 and out["ratio_fast"] == 5.0


def test_comparison_checks_every_arm_and_refuses_a_ratio_on_a_failed_identity():
    """The check sees the baseline's output and each arm's; its fields carry the arm's name where several arms are
    checked; an AssertionError from it ends the benchmark (no ratio of arms that compute something else)."""
    import pandas as pd

    from edit_lib.tools.bench import identical_frames, rows_differing

    base = pd.DataFrame({"text": ["a", "b", "c", "d"]})
    one_off = pd.DataFrame({"text": ["a", "b", "x", "d"]})
    warmed = []
    out = Comparison({"base": lambda: base, "same": lambda: base.copy(), "moved": lambda: one_off},
                     rows_differing(), repeats=1, warmup=True).run()
    assert (out["same_rows_differing"], out["moved_rows_differing"], out["moved_same_rows"]) == (0, 1, 0.75)
    out = Comparison({"base": lambda: warmed.append(1) or base, "same": lambda: base.copy()}, identical_frames,
                     warmup=True, repeats=2).run()
    assert out["identical"] is True and len(warmed) == 3  # one warm-up and two rounds
    with pytest.raises(AssertionError):
        Comparison({"base": lambda: base, "moved": lambda: one_off}, identical_frames, repeats=1).run()
    with pytest.raises(ValueError, match="'min' or 'median'"):
        Comparison({"base": lambda: base, "same": lambda: base}, statistic="mean").run()
    with pytest.raises(ValueError, match="two arms"):
        Comparison({"base": lambda: base}).run()


def test_the_packed_signal_benchmarks_run_and_agree_with_their_naive_reads():
    """`bench probe` and `bench audit` at tiny shapes, end to end: the packed reads equal the naive ones within
    float32 rounding and every timing field is there (a benchmark broken by a change elsewhere fails here, not on
    a user's machine)."""
    import torch

    from edit_lib.tools.bench_signals import bench_audit, bench_probe
    threads = torch.get_num_threads()
    try:
        probe = bench_probe(n_rollouts=1, n_steps=2, max_mark=3, prompt_len=16, step_len=6, repeats=1)
        audit = bench_audit(n_rollouts=1, n_steps=2, prompt_len=160, step_len=6, repeats=1)
    finally:
        torch.set_num_threads(threads)
    assert probe["max_abs_err_probs"] < 1e-4 and probe["max_abs_err_expected"] < 1e-3
    assert audit["max_abs_err_nll"] < 1e-3
    for out in (probe, audit):
        assert out["naive_s"] > 0 and out["packed_s"] > 0 and out["ratio_packed"] > 0
