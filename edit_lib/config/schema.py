"""The profile schema: one typed section per part of a run, each field with help text and each section checking
its own values in ``__post_init__`` (as TRL's config classes do); ``loading`` reads a YAML file into it.

The sections live by part of the run (``data_model``, ``signals``, ``revision_sft``, ``rl``); this module holds
those of evaluation (greedy decoding, App. B; the rule-faithfulness interventions, App. I, Tables 7 and 14;
question-level significance, App. G), the ``ops`` section, the run section and the whole ``Profile``, and
``edit-suite profile --keys`` documents every field. Paper values come from App. B (implementation details) and
Table 9 (RL hyper-parameters); ``configs/paper.yaml`` sets every one of them. ``ops`` says how a run is watched,
saved, where its logs go and where it runs, never what it computes: no stage declares it, so no stage key hashes it
(``runner.keys``), and every stage may read it (``ProfileView`` always lets it through).
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from edit_lib.config.checks import (ConfigError, Decoding, _at_least, _budget, _fraction, _one_of, decoding,
                                    help_field as _f, to_dict)
from edit_lib.config.data_model import DataConfig, ModelConfig, RolloutConfig, StepsConfig
from edit_lib.config.revision_sft import IntConfig, RevisionConfig, SFTConfig
from edit_lib.config.rl import RLConfig
from edit_lib.config.signals import AnalysisConfig, AuditConfig, BeliefCheckConfig, ProbeConfig, SelectionConfig
from edit_lib.systems import MAIN


@dataclass
class EvalConfig:
    decoding: Decoding = decoding("How a marking is decoded at evaluation (App. B 'Decoding and evaluation': "
                                  "greedy, one completion per response).", greedy=True, max_new_tokens=1024)
    batch_size: int = _f(16, "Prompts per batch at evaluation.")
    invalid_as: str = _f("wrong", "A completion whose mark cannot be parsed: 'wrong' (scored as the valid mark "
                                  "farthest from gold in every metric, counted in n_invalid) or 'zero' (scored as "
                                  "mark 0, as SAS-Bench's scorer does; for comparison only).")
    forced_read: bool = _f(False, "Suite's choice for small models (cpu-real), never the paper's: a completion whose "
                                  "final line cannot be parsed also gets the forced read (the probe's scaffold after "
                                  "its steps, argmax of p_T; edit_lib/evaluation/predictions.py), reported beside the "
                                  "parse-only metrics under its own status, never mixed with real parses.")

    def __post_init__(self):
        _at_least(self, 1, "batch_size")
        _budget(self.decoding, "decoding")
        _one_of(self, "invalid_as", ("wrong", "zero"))


@dataclass
class RSRConfig:
    datasets: list = _f([], "Datasets the rule-faithfulness interventions run on (App. I: Private-Biology); [] means "
                            "every dataset of the run with PTS or LoR questions.")
    splits: list = _f(["id_test", "ood_test"], "Splits whose responses are regraded under each edit.")
    responses_per_edit: int = _f(0, "Responses regraded per edit and dataset (a seeded sample, the same for every "
                                    "system); 0 means all of them.")
    systems: list = _f(help="Systems graded under the edits (Table 7, Table 14); default: the main tables' "
                            "systems of edit_lib/systems.py.", factory=lambda: list(MAIN))

    def __post_init__(self):
        bad = [x for x in self.splits if x not in ("train", "id_test", "ood_test")]
        if bad or not self.splits:
            raise ConfigError(f"splits must be a non-empty list of train / id_test / ood_test, got {self.splits!r}")
        _at_least(self, 0, "responses_per_edit")
        names = isinstance(self.systems, list) and all(isinstance(x, str) and x for x in self.systems)
        if not (names and self.systems):
            raise ConfigError(f"systems must be a non-empty list of system names, got {self.systems!r}")
        # the names themselves: edit_lib/systems.py's or run.baselines' (runner.dry_run.preflight, which loads the baselines)


@dataclass
class SignificanceConfig:
    n_boot: int = _f(10000, "Cluster-bootstrap resamples over questions (App. G).")
    ci: float = _f(0.95, "Confidence level.")
    min_questions: int = _f(10, "Suite's choice: a scope with fewer held-out questions shows its interval and 'too few "
                                "questions' instead of a p-value (a cluster bootstrap over so few clusters understates "
                                "the uncertainty); the claims ledger calls such a comparison inconclusive.")

    def __post_init__(self):
        _at_least(self, 1, "n_boot")
        _at_least(self, 2, "min_questions")
        _fraction(self, "ci", open_low=True, open_high=True)


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
