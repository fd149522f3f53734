"""The ``ops`` section: how a run is watched, saved and where its logs go, never what it computes.

No stage declares ``ops``, so no stage key hashes it (``runner.keys``): turning on TensorBoard or resumable
training states re-runs nothing. Every stage may read it (``ProfileView`` always lets ``ops`` through).
"""
from __future__ import annotations

from dataclasses import dataclass

from edit_lib.config.checks import ConfigError, _at_least, help_field as _f

REPORT_TO = ("none", "tensorboard")


@dataclass
class OpsConfig:
    report_to: str = _f("none", "Where the trainers (SFT, GRPO / EDIT-RL / DGPO) also log each step: 'none' (the "
                                "results JSON and the stage log only) or 'tensorboard' (event files under "
                                "runs/<profile>/tensorboard/<stage>/<run>; needs tensorboardX, in requirements).")
    resume_every: int = _f(0, "Save a resumable training state (optimiser, scheduler, RNG, adapter) every this many "
                              "optimiser steps of an RL or SFT run, keeping only the latest; a run killed mid-way "
                              "resumes from it. 0 = off (a killed run starts again at step 0). About 1.4 GB per "
                              "state at the paper's 174.6M trainable parameters (AdamW's two moments).")

    def __post_init__(self):
        if self.report_to not in REPORT_TO:
            raise ConfigError(f"report_to must be one of {REPORT_TO}, got {self.report_to!r}")
        _at_least(self, 0, "resume_every")
