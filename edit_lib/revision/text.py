"""Text helpers shared by the revision checks: the tokenizer-like normal form and number reading.

Model output comes in two forms: written ("point 12 ... total 6.5") and the embedded tokenizer's canonical
form, where every digit and punctuation character is its own space-separated token ("point 1 2 ... 6 . 5").
``norm`` maps both to one form: case-folded word pieces (runs of letters, single punctuation characters,
numbers) separated by one space, with digit runs and decimal points re-joined ("1 2" -> "12", "6 . 5" ->
"6.5"). Like the parsers of ``edit_lib.prompts.grading``, adjacent digits separated by one space are read as one number.
"""
from __future__ import annotations

import re

_PIECE = re.compile(r"\d|[^\w\s]|_|[^\W\d_]+")
_DIGIT_RUN = re.compile(r"(?<![\w.])\d(?: \d)+(?![\w.])")
_DECIMAL = re.compile(r"(?<![\w.])(\d+) \. (\d+)(?![\w.])")
NUMBER = r"\d+(?:\.\d+)?"


def norm(text: str) -> str:
    """The normal form of ``text`` (module docstring); newlines become spaces."""
    s = " ".join(_PIECE.findall(text.casefold()))
    s = _DIGIT_RUN.sub(lambda m: m.group(0).replace(" ", ""), s)
    return _DECIMAL.sub(r"\1.\2", s)


def contains_span(haystack: str, needle: str) -> bool:
    """True when normalised ``needle`` is a whole-token span of normalised ``haystack``."""
    h, n = f" {norm(haystack)} ", f" {norm(needle)} "
    return bool(n.strip()) and n in h


def numbers(text: str) -> list[float]:
    """Every number written in ``text`` (after ``norm``)."""
    return [float(x) for x in re.findall(rf"(?<![\w.]){NUMBER}(?![\w.])", norm(text))]
