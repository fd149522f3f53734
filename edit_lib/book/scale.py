"""The book's pages of a run's size: the scale page, how big a run is against the paper's setting (Table 8's data
sizes, Qwen3-8B's parameter count, the App. B / Table 9 recipe values, the EDIT-SFT pools of App. B's compute
budget), every number of the run read from its results JSON or its profile, every number of the paper from
``paper_reference`` or ``configs/paper.yaml``; and the study chapter (the demo sized for power), in the demo's and
the study's book: the profile values where the study differs from the demo (computed from both profiles) and,
from the study run of the book's run root when it has results, its headline comparisons against the study's power
goals (``headline.goal_section``); without one, a line saying the study has not been run there. The book ends it
with the dated record of how the sizes were chosen and what the study run found (``book/records/study.md``).
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import pandas as pd

from edit_lib import paper_reference
from edit_lib.book import claim_rules
from edit_lib.book.headline import COLUMNS, goal_section, headline_rows
from edit_lib.book.pages import PAPER_SETTING, label, md_table, render


POOL_METRICS = ("incorrect_rollouts", "pool_size", "golden_rollouts", "revisions")  # App. B pool counts


def _per_dataset(default, by: dict) -> str:
    return ", ".join(f"{k}: {v}" for k, v in by.items()) if by else str(default)


# The recipe rows: (quantity, read it from a profile, where the paper gives it). The paper's column reads
# `configs/paper.yaml`, whose values are App. B's and Table 9's (comments there cite each).
RECIPE: tuple[tuple[str, Callable, str], ...] = (
    ("Base policy", lambda p: p.model.name_or_path, "App. B"),
    ("Sampled rollouts per training response", lambda p: p.rollouts.n_per_response, "App. B, compute budget"),
    ("Phase-1 sample: training responses per dataset (0 = all)",
     lambda p: _per_dataset(p.rollouts.responses_per_dataset, p.rollouts.responses_by_dataset),
     "App. B (all); a sample is the suite's choice"),
    ("Rollout / evaluation completion budget (tokens)",
     lambda p: f"{p.rollouts.decoding.max_new_tokens} / {p.eval.decoding.max_new_tokens}", "Table 9"),
    ("Probed / audited rollouts (0 = all)", lambda p: f"{p.probe.max_rollouts} / {p.audit.max_rollouts}", "App. B"),
    ("Outcome-filter continuations N", lambda p: p.revision.n_continuations, "App. F"),
    ("LoRA rank / alpha", lambda p: f"{p.sft.lora.r} / {p.sft.lora.alpha}", "App. B"),
    ("SFT epochs / learning rate", lambda p: f"{p.sft.epochs} / {p.sft.learning_rate:g}", "App. B"),
    ("SFT effective batch", lambda p: _per_dataset(p.sft.effective_batch_size, p.sft.effective_batch_by_dataset),
     "App. B"),
    ("SFT optimiser-step cap (0 = the full epochs)", lambda p: p.sft.max_steps, "suite's choice"),
    ("Golden rollouts per kept revision (0 = all correct)", lambda p: p.sft.golden_per_revision,
     "App. B's ratio 33,958 / 22,637"),
    ("SFT pool cap (0 = none)", lambda p: p.sft.max_pool, "suite's choice"),
    ("Alg. 1 k / n / tau", lambda p: f"{p.selection.shortlist_k} / {p.selection.budget_n} / "
                                     f"{p.selection.tie_margin:g}", "suite's choice (the paper gives none)"),
    ("Failed checklist", lambda p: p.revision.checklist_failure, "suite's choice (Sec. 2.2 uses it as context)"),
    ("RL datasets ([] = all)", lambda p: ", ".join(p.rl.datasets) or "all", "App. B"),
    ("RL optimiser steps", lambda p: _per_dataset(p.rl.steps, p.rl.steps_by_dataset), "Table 9"),
    ("RL prompts per step x rollouts per prompt",
     lambda p: f"{p.rl.prompts_per_step} x {p.rl.rollouts_per_prompt}", "Table 9"),
    ("RL completion budget (tokens)", lambda p: p.rl.decoding.max_new_tokens, "Table 9"),
    ("RL learning rate / beta_KL", lambda p: f"{p.rl.learning_rate:g} / {p.rl.beta_kl:g}", "Table 9"),
    ("RL seeds", lambda p: ", ".join(str(s) for s in p.rl.seeds), "App. B (Table 4: 42, 43, 44)"),
    ("Table 4 seed / Table 5 grid datasets ([] = all RL datasets)",
     lambda p: f"{', '.join(p.rl.seed_datasets) or 'all'} / {', '.join(p.rl.grid_datasets) or 'all'}",
     "Sec. 3.2 (Private-Biology and SAS-History / Private-Biology)"),
    ("Table 10 probed test responses", lambda p: p.rl.divergence_responses, "App. D"),
    ("Cluster-bootstrap resamples", lambda p: p.significance.n_boot, "App. G"),
    ("RSR responses per edit (0 = all)", lambda p: p.rsr.responses_per_edit, "App. I"),
)


def _data_sizes(results: dict) -> pd.DataFrame:
    t8 = pd.DataFrame(claim_rules.rows(results, "00_data", "table8") or [])
    if t8.empty:
        return t8
    split = {"train": "train", "id_test": "id", "ood_test": "ood"}
    t8 = t8[t8["split"].isin(split)].assign(split=lambda d: d["split"].map(split))
    cell = t8.apply(lambda r: f"{int(r.responses):,} / {int(r.questions)}" if r.responses else "--", axis=1)
    return (t8.assign(cell=cell).pivot(index="dataset", columns="split", values="cell")
            .reindex(columns=["train", "id", "ood"]).fillna("--").reset_index())


def _paper_sizes() -> pd.DataFrame:
    t8 = paper_reference.table("Table 8")
    rows = []
    for (ds, subj), g in t8.groupby(["dataset", "subject"], sort=False):
        v = {(r.split, r.metric): r.value for r in g.itertuples()}
        row = {"dataset": f"{ds} {subj}"}
        for s in ("train", "id", "ood"):
            row[s] = f"{int(v[(s, 'responses')]):,} / {int(v[(s, 'questions')])}" if (s, "responses") in v else "--"
        lo, hi = int(v[("", "max_mark_min")]), int(v[("", "max_mark_max")])
        row["marks"] = str(lo) if lo == hi else f"{lo}-{hi}"
        rows.append(row)
    return pd.DataFrame(rows)


def _pools(results: dict) -> pd.DataFrame:
    pb = pd.DataFrame(claim_rules.rows(results, "05_edit_sft", "pool_bookkeeping") or [])
    if pb.empty:
        return pb
    keep = [c for c in ("system", "dataset", "incorrect_rollouts", "golden_rollouts", "kept", "pool_size",
                        "pool_trained") if c in pb.columns]
    return pb[keep].reset_index(drop=True)


def scale_page(name: str, results: dict, profile, paper_profile=None) -> str:
    """How big this run is against the paper's setting: data sizes (the run's 00 table beside the paper's
    Table 8), the model's parameter count (01) beside Qwen3-8B's (``dry_run``, built on the meta device from the
    stored config), the recipe values the two profiles set (App. B, Table 9) and the EDIT-SFT pools (05) beside
    App. B's compute-budget paragraph. Every number of the run is read from its results JSON or its profile."""
    from edit_lib.config import load_profile
    paper = paper_profile or load_profile("paper")
    params = claim_rules.extra(results, "01_base_policy", "parameters")
    counts, count_error = None, ""
    try:
        from edit_lib.runner.dry_run import model_counts
        counts, _ = model_counts(paper)
    except Exception as err:  # the paper's config is stored in the repository; say so if it cannot be read
        count_error = str(err)
    model = pd.DataFrame([
        {"": "parameters", "this run": f"{params:,}" if params else "(01 not run)",
         "paper": f"{counts['total']:,}" if counts else "", "cite": "App. B (Qwen3-8B; counted by `dry_run`)"},
        {"": "LoRA trainable parameters", "this run": "", "paper": f"{counts['trainable']:,}" if counts else "",
         "cite": "App. B (r = 64 on all seven projections)"}])
    recipe = pd.DataFrame([{"quantity": what, "this run": str(get(profile)), "paper": str(get(paper)), "cite": cite}
                           for what, get, cite in RECIPE])
    ref = paper_reference.table("App. B")
    ref = ref[ref.metric.isin(POOL_METRICS)]  # App. B's compute figures are the dry run's (runner/time_estimate.py)
    paper_pools = pd.DataFrame([{"system": r.system or "(shared)", "dataset": f"{r.dataset} {r.subject}",
                                 "metric": r.metric, "value": f"{int(r.value):,}", "cite": r.cite}
                                for r in ref.itertuples()])
    return render("scale", name=name, label=label(name, results), paper_setting=PAPER_SETTING,
                  sizes=_data_sizes(results), paper_sizes=_paper_sizes(), count_error=count_error, model=model,
                  recipe=recipe, pools=_pools(results), paper_pools=paper_pools)


# ------------------------------------------------------------------ the study chapter

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
