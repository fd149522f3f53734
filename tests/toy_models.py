"""Toy models the signal tests share: the seeded word-level tokenizer and random causal LM of
``edit_lib.model.toy`` (one definition, which the signal benchmarks time too), and a Qwen-like byte-level BPE
tokenizer trained offline, for the tests of token offsets and chat templates."""
from __future__ import annotations

from edit_lib.model.toy import toy_model, toy_tokenizer

__all__ = ["qwen_like_tokenizer", "toy_model", "toy_tokenizer"]

# The split rule of Qwen's byte-level BPE: letters in runs, every digit alone, punctuation with trailing newlines,
# newline runs apart, so "10" is two tokens and a line's closing ".\n" is one.
QWEN_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
              r"\s*[\r\n]+|\s+(?!\S)|\s+")
CHAT_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]


def qwen_like_tokenizer(corpus: list[str], vocab_size: int = 400):
    """A small byte-level BPE trained offline on ``corpus`` with Qwen's pre-tokenisation (digits split) and its
    chat special tokens: BPE merges and offsets behave as on Qwen3, without downloading anything."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=CHAT_SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
