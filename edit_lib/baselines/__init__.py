"""Rival methods the paper compares EDIT with (Sec. 3, Baselines): InT's intervention SFT pool
(``intervention_sft``) and its Phase-1 runs (``intervention_runs``), and DGPO's token weights (``dgpo``)."""
