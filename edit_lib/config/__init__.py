"""Profiles: the typed configuration of one run (``schema``: the ``Profile``, whose sections with help text and
their own checks live by part of the run in ``data_model``, ``signals``, ``revision_sft``, ``rl`` and ``schema``
(evaluation, ``ops``)) and how a YAML file becomes one (``loading``). Everything a caller needs is importable from
``edit_lib.config``."""
from edit_lib.config.checks import ConfigError, Decoding, help_field, to_dict
from edit_lib.config.data_model import (REVISER_ROLES, STEP_RULES, WARMUP_ROLES, DataConfig, DatasetSpec, ModelConfig, RolloutConfig,
                                        StepsConfig, WarmupConfig)
from edit_lib.config.loading import (CONFIG_DIR, apply_override, check_dataset_keys, describe, from_dict, lineage,
                                     load_profile, profile_path)
from edit_lib.config.schema import EvalConfig, OpsConfig, Profile, RSRConfig, RunConfig, SignificanceConfig
from edit_lib.config.revision_sft import (CHECKLIST_FAILURE_POLICIES, PAPER_LORA_TARGETS, IntConfig, LoraConfig,
                                          RevisionConfig, SFTConfig)
from edit_lib.config.rl import RLConfig, ShapingConfig, ShapingValues
from edit_lib.config.signals import AnalysisConfig, AuditConfig, BeliefCheckConfig, ProbeConfig, SelectionConfig

__all__ = ["OpsConfig", "CONFIG_DIR", "apply_override", "check_dataset_keys", "describe", "from_dict", "lineage", "load_profile",
           "profile_path", "CHECKLIST_FAILURE_POLICIES", "PAPER_LORA_TARGETS", "REVISER_ROLES", "STEP_RULES", "WARMUP_ROLES",
           "AnalysisConfig", "AuditConfig", "BeliefCheckConfig", "ConfigError", "DataConfig", "DatasetSpec", "Decoding",
           "EvalConfig", "IntConfig", "LoraConfig", "ModelConfig", "ProbeConfig", "Profile", "RevisionConfig",
           "RLConfig", "RolloutConfig", "RSRConfig", "RunConfig", "SelectionConfig", "SFTConfig", "ShapingConfig",
           "ShapingValues", "SignificanceConfig", "StepsConfig", "WarmupConfig", "help_field", "to_dict"]
