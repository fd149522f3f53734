"""The study chapter (the demo sized for power), in the demo's and the study's book: what the profile is
for, the profile values where it differs from the demo (computed from both profiles), and, from the study run of
the book's run root when it has results, its headline comparisons against the study's power goals (``goals``);
without one, a line saying the study has not been run there. The book ends it with the dated record of how the
sizes were chosen and what the measured study run found (``book/records/study.md``, ``records``)."""
from __future__ import annotations

import dataclasses

import pandas as pd

from edit_lib.book.goals import goal_section
from edit_lib.book.headline import COLUMNS, headline_rows
from edit_lib.book.pages import label, md_table

SECTIONS = ("data", "rollouts", "rl", "sft", "rsr", "significance")  # what the study sizes; run/model stay alike


def _flat(d, prefix: str = "") -> dict[str, object]:
    """A profile section as key -> value; a list of named entries (datasets) is keyed by each entry's name."""
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flat(v, key + "."))
        elif isinstance(v, list) and v and all(isinstance(x, dict) and "name" in x for x in v):
            out.update(_flat({x["name"]: {kk: vv for kk, vv in x.items() if kk != "name"} for x in v}, key + "."))
        else:
            out[key] = v
    return out


def profile_differences(demo, study) -> pd.DataFrame:
    """Every value of ``SECTIONS`` that differs between the two profiles (a key one lacks shows as 'default')."""
    a, b = ({k: v for s in SECTIONS for k, v in _flat({s: dataclasses.asdict(p)[s]}).items()} for p in (demo, study))
    rows = [{"profile value": k, demo.name: a.get(k, "default"), study.name: b.get(k, "default")}
            for k in sorted(set(a) | set(b)) if a.get(k, "default") != b.get(k, "default")]
    return pd.DataFrame(rows, columns=["profile value", demo.name, study.name])


def _show(v) -> str:
    return ", ".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)


def study_page(demo, study, results: dict | None, where: str) -> str:
    """The chapter: ``demo`` / ``study`` the two profiles, ``results`` the study run's results JSON (None or {}:
    not run), ``where`` the study run's results folder as the page names it."""
    diff = profile_differences(demo, study)
    out = ["# The study profile: the demo sized for power", "",
           f"`edit-suite run --profile {study.name}` (`configs/{study.name}.yaml`): {study.run.description} It runs "
           "the demo's three worlds, grader and Phase-1 recipe with the sizes the power goals ask for "
           "(`edit_lib/book/goals.py`), so that "
           "the paper's headline comparisons (Tables 3, 4 and 12) can be decided on a CPU; each size was chosen "
           "before any EDIT comparison ran, from the paper's process statistics or from GRPO-only seeds "
           "(`edit-suite pilot rl-seeds`).", "",
           "## Where the study differs from the demo", "",
           f"Computed from today's `configs/{demo.name}.yaml` and `configs/{study.name}.yaml`:", "",
           md_table(diff.map(_show)) if len(diff) else "The two profiles set the same values.", ""]
    if results:
        head = headline_rows(results)
        out += [f"## The study run (`{where}`)", "", label(study.name, results), ""]
        out += ([md_table(head[COLUMNS].round(4)), "", *goal_section(study.name, head, md_table)] if len(head) else
                ["The run has no headline comparison yet (09, 07's Table 4 or 04's contrasts not run).", ""])
    else:
        out += ["## The study run", "", f"The study has not been run in this run root: `{where}` holds no "
                f"results. `edit-suite run --profile {study.name}` runs it (resumable), then `edit-suite book "
                f"--profile {study.name}` builds its own book; there, and in the demo's book of the same run root, "
                "this chapter then shows the study's comparisons against its goals.", ""]
    return "\n".join(out)
