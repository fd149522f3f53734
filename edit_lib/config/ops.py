"""The ``ops`` section: how a run is watched, saved, where its logs go and where it runs, never what it computes.

No stage declares ``ops``, so no stage key hashes it (``runner.keys``): turning on TensorBoard or resumable
training states re-runs nothing. Every stage may read it (``ProfileView`` always lets ``ops`` through).
"""
from __future__ import annotations

import re
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

    cluster: str = _f("local", "Where the engine's units run (edit_lib/engine.py: generation workers with "
                               "model.generation_workers other than 1, RL runs with rl.workers other than 1): "
                               "'local' = a Ray that `edit-suite run` starts on this machine with every core and "
                               "GPU it has (a notebook opened by hand starts its own); 'auto' = the Ray cluster "
                               "this machine belongs to; 'host:port' = the Ray cluster at that address.")

    def __post_init__(self):
        if not isinstance(self.cluster, str) or not re.fullmatch(r"local|auto|(ray://)?[\w.\-]+:\d+", self.cluster):
            raise ConfigError(f"cluster must be 'local', 'auto' or a Ray address 'host:port', got {self.cluster!r}")
        if self.report_to not in REPORT_TO:
            raise ConfigError(f"report_to must be one of {REPORT_TO}, got {self.report_to!r}")
        _at_least(self, 0, "resume_every")
