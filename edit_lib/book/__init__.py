"""The Jupyter Book and the README's headline: build, generated pages, the run's scale beside the paper's, the
claims ledger, the power goals, the study chapter, the chapter of a real-model run and the dated records they end
with. Part of the runner layer (no stage key covers it)."""
