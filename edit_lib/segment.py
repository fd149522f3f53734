"""Step segmentation: cut a grading completion into its reasoning steps s_1..s_T (Sec. 2.1).

The probe (Eq. 1) is read at the step boundaries k = 0..T and the audit (Eq. 3) scores each step, so the
segmentation decides T and where every boundary falls (App. B reports 5.2 boundaries per rollout).
``steps.rule`` says how to cut: ``markers``, ``paragraphs``, ``lines`` or ``auto`` (the default). The final-mark
line is never a step; ``Segmentation.bounds`` gives the character offsets of the boundaries. Main entries:
``segment``, ``split_steps``, ``step_boundaries``.

Details: book/departures.md, section "Step segmentation rules (edit_lib/segment.py)".
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from edit_lib.config import STEP_RULES

RULES = STEP_RULES  # the schema holds them, so a profile is checked when it loads

_NUM = r"\d(?: ?\d)*"  # "12" or the canonical tokenised "1 2"
_EMPH = r"[*_]{0,3}"
_STEP_MARK = re.compile(rf"^(\s*)(?:[#>]+\s*)?{_EMPH}\s*step\s*{_NUM}(?:\.\d+)*\s*{_EMPH}\s*(?:[:.)\-–—]|$)"
                        rf"\s*{_EMPH}\s*", re.IGNORECASE)
_NUMBERED = re.compile(rf"^(\s*){_EMPH}\(?\d{{1,3}}[.):]{_EMPH}(?:\s+|$)")
_BULLET = re.compile(r"^(\s*)[-*•·‣▪●◦]\s+")
FAMILIES = (("step", _STEP_MARK), ("numbered", _NUMBERED), ("bullet", _BULLET))
_FINAL_LINE = re.compile(r"^[\s*_#>]*final\s+mark\s*[*_]*\s*:", re.IGNORECASE)
_WORD = re.compile(r"\w")


@dataclass(frozen=True)
class Segmentation:
    """Steps s_1..s_T of one completion (Sec. 2.1) and where they sit in it."""

    steps: tuple[str, ...]  # step bodies: marker removed, lines joined by one space
    spans: tuple[tuple[int, int], ...]  # [start, end) of each step's text in the completion, marker included
    bounds: tuple[int, ...]  # boundaries k = 0..T: completion[:bounds[k]] holds s_1..s_k
    rule: str  # the rule applied ('auto' resolved to markers / paragraphs / lines)

    @property
    def n_steps(self) -> int:
        return len(self.steps)


def is_final_line(line: str) -> bool:
    """True for the final-mark line (``Final mark: ...``, ``**Final mark:** ...``), which is never a step."""
    return bool(_FINAL_LINE.match(line))


def check_rule(rule: str) -> str:
    if rule not in RULES:
        raise ValueError(f"steps.rule must be one of {RULES}, got {rule!r}")
    return rule


def _lines(completion: str) -> list[tuple[int, str]]:
    """(start offset, text) of every line before the first final-mark line."""
    out, pos = [], 0
    for line in completion.split("\n"):
        if is_final_line(line):
            break
        out.append((pos, line))
        pos += len(line) + 1
    return out


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _family(lines: list[tuple[int, str]]):
    """The highest-priority marker family present and its top-level indentation, or None.

    A numbered or bullet family needs two top-level items (a list); one ``Step N`` line is enough."""
    for name, rx in FAMILIES:
        hits = [_indent(t) for _, t in lines if rx.match(t)]
        if hits:
            top = min(hits)
            if name == "step" or sum(h == top for h in hits) >= 2:
                return rx, top
    return None


def _opens_marker(line: str, family) -> bool:
    if family is None:
        return False
    rx, top = family
    return bool(rx.match(line)) and _indent(line) == top


def _strip_marker(line: str) -> str:
    for _, rx in FAMILIES:
        m = rx.match(line)
        if m:
            return line[m.end():].strip()
    return line.strip()


def resolve_rule(completion: str, rule: str = "auto") -> str:
    """The rule 'auto' stands for on this completion (see the module docstring); other rules unchanged."""
    if check_rule(rule) != "auto":
        return rule
    lines = _lines(completion)
    if _family(lines) is not None:
        return "markers"
    seen_text = gap = False
    for _, t in lines:
        if _WORD.search(t):
            if seen_text and gap:
                return "paragraphs"
            seen_text, gap = True, False
        elif seen_text:
            gap = True
    return "lines"


def segment(completion: str, rule: str = "auto") -> Segmentation:
    """Reasoning steps s_1..s_T of a grading completion and their boundaries (Sec. 2.1; rules above)."""
    rule = resolve_rule(completion, rule)
    lines = _lines(completion)
    family = _family(lines) if rule == "markers" else None
    groups: list[list[tuple[int, str]]] = []  # the lines of each step
    after_blank = False
    for start, text in lines:
        blank = not text.strip() if rule == "markers" else not _WORD.search(text)
        if blank:
            after_blank = True
            continue
        if rule == "lines" or not groups:
            opens = True
        elif rule == "paragraphs":
            opens = after_blank
        else:  # markers: a marker line, or an unindented block after a blank line once the open step has a body
            opens = _opens_marker(text, family) or (
                after_blank and family is not None and _indent(text) <= family[1]
                and bool(_body(groups[-1])) and not _opens_any(text))
        if opens:
            groups.append([])
        groups[-1].append((start, text))
        after_blank = False
    steps = tuple(_body(g) for g in groups)
    spans = tuple((g[0][0] + _indent(g[0][1]), g[-1][0] + len(g[-1][1].rstrip())) for g in groups)
    bounds = (0,) + tuple(min(g[-1][0] + len(g[-1][1]) + 1, len(completion)) for g in groups)
    return Segmentation(steps, spans, bounds, rule)


def _opens_any(line: str) -> bool:
    """A marker line of a lower-priority family (a sub-item): it never opens a step after a blank line."""
    return any(rx.match(line) for _, rx in FAMILIES)


def _body(group: list[tuple[int, str]]) -> str:
    parts = [_strip_marker(group[0][1])] + [t.strip() for _, t in group[1:]]
    return " ".join(p for p in parts if p)


def split_steps(completion: str, rule: str = "auto") -> list[str]:
    """Step bodies s_1..s_T of a completion (Sec. 2.1); the final-mark line excluded."""
    return list(segment(completion, rule).steps)


def step_boundaries(completion: str, rule: str = "auto") -> list[int]:
    """Character offsets of the step boundaries k = 0..T (Eq. 1): completion[:b_k] holds steps s_1..s_k."""
    return list(segment(completion, rule).bounds)
