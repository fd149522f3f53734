"""A running stage's output as the runner shows and keeps it: ``runs/<profile>/logs/<stage>.log`` and the terminal,
and the kernel's progress bars as plain text it can show.

* ``StageLog`` (the runner's process): the kernel's stdout and stderr arrive in chunks; plain lines pass whole. A
  bar rewritten with carriage returns is a sequence of states, shown when first of its bar (``bar_key``) or when
  that bar was last shown ``EVERY_SECONDS`` ago, and always in its final state, so an hour-long bar leaves about
  360 lines, not 36,000. File and terminal get the same lines (the terminal's behind ``TERMINAL_INDENT``); the
  file is flushed after each line, so ``tail -f`` follows it.
* ``install`` (the kernel, before any cell: ``KERNEL_ARGUMENT``): ``tqdm.auto`` picks tqdm's console bar, not the
  ipywidgets one (no widget output in the executed notebooks or the book); transformers' ``Trainer`` shows its
  steps as a console bar ``train`` with the last logged ``SHOWN_LOGS``; transformers' weight-loading bars
  (``QUIET_BARS``) and the datasets library's bars are not drawn. In JupyterLab (no runner) nothing changes.
Display only: nothing here changes a computed value.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import re
import sys
import time
import types
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable


__all__ = ["EVERY_SECONDS", "TERMINAL_INDENT", "StageLog", "Throttle", "bar_key", "AfterImport", "KERNEL_ARGUMENT",
           "QUIET_BARS", "SHOWN_LOGS", "install"]

EVERY_SECONDS = 10.0  # a bar is shown at most this often (plus its final state): a log line per bar per 10 s
TERMINAL_INDENT = "  | "  # a stage's lines under the runner's "[i/n] stage: running", apart from its WARNING lines
_PIECES = re.compile(r"(\r\n|\n|\r)")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # tqdm's cursor moves for nested bars


def bar_key(state: str) -> str:
    """Which bar a rewritten line belongs to: its text before the first digit (``"generate:"`` for
    ``"generate:  45%|####5     | 9/20 [...]"``); an unnamed bar's key is ``""``."""
    return re.match(r"\D*", state).group(0).strip()


def _same_count(state: str, shown: str | None) -> bool:
    """Whether two states of a bar differ at most in their ``[elapsed<remaining, rate]`` part."""
    return shown is not None and state.rsplit("[", 1)[0] == shown.rsplit("[", 1)[0]


class Throttle:
    """One output stream of a stage, written as chunks (``write``), emitted as lines (``emit``), progress bars
    throttled as the module docstring says. ``flush`` does nothing (papermill calls it after every chunk, which
    may end inside a line); ``close`` emits what is left. ``clock`` and ``last`` (bar key -> time last shown,
    shared between a stage's streams) are injectable for tests."""

    def __init__(self, emit: Callable[[str], None], every: float = EVERY_SECONDS,
                 clock: Callable[[], float] = time.monotonic, last: dict[str, float] | None = None):
        self._emit, self.every, self._clock = emit, every, clock
        self._last = {} if last is None else last
        self._cur = ""  # text since the last \r or \n
        self._rewritten = False  # the current line was rewritten with \r: a progress bar, throttled
        self._shown: str | None = None  # the current line's state last emitted
        self._pending: str | None = None  # its latest complete state, not emitted yet

    def write(self, text: str) -> int:
        for piece in _PIECES.split(_ANSI.sub("", text)):
            if piece in ("\n", "\r\n"):
                self._end_line()
            elif piece == "\r":
                self._overwritten(self._cur.rstrip())
                self._cur, self._rewritten = "", True
            else:
                self._cur += piece
        if self._rewritten:
            if self._cur.rstrip().endswith("]"):  # a whole tqdm state ("... 9.9it/s]") ends the chunk
                self._overwritten(self._cur.rstrip())
            if self._pending and self._clock() - self._last.get(bar_key(self._pending), float("-inf")) >= self.every:
                self._show(self._pending)  # the chunk's latest state, its bar due: shown now
        return len(text)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        if self._cur.strip() or self._pending:
            self._end_line()

    def _show(self, state: str) -> None:
        self._emit(state)
        self._last[bar_key(state)] = self._clock()
        self._shown, self._pending = state, None

    def _overwritten(self, state: str) -> None:
        """A complete state of the current line: held as the one to show next, unless already shown."""
        if not state.strip():  # tqdm's leave=False clears its bar: the last state was its final one
            if self._pending:
                self._show(self._pending)
        elif state != self._shown:
            self._pending = state

    def _end_line(self) -> None:
        final = self._cur.rstrip()
        if final.strip() and not self._rewritten:
            self._emit(final)  # a plain line: never throttled, and no bar's clock
        elif final.strip():
            if not _same_count(final, self._shown):  # tqdm's close redraws the last count, new timings only
                self._show(final)
        elif self._pending:
            self._show(self._pending)
        elif not self._rewritten and self._shown is None:
            self._emit("")  # a blank line the notebook printed
        self._cur, self._rewritten, self._shown, self._pending = "", False, None, None


class StageLog:
    """A stage's log file (truncated when the stage runs again) with its ``stdout`` / ``stderr`` streams for
    papermill; each emitted line also goes to ``terminal`` (indented) unless it is None (``--quiet``).
    ``note`` writes the runner's own text to the file only, each line behind ``#``; ``close(footer)`` ends both
    streams, then notes ``footer``."""

    def __init__(self, path: Path, terminal: Callable[[str], None] | None = None, every: float = EVERY_SECONDS,
                 clock: Callable[[], float] = time.monotonic):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "w", encoding="utf-8", errors="replace")
        self._terminal = terminal
        last: dict[str, float] = {}
        self.stdout = Throttle(self._line, every, clock, last)
        self.stderr = Throttle(self._line, every, clock, last)

    def _line(self, text: str) -> None:
        self._file.write(text + "\n")
        self._file.flush()
        if self._terminal is not None:
            self._terminal(TERMINAL_INDENT + text if text else "")

    def note(self, text: str) -> None:
        if not self._file.closed:
            stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
            first, *rest = text.splitlines() or [""]
            self._file.write("".join([f"# {stamp} {first}\n", *(f"# {line}\n" for line in rest)]))
            self._file.flush()

    def close(self, footer: str | None = None) -> None:
        if self._file.closed:
            return
        self.stdout.close()
        self.stderr.close()
        if footer:
            self.note(footer)
        self._file.close()


# ---------------------------------------------------------------- the kernel's side: console bars
KERNEL_ARGUMENT = ("--IPKernelApp.exec_lines="
                   "__import__('edit_lib.runner.stage_log', fromlist=['install']).install()")
SHOWN_LOGS = ("loss", "reward", "kl")  # of a Trainer's logs (GRPO logs all three; SFT the loss)
QUIET_BARS = ("Loading weights", "Loading checkpoint shards")  # transformers' bars (desc) a kernel does not draw


class AfterImport(importlib.abc.MetaPathFinder):
    """Calls ``then(module)`` right after module ``name`` is first imported (a one-time post-import hook); if
    ``then`` fails, the import still succeeds and a warning ends with ``failed`` (what is not done instead)."""

    def __init__(self, name: str, then, failed: str = "keeps its own progress"):
        self.name, self.then, self.failed = name, then, failed

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # the other finders locate the module; the hook is spent
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            load, then, failed = spec.loader.exec_module, self.then, self.failed

            def exec_module(module):
                load(module)
                try:
                    then(module)
                except Exception as e:  # noqa: BLE001 - a display preference must never break an import
                    warnings.warn(f"edit_lib.runner: {fullname} {failed} ({e})")
            spec.loader.exec_module = exec_module
        return spec


def _console_trainer(trainer_module) -> None:
    """Make ``transformers.trainer``'s default progress callback a console bar with the logs in its postfix."""
    from tqdm.auto import tqdm
    from transformers.trainer_callback import ProgressCallback

    class RunnerProgressCallback(ProgressCallback):
        """The Trainer's steps as one console bar; each log's ``SHOWN_LOGS`` go to its postfix, not a line."""

        def on_train_begin(self, args, state, control, **kwargs):  # ProgressCallback's, with a name
            if state.is_world_process_zero:
                self.training_bar = tqdm(total=state.max_steps, desc="train", dynamic_ncols=True)
            self.current_step = 0

        def on_log(self, args, state, control, logs=None, **kwargs):
            if state.is_world_process_zero and self.training_bar is not None and logs:
                shown = {k: f"{logs[k]:.4g}" for k in SHOWN_LOGS if isinstance(logs.get(k), (int, float))}
                if shown:
                    self.training_bar.set_postfix(shown, refresh=False)

    trainer_module.DEFAULT_PROGRESS_CALLBACK = RunnerProgressCallback


def _quiet_loading(logging_module) -> None:
    """transformers' bars named in ``QUIET_BARS`` become its own no-op bar (``EmptyTqdm``); the others are kept."""
    def hook(factory, args, kwargs):
        quiet = str(kwargs.get("desc", "")).startswith(QUIET_BARS)
        return (logging_module.EmptyTqdm if quiet else factory)(*args, **kwargs)
    logging_module.set_tqdm_hook(hook)


def when_imported(name: str, then, failed: str = "keeps its own progress") -> None:
    """``then(module)`` now if module ``name`` is loaded, else once right after its first import (``AfterImport``,
    installed once)."""
    if name in sys.modules:
        then(sys.modules[name])
    elif not any(isinstance(f, AfterImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, AfterImport(name, then, failed))


def install() -> None:
    """Console progress bars for the rest of this process (the runner's kernels; see the module docstring)."""
    import tqdm
    import tqdm.std

    if "tqdm.autonotebook" not in sys.modules:  # tqdm.auto imports its choice from here
        console = types.ModuleType("tqdm.autonotebook", "tqdm's console bar (edit_lib.runner.stage_log)")
        console.tqdm, console.trange, console.__all__ = tqdm.std.tqdm, tqdm.std.trange, ["tqdm", "trange"]
        sys.modules["tqdm.autonotebook"] = console
        tqdm.autonotebook = console
    when_imported("transformers.trainer", _console_trainer)
    when_imported("datasets.utils.tqdm", lambda m: m.disable_progress_bars(), "keeps its bars")
    when_imported("transformers.utils.logging", _quiet_loading, "keeps its loading bars")
