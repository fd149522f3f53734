"""Where each dataset's rubric checklist comes from (Sec. 2.2), for ``edit-suite run --dry-run``.

A scheme that lists its marking points (PTS, LoR) is checked point by point (``revision.checklist``); a free-text
rubric (SAS-Bench's reference answer and marking explanation, ASAP's scoring guide) by the span rule of
``revision.free_text_checklist``. Real data on disk is read to count questions of each kind; data that is not
there is described from its source (the dry run downloads and builds nothing else).
"""
from __future__ import annotations

from collections import Counter

from edit_lib.config import Profile
from edit_lib.data.errors import DataError, DataFileNotFound
from edit_lib.data.registry import build_dataset
from edit_lib.revision.free_text_checklist import checklist_rubric

KIND_TEXT = {"points": "listed points", "free_text": "free text", "none": "no rubric text (no checklist)"}
BY_SOURCE = {  # what a source gives when its data is not read
    "synthetic": "listed points (PTS / LoR schemes)",
    "sasbench": "free text (reference answer + analysis)",
    "asap": "free text (scoring guide)",
    "jsonl": "each question's scheme kind (known once the file is read)",
}


def _from_source(spec) -> str:
    if spec.source == "asap" and spec.options.get("key_elements"):
        return "listed points where the guide lists key elements, else free text (scoring guide)"
    return BY_SOURCE.get(spec.source, "each question's scheme kind")


def checklist_plan(profile: Profile) -> list[dict]:
    """One row per dataset of the profile: ``dataset``, ``source``, ``checklist`` (where its checklist comes from,
    with question counts when the data was read), ``read`` (whether it was) and the profile's failure policy."""
    out = []
    for spec in profile.data.datasets:
        row = dict(dataset=spec.name, source=spec.source, policy=profile.revision.checklist_failure)
        if spec.source == "synthetic":
            out.append(dict(row, checklist=_from_source(spec), read=False))
            continue
        try:
            ds = build_dataset(spec, profile.run.seed, profile.data.on_error)
        except DataFileNotFound:
            out.append(dict(row, checklist=f"{_from_source(spec)} (data not on disk)", read=False))
            continue
        except (DataError, OSError) as e:
            out.append(dict(row, checklist=f"{_from_source(spec)} (data not read: {str(e).splitlines()[0]})",
                            read=False))
            continue
        kinds = Counter(checklist_rubric(q) for q in ds.questions.values())
        text = ", ".join(f"{KIND_TEXT[k]}: {n} question{'s' * (n != 1)}" for k, n in sorted(kinds.items()))
        out.append(dict(row, checklist=text, read=True))
    return out


def format_checklist_plan(rows: list[dict]) -> list[str]:
    """The dry run's lines for ``checklist_plan``."""
    if not rows:
        return []
    out = [f"rubric checklist per dataset (Sec. 2.2; a failed checklist: revision.checklist_failure = "
           f"{rows[0]['policy']!r}):"]
    out += [f"  {r['dataset']:24s} {r['source']:10s} {r['checklist']}" for r in rows]
    return out
