"""The profile sections of RL (Table 9): GRPO / EDIT-RL / DGPO hyper-parameters, the belief shaping of EDIT-RL
(Eq. 6-7) and its calibration (App. B), with per-dataset values."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from edit_lib.config.checks import (ConfigError, Decoding, _at_least, _fraction, _one_of, _positive, _sampled,
                                    _workers_or_processes, decoding, help_field as _f)


@dataclass
class ShapingConfig:
    beta_drift: float = _f(0.75, "Exploration tolerance in raw marks (Eq. 6); calibrated unless fixed.")
    gamma: float = _f(0.1, "Shaping weight gamma_Phi (Eq. 7); calibrated flip-safe unless fixed.")
    calibrate: bool = _f(True, "Calibrate beta_drift and gamma on a 10% rollout subset (App. B) for every dataset "
                               "without an entry in rl.shaping_by_dataset (whose values are fixed).")
    calibration_fraction: float = _f(0.10, "Share of training rollouts used for calibration (App. B: 10%).")
    beta_grid: list = _f([0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0], "Suite's choice (the paper gives no grid): "
                                                                     "beta_drift values swept (marks); brackets the "
                                                                     "paper's 0.5 / 0.75. While the best is the "
                                                                     "top, the sweep goes on above it by the last "
                                                                     "step, up to the largest maximum mark.")
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
    decoding: Decoding = decoding("How a group's completions are sampled (Table 9: T = 1.0 over the whole "
                                  "vocabulary, a 1,024-token completion budget).", temperature=1.0,
                                  max_new_tokens=1024)
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
    workers: int = _f(1, "Suite's choice (speed only): 1 = RL runs trained one after another in the notebook's "
                         "process at model.torch_threads; 0 = each run whole as one unit of the engine "
                         "(edit_lib/engine.py, ops.cluster: one torch thread, a GPU each where there are GPUs), as "
                         "many at once as the engine has room for; N > 1 = at most N at once. A run's numbers "
                         "depend on its thread count, so whether runs go to the engine is in 06's key, not how "
                         "many.")
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
    shaping_by_dataset: dict[str, ShapingValues] = _f({}, "Per-dataset {beta_drift, gamma} fixed for that dataset: "
                                                          "EDIT-RL uses them, not the calibration (still reported "
                                                          "beside them); the paper profiles give Table 9's lower "
                                                          "block for the SAS datasets. Keys are dataset names.")

    def __post_init__(self):
        _positive(self, "learning_rate")
        _sampled(self.decoding, "decoding")
        _fraction(self, "warmup_ratio", open_high=True)
        _at_least(self, 0, "workers")
        _at_least(self, 1, "processes")
        _workers_or_processes(self)
        _at_least(self, 0, "beta_kl", "per_device_batch_size", "checkpoint_every", "curve_responses",
                  "divergence_responses")
        _at_least(self, 2, "rollouts_per_prompt")  # a GRPO group needs two completions to have an advantage
        _at_least(self, 1, "prompts_per_step", "steps")
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

    def calibrates(self, dataset: str) -> bool:
        """Whether EDIT-RL uses the calibrated beta_drift / gamma on ``dataset`` (App. B): `shaping.calibrate` and no
        fixed entry in `shaping_by_dataset`."""
        return self.shaping.calibrate and dataset not in self.shaping_by_dataset

    def shaping_for(self, dataset: str) -> ShapingConfig:
        """`shaping` with the dataset's beta_drift / gamma from `shaping_by_dataset`, when it has an entry."""
        v = self.shaping_by_dataset.get(dataset)
        return self.shaping if v is None else dataclasses.replace(self.shaping, beta_drift=v.beta_drift,
                                                                  gamma=v.gamma)
