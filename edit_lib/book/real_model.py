"""The book chapter "A real model on real data, on a CPU": what a run with a pretrained model (not the embedded
grader) measured, beside the embedded world's run and the paper, each labelled with its run.

Written from the results JSON of the run (and, when the same run root holds one, of the embedded default's
`demo` run), never from typed numbers. It states the profile's departures from the paper (the format warm-up
as Base, ``model.warmup``; the forced read, ``eval.forced_read``; ASAP's key elements), shows the warm-up (its
matcher agreement and held-out QWK curve), the Base's two reads (Table 1's metrics with the parse only and with
the forced read), every graded system's metrics both ways with 09's response-level intervals and MDEs, the
EDIT-SFT and InT pools with their counts (App. B), each role's parse share, the systems the profile did not run,
what each notebook can and cannot say, and the wall time per stage.
"""
from __future__ import annotations

import pandas as pd

from edit_lib import paper_reference
from edit_lib.book import claims
from edit_lib.book.claim_rules import extra
from edit_lib.book.pages import PAPER_SETTING, label, md_table
from edit_lib.config import REVISER_ROLES
from edit_lib.revision.pool import UNPARSED
from edit_lib.systems import BY_NAME, EDIT_SFT, label as system_label


#: Per notebook: what it cannot say on a run of free-text rubrics without an annotator model (the cpu-real
#: profile); shown only for the stages the run has.
LIMITS = {
    "01_base_policy": "The Base is the format warm-up (a departure: the paper's Base grades zero-shot); the "
                      "zero-shot model is graded beside it on the evaluation splits.",
    "03_audit_validation": "App. E's validation labels come from an annotator model, absent here: the notebook "
                           "shows the audit's signal distributions, not Table 11's agreement numbers.",
    "04_counterfactual_selection": "The checklist, the atomic rewrite and the continuations are written by the "
                                   "policy itself: the repair rates measure what this model can revise.",
    "05_edit_sft": "With `sft.golden_per_revision` > 0 (App. B's ratio) a pool draws golden rollouts in "
                   "proportion to its kept revisions: with no accepted repair it is empty and the system has no "
                   "policy (see the pools above).",
    "06_rl": "A few RL steps on a handful of prompts: the run tests that every arm trains and that the shaping "
             "is calibrated, not that RL improves grading.",
    "08_rsr_interventions": "App. I's LoR edits move the bands of the key-element sets, so their edited gold "
                            "follows from the human mark alone (08's `regold`: `gold and scheme`); the PTS edits "
                            "need each answer's covered points, which real answers do not carry, and a holistic "
                            "guide (set 10) has no structured scheme: neither is edited.",
    "09_significance": "App. G's question-level bootstrap resamples questions: with fewer than "
                       "significance.min_questions held-out questions, 09 warns that its intervals and p-values "
                       "are descriptive only.",
}
METRICS = ("qwk", "acc", "mae", "n", "n_invalid")


def _empty_pool_reason(edit: pd.DataFrame, results: dict) -> str:
    """Why the EDIT-SFT pool is empty: no repair accepted, or accepted repairs none of whose continuations reached
    the gold mark (04's continuations cut at their budget counted); golden rollouts follow the kept revisions."""
    accepted = int(edit["accepted"].sum()) if "accepted" in edit else 0
    why = "no repair was accepted" if not accepted else (
        f"{accepted} repairs were accepted, but no continuation of any reached the gold mark (kept 0)")
    trunc = extra(results, "04_counterfactual_selection", "truncated_continuations")
    cut = (f"; in 04, {trunc} continuations used their whole token budget without a final line"
           if accepted and trunc else "")
    return (f"The EDIT-SFT pool is empty: {why}{cut}. Golden rollouts are drawn in proportion to the kept "
            "revisions (`sft.golden_per_revision`, App. B), so none was drawn.")


def _frame(results: dict, stage: str, table: str) -> pd.DataFrame:
    return pd.DataFrame(claims.rows(results, stage, table))


def _system_metrics(results: dict, table: str) -> pd.DataFrame:
    m = _frame(results, "07_evaluation", table)
    if m.empty:
        return m
    m = m[m["subject"] == "all"].copy()
    m["system"] = [system_label(s) for s in m["system"]]
    m["seed"] = [str(int(x)) if x == x and x is not None else "" for x in m["seed"]]
    cols = ["system", "seed", "dataset", "split", *[c for c in (*METRICS, "n_forced") if c in m]]
    return m[cols].reset_index(drop=True)


def _limits(results: dict) -> list[str]:
    """``LIMITS`` for the stages the run has, in stage order, with what 04's checklists mean under the run's
    checklist policy (``checklist_limits``)."""
    lim = {s: [t] for s, t in LIMITS.items() if s in results}
    counts = _frame(results, "04_counterfactual_selection", "checklist_counts")
    policy = extra(results, "04_counterfactual_selection", "checklist_failure", "keep")
    more = checklist_limits(counts, policy)
    if more:
        lim.setdefault("04_counterfactual_selection", []).extend(more)
    return [f"* `{s}`: {' '.join(lim[s])}" for s in sorted(lim)]


def _qwk_wide(m: pd.DataFrame) -> pd.DataFrame:
    if m.empty:
        return m
    w = m.pivot_table(index=["dataset", "split"], columns="system", values="qwk", aggfunc="first", sort=False)
    order = [BY_NAME[s].label for s in BY_NAME if BY_NAME[s].label in w.columns]
    return w[order].reset_index()


def _role_examples(pairs: dict, who: str) -> list[str]:
    """The Phase-1 role examples a warm-up's summary (``pairs``) counts, as a table, or [] without any."""
    roles, trained = pairs.get("roles") or {}, pairs.get("trained") or {}
    if not set(roles) - {"grading"}:
        return []
    rows = [dict(role=r, examples=v.get("kept", 0), too_long=v.get("too_long", 0),
                 matcher_disagrees=v.get("matcher_disagrees", 0), checker_rejects=v.get("checker_rejects", 0),
                 trained=(trained.get(r) or [0, 0])[0], steps=(trained.get(r) or [0, 0])[1]) for r, v in roles.items()]
    return [f"Examples per role in {who} (`examples`: built and within `max_length`; `matcher_disagrees`: training "
            "answers a Phase-1 role cannot be written from; `trained`/`steps`: examples and optimiser steps it took "
            "of each):", "", md_table(pd.DataFrame(rows)), ""]


def _warmup_section(results: dict) -> list[str]:
    """01's warm-up: its build time, the lexical matcher's agreement and the held-out QWK against steps."""
    w = extra(results, "01_base_policy", "warmup") or {}
    curve = _frame(results, "01_base_policy", "warmup_heldout_curve")
    if not w and curve.empty:
        return []
    out = ["## The warm-up (01)", ""]
    if w.get("build_seconds"):
        out += [f"Built in {w['build_seconds'] / 60:.1f} min ({w.get('steps')} steps; training "
                f"{(w.get('seconds') or 0) / 60:.1f} min).", ""]
    match = (w.get("pairs") or {}).get("matcher") or {}
    if match:
        rows = [dict(question=q, pairs=v["pairs"], named=v["agree"], share=round(v["agree"] / max(v["pairs"], 1), 3),
                     threshold=(w.get("thresholds") or {}).get(q, {}).get("threshold"),
                     balanced_agreement=(w.get("thresholds") or {}).get(q, {}).get("balanced_agreement"))
                for q, v in sorted(match.items())]
        out += ["Judgements naming rubric points: pairs whose matched points reach the gold mark name them "
                "(`named`); the others name none. `balanced_agreement`: the matcher on every training answer, "
                "averaged over marks.", "", md_table(pd.DataFrame(rows)), ""]
    out += _role_examples(w.get("pairs") or {}, "the warm-up")
    rev = extra(results, "01_base_policy", "reviser") or {}
    if rev:
        out += [f"The separate reviser (`model.warmup.role_model: separate`): {rev.get('steps')} steps in "
                f"{(rev.get('seconds') or 0) / 60:.1f} min, on the Phase-1 roles only.", ""]
        out += _role_examples(rev.get("pairs") or {}, "the reviser")
    if len(curve):
        out += ["Held-out QWK against warm-up steps (greedy grading of training answers the warm-up never "
                "trained on; the test splits are not used):", "", md_table(curve), ""]
    return out


def _interval_section(results: dict) -> list[str]:
    """09's response-level intervals and MDEs (few held-out questions)."""
    rb = _frame(results, "09_significance", "response_bootstrap")
    if rb.empty:
        return []
    rb["system"] = [system_label(s) for s in rb["system"]]
    for c in ("qwk", "delta"):
        rb[c + " [95% CI]"] = [f"{r[c]:+.3f} [{r[c + '_lo']:+.3f}, {r[c + '_hi']:+.3f}]" if r[c] == r[c] else ""
                               for _, r in rb.iterrows()]
    cols = ["dataset", "split", "system", "n_questions", "n_responses", "qwk [95% CI]", "delta [95% CI]", "mde"]
    return ["### Intervals and MDEs (09, response level)", "",
            f"With {int(rb['n_questions'].max())} held-out questions or fewer per scope, a question-level interval or "
            "MDE (App. G) says little, so 09 resamples responses within each question: these intervals hold for "
            "these questions only. `delta`: the paired "
            "difference from Base; `mde`: the smallest difference the comparison detects with 80% power.", "",
            md_table(rb[cols].round(3)), ""]


def role_parse_shares(results: dict) -> pd.DataFrame:
    """Per role the policy plays: outputs and the share that parse (grading: a final mark in 01's greedy
    gradings; checklist: status ok in 04; rewrite: a rewrite block that parsed in 04; InT proposal: both blocks
    with valid step indices in 04; continuation: a final mark after an accepted revised prefix in 04)."""
    rows = []
    reads = _frame(results, "01_base_policy", "base_metrics")
    if len(reads) and {"n", "n_invalid"} <= set(reads):
        n = int(reads["n"].sum())
        rows.append(dict(role="grading (Base, greedy)", outputs=n, parsed=n - int(reads["n_invalid"].sum())))
    cl = _frame(results, "04_counterfactual_selection", "checklist_status")
    if len(cl):
        rows.append(dict(role="rubric checklist", outputs=int(cl["responses"].sum()),
                         parsed=int(cl.loc[cl["status"] == "ok", "responses"].sum())))
    rv = _frame(results, "04_counterfactual_selection", "revision_status")
    if len(rv):
        rv = rv[rv["rule"] == "edit"] if "rule" in rv and (rv["rule"] == "edit").any() else rv
        rv = rv[~rv["status"].astype(str).str.startswith("checklist_")]  # blocked: never written
        rows.append(dict(role="atomic rewrite", outputs=int(rv["revisions"].sum()),
                         parsed=int(rv.loc[~rv["status"].isin(UNPARSED), "revisions"].sum())))
    ip = _frame(results, "04_counterfactual_selection", "int_proposal_status")
    if len(ip):
        bad = ("no_intervention_block", "no_first_error_block", "bad_step_index", "index_beyond_T")
        rows.append(dict(role="InT proposal", outputs=int(ip["proposals"].sum()),
                         parsed=int(ip.loc[~ip["status"].isin(bad), "proposals"].sum())))
    cs = _frame(results, "04_counterfactual_selection", "continuations_by_step")
    if len(cs):
        rows.append(dict(role="continuation after a revised prefix", outputs=int(cs["continuations"].sum()),
                         parsed=int(cs["parsed"].sum())))
    t = pd.DataFrame(rows, columns=["role", "outputs", "parsed"])
    return t.assign(share=(t["parsed"] / t["outputs"].clip(lower=1)).round(3))


def _stage_seconds(results: dict) -> pd.DataFrame:
    rows = [dict(stage=s, seconds=round(float(r.get("seconds") or 0), 1)) for s, r in sorted(results.items())]
    return pd.DataFrame(rows)


def real_model_page(name: str, results: dict, profile, embedded: tuple[str, dict] | None = None) -> str:
    """The chapter for run ``name`` (``results``: stage -> results JSON; ``profile``: its profile). ``embedded``:
    (name, results) of an embedded-default run to set beside it, or None."""
    cpu = profile.model.device == "cpu"
    title = "A real model on real data" + (", on a CPU" if cpu else "")
    w = profile.model.warmup
    out = [f"# {title} (run `{name}`)", "", label(name, results), "",
           f"Policy: `{profile.model.name_or_path}` ({profile.model.dtype}, {profile.model.device}). "
           f"{profile.run.description}", ""]
    dep = departures(profile)
    if dep:
        out += ["## Departures from the paper", "", *[f"* {d}" for d in dep], ""]
    reads = _frame(results, "01_base_policy", "base_reads")
    out += ["## The Base's two reads (01)", ""]
    if len(reads):
        cols = [c for c in ("system", "read", "split", "n", "n_invalid", "n_forced", "qwk", "acc", "mae") if c in reads]
        out += [md_table(reads[cols]), "", "`n_invalid`: completions with no parsable final line (scored as "
                "`eval.invalid_as`); `n_forced`: those the forced read supplied.", ""]
    else:
        out += ["`01_base_policy` wrote no `base_reads` table (no warm-up and no forced read).", ""]
    out += _warmup_section(results)
    steps = _frame(results, "01_base_policy", "step_counts")
    if len(steps):
        out += ["Reasoning steps per sampled rollout (Sec. 2.1; the probe reads at every boundary):", "",
                md_table(steps), ""]
    m = _system_metrics(results, "metrics")
    out += ["## Every system (07)", ""]
    if len(m):
        out += ["QWK with the parse only (the paper's reading):", "", md_table(_qwk_wide(m)), ""]
        if (m["qwk"].abs() < 5e-4).all():
            out += ["Every graded system has QWK 0.000 on every split: no agreement with the gold marks beyond "
                    "chance, so this run cannot rank the systems.", ""]
        mf = _system_metrics(results, "metrics_forced_read")
        if len(mf):
            out += ["QWK with the forced read filling failed parses:", "", md_table(_qwk_wide(mf)), ""]
        out += ["All metrics (parse only):", "", md_table(m), ""]
    else:
        out += ["`07_evaluation` has not run.", ""]
    out += _interval_section(results)
    if embedded is not None:
        ename, eres = embedded
        em = _system_metrics(eres, "metrics")
        out += [f"### Beside the embedded world (run `{ename}`)", "", label(ename, eres), "",
                md_table(_qwk_wide(em)) if len(em) else f"Run `{ename}` has no `07_evaluation` results.", ""]
    ref = paper_reference.table("Table 1")
    ref = ref[ref["metric"] == "qwk"]
    if len(ref):
        wide = ref.pivot_table(index=["subject", "split"], columns="system", values="value", sort=False).reset_index()
        out += [f"### The paper (Table 1, QWK; {PAPER_SETTING})", "", md_table(wide), ""]
    not_run = extra(results, "07_evaluation", "systems_not_run") or \
        list(profile.run.skip_systems)
    if not_run:
        out += ["## Systems not run on this profile", "", "Left out by `run.skip_systems` to fit the run's budget "
                "(listed in 05-07's results as not run): " + ", ".join(
                    f"{BY_NAME[s].label} (`{s}`)" for s in not_run if s in BY_NAME) + ".", ""]
    pools = _frame(results, "05_edit_sft", "pool_bookkeeping")
    if len(pools):
        cols = [c for c in ("system", "dataset", "golden_rollouts", "incorrect_rollouts", "revisions_tried",
                            "accepted", "kept", "pool_size") if c in pools]
        out += ["## Training pools (05)", "", md_table(pools[cols] if len(cols) > 2 else pools), "",
                "`accepted`: repairs that passed the parse, locality and mimicry checks; `kept`: those with a "
                "continuation reaching the gold mark (the outcome filter, App. F).", ""]
        edit = pools[pools["system"] == EDIT_SFT]
        if len(edit) and {"pool_size", "golden_rollouts"} <= set(edit):
            if (edit["pool_size"] == 0).all():
                out += [_empty_pool_reason(edit, results), ""]
            elif (edit["pool_size"] <= edit["golden_rollouts"]).all():
                out += ["The EDIT-SFT pool holds golden rollouts only: no repair of an incorrect rollout was "
                        "kept.", ""]
    roles = role_parse_shares(results)
    if len(roles):
        taught = (f"The warm-up teaches {', '.join(w.roles)}; a role it does not teach is written zero-shot."
                  if w.steps > 0 else "Every role is written zero-shot (no warm-up).") + (
            " The checklist, rewrite and InT proposal are the separate reviser's." if w.role_model == "separate"
            and w.steps > 0 else "")
        out += ["## Does the model write each role's format?", "",
                "Share of outputs that parse, per role the policy plays (grading 01; checklist, rewrite, InT "
                f"proposal and continuation 04). {taught}", "", md_table(roles), ""]
    cs = _frame(results, "04_counterfactual_selection", "continuations_by_step")
    if len(cs):
        out += ["### Continuations by the step the revision ends at (04)", "",
                "The outcome filter's continuations (App. F) after each accepted revised prefix, by the step k it "
                "ends at: a repair is kept only where a continuation reaches the gold mark, so a rule that picks "
                "steps the policy cannot go on from keeps nothing there.", "", md_table(cs), ""]
    lim = _limits(results)
    if lim:
        out += ["## What each notebook can and cannot say here", "", *lim, ""]
    st = _stage_seconds(results)
    if len(st):
        out += ["## Wall time", "", md_table(st), "",
                f"Total {st.seconds.sum() / 60:.1f} min as recorded when each stage last ran.", ""]
    return "\n".join(out)


# ---------------------------------------------------------------- the departures the chapter lists first
def departures(profile) -> list[str]:
    """The profile's departures from the paper, one markdown paragraph each (App. B: the paper's Base, Qwen3-8B,
    grades and plays every Phase-1 role zero-shot; Sec. 2.2)."""
    w, fr = profile.model.warmup, profile.eval.forced_read
    dep = []
    if w.steps > 0:
        how = ("a templated judgement" if w.judgement == "template" else "a judgement naming the rubric points "
               f"the lexical matcher finds ({w.judgement}) where they reach the gold mark, else a templated one")
        layers = f", last {w.lora_layers} layers" if w.lora_layers else ""
        dep.append(f"**Warm-up as Base** (`model.warmup`): {w.steps} LoRA steps of {w.batch_size} answers of one "
                   f"question, their shared prompt prefix laid out once (lr {w.learning_rate:g}, r {w.lora_r}"
                   f"{layers}) on grading prompts of the training answers "
                   f"({'mark-balanced' if w.balanced else 'a seeded sample'}, never the test answers) with {how}, "
                   "ending in the gold mark, merged into the weights. The paper's Base grades zero-shot (App. B).")
        extra = [r for r in w.roles if r != "grading"]
        if extra:
            dep.append(f"**Phase-1 roles in the warm-up** (`model.warmup.roles`): {', '.join(extra)}, "
                       f"{w.role_responses_per_question} training answers per question each, in batches of "
                       f"{w.role_batch_size}, written from answers whose matched rubric points reach the gold mark "
                       "(the matcher's content, never the model's; book/departures.md, \"The warm-up's roles\"). "
                       "The paper's Base writes every role zero-shot (App. B, J)." + (
                           f" **A separate reviser** (`role_model: separate`) learns {', '.join(REVISER_ROLES)} in a "
                           f"second warm-up of the same weights ({w.role_steps} steps) and writes them in 04-05; the "
                           "Base grades and continues (the paper's policy plays every role, Sec. 2.2)."
                           if w.role_model == "separate" else ""))
    if any(d.source == "asap" and d.options.get("key_elements") for d in profile.data.datasets):
        dep.append("**Key elements as a count-to-band scheme** (ASAP's `key_elements`): sets whose scoring guide "
                   "lists key elements are scored by their count in the guide's own words, so the checklist has "
                   "points to list; gold stays the human score (book/departures.md, section \"ASAP key elements "
                   "(edit_lib/data/key_elements.py)\").")
    if fr:
        dep.append("**Forced read** (`eval.forced_read`): a completion without a parsable final line also gets "
                   "argmax p_T (Eq. 1 at its last boundary), reported as `parsed+forced` beside the paper's "
                   "parse-only reading, never in its place.")
    return dep


# ------------------------------------------------------------------ the checklists' limits under the run's policy

POLICY_EFFECT = {"keep": "the reviser sees a failed checklist as written",
                 "drop_lines": "the reviser sees only a failed checklist's lines that verify alone",
                 "block": "a failed checklist blocks the repair (status `checklist_<reason>`)"}


def checklist_limits(counts: pd.DataFrame, policy: str) -> list[str]:
    """What 04's ``checklist_counts`` (Sec. 2.2) means under ``revision.checklist_failure`` = ``policy``: free-text
    checklists checked by the span rule, failed checklists and what the policy does with them, and responses with
    no rubric text (no checklist: blocked under 'block', no checklist context otherwise)."""
    if counts.empty:
        return []
    out = []
    free = counts[counts["rubric"] == "free_text"]
    if len(free):
        out.append(f"{int(free['written'].sum())} rubric checklists were written against a free-text rubric and "
                   f"checked by the span rule (book/departures.md); {int(free['verified'].sum())} verified.")
    failed = int(counts["failed"].sum())
    if failed:
        out.append(f"{failed} of {int(counts['written'].sum())} checklists failed verification: under "
                   f"`revision.checklist_failure = {policy}` {POLICY_EFFECT.get(policy, policy)}.")
    none = int(counts.get("no_points", pd.Series(dtype=int)).fillna(0).sum())
    if none:
        what = ("their repairs are blocked (`checklist_no_points`)" if policy == "block"
                else "their rewrites get no checklist")
        out.append(f"{none} of {int(counts['responses'].sum())} responses have no rubric text, so no checklist is "
                   f"written and {what}.")
    return out
