"""Profiles: the typed configuration of one run (``schema``: sections with help text and their own checks) and how
a YAML file becomes one (``loading``). Everything a caller needs is importable from ``edit_lib.config``."""
from edit_lib.config.loading import (CONFIG_DIR, apply_override, check_dataset_keys, describe, from_dict,
                                     load_profile, profile_path)
from edit_lib.config.ops import OpsConfig
from edit_lib.config.schema import (CHECKLIST_FAILURE_POLICIES, PAPER_LORA_TARGETS, STEP_RULES, AnalysisConfig, AuditConfig,
                                    BeliefCheckConfig, ConfigError, DataConfig, DatasetSpec, EvalConfig, IntConfig,
                                    LoraConfig, ModelConfig, ProbeConfig, Profile, RevisionConfig, RLConfig,
                                    RolloutConfig, RSRConfig, RunConfig, SelectionConfig, SFTConfig, ShapingConfig,
                                    ShapingValues, SignificanceConfig, StepsConfig, WarmupConfig, help_field, to_dict)

__all__ = ["OpsConfig", "CONFIG_DIR", "apply_override", "check_dataset_keys", "describe", "from_dict", "load_profile",
           "profile_path", "CHECKLIST_FAILURE_POLICIES", "PAPER_LORA_TARGETS", "STEP_RULES", "AnalysisConfig", "AuditConfig",
           "BeliefCheckConfig", "ConfigError", "DataConfig", "DatasetSpec", "EvalConfig", "IntConfig", "LoraConfig",
           "ModelConfig", "ProbeConfig", "Profile", "RevisionConfig", "RLConfig", "RolloutConfig", "RSRConfig",
           "RunConfig", "SelectionConfig", "SFTConfig", "ShapingConfig", "ShapingValues", "SignificanceConfig",
           "StepsConfig", "WarmupConfig", "help_field", "to_dict"]
