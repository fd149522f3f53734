"""Training: LoRA SFT (App. B), the format warm-up, RL rewards, configuration and runs (distance-aware GRPO with
belief-guided shaping, Eq. 5-7), the calibration of beta_drift and gamma (Table 9) and the RL reports."""
