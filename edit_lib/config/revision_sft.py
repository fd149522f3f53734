"""The profile sections of repair and supervised training: the atomic revision (Sec. 2.2, App. F, J), the
InT-SFT baseline (Sec. 3), the shared LoRA recipe and LoRA SFT (App. B)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from edit_lib.config.checks import (ConfigError, Decoding, _at_least, _budget, _fraction, _one_of, _positive,
                                    _sampled, _workers_or_processes, decoding, help_field as _f)
from edit_lib.config.data_model import STEP_RULES, RolloutConfig


CHECKLIST_FAILURE_POLICIES = ("keep", "drop_lines", "block")


@dataclass
class RevisionConfig:
    n_continuations: int = _f(4, "Continuations sampled per revision for the outcome filter (App. F: N=4).")
    max_span: int = _f(3, "A rewrite replaces the target by 1..max_span sub-steps (App. J, Figure 6: span 1|2|3).")
    rewrite_decoding: Decoding = decoding("How the atomic rewrite is decoded (App. J): greedy, one rewrite per "
                                          "selected step, so selection rules differ only in the step they pick; a "
                                          "256-token budget. The suite's choice, fixed before any result.",
                                          greedy=True, max_new_tokens=256)
    checklist_decoding: Decoding = decoding("How the rubric checklist is decoded (Sec. 2.2): greedy, one checklist "
                                            "per response shared by every rule (the suite's choice; the paper does "
                                            "not say). max_new_tokens 0 = the rewrite's budget; a checklist lists "
                                            "every marking point with its evidence, so a long free-text rubric "
                                            "(SAS-Bench: up to 26 marks) may need more. Checklists cut at the "
                                            "budget are counted in 04.", greedy=True, max_new_tokens=0)
    continuation_decoding: Decoding = decoding("How the N continuations after a revised prefix are sampled (App. F): "
                                               "the rollouts' temperature (App. B / Table 9: 1.0). max_new_tokens "
                                               "0 = the rollouts' budget (`rollouts.decoding.max_new_tokens`), so a "
                                               "continuation may be as long as the rollout it repairs; truncated "
                                               "continuations are counted in 04.", temperature=1.0, max_new_tokens=0)
    free_rewrite_max_new_tokens: int = _f(0, "Token budget of Table 6's 'w/o atomic' rewrite (decoded as "
                                             "`rewrite_decoding`), which rewrites the target and every step after "
                                             "it; 0 = the larger of the rollouts' budget and the rewrite's, so a "
                                             "whole-suffix rewrite is not cut where the rollout it repairs was "
                                             "not. A rewrite cut at its budget is counted as `rewrite_truncated`.")
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
        _at_least(self, 0, "free_rewrite_max_new_tokens")
        _at_least(self, 1, "n_continuations", "max_span", "batch_size")
        _budget(self.rewrite_decoding, "rewrite_decoding")
        _sampled(self.continuation_decoding, "continuation_decoding", own_budget=False)  # App. F: N samples

    def continuation_budget(self, rollouts: "RolloutConfig") -> int:
        """Tokens a continuation may generate: its own budget, or the rollouts' (App. B: 1,024)."""
        return self.continuation_decoding.max_new_tokens or rollouts.decoding.max_new_tokens

    def free_rewrite_budget(self, rollouts: "RolloutConfig") -> int:
        """Tokens a "w/o atomic" rewrite (Table 6) may generate: its own budget, or the rollouts' (App. B: 1,024)
        and at least the atomic rewrite's."""
        return self.free_rewrite_max_new_tokens or max(rollouts.decoding.max_new_tokens,
                                                       self.rewrite_decoding.max_new_tokens)

    @property
    def checklist_budget(self) -> int:
        """Tokens a rubric checklist (Sec. 2.2) may generate."""
        return self.checklist_decoding.max_new_tokens or self.rewrite_decoding.max_new_tokens

    def rewrite_budget(self, atomic: bool) -> int:
        """Tokens a rewrite may generate: ``rewrite_decoding.max_new_tokens`` for the atomic rewriter (App. J), the
        resolved free budget for Table 6's "w/o atomic" one."""
        if atomic:
            return self.rewrite_decoding.max_new_tokens
        if self.free_rewrite_max_new_tokens < 1:
            raise ValueError("revision.free_rewrite_max_new_tokens is 0 (the rollouts' budget): pass "
                             "P.revision.resolved(P.rollouts)")
        return self.free_rewrite_max_new_tokens

    def resolved(self, rollouts: "RolloutConfig") -> "RevisionConfig":
        """This section with the continuation and free-rewrite budgets made concrete (``continuation_budget``,
        ``free_rewrite_budget``): what Phase 1's generation functions take."""
        cont = dataclasses.replace(self.continuation_decoding, max_new_tokens=self.continuation_budget(rollouts))
        return dataclasses.replace(self, continuation_decoding=cont,
                                   free_rewrite_max_new_tokens=self.free_rewrite_budget(rollouts))


@dataclass
class IntConfig:
    """InT-SFT choices (Yang et al. 2026; Sec. 3 Baselines (4), App. B); fixed before any result exists."""

    rule: str = _f("auto", "How the rollout is cut into sub-steps (edit_lib/segment.py rules); 'paragraphs' is "
                           "InT's blank-line split.")
    n_proposals: int = _f(4, "Interventions sampled per incorrect rollout; the first usable one is kept (InT's "
                             "public script: K = 4). The self-audit rule of Table 6 reads the same proposals.")
    decoding: Decoding = decoding("How the proposals are sampled (InT's public script: T = 0.7, top-p 0.8, the "
                                  "suite's 384-token budget for a verification log, first error and "
                                  "intervention).", temperature=0.7, top_p=0.8, max_new_tokens=384)
    n_continuations: int = _f(4, "Continuations after prefix + intervention for the outcome filter (same N as EDIT, "
                                 "App. F; InT's script: 32).")
    index_words: tuple[str, ...] = _f(("point", "step"), "Words after which a number is an index, not a mark, for "
                                                         "the leak filter.")

    def __post_init__(self):
        _one_of(self, "rule", STEP_RULES)
        _at_least(self, 1, "n_proposals", "n_continuations")
        _sampled(self.decoding, "decoding")


# App. B: "applied to all attention and MLP projection matrices (q, k, v, o, gate, up, down)"
PAPER_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass
class LoraConfig:
    """The shared LoRA recipe of App. B (SFT, and as a fresh adapter for RL: Table 9);
    ``edit_lib.model.hf.attach_lora`` applies it."""
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
    workers: int = _f(1, "Suite's choice (speed only): 1 = 05's SFT runs one after another in the notebook's "
                         "process; 0 = each run whole as one unit of the engine (edit_lib/engine.py, ops.cluster: "
                         "model.torch_threads threads and as many CPUs, a GPU each where there are GPUs), as many "
                         "at once as the engine has room for; N > 1 = at most N at once. The same threads as the "
                         "notebook's process, so the same adapters: no stage key holds it.")

    def __post_init__(self):
        _at_least(self, 0, "workers")
        _workers_or_processes(self, "sft.")
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
