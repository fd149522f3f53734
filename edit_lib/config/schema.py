"""The profile schema: one typed section per part of a run, each field with help text and each section checking
its own values in ``__post_init__`` (as TRL's config classes do); ``loading`` reads a YAML file into it.

The sections live by part of the run (``data_model``, ``signals``, ``revision_sft``, ``rl``, ``evaluation``);
this module holds the ``ops`` section, the run section and the whole ``Profile``, and ``edit-suite profile --keys``
documents every field. Paper values come from App. B (implementation details) and Table 9 (RL hyper-parameters);
``configs/paper.yaml`` sets every one of them. ``ops`` says how a run is watched, saved, where its logs go and
where it runs, never what it computes: no stage declares it, so no stage key hashes it (``runner.keys``), and
every stage may read it (``ProfileView`` always lets it through).
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from edit_lib.config.checks import _at_least, ConfigError, help_field as _f, to_dict
from edit_lib.config.data_model import DataConfig, ModelConfig, RolloutConfig, StepsConfig
from edit_lib.config.evaluation import EvalConfig, RSRConfig, SignificanceConfig
from edit_lib.config.revision_sft import IntConfig, RevisionConfig, SFTConfig
from edit_lib.config.rl import RLConfig
from edit_lib.config.signals import AnalysisConfig, AuditConfig, BeliefCheckConfig, ProbeConfig, SelectionConfig


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


@dataclass
class RunConfig:
    seed: int = _f(0, "Global seed; every stage derives its own RNG streams from it.")
    description: str = _f("", "One line saying what this profile is for.")
    skip_systems: list = _f([], "Systems this profile does not train or grade (names of edit_lib/systems.py, e.g. "
                                "'base_dgpo'); each is listed as not run in 05-07's results, never silently "
                                "missing. [] = every system (the paper).")
    baselines: list = _f([], "Python files that each add a baseline system (edit_lib/ARCHITECTURE.md, 'Add a "
                             "baseline'): paths, absolute or relative to the repository root. 05 or 06 trains it, 07 "
                             "grades it into Tables 1-2, 09 compares it with Base. [] = the paper's systems only.")

    def __post_init__(self):
        if not all(isinstance(x, str) and x for x in self.skip_systems):
            raise ConfigError(f"skip_systems must be a list of system names, got {self.skip_systems!r}")
        if not all(isinstance(x, str) and x.endswith(".py") for x in self.baselines):
            raise ConfigError(f"baselines must be a list of paths of Python files, got {self.baselines!r}")


@dataclass
class Profile:
    """One run's whole configuration (one YAML file in configs/)."""

    name: str = _f("", "Profile name (the YAML file's stem); runs go to runs/<name>/.")
    run: RunConfig = field(default_factory=RunConfig, metadata={"help": "Seed and description."})
    data: DataConfig = field(default_factory=DataConfig, metadata={"help": "Datasets (App. A)."})
    model: ModelConfig = field(default_factory=ModelConfig, metadata={"help": "The policy model (App. B)."})
    steps: StepsConfig = field(default_factory=StepsConfig, metadata={"help": "Step segmentation (Sec. 2.1)."})
    rollouts: RolloutConfig = field(default_factory=RolloutConfig, metadata={"help": "Rollout sampling."})
    eval: EvalConfig = field(default_factory=EvalConfig, metadata={"help": "Greedy evaluation (App. B)."})
    analysis: AnalysisConfig = field(default_factory=AnalysisConfig,
                                     metadata={"help": "Step labels and synthetic-world analyses, named by profile."})
    probe: ProbeConfig = field(default_factory=ProbeConfig, metadata={"help": "Posterior belief probe (Eq. 1-2)."})
    audit: AuditConfig = field(default_factory=AuditConfig, metadata={"help": "Grounding audit (Eq. 3-4)."})
    selection: SelectionConfig = field(default_factory=SelectionConfig, metadata={"help": "Alg. 1."})
    revision: RevisionConfig = field(default_factory=RevisionConfig, metadata={"help": "Atomic revision (Sec. 2.2)."})
    belief_check: BeliefCheckConfig = field(default_factory=BeliefCheckConfig,
                                            metadata={"help": "Monte-Carlo check of the probe's belief (04)."})
    sft: SFTConfig = field(default_factory=SFTConfig, metadata={"help": "LoRA SFT (App. B)."})
    int_sft: IntConfig = field(default_factory=IntConfig, metadata={"help": "InT-SFT baseline (Sec. 3)."})
    rl: RLConfig = field(default_factory=RLConfig, metadata={"help": "GRPO / EDIT-RL (Table 9)."})
    rsr: RSRConfig = field(default_factory=RSRConfig, metadata={"help": "Rule-faithfulness interventions (App. I)."})
    significance: SignificanceConfig = field(default_factory=SignificanceConfig, metadata={"help": "Question-level significance (App. G)."})
    ops: OpsConfig = field(default_factory=OpsConfig, metadata={
        "help": "How a run is watched and saved (logs, TensorBoard, resumable states); in no stage key."})

    def section(self, dotted: str) -> Any:
        """The value at a dotted path (``'rl.shaping'``), as plain data."""
        node: Any = self
        for part in dotted.split("."):
            node = getattr(node, part)
        return to_dict(node) if dataclasses.is_dataclass(node) else node
