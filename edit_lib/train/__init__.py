"""Training stages: LoRA SFT (`sft`, App. B); the RL stages of 06 follow (ARCHITECTURE.md)."""
