"""Watching a run: the stage output throttle (edit_lib/runner/stage_log.py) on synthetic streams, the kernel's
console bars (edit_lib/runner/stage_log.py), and `run()` writing runs/<profile>/logs/<stage>.log with the
terminal quiet or not."""
import io
import json
import subprocess
import sys
import textwrap

import pytest
from tqdm.std import tqdm

from edit_lib.runner.stage_log import TERMINAL_INDENT, StageLog, Throttle, bar_key


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def _throttle(every=10.0):
    lines, clock = [], Clock()
    return Throttle(lines.append, every=every, clock=clock), lines, clock


def _bar(i, n=100, desc="generate"):
    return f"\r{desc}: {100 * i // n:3d}%|#   | {i}/{n} [00:0{i % 10}<00:00, 9.9it/s]"


def test_bar_key_is_the_text_before_the_first_digit():
    assert bar_key("generate:  45%|####5 | 9/20 [00:01<00:02]") == "generate:"
    assert bar_key(" 12%|#  | 3/24") == ""


def test_a_bar_is_shown_at_most_every_n_seconds_plus_its_first_and_final_states():
    th, lines, clock = _throttle(every=10.0)
    for i in range(301):  # 30 s of a bar updating every 0.1 s, two states per chunk as ipykernel batches them
        clock.t = i * 0.1
        th.write(_bar(i, 300) + (_bar(i, 300) if i % 2 else ""))
    th.write("\n")
    assert [ln.split("|")[2].split(" ")[1] for ln in lines] == ["0/300", "100/300", "200/300", "300/300"]
    assert all("\r" not in ln for ln in lines)


def test_only_the_latest_state_of_a_chunk_counts():
    th, lines, _ = _throttle()
    th.write(_bar(0, 3) + _bar(1, 3) + _bar(2, 3))  # one flush of the kernel's stream holding three states
    assert lines == [_bar(2, 3)[1:]]


def test_the_final_state_is_shown_even_right_after_another_and_only_once():
    th, lines, clock = _throttle()
    th.write(_bar(0, 2))
    clock.t = 0.5
    th.write(_bar(1, 2) + _bar(2, 2))  # within 10 s: held
    assert lines == [_bar(0, 2)[1:]]
    th.write("\n")  # ends the line: its final state is shown
    assert lines == [_bar(0, 2)[1:], _bar(2, 2)[1:]]
    clock.t = 20.0
    th.write(_bar(0, 2))  # a new bar, due: shown as it arrives ...
    th.write("\n")  # ... and not again when the newline ends it
    assert lines[-1] == _bar(0, 2)[1:] and len(lines) == 3


def test_tqdm_closing_redraw_of_a_count_already_shown_is_not_a_second_line():
    th, lines, clock = _throttle()
    th.write(_bar(0, 12))
    clock.t = 21.0
    th.write("\rgenerate: 100%|#   | 12/12 [00:21<00:00,  1.83s/it]")  # due: shown as it arrives
    th.write("\rgenerate: 100%|#   | 12/12 [00:23<00:00,  1.92s/it]")  # close(): same count, new timings
    th.write("\n")
    assert lines == [_bar(0, 12)[1:], "generate: 100%|#   | 12/12 [00:21<00:00,  1.83s/it]"]


def test_a_bar_run_again_soon_shows_only_its_final_state_and_other_bars_keep_their_own_clock():
    th, lines, clock = _throttle()
    for run in range(3):  # three quick bars of the same name (01's generate bars)
        clock.t = run * 0.5
        for chunk in (_bar(0, 4), _bar(2, 4), _bar(4, 4), "\n"):
            th.write(chunk)
    assert lines == [_bar(0, 4)[1:], _bar(4, 4)[1:], _bar(4, 4)[1:], _bar(4, 4)[1:]]
    th.write(_bar(0, 4, "Loading weights"))  # another bar's first state is shown at once
    assert lines[-1] == _bar(0, 4, "Loading weights")[1:]


def test_plain_lines_pass_whole_and_unthrottled_even_when_split_across_chunks():
    th, lines, _ = _throttle()
    th.write("synth_sas: 12 questions\nsynth_bio: 4 ques")
    th.write("tions\n\nWARNING: pool empty\r\n")
    for i in range(50):  # same shape, same instant: every one is kept
        th.write(f"step {i}\n")
    assert lines[:4] == ["synth_sas: 12 questions", "synth_bio: 4 questions", "", "WARNING: pool empty"]
    assert lines[4:] == [f"step {i}" for i in range(50)]


def test_a_bar_that_clears_itself_leaves_its_last_state_and_close_flushes_an_open_line():
    th, lines, clock = _throttle()
    th.write(_bar(0, 3))
    clock.t = 1.0
    th.write(_bar(3, 3))  # held (within 10 s)
    th.write("\r" + " " * 40 + "\r")  # tqdm leave=False
    assert lines == [_bar(0, 3)[1:], _bar(3, 3)[1:]]
    th.write("no newline at the end")
    assert len(lines) == 2
    th.close()
    assert lines[-1] == "no newline at the end"


def test_a_real_tqdm_bar_of_1000_updates_becomes_two_lines():
    lines, clock = [], Clock()
    th = Throttle(lines.append, every=10.0, clock=clock)
    buf = io.StringIO()
    for _ in tqdm(range(1000), desc="probe", file=buf, mininterval=0, miniters=1, ascii=True):
        pass
    raw = buf.getvalue()
    assert raw.count("\r") > 1000  # what papermill hands over today, all at the same clock time here
    for i in range(0, len(raw), 97):  # arbitrary chunk boundaries
        th.write(raw[i:i + 97])
    th.close()
    assert len(lines) == 2 and lines[0].startswith("probe:   0%") and "1000/1000" in lines[1]


def test_stage_log_writes_the_file_and_the_terminal_the_same_lines(tmp_path):
    term = []
    log = StageLog(tmp_path / "logs" / "00_data.log", terminal=term.append, clock=Clock())
    log.note("[1/1] 00_data: running")
    log.stdout.write("hello\n")
    log.stderr.write(_bar(0, 2))
    log.stderr.write(_bar(1, 2) + _bar(2, 2))  # held (same instant), then shown by close
    log.close("notebook finished in 1.0s")
    text = (tmp_path / "logs" / "00_data.log").read_text().splitlines()
    assert text[0].startswith("# ") and text[0].endswith("[1/1] 00_data: running")
    assert text[1:3] == ["hello", _bar(0, 2)[1:]] and text[3] == _bar(2, 2)[1:]
    assert text[-1].endswith("notebook finished in 1.0s")
    assert term == [TERMINAL_INDENT + t for t in text[1:4]]
    quiet = StageLog(tmp_path / "q.log", terminal=None)
    quiet.stdout.write("only in the file\n")
    quiet.close()
    assert (tmp_path / "q.log").read_text() == "only in the file\n"


@pytest.mark.slow
def test_kernel_progress_turns_tqdm_auto_and_the_trainer_bar_into_console_bars(tmp_path):
    """In a Jupyter kernel with ipywidgets, tqdm.auto picks the widget bar; after `install()` the console bar,
    transformers' Trainer gets a console bar whose postfix carries the logged loss / reward / KL, and its
    weight-loading bars are not drawn."""
    (tmp_path / "ipywidgets").mkdir()  # a stand-in for ipywidgets: enough for tqdm.notebook's import
    (tmp_path / "ipywidgets" / "__init__.py").write_text("class FloatProgress: pass\nclass HBox: pass\n"
                                                         "class HTML: pass\n")
    probe = textwrap.dedent("""
        import sys, types, io
        import ipykernel.zmqshell  # what tqdm.autonotebook looks for: "a Jupyter kernel"
        if sys.argv[1] == "install":
            from edit_lib.runner.stage_log import install
            install()
        from tqdm.auto import tqdm
        print("widget" if any(c.__module__ == "tqdm.notebook" for c in tqdm.__mro__) else "console")
        if sys.argv[1] == "install":
            import transformers.trainer as t
            cb = t.DEFAULT_PROGRESS_CALLBACK()
            state = types.SimpleNamespace(is_world_process_zero=True, max_steps=4, global_step=0)
            err, sys.stderr = sys.stderr, io.StringIO()  # where the bar writes
            cb.on_train_begin(None, state, None)
            cb.on_log(None, state, None, logs={"loss": 0.25, "reward": 0.5, "kl": 0.0125, "grad_norm": 3.0})
            state.global_step = 1
            cb.on_step_end(None, state, None)
            cb.on_train_end(None, state, None)  # the final state
            bar, sys.stderr = sys.stderr.getvalue(), err
            print(type(cb).__name__, bar.split("\\r")[-1].strip())
            from transformers.utils.logging import tqdm as hf_tqdm
            for desc in ("Loading weights", "Loading checkpoint shards", "Fetching files"):
                err, sys.stderr = sys.stderr, io.StringIO()
                list(hf_tqdm(range(3), desc=desc))
                drawn, sys.stderr = sys.stderr.getvalue(), err
                print(desc, "drawn" if desc in drawn else "quiet")
            from datasets import Dataset
            err, sys.stderr = sys.stderr, io.StringIO()
            Dataset.from_dict({"x": [1, 2]}).map(lambda r: r, desc="Tokenizing train dataset")
            drawn, sys.stderr = sys.stderr.getvalue(), err
            print("datasets", "drawn" if "Tokenizing" in drawn else "quiet")
    """)
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}

    def out(mode):
        return subprocess.run([sys.executable, "-c", probe, mode], capture_output=True, text=True, env=env,
                              timeout=300, check=True).stdout.splitlines()

    assert out("plain") == ["widget"]  # the stand-in works: a widget bar without the runner
    mode, trainer, *loading = out("install")
    assert mode == "console"
    # transformers' weight-loading bars are not drawn; its other bars (a download's files) are
    assert loading == ["Loading weights quiet", "Loading checkpoint shards quiet", "Fetching files drawn",
                       "datasets quiet"]
    assert trainer.startswith("RunnerProgressCallback train:") and "1/4" in trainer
    assert "loss=0.25" in trainer and "reward=0.5" in trainer and "kl=0.0125" in trainer and "grad" not in trainer


@pytest.mark.notebook
@pytest.mark.slow
def test_run_writes_the_stage_log_and_quiet_prints_only_the_runner_lines(tmp_path):
    from edit_lib.runner.run import run

    loud: list[str] = []
    run("smoke", only=["00_data"], run_root=str(tmp_path), log=loud.append)
    log_file = tmp_path / "smoke" / "logs" / "00_data.log"
    text = log_file.read_text()
    assert "synth_sas: " in text and "records skipped" in text  # the notebook's own prints
    assert "\r" not in text and "TqdmWarning" not in text  # console bars in the kernel: no IProgress warning
    stage_lines = [ln for ln in loud if ln.startswith(TERMINAL_INDENT)]
    assert stage_lines and [ln[len(TERMINAL_INDENT):] for ln in stage_lines] == [
        ln for ln in text.splitlines() if not ln.startswith("# ")]
    nb = json.loads((tmp_path / "smoke" / "notebooks" / "00_data.ipynb").read_text())
    outputs = [o for c in nb["cells"] for o in c.get("outputs", [])]
    assert not any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs)

    quiet: list[str] = []
    run("smoke", only=["00_data"], run_root=str(tmp_path), log=quiet.append, force=True, quiet=True)
    assert [ln.split(": ")[1].split(" ")[0] for ln in quiet] == ["running", "done"]  # what it printed before
    assert all(ln.startswith("[1/1] 00_data: ") for ln in quiet)
    assert "synth_sas: " in log_file.read_text()  # the log is written either way


@pytest.mark.notebook
@pytest.mark.slow
def test_a_failing_stage_keeps_its_output_and_the_failure_in_its_log(tmp_path, monkeypatch):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    import edit_lib.runner.run as rn
    import edit_lib.runner.stage as pl

    nb = new_notebook(cells=[new_code_cell("profile = 'smoke'\noverrides = []\nrun_root = None",
                                           metadata={"tags": ["parameters"]}),
                             new_code_cell("print('before the error')"), new_code_cell("raise ValueError('boom')")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    (tmp_path / "nbs").mkdir()
    nbformat.write(nb, tmp_path / "nbs" / "00_data.ipynb")
    monkeypatch.setattr(pl, "NOTEBOOK_DIR", tmp_path / "nbs")
    with pytest.raises(rn.NotebookFailed) as e:
        rn.run("smoke", only=["00_data"], run_root=str(tmp_path / "runs"), log=lambda *_: None, quiet=True)
    log_file = tmp_path / "runs" / "smoke" / "logs" / "00_data.log"
    assert f"stage log: {log_file}" in str(e.value) and "boom" in str(e.value)
    lines = log_file.read_text().splitlines()
    assert "before the error" in lines
    notes = lines[lines.index("before the error") + 1:]  # the runner's notes after the notebook's output
    assert notes and all(ln.startswith("# ") for ln in notes)
    assert "FAILED: notebook 00_data failed at cell" in notes[0] and "(ValueError: boom)" in notes[0]


def _executed(path, ename: str, evalue: str):
    """An executed notebook whose second cell holds an error output (as papermill writes it)."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output
    cell = new_code_cell("ensure_base()", outputs=[new_output("error", ename=ename, evalue=evalue,
                                                                 traceback=["Traceback ...", "line 1", "line 2"])])
    nbformat.write(new_notebook(cells=[new_code_cell("x = 1"), cell]), path)
    return path


def test_a_deliberate_stop_is_one_line_and_another_error_keeps_its_cell_and_traceback(tmp_path):
    import edit_lib.runner.run as rn
    from edit_lib.model.warmup import WarmupGuardStop, stop_message
    assert WarmupGuardStop.__name__ in rn.STOPS  # the warm-up guard's stop is one the runner knows
    why = stop_message("model.warmup.guard: the warm-up Base at step 32 of 96: held-out QWK 0.000 is below 0.3")
    err = rn._failed("01_base_policy", _executed(tmp_path / "a.ipynb", "WarmupGuardStop", why),
                     tmp_path / "01.log", RuntimeError("PapermillExecutionError: long traceback"))
    assert isinstance(err, rn.StageStopped) and isinstance(err, rn.NotebookFailed)  # exit 1 like any failure
    assert str(err) == f"01_base_policy stopped: {why} (stage log: {tmp_path / '01.log'})"
    assert "\n" not in str(err) and "Traceback" not in str(err)
    other = rn._failed("01_base_policy", _executed(tmp_path / "b.ipynb", "ValueError", "boom"), tmp_path / "01.log",
                       RuntimeError("the traceback's end"))
    assert type(other) is rn.NotebookFailed
    assert str(other).startswith("notebook 01_base_policy failed at cell 1 (ValueError: boom)\n--- cell source ---")
    assert "the traceback's end" in str(other) and f"executed copy: {tmp_path / 'b.ipynb'}" in str(other)


def test_the_cli_prints_a_stop_as_one_line_and_exits_1(monkeypatch, capsys):
    import edit_lib.runner.dry_run as pf
    import edit_lib.runner.run as rn
    from edit_lib.cli import main
    monkeypatch.setattr(pf, "preflight", lambda *a, **k: (None, []))

    def stopped(*a, **k):
        raise rn.StageStopped("01_base_policy stopped: model.warmup.guard: flat (stage log: x.log)")
    monkeypatch.setattr(rn, "run", stopped)
    assert main(["run", "--profile", "smoke"]) == 1
    assert capsys.readouterr().err == "edit-suite run: 01_base_policy stopped: model.warmup.guard: flat (stage log: x.log)\n"
