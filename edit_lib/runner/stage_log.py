"""A running stage's output as the runner shows and keeps it: ``runs/<profile>/logs/<stage>.log`` and the terminal.

The kernel's stdout and stderr arrive in chunks (papermill's ``stdout_file`` / ``stderr_file``). Plain lines pass
through whole. A line rewritten with carriage returns (a tqdm bar) is a sequence of states; a bar's state is shown
when it is the first of its bar, or when that bar (``bar_key``: its text before the first digit) was last shown at
least ``EVERY_SECONDS`` ago (judged when the next state or a newline ends it, or at once when a chunk ends with a
whole tqdm state, ``...]``). Its final state (the one a newline ends, or the last before the bar clears itself) is
always shown, unless the line shown last has its count already. A bar updating ten times a second for an hour
thus leaves about 360 lines, not 36,000. The log file and the terminal get the same lines (the terminal's behind
``TERMINAL_INDENT``); the file is flushed after each line, so ``tail -f`` follows it. All of this runs in the
runner's process: the kernel writes as always.
"""
from __future__ import annotations

import re
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

__all__ = ["EVERY_SECONDS", "TERMINAL_INDENT", "StageLog", "Throttle", "bar_key"]

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
