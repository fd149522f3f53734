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
from edit_lib.book.pages import label, md_table, render

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
    """The chapter (``templates/study.md.j2``): ``demo`` / ``study`` the two profiles, ``results`` the study run's
    results JSON (None or {}: not run), ``where`` the study run's results folder as the page names it."""
    head = headline_rows(results) if results else pd.DataFrame()
    return render("study", demo=demo.name, study=study.name, description=study.run.description, where=where,
                  differences=profile_differences(demo, study).map(_show), results=bool(results),
                  label=label(study.name, results) if results else "",
                  headline=head[COLUMNS].round(4) if len(head) else head,
                  goals="\n".join(goal_section(study.name, head, md_table)) if len(head) else "")
