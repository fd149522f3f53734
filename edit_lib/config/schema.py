"""The profile schema: one typed section per part of a run, each field with help text and each section checking
its own values in ``__post_init__`` (as TRL's config classes do); ``loading`` reads a YAML file into it.

Longer than 300 lines because every profile section and its help text lives here, so that one file (and
``edit-suite profile --keys``) documents a whole profile. Paper values come from App. B (implementation
details) and Table 9 (RL hyper-parameters); ``configs/paper.yaml`` sets every one of them.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from edit_lib.config.checks import (ConfigError, _at_least, _fraction, _one_of, _positive,  # noqa: F401
                                    help_field, to_dict)
from edit_lib.config.ops import OpsConfig

_f = help_field  # short name for the many fields below


STEP_RULES = ("auto", "markers", "lines", "paragraphs")  # segment.py's rules (Sec. 2.1)


@dataclass
class RunConfig:
    seed: int = _f(0, "Global seed; every stage derives its own RNG streams from it.")
    description: str = _f("", "One line saying what this profile is for.")
    skip_systems: list = _f([], "Systems this profile does not train or grade (names of edit_lib/systems.py, e.g. "
                                "'base_dgpo'); each is listed as not run in 05-07's results, never silently "
                                "missing. [] = every system (the paper).")

    def __post_init__(self):
        if not all(isinstance(x, str) and x for x in self.skip_systems):
            raise ConfigError(f"skip_systems must be a list of system names, got {self.skip_systems!r}")


@dataclass
class DatasetSpec:
    name: str = _f("", "Dataset name used in artifact paths and tables (e.g. 'synth_sas').")
    source: str = _f("synthetic", "One of: synthetic, asap, sasbench, jsonl.")
    options: dict = _f({}, "Source-specific options, validated by the source's own dataclass "
                           "(e.g. edit_lib.data.synthetic.WorldConfig).")


@dataclass
class DataConfig:
    datasets: list = _f([], "Datasets of this run: a list of DatasetSpec mappings (name, source, options).")
    on_error: str = _f("raise", "Malformed records: 'raise' stops at the first; 'skip' drops and reports each.")
    max_skipped_fraction: float = _f(0.05, "With on_error=skip, `edit-suite run` fails when a dataset drops more "
                                           "than this share of its records (raise it deliberately to go on).")

    def __post_init__(self):
        _one_of(self, "on_error", ("raise", "skip"))
        _fraction(self, "max_skipped_fraction")


WARMUP_ROLES = ("grading", "checklist", "rewrite", "intervention", "continuation")


@dataclass
class WarmupConfig:
    """A short format warm-up SFT that becomes the profile's Base (suite's choice for models too small to write the
    final line zero-shot, the cpu-real profile; the paper's Base grades zero-shot, App. B): LoRA SFT on training
    responses with a templated judgement ending in the gold mark, merged into the weights (edit_lib/warmup.py)."""
    steps: int = _f(0, "Optimiser steps of the warm-up SFT; 0 = no warm-up (the paper).")
    responses_per_question: int = _f(16, "Training responses per question in the warm-up set (a seeded sample).")
    batch_size: int = _f(4, "Warm-up batch (examples per optimiser step, all of one question: their shared prompt "
                            "prefix is laid out once, edit_lib/train/packed_sft.py).")
    learning_rate: float = _f(2e-4, "Warm-up learning rate (App. B's SFT rate).")
    lora_r: int = _f(16, "Warm-up LoRA rank (merged into the weights afterwards).")
    max_length: int = _f(512, "Token cap of prompt + judgement (+ EOS): longer pairs are left out and counted.")
    balanced: bool = _f(True, "Draw the same number of training answers for every gold mark of a question (a small "
                              "mark's answers repeat, counted); false = a plain seeded sample.")
    judgement: str = _f("template", "template: fixed steps ending in the gold mark; key_elements: where the scheme "
                                    "lists key elements and the lexical matcher agrees with the gold band, one "
                                    "line per element found (edit_lib/data/element_match.py).")
    curve_every: int = _f(0, "Optimiser steps between points of the held-out QWK curve (0 = no curve).")
    curve_answers: int = _f(24, "Held-out training answers per question for the curve (never warm-up pairs).")
    lora_layers: int = _f(0, "LoRA on the last N decoder layers only (0 = every layer): the backward pass stops "
                             "at the lowest adapted layer, so a step costs less.")
    roles: list = _f(["grading"], "The roles the warm-up teaches: grading (responses_per_question answers per "
                                  "question) and the Phase-1 roles checklist, rewrite, intervention, "
                                  "continuation (the chain after a revised step) (role_responses_per_question "
                                  "each, from answers whose matched key elements reach the gold band, "
                                  "edit_lib/train/warmup_roles.py).")
    role_responses_per_question: int = _f(32, "Training answers per question for each Phase-1 role (checklist, "
                                              "rewrite, intervention, continuation alike; grading has "
                                              "responses_per_question).")
    role_batch_size: int = _f(4, "Warm-up batch of a Phase-1 role (one question and role per batch): their prompts "
                                 "and completions are 3-7 times a grading pair's tokens.")

    def __post_init__(self):
        _at_least(self, 0, "steps", "curve_every", "lora_layers")
        _at_least(self, 1, "responses_per_question", "batch_size", "lora_r", "max_length", "curve_answers",
                  "role_responses_per_question", "role_batch_size")
        _positive(self, "learning_rate")
        bad = [r for r in self.roles if r not in WARMUP_ROLES]
        if bad or not self.roles or len(set(self.roles)) != len(self.roles):
            raise ConfigError(f"model.warmup.roles: distinct roles of {list(WARMUP_ROLES)}, got {self.roles!r}")
        if self.judgement not in ("template", "key_elements"):
            raise ConfigError(f"model.warmup.judgement: 'template' or 'key_elements', got {self.judgement!r}")


@dataclass
class ModelConfig:
    """Which causal LM is the policy and how it is loaded (paper: Qwen/Qwen3-8B in bfloat16 on cuda, App. B)."""
    name_or_path: str = _f("embedded", "Policy: 'embedded' (the shipped tiny grader), 'micro' (build a micro "
                                       "grader from scratch, seconds), 'smollm2-135m-instruct' (the packaged GGUF "
                                       "model, `make real-model`), or any HF causal LM name/path (Qwen/Qwen3-8B).")
    dtype: str = _f("float32", "float32 | bfloat16 | float16 | auto (the checkpoint's own dtype).")
    device: str = _f("cpu", "cpu | cuda | cuda:N | auto (cuda when available, else cpu).")
    attn_implementation: str = _f("eager", "Attention kernel (eager | sdpa | flash_attention_2); '' leaves "
                                           "transformers' default.")
    torch_threads: int = _f(2, "torch.set_num_threads on CPU (two cores here: oversubscription is 10-50x slower).")
    trust_remote_code: bool = _f(False, "Allow custom modelling code from the hub.")
    local_files_only: bool = _f(False, "Never touch the network (tests, offline runs; set for local graders).")
    generation_backend: str = _f("hf", "Rollout and evaluation engine: 'hf' (transformers generate, everywhere) or "
                                       "'vllm' (GPU, vLLM installed: rollouts, evaluation and GRPO's co-located "
                                       "generation; App. B runs RL with the rollout engine co-located).")
    vllm_gpu_memory_utilization: float = _f(0.5, "Suite's choice: share of GPU memory vLLM may hold "
                                                 "(generation_backend 'vllm' only).")
    prefix_cache: bool = _f(False, "HF generation: encode each batch's common prompt prefix once and share its "
                                   "key/value cache (rows batched in token order, so one question's grading prompts "
                                   "share a batch); the same tokens up to floating-point differences (`edit-suite "
                                   "bench prefix` measures the saving). Off: each batch encoded whole.")
    hub_commit: str = _f("", "A hub model's commit (40 hex digits, or a tag / branch) that every load pins "
                             "(`revision=` of from_pretrained), so two runs a month apart use the same weights; it "
                             "joins the weights fingerprint of every stage key. '' = the hub's current main (stage "
                             "keys as without this value). Ignored for named Bases and local folders.")
    warmup: WarmupConfig = field(default_factory=WarmupConfig, metadata={
        "help": "Format warm-up SFT that becomes Base (cpu-real only; off in the paper profile)."})

    def __post_init__(self):
        if not self.name_or_path:
            raise ConfigError("name_or_path must name a model")
        _one_of(self, "dtype", ("float32", "bfloat16", "float16", "auto"))
        if not re.fullmatch(r"cpu|auto|cuda(:\d+)?", self.device):
            raise ConfigError(f"device must be cpu, cuda, cuda:N or auto, got {self.device!r}")
        _one_of(self, "generation_backend", ("hf", "vllm"))
        _at_least(self, 0, "torch_threads")
        _fraction(self, "vllm_gpu_memory_utilization", open_low=True)
        if not isinstance(self.hub_commit, str) or (self.hub_commit and not re.fullmatch(r"[\w.\-/]+", self.hub_commit)):
            raise ConfigError(f"hub_commit must be a commit hash, tag or branch name, got {self.hub_commit!r}")


@dataclass
class StepsConfig:
    rule: str = _f("auto", "How a completion is cut into reasoning steps s_1..s_T (Sec. 2.1): auto | markers | lines "
                           "| paragraphs; each rule is defined in edit_lib/segment.py.")
    warn_single_step_share: float = _f(0.2, "Warn (notebook, results JSON, CLI) when more than this share of "
                                            "rollouts has T <= 1 step: the probe then has one delta-eps.")

    def __post_init__(self):
        _one_of(self, "rule", STEP_RULES)
        _fraction(self, "warn_single_step_share")


# App. B: "applied to all attention and MLP projection matrices (q, k, v, o, gate, up, down)"
PAPER_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass
class LoraConfig:
    """The shared LoRA recipe of App. B (SFT, and as a fresh adapter for RL: Table 9); `models.attach_lora`."""
    r: int = _f(64, "LoRA rank (App. B: r=64).")
    alpha: int = _f(128, "LoRA alpha (App. B: 128).")
    dropout: float = _f(0.05, "LoRA dropout.")
    target_modules: list[str] = _f(list(PAPER_LORA_TARGETS),
                                   "Adapted projections (App. B: all attention and MLP projections).")
    bias: str = _f("none", "peft bias mode: none | all | lora_only.")

    def __post_init__(self):
        _at_least(self, 1, "r")
        _positive(self, "alpha")
        _fraction(self, "dropout", open_high=True)
        _one_of(self, "bias", ("none", "all", "lora_only"))
        if not self.target_modules:
            raise ConfigError("target_modules must name at least one projection")


@dataclass
class RolloutConfig:
    n_per_response: int = _f(20, "Sampled rollouts per training response (App. B compute budget: 20).")
    temperature: float = _f(1.0, "Sampling temperature for rollouts.")
    top_p: float = _f(1.0, "Nucleus sampling.")
    max_new_tokens: int = _f(1024, "Completion budget in tokens (Table 9: 1,024).")
    batch_size: int = _f(16, "Prompts per generation batch.")
    responses_per_dataset: int = _f(0, "The Phase-1 sample (App. B: 'the same pool of 20 sampled rollouts per training "
                                       "response'): 01 samples rollouts only for a seeded sample of this many training "
                                       "responses per dataset, and Phase 1 (02-05) works on every incorrect rollout of "
                                       "them; 0 = every training response (the paper). The suite's choice for CPU "
                                       "budgets.")
    responses_by_dataset: dict[str, int] = _f({}, "Per-dataset Phase-1 sample sizes overriding "
                                                  "`responses_per_dataset` (keys are dataset names; 0 = every "
                                                  "training response). Suite's choice: the study profile's larger "
                                                  "SAS-like sample for Table 12's power.")

    def __post_init__(self):
        _at_least(self, 1, "n_per_response", "max_new_tokens", "batch_size")
        _at_least(self, 0, "responses_per_dataset")
        bad = {k: v for k, v in self.responses_by_dataset.items() if not isinstance(v, int) or v < 0}
        if bad:
            raise ConfigError(f"responses_by_dataset values must be integers >= 0, got {bad}")
        _positive(self, "temperature")
        _fraction(self, "top_p", open_low=True)

    def responses_for(self, dataset: str) -> int:
        """The Phase-1 sample size of one dataset: its ``responses_by_dataset`` entry or ``responses_per_dataset``."""
        return self.responses_by_dataset.get(dataset, self.responses_per_dataset)


@dataclass
class EvalConfig:
    greedy: bool = _f(True, "Greedy decoding, one completion per response (App. B 'Decoding and evaluation').")
    max_new_tokens: int = _f(1024, "Completion budget at evaluation.")
    batch_size: int = _f(16, "Prompts per batch at evaluation.")
    invalid_as: str = _f("wrong", "A completion whose mark cannot be parsed: 'wrong' (scored as the valid mark "
                                  "farthest from gold in every metric, counted in n_invalid) or 'zero' (scored as "
                                  "mark 0, as SAS-Bench's scorer does; for comparison only).")
    forced_read: bool = _f(False, "Suite's choice for small models (cpu-real), never the paper's: a completion whose "
                                  "final line cannot be parsed also gets the forced read (the probe's scaffold after "
                                  "its steps, argmax of p_T; edit_lib/evaluation/forced_read.py), reported beside the "
                                  "parse-only metrics under its own status, never mixed with real parses.")

    def __post_init__(self):
        _at_least(self, 1, "max_new_tokens", "batch_size")
        _one_of(self, "invalid_as", ("wrong", "zero"))


@dataclass
class AnalysisConfig:
    """Analyses whose code a profile value names (``edit_lib.providers``; the runner registers them). Each value is
    its own stage input: changing one re-runs only the stages that use it."""
    step_annotator: str = _f("none", "Step-role labels (grounding / synthesis) of the audit validation (App. E, "
                                     "Table 11; 03) and of the locality check's role rule (App. J; 04, 05): 'none' "
                                     "(Table 11 and the role rule left out), a registered name ('synthetic': the "
                                     "synthetic world's step grammar) or the path of a JSONL file of {\"step\": text, "
                                     "\"label\": \"grounding\"|\"synthesis\"} rows (edit_lib/signals/step_labels.py).")
    behaviour: str = _f("none", "01's behaviour analysis of rollouts against ground truth: 'none' or a registered "
                                "name ('synthetic': needs the synthetic world's per-point coverage).")
    error_analysis: str = _f("none", "App. H's error analysis of 07 (evidence vs synthesis errors): 'none' or a "
                                     "registered name ('synthetic': needs the synthetic world's per-point coverage).")

    def __post_init__(self):
        for name in ("step_annotator", "behaviour", "error_analysis"):
            if not getattr(self, name):
                raise ConfigError(f"{name} must be 'none', a registered name or (step_annotator) a labels file")


@dataclass
class ProbeConfig:
    temperature: float = _f(0.7, "Temperature the posterior belief probe is read at (App. B: 0.7).")
    scaffold: str = _f("Final mark: ", "Answer scaffold appended at each step boundary (Eq. 1).")
    terminator: str = _f("/", "Token that ends a mark after the scaffold ('7/12'); used only by the 'sequence' "
                              "read, so '1' is not read as '12'.")
    read: str = _f("next_token", "How p_k(m) is read (Eq. 1). 'next_token': one softmax over the next-token logits "
                                 "of the valid marks, exactly Eq. 1, used wherever every mark 0..M_q is one token; "
                                 "questions whose marks span several tokens fall back to the exact multi-token "
                                 "continuation. 'sequence': always score digits + terminator.")
    batch_size: int = _f(8, "Rollouts per packed forward pass.")
    max_rollouts: int = _f(0, "Cap on probed rollouts (0 = all). Every incorrect rollout of 01 is probed whatever the "
                              "cap (Phase 1 repairs each one, Sec. 2.2); correct rollouts fill the rest.")
    dtype: str = _f("model", "Precision of the probe's forward passes: 'model' (the policy's own dtype, App. B) or "
                             "'float32' (a bfloat16 policy upcast for the read and restored exactly; "
                             "signals/precision.py). `edit-suite bench precision` measures the difference.")

    def __post_init__(self):
        _positive(self, "temperature")
        _one_of(self, "read", ("next_token", "sequence"))
        _one_of(self, "dtype", ("model", "float32"))
        _at_least(self, 1, "batch_size")
        _at_least(self, 0, "max_rollouts")
        if not self.scaffold or not self.terminator:
            raise ConfigError("scaffold and terminator must be non-empty (Eq. 1)")


@dataclass
class AuditConfig:
    mask_token: str = _f("[MASK]", "Placeholder replacing the masked input section (Eq. 3).")
    nll_reduction: str = _f("sum", "Step NLL: 'sum' over the step's tokens or 'mean' per token.")
    residual_method: str = _f("exact", "How mu_p(u) of Eq. 4 is estimated per dataset: 'exact' (the mean G^p at "
                                       "each observed u = k/T, the kernel smoother where fewer than "
                                       "residual_min_count steps share a u), 'kernel' (Nadaraya-Watson smoother "
                                       "everywhere) or 'bins' (equal-width bin means; the old estimate).")
    residual_bins: int = _f(10, "Bins over relative position u = k/T for mu_p(u) ('bins').")
    residual_min_count: int = _f(5, "mu_p(u) (Eq. 4) is the dataset's mean G^p at each observed u = k/T; a u value "
                                    "with fewer steps than this uses the kernel smoother instead.")
    residual_bandwidth: float = _f(0.1, "Gaussian kernel bandwidth in u for mu_p(u) ('kernel').")
    batch_size: int = _f(8, "Rollouts per packed forward pass.")
    max_rollouts: int = _f(0, "Cap on audited rollouts (0 = all). Every incorrect rollout of 01 is audited whatever "
                              "the cap (Phase 1 repairs each one, Sec. 2.2); correct rollouts fill the rest.")

    def __post_init__(self):
        _one_of(self, "nll_reduction", ("sum", "mean"))
        _one_of(self, "residual_method", ("exact", "kernel", "bins"))
        _at_least(self, 1, "residual_bins", "residual_min_count", "batch_size")
        _positive(self, "residual_bandwidth")
        _at_least(self, 0, "max_rollouts")


@dataclass
class SelectionConfig:
    shortlist_k: int = _f(3, "Alg. 1 shortlist size k (top-k most negative delta-eps). The suite's choice: the "
                             "paper gives no value.")
    budget_n: int = _f(2, "Alg. 1 candidate budget n. The suite's choice: the paper gives no value.")
    tie_margin: float = _f(0.05, "Alg. 1 near-tie margin tau (marks). The suite's choice: the paper gives no value.")
    percentile: float = _f(25.0, "Alg. 1 dataset-wide percentile p25 for weak grounding.")
    random_seed: int = _f(0, "Seed of the position-matched random rival (App. F); the suite's choice.")
    max_rollouts: int = _f(0, "Cap on the incorrect rollouts that 04 repairs under every rule (0 = every incorrect "
                              "rollout that was both probed in 02 and audited in 03); a seeded sample, the suite's "
                              "choice for the CPU budget.")

    def __post_init__(self):
        _at_least(self, 1, "shortlist_k", "budget_n")
        _at_least(self, 0, "tie_margin", "max_rollouts")
        if not 0 < self.percentile < 100:
            raise ConfigError(f"percentile must be in (0, 100), got {self.percentile!r}")


CHECKLIST_FAILURE_POLICIES = ("keep", "drop_lines", "block")


@dataclass
class RevisionConfig:
    n_continuations: int = _f(4, "Continuations sampled per revision for the outcome filter (App. F: N=4).")
    max_span: int = _f(3, "A rewrite replaces the target by 1..max_span sub-steps (App. J, Figure 6: span 1|2|3).")
    checklist_temperature: float = _f(0.0, "Decoding of the rubric checklist (Sec. 2.2): 0 = greedy, one checklist "
                                           "per response shared by every rule. The paper does not say; the suite's "
                                           "choice, fixed before any result.")
    rewrite_temperature: float = _f(0.0, "Decoding of the atomic rewrite (App. J): 0 = greedy, one rewrite per "
                                         "selected step, so selection rules differ only in the step they pick. The "
                                         "suite's choice, fixed before any result.")
    continuation_temperature: float = _f(1.0, "Sampling temperature of the N continuations after a revised prefix "
                                              "(App. F); the rollouts' temperature (App. B / Table 9: 1.0).")
    max_new_tokens: int = _f(256, "Token budget of an atomic rewrite, and of a checklist unless "
                                  "`checklist_max_new_tokens` is set (the suite's choice).")
    checklist_max_new_tokens: int = _f(0, "Token budget of a rubric checklist (Sec. 2.2); 0 = `max_new_tokens`. A "
                                          "checklist lists every marking point with its evidence, so a long "
                                          "free-text rubric (SAS-Bench: up to 26 marks) may need more than a "
                                          "rewrite; checklists cut at the budget are counted in 04.")
    free_rewrite_max_new_tokens: int = _f(0, "Token budget of Table 6's 'w/o atomic' rewrite, which rewrites the "
                                             "target and every step after it; 0 = the larger of the rollouts' "
                                             "budget (`rollouts.max_new_tokens`) and `max_new_tokens`, so a "
                                             "whole-suffix rewrite is not cut where the rollout it repairs was "
                                             "not. A rewrite cut at its budget is counted as `rewrite_truncated`.")
    continuation_max_new_tokens: int = _f(0, "Token budget of a continuation after a revised prefix; 0 = the rollouts' "
                                             "budget (`rollouts.max_new_tokens`), so a continuation may be as long as "
                                             "the rollout it repairs. Truncated continuations are counted in 04.")
    checklist_failure: str = _f("keep", "What a rubric checklist that fails verification does (checklist.py: a point "
                                        "not verbatim, evidence not in the answer, ...). The paper does not verify "
                                        "the checklist; Sec. 2.2 uses it as context for the reviser ('a checklist to "
                                        "CONSIDER', Figure 6), so the default 'keep' gives the reviser the text as "
                                        "written; 'drop_lines' gives only its lines that verify; 'block' writes no "
                                        "rewrite for that response (the suite's former behaviour). 04 shows Table 12 "
                                        "under each on `sft.ablation_dataset`.")
    compare_checklist_policies: bool = _f(True, "04 repairs `sft.ablation_dataset`'s selections under every "
                                                "`checklist_failure` policy (Table 12 by checklist policy); false = "
                                                "under the chosen policy only, which saves the other policies' "
                                                "rewrites and continuations (a budget cut, listed in 04).")
    batch_size: int = _f(32, "Prompts per generation call.")

    def __post_init__(self):
        _one_of(self, "checklist_failure", CHECKLIST_FAILURE_POLICIES)
        _at_least(self, 0, "continuation_max_new_tokens", "free_rewrite_max_new_tokens", "checklist_max_new_tokens",
                  "checklist_temperature", "rewrite_temperature")
        _at_least(self, 1, "n_continuations", "max_span", "max_new_tokens", "batch_size")
        _positive(self, "continuation_temperature")

    def continuation_budget(self, rollouts: "RolloutConfig") -> int:
        """Tokens a continuation may generate: its own budget, or the rollouts' (App. B: 1,024)."""
        return self.continuation_max_new_tokens or rollouts.max_new_tokens

    def free_rewrite_budget(self, rollouts: "RolloutConfig") -> int:
        """Tokens a "w/o atomic" rewrite (Table 6) may generate: its own budget, or the rollouts' (App. B: 1,024)
        and at least the atomic rewrite's."""
        return self.free_rewrite_max_new_tokens or max(rollouts.max_new_tokens, self.max_new_tokens)

    @property
    def checklist_budget(self) -> int:
        """Tokens a rubric checklist (Sec. 2.2) may generate."""
        return self.checklist_max_new_tokens or self.max_new_tokens

    def rewrite_budget(self, atomic: bool) -> int:
        """Tokens a rewrite may generate: ``max_new_tokens`` for the atomic rewriter (App. J), the resolved free
        budget for Table 6's "w/o atomic" one."""
        if atomic:
            return self.max_new_tokens
        if self.free_rewrite_max_new_tokens < 1:
            raise ValueError("revision.free_rewrite_max_new_tokens is 0 (the rollouts' budget): pass "
                             "P.revision.resolved(P.rollouts)")
        return self.free_rewrite_max_new_tokens

    def resolved(self, rollouts: "RolloutConfig") -> "RevisionConfig":
        """This section with the continuation and free-rewrite budgets made concrete (``continuation_budget``,
        ``free_rewrite_budget``): what Phase 1's generation functions take."""
        return dataclasses.replace(self, continuation_max_new_tokens=self.continuation_budget(rollouts),
                                   free_rewrite_max_new_tokens=self.free_rewrite_budget(rollouts))


@dataclass
class BeliefCheckConfig:
    samples: int = _f(8, "Beyond the paper (is the probe's belief a real belief?): continuations M sampled at every "
                         "boundary k of an incorrect rollout; their final marks give the empirical p_k.")
    max_rollouts: int = _f(0, "Incorrect rollouts checked against Monte-Carlo continuations (0 = none; a seeded "
                              "sample of those 04 repairs).")
    temperature: float = _f(1.0, "Sampling temperature of those continuations (the outcome filter's, App. F).")

    def __post_init__(self):
        _at_least(self, 1, "samples")
        _at_least(self, 0, "max_rollouts")
        _positive(self, "temperature")


@dataclass
class IntConfig:
    """InT-SFT choices (Yang et al. 2026; Sec. 3 Baselines (4), App. B); fixed before any result exists."""

    rule: str = _f("auto", "How the rollout is cut into sub-steps (edit_lib/segment.py rules); 'paragraphs' is "
                           "InT's blank-line split.")
    n_proposals: int = _f(4, "Interventions sampled per incorrect rollout; the first usable one is kept (InT's "
                             "public script: K = 4). The self-audit rule of Table 6 reads the same proposals.")
    temperature: float = _f(0.7, "Sampling temperature of the proposals (InT's public script: 0.7).")
    top_p: float = _f(0.8, "Nucleus mass of the proposals (InT's public script: 0.8).")
    n_continuations: int = _f(4, "Continuations after prefix + intervention for the outcome filter (same N as EDIT, "
                                 "App. F; InT's script: 32).")
    index_words: tuple[str, ...] = _f(("point", "step"), "Words after which a number is an index, not a mark, for "
                                                         "the leak filter.")
    max_new_tokens: int = _f(384, "Token budget of a proposal (verification log + first error + intervention).")

    def __post_init__(self):
        _one_of(self, "rule", STEP_RULES)
        _at_least(self, 1, "n_proposals", "n_continuations", "max_new_tokens")
        _positive(self, "temperature")
        _fraction(self, "top_p", open_low=True)


@dataclass
class SFTConfig:
    lora: LoraConfig = field(default_factory=LoraConfig, metadata={"help": "Adapter shared by all methods (App. B)."})
    epochs: int = _f(2, "SFT epochs (App. B: 2).")
    learning_rate: float = _f(2e-4, "SFT learning rate (App. B: 2e-4).")
    lr_scheduler: str = _f("cosine", "SFT schedule (App. B: cosine).")
    warmup_ratio: float = _f(0.10, "SFT warmup share (App. B: 10%).")
    effective_batch_size: int = _f(32, "SFT effective batch (App. B: 8 on SAS, 32 on Private-Science).")
    effective_batch_by_dataset: dict[str, int] = _f({}, "Per-dataset effective batch overriding "
                                                        "`effective_batch_size` (App. B); keys are dataset names.")
    per_device_batch_size: int = _f(8, "Suite's choice (memory only; the paper gives the effective batch): "
                                       "sequences per device per forward pass; gradient accumulation makes up the "
                                       "effective batch, which must be a multiple of it (`edit_lib/train/sft.py`).")
    max_steps: int = _f(0, "0 trains the full `epochs` (App. B; every results profile). > 0 stops after this many "
                           "optimiser steps, which gives arms with pools of different sizes different budgets: for "
                           "quick experiments only (05 warns). To bound SFT time, cap the pools (`max_pool`).")
    golden_per_revision: float = _f(1.5, "Golden (originally correct) rollouts mixed into EDIT's pool per kept "
                                         "revision, drawn seeded from the correct rollouts of the same Phase-1 "
                                         "responses (Sec. 2.2 'Pool composition'). 1.5 is the paper's ratio (App. B: "
                                         "33,958 golden to 22,637 revisions), not its stated method, which the paper "
                                         "does not give; 0 = every correct rollout of the sample.")
    max_pool: int = _f(0, "Suite's choice for CPU budgets: cap every SFT pool at this many examples by a seeded "
                          "subsample that keeps its golden : revision ratio; the same cap for every arm, and every "
                          "arm trains the full `epochs` over its pool (App. B). 0 = no cap (the paper).")
    max_length: int = _f(0, "Suite's choice: token cap of prompt + completion; 0 = the model's context length. A "
                            "longer pair is an error naming its row (truncation would cut the final mark).")
    logging_steps: int = _f(1, "Suite's choice: optimiser steps between loss-curve points.")
    gradient_checkpointing: bool = _f(True, "Suite's choice on GPU (memory for 8B models); always off on CPU.")
    check_responses: int = _f(48, "Suite's choice: training responses per dataset (seeded sample) graded greedily by "
                                  "Base and by EDIT-SFT in 05's quick check; every other adapter grades 8 of them "
                                  "to show it loads and grades through the same path.")
    ablation_dataset: str = _f("", "Table 6: the dataset the three EDIT-SFT ablations (w/o localiser, w/o "
                                   "checklist, w/o atomic) are built and trained on (the paper: SAS-History, its "
                                   "largest SAS dataset); '' = the first dataset name in alphabetical order.")
    processes: int = _f(1, "Suite's choice (speed only; the global batch is held equal): processes one SFT run is "
                           "spread over, data parallel through torchrun / accelerate launch, one per GPU (gloo on "
                           "CPU). 1 = the notebook's process.")

    def __post_init__(self):
        _at_least(self, 1, "epochs", "effective_batch_size", "per_device_batch_size", "logging_steps", "processes")
        _at_least(self, 0, "max_steps", "golden_per_revision", "max_pool", "max_length", "check_responses")
        _positive(self, "learning_rate")
        _fraction(self, "warmup_ratio", open_high=True)
        bad = {k: v for k, v in self.effective_batch_by_dataset.items() if v < 1}
        if bad:
            raise ConfigError(f"effective_batch_by_dataset values must be >= 1, got {bad}")

    def effective_batch_for(self, dataset: str) -> int:
        """The SFT effective batch of one dataset (App. B: 8 on SAS, 32 on Private-Science)."""
        return self.effective_batch_by_dataset.get(dataset, self.effective_batch_size)


@dataclass
class ShapingConfig:
    beta_drift: float = _f(0.75, "Exploration tolerance in raw marks (Eq. 6); calibrated unless fixed.")
    gamma: float = _f(0.1, "Shaping weight gamma_Phi (Eq. 7); calibrated flip-safe unless fixed.")
    calibrate: bool = _f(True, "Calibrate beta_drift and gamma on a 10% rollout subset (App. B).")
    calibration_fraction: float = _f(0.10, "Share of training rollouts used for calibration (App. B: 10%).")
    beta_grid: list = _f([0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0], "Suite's choice (the paper gives no grid): "
                                                                     "beta_drift values swept (marks); brackets the "
                                                                     "paper's 0.5 / 0.75.")
    gamma_cap: float = _f(1.0, "Suite's choice: gamma_Phi never above this (shaping never outweighs r_out).")
    gamma_safety: float = _f(0.99, "Suite's choice: gamma_Phi = safety x the flip-safe bound (the bound is a "
                                   "strict inequality).")
    flip_safe_rule: str = _f("literal", "Flip-safe rule of gamma_Phi (App. B): 'literal' = App. B's wording, "
                                        "gamma x pen(correct) < r_out(correct) - r_out(incorrect) within a group; "
                                        "'pairwise' = looser, gamma x (pen(correct) - pen(incorrect)) < that gap "
                                        "(Eq. 7 never inverts the pair).")

    def __post_init__(self):
        _one_of(self, "flip_safe_rule", ("literal", "pairwise"))
        _at_least(self, 0, "beta_drift", "gamma")
        _fraction(self, "calibration_fraction", "gamma_safety", open_low=True)
        _positive(self, "gamma_cap")
        if not self.beta_grid or min(self.beta_grid) < 0:
            raise ConfigError(f"beta_grid must be a non-empty list of values >= 0, got {self.beta_grid!r}")


@dataclass
class ShapingValues:
    """beta_drift / gamma of one dataset (Table 9 lower block)."""
    beta_drift: float = _f(help="Exploration tolerance beta_drift in raw marks (Eq. 6).")
    gamma: float = _f(help="Shaping weight gamma_Phi of the total reward (Eq. 7).")

    def __post_init__(self):
        _at_least(self, 0, "beta_drift", "gamma")


@dataclass
class RLConfig:
    learning_rate: float = _f(5e-6, "RL learning rate (Table 9: 5e-6).")
    lr_scheduler: str = _f("cosine", "RL schedule (Table 9: cosine).")
    warmup_ratio: float = _f(0.03, "RL warmup share (Table 9: 3%).")
    beta_kl: float = _f(0.02, "KL coefficient towards the initialisation (Table 9: 0.02).")
    rollouts_per_prompt: int = _f(8, "Group size (Table 9: 8).")
    prompts_per_step: int = _f(4, "Prompts per optimiser step (Table 9: 4, i.e. 32 completions).")
    temperature: float = _f(1.0, "Sampling temperature (Table 9: 1.0).")
    max_completion_tokens: int = _f(1024, "Completion budget (Table 9: 1,024).")
    steps: int = _f(500, "Optimiser steps (Table 9: 500 Private-Science, 200 SAS).")
    steps_by_dataset: dict[str, int] = _f({}, "Per-dataset optimiser steps overriding `steps` (Table 9); keys "
                                              "are dataset names.")
    seeds: list = _f([42], "Seeds; Table 4 repeats the EDIT-SFT+GRPO / EDIT-SFT+EDIT-RL pair with 42, 43, 44; every "
                           "other arm runs with the first seed.")
    datasets: list = _f([], "Datasets RL runs on (one run per dataset and arm, App. B); [] = every dataset. The "
                            "suite's choice for the CPU demo: one dataset.")
    seed_datasets: list = _f([], "Datasets on which Table 4's pair (EDIT-SFT+GRPO, EDIT-SFT+EDIT-RL) repeats every seed "
                                 "of `seeds` (Table 4: Private-Biology and SAS-History); [] = every RL dataset. "
                                 "Elsewhere EDIT-SFT+EDIT-RL runs with the first seed and EDIT-SFT+GRPO only where "
                                 "`grid_datasets` needs it.")
    grid_datasets: list = _f([], "Datasets of the SFT x RL grid (Table 5, Figure 3's curves, Table 10; the paper: "
                                 "Private-Biology), where Base+EDIT-RL and EDIT-SFT+GRPO also run; [] = every RL "
                                 "dataset. Tables 1-3's RL systems run on every RL dataset.")
    per_device_batch_size: int = _f(0, "Suite's choice (memory only): completions per forward pass; 0 = one group "
                                       "(rollouts_per_prompt); gradient accumulation makes up the step.")
    workers: int = _f(1, "Suite's choice (speed only): RL runs trained at once, each in its own process with "
                         "model.torch_threads / workers threads (a run's numbers depend on its thread count). 1 "
                         "trains them one after another in the notebook's process.")
    processes: int = _f(1, "Suite's choice (speed only; the global batch is held equal): processes one RL run is "
                           "spread over, data parallel through torchrun / accelerate launch, one per GPU (gloo on "
                           "CPU). 1 = the notebook's process or its worker.")
    checkpoint_every: int = _f(0, "Suite's choice (the paper does not say): save the adapter every this many steps for "
                                  "the post hoc QWK curves of Figure 3 (0 = final step only, no curves).")
    curve_responses: int = _f(0, "Figure 3: responses per evaluation split graded at each checkpoint (a seeded "
                                 "sample; 0 = the whole split).")
    divergence_responses: int = _f(200, "Table 10: test responses whose greedy rollouts are probed under each "
                                        "SFT-initialised RL policy and the frozen EDIT-SFT (App. D: 200).")
    shaping: ShapingConfig = field(default_factory=ShapingConfig, metadata={"help": "EDIT-RL belief shaping."})
    shaping_by_dataset: dict[str, ShapingValues] = _f({}, "Per-dataset {beta_drift, gamma} replacing `shaping`'s "
                                                          "values for that dataset (Table 9 lower block: the paper's "
                                                          "calibrated values); keys are dataset names.")

    def __post_init__(self):
        _positive(self, "learning_rate", "temperature")
        _fraction(self, "warmup_ratio", open_high=True)
        _at_least(self, 1, "workers", "processes")
        _at_least(self, 0, "beta_kl", "per_device_batch_size", "checkpoint_every", "curve_responses",
                  "divergence_responses")
        _at_least(self, 2, "rollouts_per_prompt")  # a GRPO group needs two completions to have an advantage
        _at_least(self, 1, "prompts_per_step", "max_completion_tokens", "steps")
        bad = {k: v for k, v in self.steps_by_dataset.items() if v < 1}
        if bad:
            raise ConfigError(f"steps_by_dataset values must be >= 1, got {bad}")
        for name in ("seed_datasets", "grid_datasets"):
            v = getattr(self, name)
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise ConfigError(f"{name} must be a list of dataset names, got {v!r}")
        if not self.seeds or not all(isinstance(x, int) and not isinstance(x, bool) for x in self.seeds):
            raise ConfigError(f"seeds must be a non-empty list of integers, got {self.seeds!r}")

    def datasets_in(self, names) -> list[str]:
        """The datasets RL runs on among a run's dataset ``names``: ``datasets`` (each must be one) or all of them."""
        chosen = list(self.datasets) or sorted(names)
        unknown = [d for d in chosen if d not in names]
        if unknown:
            raise ValueError(f"rl.datasets names {unknown}, not datasets of this profile: {sorted(names)}")
        return chosen

    def subset_in(self, key: str, names) -> list[str]:
        """``seed_datasets`` (Table 4) or ``grid_datasets`` (Table 5, Figure 3, Table 10) as ``key``, each within
        ``datasets_in(names)``; empty: all of those."""
        chosen = self.datasets_in(names)
        v = list(getattr(self, key)) or chosen
        outside = [d for d in v if d not in chosen]
        if outside:
            raise ValueError(f"rl.{key} names {outside}, which RL does not run on (rl.datasets: {chosen})")
        return v

    def steps_for(self, dataset: str) -> int:
        """Optimiser steps of one dataset (Table 9: 500 Private-Science, 200 SAS)."""
        return self.steps_by_dataset.get(dataset, self.steps)

    def shaping_for(self, dataset: str) -> ShapingConfig:
        """`shaping` with the dataset's beta_drift / gamma from `shaping_by_dataset`, when it has an entry."""
        v = self.shaping_by_dataset.get(dataset)
        return self.shaping if v is None else dataclasses.replace(self.shaping, beta_drift=v.beta_drift,
                                                                  gamma=v.gamma)


@dataclass
class RSRConfig:
    datasets: list = _f([], "Datasets the rule-faithfulness interventions run on (App. I: Private-Biology); [] means "
                            "every dataset of the run with PTS or LoR questions.")
    splits: list = _f(["id_test", "ood_test"], "Splits whose responses are regraded under each edit.")
    responses_per_edit: int = _f(0, "Responses regraded per edit and dataset (a seeded sample, the same for every "
                                    "system); 0 means all of them.")
    systems: list = _f(["base", "base_grpo", "base_dgpo", "int_sft", "int_sft_int_rl", "edit_sft",
                        "edit_sft_edit_rl"], "Systems graded under the edits (Table 7, Table 14).")

    def __post_init__(self):
        bad = [x for x in self.splits if x not in ("train", "id_test", "ood_test")]
        if bad or not self.splits:
            raise ConfigError(f"splits must be a non-empty list of train / id_test / ood_test, got {self.splits!r}")
        _at_least(self, 0, "responses_per_edit")


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

    def hash_of(self, *dotted: str) -> str:
        """Stable short hash of the named sections (artifact keys)."""
        payload = json.dumps({d: self.section(d) for d in dotted}, sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()[:12]

