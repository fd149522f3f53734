"""Seeded toy models: a word-level tokenizer and a random fp32 Qwen3/Llama causal LM, built offline.

The signal benchmarks (``tools.bench_signals``: App. B's packed probe and audit) time them so that the numbers
measure the packing, not a model, and the signal tests read the probe (Eq. 1-2) and the audit (Eq. 3) on them
(through ``tests/toy_models.py``). Nothing downloads; the same seed gives the same weights.
"""
from __future__ import annotations

import torch

TOY_TEXT = [
    "Question : what is the mass of the sample ? Answer : 12 grams because 3 plus 9 is 12 .",
    "Rubric : award 1 mark for the unit and 2 marks for the method ; max 26 marks .",
    "Step 1 : the student states the unit . Step 2 : the method is correct so award 0 or 1 mark .",
    "Final mark : 7 / Final mark : 18 / Final mark : 20 / [MASK] 4 5 6 8",
]


def toy_tokenizer():
    """Seeded word-level tokenizer with digits split one per token (as Qwen does), wrapped for transformers."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Whitespace(), pre_tokenizers.Digits(individual_digits=True)])
    tok.train_from_iterator(TOY_TEXT, trainers.WordLevelTrainer(special_tokens=["[PAD]", "[UNK]", "[MASK]"]))
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]")


def toy_model(arch: str = "qwen3", vocab_size: int = 64, hidden: int = 64, layers: int = 2, heads: int = 4,
              kv_heads: int = 2, intermediate: int = 128, attn: str = "sdpa", seed: int = 0,
              init_range: float = 0.02):
    """A seeded random fp32 Qwen3/Llama causal LM (``attn``: "sdpa" or "eager")."""
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen3Config

    cls = {"qwen3": Qwen3Config, "llama": LlamaConfig}[arch]
    cfg = cls(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
              num_key_value_heads=kv_heads, intermediate_size=intermediate, head_dim=hidden // heads,
              max_position_embeddings=4096, initializer_range=init_range, pad_token_id=0, bos_token_id=None,
              eos_token_id=None, tie_word_embeddings=False)
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(cfg, attn_implementation=attn, dtype=torch.float32).eval()
