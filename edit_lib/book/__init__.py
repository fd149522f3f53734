"""The Jupyter Book and the README's results section: build, generated pages, the run's scale beside the paper's,
the claims ledger and the chapter of a real-model run. Part of the runner layer (no stage key covers it)."""
