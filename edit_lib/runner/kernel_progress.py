"""Progress bars in a kernel the runner started: plain text, so the runner can show and log them (``stage_log``).

The runner starts each notebook's kernel with ``install()`` (IPython's ``exec_lines``, ``KERNEL_ARGUMENT``), before
any cell runs. ``tqdm.auto`` (the library's bars, transformers', datasets', huggingface_hub's) then picks tqdm's
console bar, not the ipywidgets bar it picks in a Jupyter kernel: no widget output (nor tqdm's IProgress warning)
in the executed notebooks or the book. transformers' ``Trainer`` shows its steps as a console bar ``train`` whose
postfix carries the last logged loss / reward / KL (``SHOWN_LOGS``), not the HTML table it draws in a notebook.
transformers' weight-loading bars (``QUIET_BARS``: one per policy load, 87 in a demo's terminal) and the datasets
library's bars (TRL's three dataset passes before each SFT run, six lines a run) are not drawn; huggingface_hub's
download bars still are.
In JupyterLab (no runner) nothing changes: with ipywidgets installed (the ``lab`` extra) bars are widgets.
Display only: nothing here changes a computed value.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import types
import warnings

__all__ = ["AfterImport", "KERNEL_ARGUMENT", "QUIET_BARS", "SHOWN_LOGS", "install"]

KERNEL_ARGUMENT = ("--IPKernelApp.exec_lines="
                   "__import__('edit_lib.runner.kernel_progress', fromlist=['install']).install()")
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


def install() -> None:
    """Console progress bars for the rest of this process (the runner's kernels; see the module docstring)."""
    import tqdm
    import tqdm.std

    if "tqdm.autonotebook" not in sys.modules:  # tqdm.auto imports its choice from here
        console = types.ModuleType("tqdm.autonotebook", "tqdm's console bar (edit_lib.runner.kernel_progress)")
        console.tqdm, console.trange, console.__all__ = tqdm.std.tqdm, tqdm.std.trange, ["tqdm", "trange"]
        sys.modules["tqdm.autonotebook"] = console
        tqdm.autonotebook = console
    if "transformers.trainer" in sys.modules:
        _console_trainer(sys.modules["transformers.trainer"])
    elif not any(isinstance(f, AfterImport) and f.name == "transformers.trainer" for f in sys.meta_path):
        sys.meta_path.insert(0, AfterImport("transformers.trainer", _console_trainer))
    if "datasets.utils.tqdm" in sys.modules:
        sys.modules["datasets.utils.tqdm"].disable_progress_bars()
    elif not any(isinstance(f, AfterImport) and f.name == "datasets.utils.tqdm" for f in sys.meta_path):
        sys.meta_path.insert(0, AfterImport("datasets.utils.tqdm", lambda m: m.disable_progress_bars(),
                                            "keeps its bars"))
    if "transformers.utils.logging" in sys.modules:
        _quiet_loading(sys.modules["transformers.utils.logging"])
    elif not any(isinstance(f, AfterImport) and f.name == "transformers.utils.logging" for f in sys.meta_path):
        sys.meta_path.insert(0, AfterImport("transformers.utils.logging", _quiet_loading, "keeps its loading bars"))
