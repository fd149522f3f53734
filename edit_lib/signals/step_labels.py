"""The step annotator of the audit validation (App. E, Table 11) and of the locality check's role rule (App. J).

The paper labels each grading step as grounding or synthesis with a stronger annotator model. An annotator here
is any function ``(step_text) -> "grounding" | "synthesis" | None``, chosen by ``analysis.step_annotator``:

* ``none``: no labels (03 reports the audit without Table 11; the locality check drops its role rule);
* a registered name (``providers``): ``synthetic`` on the embedded default, the synthetic world's step grammar;
* a path to a JSONL file of ``{"step": text, "label": "grounding" | "synthesis"}`` rows a user supplies (e.g.
  from an annotator model): a step missing from the file gets None and is counted as unlabelled.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from edit_lib import providers
from edit_lib.data.schema import DataError, DataFileNotFound

Annotator = Callable[[str], "str | None"]
LABELS = ("grounding", "synthesis")


def labels_file_annotator(path: str | Path) -> Annotator:
    """An annotator that looks each step's text up in a JSONL labels file (module docstring); every row is
    checked and a bad one raises a ``DataError`` naming the file, line and field."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataFileNotFound(f"analysis.step_annotator: labels file {path} does not exist")
    table: dict[str, str] = {}
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"not JSON ({e.msg})", path=str(path), line=i) from e
        if not isinstance(row, dict) or not isinstance(row.get("step"), str):
            raise DataError("a string is required", path=str(path), line=i, field="step")
        if row.get("label") not in LABELS:
            raise DataError(f"{row.get('label')!r} is not one of {LABELS}", path=str(path), line=i, field="label")
        if table.get(row["step"], row["label"]) != row["label"]:
            raise DataError(f"the step is labelled both {table[row['step']]!r} and {row['label']!r}",
                            path=str(path), line=i, field="label")
        table[row["step"]] = row["label"]
    return lambda step: table.get(step.strip(), table.get(step))


def is_labels_file(choice: str) -> bool:
    return choice.endswith((".jsonl", ".json")) or "/" in choice


def step_annotator(choice: str) -> Annotator | None:
    """The annotator ``analysis.step_annotator`` names (module docstring); None for ``none``."""
    if is_labels_file(choice):
        return labels_file_annotator(choice)
    return providers.lookup("annotator", choice)
