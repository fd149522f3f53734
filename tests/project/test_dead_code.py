"""No dead code: the pinned dead-code finder (vulture 2.14, the `test` extra) finds nothing in edit_lib/ at
confidence 60 or more, the notebooks' code cells counting as callers (the tests do not: a helper only a test
calls is dead to the suite). What it cannot see as used is listed in ALLOWED, each entry with its reason; an
entry it no longer reports is stale and fails too."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MIN_CONFIDENCE = 60

HOOK = "a transformers TrainerCallback hook (or its argument), called by name by the Trainer"
SET_ON = "an attribute set on a third-party object, read by that library"
FIELD = "a dataclass field, read through asdict / a DataFrame built from the rows"
BY_NAME = "dispatched by name ('module:function'), never called directly"

ALLOWED = {  # (file relative to edit_lib/, name) -> why vulture cannot see it used
    ("systems.py", "baseline"): "the decorator of a baseline's own file (run.baselines; tests/fixtures/toy_baseline.py)",
    ("artifacts.py", "exc"): "__exit__(*exc): the context-manager protocol's arguments",
    ("runner/stage_log.py", "on_train_begin"): HOOK,
    ("runner/stage_log.py", "on_log"): HOOK,
    ("runner/stage_log.py", "control"): HOOK,
    ("runner/stage_log.py", "current_step"): SET_ON + " (tqdm's bar position)",
    ("runner/stage_log.py", "DEFAULT_PROGRESS_CALLBACK"): SET_ON + " (transformers.trainer's default)",
    ("runner/stage_log.py", "__all__"): SET_ON + " (the stand-in tqdm.autonotebook module)",
    ("runner/stage_log.py", "autonotebook"): SET_ON + " (tqdm.autonotebook)",
    ("runner/stage.py", "parameters_cell"): "writes the notebooks' parameters cells; tests/runner/test_variants.py "
                                            "holds every cell equal to it",
    ("tools/bench_signals.py", "on_step_begin"): HOOK,
    ("tools/bench_signals.py", "on_step_end"): HOOK,
    ("tools/bench_signals.py", "control"): HOOK,
    ("train/sft.py", "on_train_begin"): HOOK,
    ("train/sft.py", "control"): HOOK,
    ("train/rl_runs.py", "on_step_end"): HOOK,
    ("train/rl_runs.py", "control"): HOOK,
    ("runner/time_split.py", "unit_hook"): BY_NAME + " (engine.run_hooks, in each engine worker)",
    ("embedded/tokenizer.py", "decoder"): SET_ON + " (tokenizers.Tokenizer)",
    ("embedded/tokenizer.py", "normalizer"): SET_ON + " (tokenizers.Tokenizer)",
    ("embedded/tokenizer.py", "pre_tokenizer"): SET_ON + " (tokenizers.Tokenizer)",
    ("model/toy.py", "pre_tokenizer"): SET_ON + " (tokenizers.Tokenizer)",
    ("model/gguf_model.py", "hf_quantizer"): SET_ON + " (transformers' model: cleared after dequantising)",
    ("model/hf.py", "padding_side"): SET_ON + " (the tokenizer)",
    ("model/hf.py", "layers_to_transform"): SET_ON + " (peft's LoraConfig)",
    ("train/sft.py", "logging_dir"): SET_ON + " (TensorBoardCallback)",
    ("runner/time_estimate.py", "bench"): "read by DataFrame.query as @bench",
    ("data/sasbench.py", "segments"): FIELD,
    ("data/sasbench.py", "has_gold"): FIELD,
    ("embedded/behaviour.py", "sum_kind"): FIELD,
    ("embedded/behaviour.py", "sum_terms"): FIELD,
    ("embedded/behaviour.py", "rounded"): FIELD,
    ("embedded/behaviour.py", "other_steps"): FIELD,
    ("revision/checklist.py", "contradicts"): FIELD,
    ("revision/checklist.py", "n_points"): FIELD,
    ("train/calibration.py", "fire_rate_incorrect"): FIELD,
    ("train/calibration.py", "fire_rate_correct"): FIELD,
    ("train/calibration.py", "binding_group"): FIELD,
    ("train/rl_runs.py", "run_in"): BY_NAME + " (launched_run, rl.processes > 1)",
    ("tools/bench_generation.py", "bench_decoding"): BY_NAME + " (tools/bench.py's registry)",
    ("tools/bench_generation.py", "bench_bound"): BY_NAME + " (tools/bench.py's registry)",
    ("tools/bench_generation.py", "bench_profiler"): BY_NAME + " (tools/bench.py's registry)",
    ("tools/bench_generation.py", "bench_generation"): BY_NAME + " (tools/bench.py's registry)",
    ("tools/bench_generation.py", "bench_merge"): BY_NAME + " (tools/bench.py's registry)",
    ("tools/bench_generation.py", "bench_rollouts"): BY_NAME + " (tools/bench.py's registry)",
    ("tools/bench_signals.py", "bench_packed_sft"): BY_NAME + " (tools/bench.py's registry)",
    ("tools/bench_generation.py", "bench_prefix"): BY_NAME + " (tools/bench.py's registry)",
    ("tools/bench_signals.py", "bench_shaping"): BY_NAME + " (tools/bench.py's registry)",
    ("tools/bench_signals.py", "bench_probe"): BY_NAME + " (tools/bench.py's registry)",
    ("tools/bench_signals.py", "bench_audit"): BY_NAME + " (tools/bench.py's registry)",
    ("tools/bench_signals.py", "bench_probe_real"): BY_NAME + " (tools/bench.py's registry)",
    ("tools/bench.py", "bench_suite"): "dispatched by name from BENCHMARKS (\"bench:bench_suite\"), as `edit-suite bench suite`",
    ("tools/bench.py", "format_suite"): "dispatched by name from BENCHMARKS (\"bench:format_suite\"), as `edit-suite bench suite`",
}


def notebook_code(repo: Path, dest: Path) -> Path:
    """The notebooks' code cells as one Python file (IPython magics and shell lines blanked): the callers the
    library has besides itself."""
    lines = []
    for nb in sorted((repo / "notebooks").glob("*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            if cell["cell_type"] == "code":
                lines += ["" if ln.lstrip().startswith(("%", "!")) else ln
                          for ln in "".join(cell["source"]).splitlines()]
    dest.write_text("\n".join(lines) + "\n")
    return dest


def findings(repo: Path, tmp: Path) -> dict[tuple[str, str], str]:
    """(file relative to edit_lib/, name) -> vulture's message, for edit_lib/ with the notebooks as callers."""
    vulture = pytest.importorskip("vulture", reason="vulture is not installed (pip install -e '.[test]')")
    v = vulture.Vulture()
    v.scavenge([str(repo / "edit_lib"), str(notebook_code(repo, tmp / "notebook_cells.py"))])
    lib = repo / "edit_lib"
    return {(Path(i.filename).relative_to(lib).as_posix(), i.name): f"{i.message} (line {i.first_lineno})"
            for i in v.get_unused_code(min_confidence=MIN_CONFIDENCE) if Path(i.filename).is_relative_to(lib)}


def test_vulture_finds_no_dead_code(tmp_path):
    found = findings(REPO, tmp_path)
    new = sorted(f"edit_lib/{f}: {msg}" for (f, name), msg in found.items() if (f, name) not in ALLOWED)
    assert not new, ("dead code (delete it; if something uses it by name, add it to ALLOWED with the reason):\n"
                     + "\n".join(new))
    stale = sorted(f"{f}: {name}" for f, name in ALLOWED if (f, name) not in found)
    assert not stale, "ALLOWED entries vulture no longer reports (remove them):\n" + "\n".join(stale)


def test_a_new_unused_function_is_found(tmp_path):
    """On a copy of the tree with an uncalled function added, the check reports it by file and name."""
    repo = tmp_path / "repo"
    for f in (REPO / "edit_lib").rglob("*.py"):
        dest = repo / "edit_lib" / f.relative_to(REPO / "edit_lib")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(f.read_text())
    (repo / "notebooks").mkdir()
    for nb in (REPO / "notebooks").glob("*.ipynb"):
        (repo / "notebooks" / nb.name).write_text(nb.read_text())
    (repo / "edit_lib" / "metrics.py").write_text((repo / "edit_lib" / "metrics.py").read_text()
                                                  + "\n\ndef nobody_calls_me():\n    return 1\n")
    assert ("metrics.py", "nobody_calls_me") in findings(repo, tmp_path)
    assert ("metrics.py", "nobody_calls_me") not in findings(REPO, tmp_path)
