"""The profile sections of Phase 1's signals and selection: the posterior belief probe (Eq. 1-2), the grounding
audit (Eq. 3-4), counterfactual step selection (Alg. 1, App. F), the Monte-Carlo check of the probe's belief, and
the analyses a profile value names (step labels App. E, App. H)."""
from __future__ import annotations

from dataclasses import dataclass

from edit_lib.config.checks import (ConfigError, Decoding, _at_least, _one_of, _positive, _sampled, decoding,
                                    help_field as _f)


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
                             "signals/probe.py). `edit-suite bench precision` measures the difference.")

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


@dataclass
class BeliefCheckConfig:
    samples: int = _f(8, "Beyond the paper (is the probe's belief a real belief?): continuations M sampled at every "
                         "boundary k of an incorrect rollout; their final marks give the empirical p_k.")
    max_rollouts: int = _f(0, "Incorrect rollouts checked against Monte-Carlo continuations (0 = none; a seeded "
                              "sample of those 04 repairs).")
    decoding: Decoding = decoding("How those continuations are sampled: the outcome filter's temperature (App. "
                                  "F: 1.0); max_new_tokens 0 = the continuations' budget "
                                  "(`revision.continuation_decoding`).", temperature=1.0, max_new_tokens=0)

    def __post_init__(self):
        _at_least(self, 1, "samples")
        _at_least(self, 0, "max_rollouts")
        _sampled(self.decoding, "decoding", own_budget=False)  # M continuations per boundary
