"""Rival methods the paper compares EDIT with (Sec. 3, Baselines): InT-SFT (``int_sft``)."""
