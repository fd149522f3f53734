"""The Jupyter Book and the README's headline: build, generated pages, the run's scale beside the paper's, the
claims ledger, the power goals, the study chapter, the chapter of a real-model run and the dated records they end
with. A layer above the runner and the tools (no stage key covers it; edit_lib/ARCHITECTURE.md)."""
