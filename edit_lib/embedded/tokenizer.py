"""Word-level tokenizer for the embedded tiny grader.

The paper's grader is Qwen3-8B (App. B); the embedded default replaces it with a tiny Qwen3-architecture model
whose tokenizer is trained here with `tokenizers`. Like Qwen's, it splits digits one per token, so a mark such
as "12" is the two tokens "1", "2" and multi-digit marks must be generated digit by digit.

Canonical text format (what the synthetic world should write, and what decode returns):
  * tokens are words, single punctuation characters, single digits, "_" and the newline "\\n";
  * within a line tokens are separated by exactly one space; lines are joined by a bare "\\n".
`canonicalize(text)` maps any text to that format, and `decode(encode(canonicalize(x))) == canonicalize(x)`
for every x whose tokens are in the vocabulary. Spaces come back from the decoder: every token is prefixed
with a marker, the marker becomes a space, except next to a newline and at the very start.
"""
from __future__ import annotations

from collections import Counter
from typing import Iterable

from typing import TYPE_CHECKING

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"
DEFAULT_SPECIAL_TOKENS = (PAD, UNK, BOS, EOS)
DIGITS = tuple("0123456789")
_MARK = "\u2581"  # "▁": joins tokens inside the decoder; never part of canonical text
# one piece per: newline, digit, punctuation character, underscore; runs of letters stay whole
_PIECE = Regex(r"\n|\d|[^\w\s]|_")
_SPACES = Regex(r"[^\S\n]+")  # whitespace other than newline separates tokens and is dropped


def _normalizer() -> normalizers.Normalizer:
    return normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(_MARK, " ")])


def _pre_tokenizer() -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(_SPACES, behavior="removed"),
        pre_tokenizers.Split(_PIECE, behavior="isolated"),
    ])


def _decoder() -> decoders.Decoder:
    # "▁a▁b▁\n▁c" -> "a b\nc": prefix every token, fuse, drop markers that touch a newline, rest -> spaces
    return decoders.Sequence([
        decoders.Replace(Regex("^"), _MARK), decoders.Fuse(),
        decoders.Replace(_MARK + "\n", "\n"), decoders.Replace("\n" + _MARK, "\n"),
        decoders.Replace(_MARK, " "), decoders.Strip(" ", 1, 0),
    ])


_NORM, _PRE = _normalizer(), _pre_tokenizer()


def words(text: str) -> list[str]:
    """Split text into the tokenizer's word pieces (newlines kept as "\\n" pieces)."""
    return [w for w, _ in _PRE.pre_tokenize_str(_NORM.normalize_str(text))]


def canonicalize(text: str) -> str:
    """Canonical form of `text`: one space between tokens, bare newlines between lines (module docstring)."""
    out: list[str] = []
    for w in words(text):
        if w != "\n" and out and out[-1] != "\n":
            out.append(" ")
        out.append(w)
    return "".join(out)


def train_word_tokenizer(texts: Iterable[str], extra_words: Iterable[str] = (),
                         special_tokens: Iterable[str] = DEFAULT_SPECIAL_TOKENS, min_frequency: int = 1,
                         model_max_length: int = 1024) -> PreTrainedTokenizerFast:
    """Train the tiny grader's word-level tokenizer (stands in for Qwen3-8B's tokenizer, App. B).

    Vocabulary = special tokens, then the ten digits, "\\n" and `extra_words` (always kept), then every
    corpus word seen at least `min_frequency` times, ordered by (-count, word) so training is deterministic.
    `special_tokens` must contain <pad>, <unk>, <bos>, <eos> (other names: pass all four as the first four).
    """
    from transformers import PreTrainedTokenizerFast  # here: the stage keys import this module, not transformers

    specials = list(dict.fromkeys(special_tokens))
    if len(specials) < 4:
        raise ValueError("special_tokens needs at least pad, unk, bos, eos (in that order)")
    pad, unk, bos, eos = specials[:4]
    counts: Counter[str] = Counter()
    for t in texts:
        counts.update(words(t))
    vocab: dict[str, int] = {}
    for w in [*specials, *DIGITS, "\n", *(p for e in extra_words for p in words(e))]:
        vocab.setdefault(w, len(vocab))
    for w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if c >= min_frequency:
            vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=unk))
    tok.normalizer, tok.pre_tokenizer, tok.decoder = _normalizer(), _pre_tokenizer(), _decoder()
    tok.add_special_tokens(specials)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=pad, unk_token=unk, bos_token=bos, eos_token=eos,
        model_max_length=model_max_length, clean_up_tokenization_spaces=False, padding_side="left")
