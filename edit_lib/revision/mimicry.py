"""Checklist-mimicry detector for atomic rewrites (Sec. 2.2, App. J / Figure 6).

Figure 6 asks the rewriter for "one claim per step; no "(1)(2)" markers, no covered/partial verdict labels, no
enumeration", to "never state the mark digit or its spelled-out word", and its caption says that neither the
gold mark nor the rubric block's structure may appear in the rewrite. ``detect_mimicry`` checks every sub-step
of a rewrite (on ``checklist.norm``, so written and canonical forms read alike) and returns EVERY reason that
applies, in the order of ``REASONS`` (an empty list means the rewrite passes): checklist structure
(``verdict_label``, ``checklist_line``, ``checklist_copy``, ``enumeration``, ``multi_point``) and gold-mark
leaks (``gold_word``, ``gold_fraction``, ``gold_labelled``). ``gold_word_counts`` sets the former ``gold_word``
rule (any use of the word) beside the current one (the word used as a mark) on one run's rewrites.

Each reason's full rule (when a mark counts as derived, not leaked; the known false positive) and departures from the
paper and from public code: book/departures.md, section "Checklist mimicry (edit_lib/revision/mimicry.py)".
"""
from __future__ import annotations

import re
from typing import Sequence

import pandas as pd

from edit_lib.prompts.grading import render_scheme
from edit_lib.revision.checklist import NUMBER, norm, numbers

REASONS = ("verdict_label", "checklist_line", "checklist_copy", "enumeration", "multi_point",
           "gold_word", "gold_fraction", "gold_labelled")
NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
                "sixteen seventeen eighteen nineteen twenty").split()

_VERDICTS = ("not covered", "uncovered", "covered", "partially", "partial")
_CHECKLIST_LINE = (re.compile(r"\bpoint \d+\b.*; (?:not )?covered\b"), re.compile(r"; evidence\b"),
                   re.compile(r"\bevidence :"), re.compile(r"\bcovered \d+ of \d+ points?\b"))
_ENUM = (re.compile(r"\( (?:\d+|[a-z]) \)"), re.compile(r"(?:^|[;:,] )(?:\d+|[a-z]) [.)] "))
_MULTI = re.compile(r"\bpoints \d+ (?:and|,|&) \d+")
_LABEL = (r"(?:(?:final|correct|gold|true|right|expected|oracle|reference) mark|mark|score|grade|total|gold|oracle)"
          r"(?: (?:is|of|=|:|should be|must be|becomes|equals))*")
_EQUATION = re.compile(rf"((?:{NUMBER} [-+x*/] )+{NUMBER}|{NUMBER}) = ({NUMBER})")
# a number word used as a mark: followed by a mark noun, "out of", "/" or a number (not "of": "one of the points"),
# or after a mark label, "=", an awarding verb or a number that is not a point / step index
_WORD_AFTER = rf" (?:(?:marks?|points?|score)\b|out of\b|/|{NUMBER}(?![\w.]))"
_WORD_BEFORE = (rf"(?:\b{_LABEL} |= |\b(?:earns?|earned|deserves?|deserved|awards?|awarded|scores?|scored|worth) "
                rf"|(?<!point )(?<!step )(?<![\w.]){NUMBER} )")
GOLD_WORD_RULES = ("old", "new")  # old: any use of the word; new: the word used as a mark


def _eval(expr: str) -> float | None:
    """Value of 'a op b op c' with * / x before + - (the chain's arithmetic); None if malformed."""
    toks = expr.split(" ")
    try:
        terms, ops, cur = [], [], float(toks[0])
        for op, x in zip(toks[1::2], toks[2::2]):
            v = float(x)
            if op in ("x", "*"):
                cur *= v
            elif op == "/":
                cur = cur / v if v else float("nan")
            else:
                terms.append(cur)
                ops.append(op)
                cur = v
        terms.append(cur)
    except ValueError:
        return None
    total = terms[0]
    for op, v in zip(ops, terms[1:]):
        total = total + v if op == "+" else total - v
    return total


def _derived_spans(s: str, context: set[float]) -> list[tuple[int, int]]:
    """Character spans of the equations in ``s`` that hold and whose operands the chain shows."""
    spans = []
    for m in _EQUATION.finditer(s):
        lhs, rhs = m.group(1), float(m.group(2))
        value = _eval(lhs)
        operands = [float(x) for x in lhs.split(" ")[0::2]]
        # 0 carries no information (an empty sum, "x 0" extra points), so it needs no provenance
        if value is not None and abs(value - rhs) < 1e-9 and all(x == 0 or x in context for x in operands):
            spans.append(m.span())
    return spans


def gold_word(step: str, gold: int, quoted: str = "", rule: str = "new") -> bool:
    """Is the gold mark written as a word in ``step`` (App. J / Figure 6: "never state ... its spelled-out word";
    rule in book/departures.md)? ``rule`` "new": only where the word is used as a mark ("one mark", "one / 4",
    "score : one", "deserves one"), so "one of the points" or "zero evidence" pass; "old": any use of the word
    (the earlier rule, kept for ``gold_word_counts``). Never when the word occurs in ``quoted``."""
    if rule not in GOLD_WORD_RULES:
        raise ValueError(f"gold_word rule must be one of {GOLD_WORD_RULES}, got {rule!r}")
    if not 0 <= gold < len(NUMBER_WORDS):
        return False
    word, s = NUMBER_WORDS[gold], norm(step)
    if re.search(rf"\b{word}\b", norm(quoted)):
        return False
    if rule == "old":
        return bool(re.search(rf"\b{word}\b", s))
    return bool(re.search(rf"\b{word}(?={_WORD_AFTER})|{_WORD_BEFORE}{word}\b(?! of\b)", s))


def gold_leaks(step: str, gold: int, max_mark: int, context_numbers: Sequence[float] = (),
               quoted: str = "") -> list[str]:
    """Gold-mark leak reasons of one sub-step (App. J / Figure 6; rule in book/departures.md).

    ``context_numbers``: numbers written in the prefix, the other sub-steps and the scheme; ``quoted``: answer
    and scheme text, where a number word may legitimately occur."""
    s, g, out = norm(step), str(gold), []
    if gold_word(step, gold, quoted):
        out.append("gold_word")
    if re.search(rf"(?<![\w.]){g} (?:/|out of) {max_mark}(?![\w.])", s):
        out.append("gold_fraction")
    derived = _derived_spans(s, set(context_numbers))
    hits = [m.start(1) for m in re.finditer(rf"\b{_LABEL} ({g})(?![\w.])", s)]
    hits += [m.start(1) for m in re.finditer(rf"(?<![\w.])({g}) marks?\b", s)]
    hits += [m.start(1) for m in re.finditer(rf"= ({g})(?![\w.])", s)]
    if any(not any(a <= h < b for a, b in derived) for h in hits):
        out.append("gold_labelled")
    return out


def structure_reasons(step: str, quoted: str = "", checklist: str | None = None) -> list[str]:
    """Checklist-structure reasons of one sub-step (App. J / Figure 6 "Style"; rules in book/departures.md)."""
    s, q, out = norm(step), norm(quoted), []
    if any(re.search(rf"\b{v}\b", s) and not re.search(rf"\b{v}\b", q) for v in _VERDICTS):
        out.append("verdict_label")
    if any(rx.search(s) for rx in _CHECKLIST_LINE):
        out.append("checklist_line")
    if checklist and any(len(ln.split()) >= 4 and f" {ln} " in f" {s} "
                         for ln in (norm(x) for x in checklist.split("\n"))):
        out.append("checklist_copy")
    if any(rx.search(s) for rx in _ENUM):
        out.append("enumeration")
    if len(set(re.findall(r"\bpoint (\d+)\b", s))) >= 2 or _MULTI.search(s):
        out.append("multi_point")
    return out


def detect_mimicry(sub_steps: Sequence[str], gold: int, max_mark: int, prefix_steps: Sequence[str] = (),
                   answer: str = "", scheme_text: str = "", checklist: str | None = None) -> list[str]:
    """Checklist-mimicry detector (Sec. 2.2, App. J / Figure 6): every rejection reason of a rewrite, in
    ``REASONS`` order; [] when it passes. ``scheme_text`` is the rendered scheme (``prompts.grading.render_scheme``)."""
    quoted = f"{answer}\n{scheme_text}"
    found: set[str] = set()
    for i, step in enumerate(sub_steps):
        others = [x for j, x in enumerate(sub_steps) if j != i]
        context = numbers("\n".join([*prefix_steps, *others, scheme_text]))
        found.update(structure_reasons(step, quoted, checklist))
        found.update(gold_leaks(step, gold, max_mark, context, quoted))
    return [r for r in REASONS if r in found]


def quoted_texts(datasets: dict, keys: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(dataset, response_id) of ``keys`` -> the answer and rendered scheme, the text ``detect_mimicry`` reads as
    quoted (App. J)."""
    want = set(map(tuple, keys[["dataset", "response_id"]].to_numpy()))
    return {(name, r.id): f"{r.answer}\n{render_scheme(ds.question(r))}"
            for name, ds in datasets.items() for r in ds.responses if (name, r.id) in want}


def _flagged(rewrite, rule: str, quoted: dict) -> bool:
    """Does ``rule`` flag the gold word in any sub-step of one rewrite (a row of the rewrites table)?"""
    q = quoted.get((rewrite.dataset, rewrite.response_id), "")
    return any(gold_word(x, int(rewrite.gold), q, rule) for x in rewrite.sub_steps)


def gold_word_counts(rewrites: pd.DataFrame, quoted: dict[tuple[str, str], str] | None = None) -> pd.DataFrame:
    """``gold_word`` (App. J / Figure 6) under the old and the new rule on one run's rewrites (columns dataset,
    response_id, gold, sub_steps, reasons; ``generation.REWRITE_COLUMNS``), per dataset: ``rejected`` (rewrites
    with a sub-step the rule flags), ``only_reason`` (of those, rewrites with no other recorded reason, which the
    rule alone rejects) and ``rewrites`` (rewrites with sub-steps, i.e. parsed ones the detector read).
    ``quoted``: ``quoted_texts``; without it no word counts as quoted."""
    parsed, quoted = rewrites[rewrites["sub_steps"].map(len) > 0], quoted or {}
    rows = []
    for ds, g in parsed.groupby("dataset", sort=True):
        alone = g["reasons"].map(lambda rs: not set(rs) - {"gold_word"})  # no other reason recorded
        for rule in GOLD_WORD_RULES:
            hit = pd.Series([_flagged(r, rule, quoted) for r in g.itertuples()], index=g.index, dtype=bool)
            rows.append(dict(dataset=ds, rule=rule, rejected=int(hit.sum()), only_reason=int((hit & alone).sum()),
                             rewrites=len(g)))
    return pd.DataFrame(rows, columns=["dataset", "rule", "rejected", "only_reason", "rewrites"])
