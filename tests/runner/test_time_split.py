"""`edit-suite run --time-split` (edit_lib/runner/time_split.py): the clock's exclusive parts, the timers' counts
in a process of their own (outermost forwards only, generation calls once however nested, backward and optimiser
steps, an engine worker's forwards), outputs unchanged by the timers, and the runner's timing file whose
parts and "other" sum to the wall time. Counts and sums are checked, never how long anything took."""
import importlib
import json
import subprocess
import sys
import textwrap

import pytest

from edit_lib.runner import time_split as ts

# Run as a script (an engine worker gets its task from it): the same work before and after `install`, the
# counts the timers made, and the outputs of both, which must be equal.
SCRIPT = textwrap.dedent('''
    import json, os, sys

    PROMPTS = ["Question : what is the mass", "Rubric : award 1 mark", "Step 1 : the student states the unit"]


    def nested():
        import torch

        class Inner(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.a, self.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)

            def forward(self, x):
                return self.b(torch.relu(self.a(x)))

        class Outer(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.inner, self.head = Inner(), torch.nn.Linear(4, 1)

            def forward(self, x):
                return self.head(self.inner(x) + self.inner(x))
        torch.manual_seed(0)
        return Outer()


    def worker_task(n):
        import torch
        m = nested()
        return [m(torch.ones(1, 4)).item() for _ in range(n)]


    def work():
        """Forwards of a nested model, generation three ways, a training loop: (outputs, top-level calls)."""
        from types import SimpleNamespace
        import torch
        import edit_lib.model.parallel as par  # bound `generate` by name before `install`
        from transformers import GenerationConfig
        from edit_lib.model.generate import SamplingConfig, policy_generate
        from edit_lib.model.lean_decode import lean_generate
        from edit_lib.model.toy import toy_model, toy_tokenizer
        calls = dict(nested=0, nested_all=0, lm=0, embed=0)
        m = nested()
        for sub in m.modules():
            sub.register_forward_hook(lambda *_: calls.__setitem__("nested_all", calls["nested_all"] + 1))
        m.register_forward_hook(lambda *_: calls.__setitem__("nested", calls["nested"] + 1))
        out = [m(torch.full((1, 4), float(i))).item() for i in range(3)]
        lm, tok = toy_model(), toy_tokenizer()
        lm.register_forward_hook(lambda *_: calls.__setitem__("lm", calls["lm"] + 1))
        # once per forward of the LM and once per lean one-token step, which calls the LM's modules one by one
        lm.model.embed_tokens.register_forward_hook(lambda *_: calls.__setitem__("embed", calls["embed"] + 1))
        cfg = SamplingConfig(n=2, max_new_tokens=6, seed=3, batch_size=4)  # 6 rows: two HF generate calls each
        rows = [par.generate(lm, tok, PROMPTS, cfg, progress=False),
                policy_generate(SimpleNamespace(model=lm, tokenizer=tok), PROMPTS, cfg, progress=False)]
        ids = tok(PROMPTS[:1], return_tensors="pt")["input_ids"]
        direct = lm.generate(input_ids=ids, max_new_tokens=4, do_sample=False, pad_token_id=0).tolist()
        greedy = GenerationConfig(max_new_tokens=4, do_sample=False, pad_token_id=0)
        lean = lean_generate(lm, ids, torch.ones_like(ids), greedy).tolist()  # as GRPO's lean rollouts call it
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(4):
            loss = m(torch.ones(2, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return dict(out=out, rows=[r.to_dict("records") for r in rows], direct=direct, lean=lean,
                    params=[p.tolist() for p in m.parameters()]), calls


    if __name__ == "__main__":
        from edit_lib import engine
        timing, report = sys.argv[1], sys.argv[2]
        before, _ = work()
        os.environ["EDIT_SUITE_TIME_SPLIT"] = timing
        from edit_lib.runner import time_split
        time_split.install()
        after, calls = work()
        engine.connect()  # one kept engine worker, two calls: its timers from engine.run_hooks
        (worker,) = engine.actors("generate", 1)
        pooled = [r for _, r in sorted(engine.over_actors([worker], "generate", [(worker_task, 3), (worker_task, 4)]))]
        engine.release([worker])
        engine.stop()
        time_split._write(__import__("pathlib").Path(timing), time_split._CLOCK.totals())  # as after a cell
        json.dump(dict(same=before == after, calls=calls, pooled=pooled == [worker_task(3), worker_task(4)]),
                  open(report, "w"))
''')


@pytest.fixture(scope="module")
def timed(tmp_path_factory):
    """The script's report and the run folder whose timing file (and worker file) it wrote."""
    tmp = tmp_path_factory.mktemp("time_split")
    (tmp / "script.py").write_text(SCRIPT)
    run_dir = tmp / "run"
    f = ts.timing_file(run_dir, "01_base_policy")
    subprocess.run([sys.executable, str(tmp / "script.py"), str(f), str(tmp / "report.json")], check=True,
                   cwd=tmp, timeout=600, env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    return dict(report=json.loads((tmp / "report.json").read_text()), raw=json.loads(f.read_text()),
                run_dir=run_dir, file=f)


@pytest.mark.slow  # one process of its own with torch, a toy LM and a spawned worker: ~20 s
def test_the_timers_change_no_output(timed):
    assert timed["report"]["same"]  # forward values, generated rows, HF generate's tokens, trained weights
    assert timed["report"]["pooled"]  # a timed pool worker's outputs equal the same work done here


@pytest.mark.slow
def test_only_the_outermost_forward_is_counted(timed):
    calls, counted = timed["report"]["calls"], timed["raw"]["calls"]
    assert calls["nested_all"] == 8 * (3 + 4)  # Outer, head, Inner twice, a and b twice: 8 module calls each
    # 3 + 4 calls of the nested model (the training loop's included) and the LM's own calls while it generated
    assert calls["nested"] == 7 and calls["lm"] >= 5  # at least one per HF generate call
    # the lean loop's prefill is an LM forward; its 3 one-token steps (4 new tokens) count one forward each
    lean_steps = calls["embed"] - calls["lm"]
    assert lean_steps == 3
    assert counted["forward"] == calls["nested"] + calls["lm"] + lean_steps


@pytest.mark.slow
def test_each_generation_call_counts_once_however_nested(timed):
    # edit_lib's generate (through a module that imported it before the timers), policy_generate -> generate,
    # each making two HF generate calls, one HF generate call of its own and one call of the lean loop
    assert timed["raw"]["calls"]["generate"] == 4


@pytest.mark.slow
def test_backward_and_optimiser_steps_are_counted(timed):
    counted = timed["raw"]["calls"]
    assert counted["backward"] == 4 and counted["optimizer_step"] == 4


@pytest.mark.slow
def test_finish_adds_the_wall_time_and_the_pool_workers(timed):
    raw = timed["raw"]
    parts = sum(raw[f"{p}_seconds"] for p in ts.PARTS)
    assert 0 < parts <= raw["process_seconds"]
    wall = round(raw["process_seconds"] + 2.5, 1)  # the runner's seconds include the kernel's start
    out = ts.finish(timed["run_dir"], "01_base_policy", "k1", wall)
    assert out == json.loads(timed["file"].read_text()) and out["wall_seconds"] == wall
    assert out["other_seconds"] + parts == pytest.approx(wall, abs=2e-3)
    assert out["workers"] == 1 and out["worker_calls"]["forward"] == 3 + 4  # the worker's outer calls only
    assert 0 < out["worker_forward_seconds"] <= out["worker_process_seconds"]
    assert not (timed["file"].parent / "01_base_policy.workers").exists()
    results = {"01_base_policy": dict(key="k1", runner_seconds=wall)}
    assert ts.breakdown(timed["run_dir"], results) == {"01_base_policy": out}
    # another run of the stage (another key, or the same key at another time) is not described by it
    assert ts.breakdown(timed["run_dir"], {"01_base_policy": dict(key="k2", runner_seconds=wall)}) == {}
    assert ts.breakdown(timed["run_dir"], {"01_base_policy": dict(key="k1", runner_seconds=wall + 1)}) == {}


def test_start_drops_the_last_timing_and_sets_the_kernel_env_only_when_on(tmp_path):
    f = ts.timing_file(tmp_path, "02_probing")
    f.parent.mkdir(parents=True)
    f.write_text("{}")
    assert ts.start(tmp_path, "02_probing", on=False) == {} and not f.exists()
    assert ts.start(tmp_path, "02_probing", on=True) == {ts.TIMING_ENV: str(f.resolve())}
    assert ts.finish(tmp_path, "02_probing", "k", 1.0) is None  # the kernel wrote nothing


class _Ticks:
    """A stand-in for the ``time`` module whose clock reads the values a test sets."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now


def test_the_clock_gives_time_to_the_innermost_part(monkeypatch):
    t = _Ticks()
    monkeypatch.setattr(ts, "time", t)
    c = ts.Clock()
    t.now = 1.0
    c.enter("generation", "generate")      # 1-2 generation
    t.now = 2.0
    c.enter("forward", "forward")          # 2-5 forward, a submodule inside it deepens it
    c.enter("forward", "forward")
    t.now = 4.0
    c.leave("forward")
    t.now = 5.0
    c.leave("forward")
    c.enter("generation", "generate")      # generate inside policy_generate: not counted again
    t.now = 6.0
    c.leave("generation")
    t.now = 7.0
    c.leave("generation")                  # 5-7 generation
    c.enter("training", "optimizer_step")  # 7-9 training; a backward inside it deepens it, not counted
    t.now = 8.0
    c.enter("training", "backward")
    c.leave("training")
    t.now = 9.0
    c.enter("forward", "forward")          # 9-10 forward
    t.now = 10.0
    c.leave("forward")
    c.leave("training")
    t.now = 12.0                           # 10-12 nothing open: other
    out = c.totals()
    assert out["calls"] == dict(forward=2, generate=1, backward=0, optimizer_step=1)
    assert (out["forward_seconds"], out["generation_seconds"], out["training_seconds"]) == (4.0, 3.0, 2.0)
    assert out["process_seconds"] == 12.0 and not c.open


def test_a_region_left_early_closes_the_regions_inside_it(monkeypatch):
    t = _Ticks()
    monkeypatch.setattr(ts, "time", t)
    c = ts.Clock()
    c.enter("training", "optimizer_step")
    t.now = 1.0
    c.enter("forward", "forward")
    t.now = 3.0
    c.leave("training")  # the forward's end was skipped: it closes at the training region's end
    c.leave("forward")   # not open any more: ignored
    out = c.totals()
    assert (out["training_seconds"], out["forward_seconds"]) == (1.0, 2.0) and not c.open


def test_other_threads_are_not_timed(monkeypatch):
    import threading

    c = ts.Clock()
    worker = threading.Thread(target=lambda: (c.enter("forward", "forward"), c.leave("forward")))
    worker.start()
    worker.join()
    assert c.totals()["calls"]["forward"] == 0 and not c.open


def test_a_module_imported_later_is_wrapped_on_import(tmp_path, monkeypatch):
    from edit_lib.runner.stage_log import when_imported

    (tmp_path / "late_module_for_time_split.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    when_imported("late_module_for_time_split", seen.append)
    assert seen == []
    module = importlib.import_module("late_module_for_time_split")
    assert seen == [module]
    monkeypatch.delitem(sys.modules, "late_module_for_time_split")


LATE = textwrap.dedent('''
    import sys
    from edit_lib.runner import time_split
    assert "edit_lib.model.lean_decode" not in sys.modules
    time_split._set_timers()  # as a kernel's start does, before any notebook import
    from edit_lib.model import lean_decode
    print(getattr(lean_decode.lean_generate, time_split._WRAPPED, False),
          getattr(lean_decode.LeanStep.__call__, time_split._WRAPPED, False))
''')


def test_lean_decoding_imported_after_the_timers_has_its_loop_and_its_step_timed(tmp_path):
    """A kernel installs the timers before its notebook imports lean decoding: both of the module's wrappers
    (the loop as generation, the one-token step as a forward) are set on that import, not only the first."""
    out = subprocess.run([sys.executable, "-c", LATE], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "True"]


@pytest.mark.notebook
@pytest.mark.slow
def test_the_runner_writes_a_stage_timing_that_sums_to_its_wall_time(tmp_path):
    from edit_lib.runner.run import run

    run("smoke", only=["00_data"], run_root=str(tmp_path), log=lambda *_: None, quiet=True, time_split=True)
    res = json.loads((tmp_path / "smoke" / "results" / "00_data.json").read_text())
    t = json.loads(ts.timing_file(tmp_path / "smoke", "00_data").read_text())
    assert t["key"] == res["key"] and t["wall_seconds"] == res["runner_seconds"]
    assert 0 < t["process_seconds"] <= t["wall_seconds"]  # the kernel's clock, started before the first cell
    assert t["other_seconds"] + sum(t[f"{p}_seconds"] for p in ts.PARTS) == pytest.approx(t["wall_seconds"], abs=2e-3)
    run("smoke", only=["00_data"], run_root=str(tmp_path), log=lambda *_: None, quiet=True, force=True)
    assert not ts.timing_file(tmp_path / "smoke", "00_data").exists()  # run again untimed: no stale timing
