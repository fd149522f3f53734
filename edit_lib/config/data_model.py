"""The profile sections of what a run is made of: its datasets (App. A), the policy model and its optional
format warm-up (App. B), how a completion is cut into steps (Sec. 2.1) and how rollouts are sampled (App. B)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from edit_lib.config.checks import (ConfigError, Decoding, _at_least, _fraction, _one_of, _positive, _sampled,
                                    decoding, help_field as _f)


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
#: The Phase-1 roles a separate reviser learns (``model.warmup.role_model``); grading and continuation are the Base's.
REVISER_ROLES = ("checklist", "rewrite", "intervention")
#: ``model.warmup.judgement``: what the warm-up's grading judgement says (edit_lib/train/warmup.py).
JUDGEMENTS = ("template", "points", "key_elements")


@dataclass
class WarmupConfig:
    """A short format warm-up SFT that becomes the profile's Base (suite's choice for models too small to write the
    final line zero-shot, the cpu-real profile; the paper's Base grades zero-shot, App. B): LoRA SFT on training
    responses with a templated judgement ending in the gold mark, merged into the weights
    (edit_lib/train/warmup.py)."""
    steps: int = _f(0, "Optimiser steps of the warm-up SFT; 0 = no warm-up (the paper).")
    responses_per_question: int = _f(16, "Training responses per question in the warm-up set (a seeded sample).")
    batch_size: int = _f(4, "Warm-up batch (examples per optimiser step, all of one question: their shared prompt "
                            "prefix is laid out once, edit_lib/train/packed_sft.py).")
    learning_rate: float = _f(2e-4, "Warm-up learning rate (App. B's SFT rate).")
    lora_r: int = _f(16, "Warm-up LoRA rank (merged into the weights afterwards).")
    max_length: int = _f(512, "Token cap of prompt + judgement (+ EOS): longer pairs are left out and counted.")
    balanced: bool = _f(True, "Draw the same number of training answers for every gold mark of a question (a small "
                              "mark's answers repeat, counted); false = a plain seeded sample.")
    judgement: str = _f("template", "template: fixed steps ending in the gold mark; points: where the lexical "
                                    "matcher's points reach the gold mark, one line per point found, for every "
                                    "scheme kind (PTS and LoR points, a free-text rubric's clauses; "
                                    "edit_lib/train/warmup.py); key_elements: the same for LoR schemes "
                                    "only (ASAP's key elements), the template elsewhere.")
    mark_weight: float = _f(1.0, "Loss weight of the final line's mark tokens against 1 for every other completion "
                                 "token (the warm-up's mean is then weighted): a templated judgement holds its "
                                 "information in the mark alone, one of its ~40 tokens; 1 = the plain mean (TRL's "
                                 "completion-only loss).")
    curve_every: int = _f(0, "Optimiser steps between points of the held-out QWK curve (0 = no curve).")
    curve_answers: int = _f(24, "Held-out training answers per question for the curve (never warm-up pairs).")
    lora_layers: int = _f(0, "LoRA on the last N decoder layers only (0 = every layer): the backward pass stops "
                             "at the lowest adapted layer, so a step costs less.")
    roles: list = _f(["grading"], "The roles the warm-up teaches: grading (responses_per_question answers per "
                                  "question) and the Phase-1 roles checklist, rewrite, intervention, "
                                  "continuation (the chain after a revised step) (role_responses_per_question "
                                  "each, from answers whose matched rubric points reach the gold mark, any "
                                  "scheme kind; edit_lib/train/warmup.py).")
    role_responses_per_question: int = _f(32, "Training answers per question for each Phase-1 role (checklist, "
                                              "rewrite, intervention, continuation alike; grading has "
                                              "responses_per_question).")
    role_batch_size: int = _f(4, "Warm-up batch of a Phase-1 role (one question and role per batch): their prompts "
                                 "and completions are 3-7 times a grading pair's tokens.")
    role_phase: str = _f("mixed", "How the Phase-1 role batches meet grading's: mixed (one seeded order of all "
                                  "batches, cycled) | first (each role batch once, then grading's batches cycled "
                                  "for the remaining steps; edit_lib/train/warmup.py).")
    role_model: str = _f("shared", "Who learns the Phase-1 roles checklist, rewrite and intervention: shared (this "
                                   "warm-up, beside grading; its Base plays them) | separate (a second warm-up "
                                   "of the same pretrained weights, the reviser, trained on them alone for "
                                   "role_steps; 04 and 05 prompt it for those roles, the Base grades and "
                                   "continues; a departure, book/departures.md).")
    role_steps: int = _f(64, "Optimiser steps of the separate reviser's warm-up (role_model: separate), "
                             "batches of role_batch_size in one seeded order, cycled.")
    guard: str = _f("off", "What 01 does when the held-out curve says the warm-up Base will not grade (the rule: "
                           "edit_lib/model/warmup.py): off | warn (a caveat every later notebook carries) | "
                           "stop (01 fails at once with the numbers, before the warm-up's remaining steps and the "
                           "later stages spend their budget). Needs curve_every > 0.")
    guard_after: float = _f(0.75, "Share of the warm-up's steps from which a curve point is judged: earlier points "
                                  "still move (the cpu-real record in the book shows a mid-warm-up dip that "
                                  "recovered).")
    guard_min_qwk: float = _f(0.3, "Held-out QWK (macro over questions) a judged curve point should reach.")
    guard_min_gain: float = _f(0.05, "A judged point below guard_min_qwk whose QWK rose less than this since the "
                                     "previous curve point is flat.")
    guard_max_mark_share: float = _f(0.6, "Share of a dataset's held-out gradings one mark may take (or its share of "
                                          "their gold marks plus guard_share_margin, if larger) before a "
                                          "judged point is degenerate.")
    guard_share_margin: float = _f(0.1, "How far a mark's share of the held-out gradings must exceed its share of "
                                        "their gold marks to count as degenerate: on skewed gold marks a Base that "
                                        "grades gives the common mark a little more often (one answer of n moves "
                                        "a share by 1/n).")

    def __post_init__(self):
        _at_least(self, 0, "steps", "curve_every", "lora_layers")
        _at_least(self, 1, "responses_per_question", "batch_size", "lora_r", "max_length", "curve_answers",
                  "role_responses_per_question", "role_batch_size", "role_steps")
        _positive(self, "learning_rate", "mark_weight")
        bad = [r for r in self.roles if r not in WARMUP_ROLES]
        if bad or not self.roles or len(set(self.roles)) != len(self.roles):
            raise ConfigError(f"model.warmup.roles: distinct roles of {list(WARMUP_ROLES)}, got {self.roles!r}")
        if self.judgement not in JUDGEMENTS:
            raise ConfigError(f"model.warmup.judgement: one of {list(JUDGEMENTS)}, got {self.judgement!r}")
        if self.role_phase not in ("mixed", "first"):
            raise ConfigError(f"model.warmup.role_phase: 'mixed' or 'first', got {self.role_phase!r}")
        if self.role_model not in ("shared", "separate"):
            raise ConfigError(f"model.warmup.role_model: 'shared' or 'separate', got {self.role_model!r}")
        if self.role_model == "separate" and ("grading" not in self.roles or not set(self.roles) & set(REVISER_ROLES)):
            raise ConfigError(f"model.warmup.role_model='separate' trains the roles {list(REVISER_ROLES)} apart from "
                              f"grading: model.warmup.roles needs grading and at least one of them, got {self.roles!r}")
        if self.guard not in ("off", "warn", "stop"):
            raise ConfigError(f"model.warmup.guard: 'off', 'warn' or 'stop', got {self.guard!r}")
        if self.guard != "off" and self.steps > 0 and self.curve_every <= 0:
            raise ConfigError(f"model.warmup.guard={self.guard!r} judges the held-out curve, which "
                              "model.warmup.curve_every=0 does not draw: set curve_every > 0 or guard: off")
        for name in ("guard_after", "guard_min_qwk", "guard_max_mark_share", "guard_share_margin"):
            if not 0 <= getattr(self, name) <= 1:
                raise ConfigError(f"model.warmup.{name} must lie in [0, 1], got {getattr(self, name)!r}")
        _at_least(self, 0, "guard_min_gain")


@dataclass
class ModelConfig:
    """Which causal LM is the policy and how it is loaded (paper: Qwen/Qwen3-8B in bfloat16 on cuda, App. B)."""
    name_or_path: str = _f("embedded", "Policy: 'embedded' (the shipped tiny grader), 'micro' (build a micro "
                                       "grader from scratch, seconds), 'smollm2-135m-instruct' (the packaged GGUF "
                                       "model, `make real-model`), or any HF causal LM name/path (Qwen/Qwen3-8B).")
    dtype: str = _f("float32", "float32 | bfloat16 | float16 | auto (the checkpoint's own dtype).")
    device: str = _f("cpu", "cpu | cuda | cuda:N | auto (cuda when available, else cpu).")
    attn_implementation: str = _f("eager", "Attention kernel (eager | sdpa | sdpa_blocks | flash_attention_2); '' "
                                           "leaves transformers' default. sdpa_blocks: SDPA that skips the key "
                                           "columns App. B's block mask hides (edit_lib/model/block_attention.py).")
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
    lean_decoding: bool = _f(False, "HF generation on the CPU, 06's GRPO rollouts included: decode each batch "
                                    "with edit_lib/model/lean_decode.py (generate's loop, the key/value cache "
                                    "grown in place, one-token steps through lean_forward.py's step without "
                                    "transformers' per-call plumbing; finished rows dropped; a prompt prefix "
                                    "that rows share read once a step): transformers generate's tokens up to "
                                    "last-digit rounding, in less time on a small model (`edit-suite bench "
                                    "decoding` and `bench rollouts` measure the ratios); where it cannot promise "
                                    "them (another device, cache or decoding mode) it warns and uses generate. "
                                    "Off: transformers generate.")
    generation_workers: int = _f(1, "HF generation (and 02's and 03's probe and audit passes, cut at their "
                                    "batches): 1 = in the stage's own process; 0 = spread over as many of "
                                    "the engine's generation workers as it has cores, or GPUs under device "
                                    "'cuda' / 'auto' on a cluster with GPUs (one GPU each; edit_lib/engine.py, "
                                    "ops.cluster), one torch thread each, started once per stage and keeping "
                                    "each policy loaded (edit_lib/model/parallel.py); N > 1 = at most N of them. "
                                    "On the CPU the same rows as one process whatever the count (row-seeded "
                                    "sampling; `edit-suite bench generation` measures the ratio), so no stage "
                                    "key holds the count. Not 1 needs generation_backend 'hf', prefix_cache off "
                                    "and no pinned device (cuda:N).")
    pool_merges_adapters: bool = _f(False, "With generation_workers other than 1: each worker folds a policy's "
                                           "LoRA adapters into its weights before generating (the same function, up to "
                                           "floating-point rounding; the stage's own process keeps them unmerged "
                                           "for probing and training). `edit-suite bench merge` measures the ratio "
                                           "and counts rows that differ; a greedy token at a near-tie can flip "
                                           "(book/records/performance.md). Off, or generation_workers 1: adapters "
                                           "stay unmerged, the same rows as one process.")
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
        if self.lean_decoding and self.generation_backend != "hf":
            raise ConfigError(f"lean_decoding replaces transformers generate's loop: it needs generation_backend "
                              f"'hf', got {self.generation_backend!r}")
        _at_least(self, 0, "torch_threads")
        _at_least(self, 0, "generation_workers")
        pooled = (self.generation_backend, self.device in ("cpu", "cuda", "auto"), self.prefix_cache)
        if self.generation_workers != 1 and pooled != ("hf", True, False):
            raise ConfigError(f"generation_workers = {self.generation_workers} splits HF generation over the "
                              f"engine's workers (one GPU each where there are GPUs): it needs generation_backend "
                              f"'hf', device 'cpu', 'cuda' or 'auto' (not a pinned cuda:N) and prefix_cache off "
                              f"(batches differ per worker), got {self.generation_backend!r}, {self.device!r}, "
                              f"prefix_cache {self.prefix_cache}")
        _fraction(self, "vllm_gpu_memory_utilization", open_low=True)
        if not isinstance(self.hub_commit, str) or (self.hub_commit and not re.fullmatch(r"[\w.\-/]+", self.hub_commit)):
            raise ConfigError(f"hub_commit must be a commit hash, tag or branch name, got {self.hub_commit!r}")


STEP_RULES = ("auto", "markers", "lines", "paragraphs")  # segment.py's rules (Sec. 2.1)


@dataclass
class StepsConfig:
    rule: str = _f("auto", "How a completion is cut into reasoning steps s_1..s_T (Sec. 2.1): auto | markers | lines "
                           "| paragraphs; each rule is defined in edit_lib/segment.py.")
    warn_single_step_share: float = _f(0.2, "Warn (notebook, results JSON, CLI) when more than this share of "
                                            "rollouts has T <= 1 step: the probe then has one delta-eps.")

    def __post_init__(self):
        _one_of(self, "rule", STEP_RULES)
        _fraction(self, "warn_single_step_share")


@dataclass
class RolloutConfig:
    n_per_response: int = _f(20, "Sampled rollouts per training response (App. B compute budget: 20).")
    decoding: Decoding = decoding("How a rollout is sampled (App. B: T = 1.0, a 1,024-token budget).",
                                  temperature=1.0, max_new_tokens=1024)
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
        _at_least(self, 1, "n_per_response", "batch_size")
        _sampled(self.decoding, "decoding")
        _at_least(self, 0, "responses_per_dataset")
        bad = {k: v for k, v in self.responses_by_dataset.items() if not isinstance(v, int) or v < 0}
        if bad:
            raise ConfigError(f"responses_by_dataset values must be integers >= 0, got {bad}")

    def responses_for(self, dataset: str) -> int:
        """The Phase-1 sample size of one dataset: its ``responses_by_dataset`` entry or ``responses_per_dataset``."""
        return self.responses_by_dataset.get(dataset, self.responses_per_dataset)
