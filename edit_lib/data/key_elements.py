"""ASAP's key-element scoring guides as a count-to-band scheme (a documented departure, App. A).

The science sets 5 and 6 list "Key Elements:" and map how many an answer states to a score ("3 points / Four key
elements", "1 point / One or two key elements", "0 points / Other"). ``parse_key_elements`` turns that into a
``LevelScheme`` in the rubric's own wording: one indicative point per key element, one level per scored band,
reached from the smallest count its descriptor names. The gold mark stays the human Score1; the scheme says how
the guide maps counts to marks, so EDIT's checklist (Sec. 2.2) has points to list. A guide without a key-element
list (set 10, holistic) gives None and keeps its free-text scheme. Details: book/departures.md, section
"ASAP key elements (edit_lib/data/key_elements.py)".
"""
from __future__ import annotations

import re

from edit_lib.data.errors import DataError
from edit_lib.data.schema import Level, LevelScheme, MarkingPoint

ELEMENTS_HEAD = re.compile(r"^key elements\s*:\s*$", re.IGNORECASE)
BANDS_HEAD = re.compile(r"^rubric\s*:\s*$", re.IGNORECASE)
BAND = re.compile(r"^(\d+)\s+points?\s*$", re.IGNORECASE)
COUNT_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
               "nine": 9, "ten": 10}
DESCRIPTOR = re.compile(r"^((?:\w+)(?:\s*(?:,|or|and)\s*\w+)*)\s+key\s+elements?\s*$", re.IGNORECASE)


def _counts(descriptor: str) -> list[int]:
    """The element counts a band descriptor names ('One or two key elements' -> [1, 2]); [] when it names none."""
    m = DESCRIPTOR.match(descriptor.strip())
    if not m:
        return []
    words = re.findall(r"[a-z]+|\d+", m.group(1).lower())
    return [int(w) if w.isdigit() else COUNT_WORDS[w] for w in words if w.isdigit() or w in COUNT_WORDS]


def parse_key_elements(rubric: str, max_mark: int, where: str = "rubric") -> LevelScheme | None:
    """The count-to-band scheme of a scoring guide (module docstring), or None when it lists no key elements.

    ``rubric``: the guide's text from its first heading (``asap.AsapRubric.rubric``); ``where`` names the file in
    errors. A guide that lists elements but whose bands cannot be read raises DataError naming the line."""
    lines = [ln.strip() for ln in rubric.replace("\r", "").split("\n")]
    start = next((i for i, ln in enumerate(lines) if ELEMENTS_HEAD.match(ln)), None)
    if start is None:
        return None
    elements, i = [], start + 1
    while i < len(lines) and not BANDS_HEAD.match(lines[i]):
        if lines[i]:
            elements.append(lines[i])
        i += 1
    if not elements:
        raise DataError("'Key Elements:' lists no element", path=where, line=start + 1, field="Key Elements")
    if i == len(lines):
        raise DataError("'Key Elements:' without a 'Rubric:' list of score bands", path=where, field="Rubric")
    levels, seen = [], set()
    j = i + 1
    while j < len(lines):
        m = BAND.match(lines[j])
        if not m:
            j += 1
            continue
        mark = int(m.group(1))
        desc = next((ln for ln in lines[j + 1:] if ln), "")
        counts = _counts(desc)
        if mark > 0:
            if not counts:
                raise DataError(f"band '{lines[j]}' names no count of key elements ({desc!r})", path=where,
                                line=j + 2, field="Rubric")
            if mark in seen or not 0 < mark <= max_mark:
                raise DataError(f"band of {mark} points repeated or outside 1..{max_mark}", path=where,
                                line=j + 1, field="Rubric")
            levels.append(Level(level=mark, descriptor=desc, low=mark, high=mark, min_points=min(counts)))
            seen.add(mark)
        j += 2
    if sorted(seen) != list(range(1, max_mark + 1)):
        raise DataError(f"score bands {sorted(seen)} do not cover 1..{max_mark}", path=where, field="Rubric")
    mins = [lv.min_points for lv in sorted(levels, key=lambda lv: lv.level)]
    if mins != sorted(mins) or len(set(mins)) != len(mins):
        raise DataError(f"higher bands must need more key elements (minimum counts {mins})", path=where,
                        field="Rubric")
    if mins[-1] > len(elements):
        raise DataError(f"the top band needs {mins[-1]} key elements but the guide lists {len(elements)}",
                        path=where, field="Key Elements")
    points = tuple(MarkingPoint(id=f"k{n}", text=t) for n, t in enumerate(elements, start=1))
    return LevelScheme(points=points, levels=tuple(levels))


def band_of(scheme: LevelScheme, n_elements: int) -> int:
    """The mark a count of key elements reaches under a count-to-band scheme (0 below the lowest band)."""
    lv = scheme.level_of(n_elements)
    return 0 if lv is None else lv.low
