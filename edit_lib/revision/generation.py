"""Policy-driven Phase-1 steps (Sec. 2.2, App. F, App. J / Figure 6): the policy writes the rubric checklists,
the atomic rewrites of selected steps and the continuations after each revised prefix; this module batches
those calls through ``generate.generate`` (seeded) and turns the text into the tables of ``revision.pool``.

* ``step_table``: the input of Alg. 1, one row per step k = 1..T of an incorrect rollout (Eq. 2-4 signals);
* ``write_checklists``: one checklist per response (gold mark as privileged input, Sec. 2.2);
* ``write_rewrites``: one rewrite per distinct (rollout, k), the SAME rewriter for every rule (App. F), each
  checked by ``check_locality``: it replaces exactly s_k, holds 1-3 sub-steps (``revision.max_span``) of the
  target's local role (``role_of``), and leaves s_1..s_{k-1} unchanged (reason: one of ``REASONS``);
* ``continue_revisions``: N sampled continuations after each accepted revised prefix (App. F: N = 4);
* ``per_rule``: the (rollout, k) units spread over the selection rules for ``pool.outcome_filter``.

``RewriteVariant`` gives Table 6's ablations ("w/o localiser", "w/o checklist", "w/o atomic") their rewriter.
Departures: book/departures.md, sections "Phase-1 generation (edit_lib/revision/generation.py)" and "Locality
constraint (edit_lib/revision/generation.py)".
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from edit_lib.config import Decoding, RevisionConfig
from edit_lib.data.schema import Dataset
from edit_lib.model.generate import policy_generate, SamplingConfig
from edit_lib.model.policy import Policy
from edit_lib.prompts.grading import read_final_mark, render_scheme
from edit_lib.prompts.rewrite import (diagnostic_hints, parse_rewrite, render_checklist_prompt, render_in_rule,
                                      render_rewrite_prompt, RewriteBlock, RewriteParseError)
from edit_lib.random_streams import CHECKLISTS, CONTINUATIONS, REWRITES, stream_seed
from edit_lib.revision.checklist import (checklist_context, checklist_rubric, ChecklistFailure, parse_checklist,
                                         rubric_text, scheme_points, verified_lines, verify_free, norm)
from edit_lib.revision.mimicry import detect_mimicry
from edit_lib.revision.pool import OK
from edit_lib.segment import segment


SYNTHESIS = "synthesis"
REASONS = ("target_out_of_range", "location_mismatch", "span_count", "prefix_changed", "role_unknown",
           "role_changed")

RoleOf = Callable[[str], "str | None"]


def check_locality(original: Sequence[str], block: RewriteBlock, target: int, role_of: RoleOf | None = None,
                   revised: Sequence[str] | None = None, max_span: int = 3) -> tuple[bool, str]:
    """Locality constraint (Sec. 2.2, App. J / Figure 6) of ``block`` rewriting step ``target`` (1-based) of
    the reasoning steps ``original``. ``revised`` is the revised chain the caller built (prefix + sub-steps);
    by default ``original[:target-1] + block.steps``. ``max_span``: the most
    sub-steps (``revision.max_span``; Sec. 2.2: 1-3)."""
    if not 1 <= target <= len(original):
        return False, "target_out_of_range"
    if block.location != target:
        return False, "location_mismatch"
    subs = list(block.steps)
    if not 1 <= len(subs) <= max_span or block.span != len(subs):
        return False, "span_count"
    if revised is not None:
        prefix = list(original[:target - 1])
        if len(revised) != len(prefix) + len(subs) or \
                [norm(s) for s in revised[:target - 1]] != [norm(s) for s in prefix] or \
                [norm(s) for s in revised[target - 1:]] != [norm(s) for s in subs]:
            return False, "prefix_changed"
    want = role_of(original[target - 1]) if role_of is not None else None
    if want is None:
        return True, ""
    roles = [role_of(s) for s in subs]
    if any(r is None for r in roles):
        return False, "role_unknown"
    if roles[-1] != want or (want != SYNTHESIS and any(r != want for r in roles)):
        return False, "role_changed"
    return True, ""


# ---------------------------------------------------------------- Phase-1 generation

ROLLOUT = ["dataset", "response_id", "rollout_id"]
SIGNALS = ["G_rho", "G_a", "G_p_tilde"]
REWRITE_COLUMNS = ["unit_id", *ROLLOUT, "k", "gold", "max_mark", "target", "sub_steps", "status", "reasons", "detail",
                   "revised_prefix", "raw", "n_prompt_tokens", "n_tokens"]


@dataclass(frozen=True)
class RewriteVariant:
    """Which parts of the App. J / Figure 6 rewriter are on (all of them for EDIT; one off per Table 6 ablation)."""

    hints: bool = True  # the locator's diagnostic hints (off: "w/o localiser")
    checklist: bool = True  # the per-criterion rubric analysis (off: "w/o checklist")
    atomic: bool = True  # 1-3 sub-steps under the locality constraint (off: "w/o atomic")

    @property
    def suffix(self) -> str:
        """The unit-id suffix that keeps a variant's rewrites apart from EDIT's ('' for the full rewriter)."""
        off = [n for n, on in (("nohints", self.hints), ("nochecklist", self.checklist), ("free", self.atomic))
               if not on]
        return "".join(f"/{n}" for n in off)


FULL = RewriteVariant()


def revision_sampling(decoding: Decoding, cfg: RevisionConfig, seed: int, stream: str, n: int = 1,
                      max_new_tokens: int = 0) -> SamplingConfig:
    """The request of one Phase-1 role (Sec. 2.2, App. F; ``config.RevisionConfig``): the role's ``decoding``
    (``checklist_decoding``, ``rewrite_decoding`` or ``continuation_decoding``) with ``max_new_tokens`` when given
    (a resolved budget), the section's batch size, under the role's named stream of the run's ``seed``
    (``random_streams``: checklists, rewrites or continuations)."""
    budget = {"max_new_tokens": max_new_tokens} if max_new_tokens else {}
    return SamplingConfig.of(decoding, n=n, batch_size=cfg.batch_size, seed=stream_seed(seed, stream), **budget)


def step_table(rollouts: pd.DataFrame, beliefs: pd.DataFrame, audit: pd.DataFrame) -> pd.DataFrame:
    """Alg. 1 input for the incorrect rollouts of ``rollouts`` (01) present in both the probe table ``beliefs``
    (02, Eq. 1-2) and the audit table ``audit`` (03, Eq. 3-4, with ``G_p_tilde``): ROLLOUT, k, n_steps, u,
    delta_eps, G_rho, G_a, G_p_tilde. A step missing from either table is an error naming the rollout."""
    bad = rollouts.loc[~rollouts["correct"].astype(bool), ROLLOUT]
    keys = bad.merge(beliefs[ROLLOUT].drop_duplicates(), on=ROLLOUT).merge(audit[ROLLOUT].drop_duplicates(),
                                                                           on=ROLLOUT)
    a = audit.merge(keys, on=ROLLOUT)[[*ROLLOUT, "k", "n_steps", "u", *SIGNALS]]
    b = beliefs.merge(keys, on=ROLLOUT)
    b = b.loc[b["k"] >= 1, [*ROLLOUT, "k", "delta_eps"]]
    out = a.merge(b, on=[*ROLLOUT, "k"], how="outer", indicator=True)
    if (out["_merge"] != "both").any():
        r = out[out["_merge"] != "both"].iloc[0]
        raise ValueError(f"rollout {r.dataset}/{r.response_id}/{r.rollout_id} step {r.k}: only in the "
                         f"{'audit' if r._merge == 'left_only' else 'probe'} table (02 and 03 cut steps differently)")
    out = out.drop(columns="_merge").astype({"k": int, "n_steps": int, "rollout_id": int})
    return out[[*ROLLOUT, "k", "n_steps", "u", "delta_eps", *SIGNALS]].sort_values([*ROLLOUT, "k"]) \
        .reset_index(drop=True)


def response_index(datasets: dict[str, Dataset]) -> dict[tuple[str, str], tuple]:
    """(dataset, response_id) -> (question, response) over every dataset."""
    return {(name, r.id): (ds.question(r), r) for name, ds in datasets.items() for r in ds.responses}


def _verify(q, text: str, answer: str) -> tuple:
    """(parsed checklist or failure, its verified lines, its clause share) under the question's rubric kind."""
    if checklist_rubric(q) == "points":
        pts = scheme_points(q)
        return parse_checklist(text, pts, answer), verified_lines(text, pts, answer), float("nan")
    return verify_free(text, rubric_text(q), answer)


CHECKLIST_COLUMNS = ["dataset", "response_id", "rubric", "text", "status", "detail", "n_covered", "clause_share",
                     "n_prompt_tokens", "n_tokens", "verified_text"]


def write_checklists(policy: Policy, datasets: dict[str, Dataset], responses: pd.DataFrame,
                     settings: RevisionConfig, *, seed: int, progress: bool = True) -> pd.DataFrame:
    """One rubric checklist per (dataset, response_id) of ``responses`` (Sec. 2.2): ``rubric`` ("points" or
    "free_text", ``checklist_rubric``), ``text``, ``status`` ("ok" or a ``checklist.FAILURE_REASONS`` reason;
    ``no_points`` only for a free-text rubric with no text), ``detail``, ``n_covered``, ``clause_share`` (share
    of a free-text rubric's clauses the verified points list; NaN for listed points), token counts and the
    verified lines (``drop_lines``)."""
    index = response_index(datasets)
    keys = sorted(set(map(tuple, responses[["dataset", "response_id"]].to_numpy())))
    prompts, todo, rows = [], [], {}
    for key in keys:
        q, r = index[key]
        kind = checklist_rubric(q)
        if kind == "none":
            rows[key] = dict(rubric=kind, text="", status="no_points", n_covered=None, clause_share=float("nan"),
                             verified_text="", detail=f"question {q.id}: the free-text rubric is empty")
            continue
        prompts.append(policy.input_text(render_checklist_prompt(q, r.answer, r.gold, style=policy.prompt_style)))
        todo.append(key)
    sampling = revision_sampling(settings.checklist_decoding, settings, seed, CHECKLISTS, 1, settings.checklist_budget)
    gen = policy_generate(policy, prompts, sampling, progress=progress)
    for key, text, n_in, n_out in zip(todo, gen["text"], gen["n_prompt_tokens"], gen["n_tokens"]):
        q, r = index[key]
        parsed, verified, share = _verify(q, text, r.answer)
        fail = isinstance(parsed, ChecklistFailure)
        rows[key] = dict(rubric=checklist_rubric(q), text=text, status=parsed.reason if fail else OK,
                         detail=parsed.detail if fail else "", n_covered=None if fail else parsed.n_covered,
                         clause_share=share, n_prompt_tokens=int(n_in), n_tokens=int(n_out), verified_text=verified)
    return pd.DataFrame([dict(dataset=k[0], response_id=k[1], **rows[k]) for k in keys], columns=CHECKLIST_COLUMNS)


def step_hints(step: dict, p25: dict, tie_margin: float) -> list[str]:
    """Hints for one step from its own measurements (App. J / Figure 6; ``hints.diagnostic_hints``): its
    delta-eps, G^rho, G^a, G~^p against the dataset's 25th percentiles, and w_k (all three below, Alg. 1)."""
    sig = {s: float(step[s]) for s in SIGNALS}
    weak = all(math.isfinite(sig[s]) and sig[s] < float(p25[s]) for s in SIGNALS)
    return diagnostic_hints(float(step["delta_eps"]), sig, {s: float(p25[s]) for s in SIGNALS}, weak, tie_margin)


def write_rewrites(policy: Policy, datasets: dict[str, Dataset], units: pd.DataFrame, rollouts: pd.DataFrame,
                   checklists: pd.DataFrame, percentiles: pd.DataFrame, tie_margin: float, settings: RevisionConfig,
                   *, seed: int, role_of: RoleOf | None = None, step_rule: str = "auto", progress: bool = True,
                   variant: RewriteVariant = FULL, checklist_failure: str | None = None,
                   tag: str = "") -> pd.DataFrame:
    """Atomic rewrite (App. J, Figure 6) of each distinct (rollout, k) in ``units`` (columns ROLLOUT, k and the
    step's delta_eps, G_rho, G_a, G_p_tilde), checked for locality (``role_of``: the step-role annotator) and
    checklist mimicry. Returns ``unit_id``, ROLLOUT, k, gold, max_mark, target, sub_steps, status, reasons,
    detail, revised_prefix, raw (the policy's text), n_prompt_tokens, n_tokens (generated). ``variant``: a
    Table 6 ablation's rewriter (book/departures.md); its unit ids carry ``variant.suffix``; an atomic one holds
    1..``settings.max_span`` sub-steps, a free one gets ``settings.rewrite_budget(False)`` tokens (``settings``
    resolved). A block that does not parse is ``rewrite_truncated`` when the rewrite used its whole budget, else
    ``rewrite_parse``. ``checklist_failure`` (default: the settings') decides what a failed checklist does
    (``checklist_context``); ``tag`` is appended to the unit ids (04's Table 12 under another checklist policy)."""
    policy_cl = checklist_failure or settings.checklist_failure
    budget = settings.rewrite_budget(variant.atomic)
    index = response_index(datasets)
    roll = rollouts.set_index(ROLLOUT)
    cl = {(r.dataset, r.response_id): r for r in checklists.itertuples()}
    p25 = {r["dataset"]: r for r in percentiles.to_dict("records")}
    rows, prompts, todo = [], [], []
    for u in units.drop_duplicates([*ROLLOUT, "k"]).sort_values([*ROLLOUT, "k"]).to_dict("records"):
        q, resp = index[(u["dataset"], u["response_id"])]
        rec = roll.loc[(u["dataset"], u["response_id"], int(u["rollout_id"]))]
        steps, k = list(rec["steps"]), int(u["k"])
        row = dict(unit_id=f"{u['dataset']}/{u['response_id']}/{int(u['rollout_id'])}/k{k}{variant.suffix}{tag}",
                   **{c: u[c] for c in ROLLOUT}, k=k, gold=int(resp.gold), max_mark=int(q.max_mark),
                   target=steps[k - 1], sub_steps=[], status=OK, reasons=[], detail="", revised_prefix="", raw="",
                   n_prompt_tokens=0, n_tokens=0)
        c = cl[(u["dataset"], u["response_id"])]
        context, blocked = checklist_context(c, policy_cl)
        if blocked:
            row.update(status=blocked, reasons=[blocked], detail=c.detail)
        else:
            hints = step_hints(u, p25[u["dataset"]], tie_margin) if variant.hints else []
            prompts.append(policy.input_text(render_rewrite_prompt(
                q, resp.answer, resp.gold, steps, k, hints, context if variant.checklist else None,
                atomic=variant.atomic)))
            todo.append(len(rows))
        rows.append(row)
    gen = policy_generate(policy, prompts, revision_sampling(settings.rewrite_decoding, settings, seed,
                                                             REWRITES, 1, budget), progress=progress)
    for i, text, n_in, n_out in zip(todo, gen["text"], gen["n_prompt_tokens"], gen["n_tokens"]):
        row = rows[i]
        q, resp = index[(row["dataset"], row["response_id"])]
        rec = roll.loc[(row["dataset"], row["response_id"], int(row["rollout_id"]))]
        steps, k = list(rec["steps"]), row["k"]
        row.update(raw=text, n_prompt_tokens=int(n_in), n_tokens=int(n_out))
        try:
            block = parse_rewrite(text, max_span=settings.max_span if variant.atomic else None)
        except RewriteParseError as e:
            cut = int(n_out) >= budget  # whole budget used: a cut, counted apart (pool.TRUNCATED)
            failed = "rewrite_truncated" if cut else "rewrite_parse"
            row.update(status=failed, reasons=[failed], detail=f"{e} (all {budget} tokens used)" if cut else str(e))
            continue
        row["sub_steps"] = list(block.steps)
        ok, why = (check_locality(steps, block, k, role_of, max_span=settings.max_span) if variant.atomic
                   else (block.location == k, "location_mismatch"))
        reasons = [] if ok else [why]
        reasons += detect_mimicry(block.steps, resp.gold, q.max_mark, steps[:k - 1], resp.answer, render_scheme(q),
                                  cl[(row["dataset"], row["response_id"])].text)
        row.update(status=reasons[0] if reasons else OK, reasons=reasons)
        if not reasons:  # only an accepted rewrite is continued
            seg = segment(rec["text"], step_rule)
            row["revised_prefix"] = rec["text"][:seg.bounds[k - 1]] + render_in_rule(block.steps, seg.rule, k)
    return pd.DataFrame(rows, columns=REWRITE_COLUMNS)


def continue_prefixes(policy: Policy, datasets: dict[str, Dataset], rows: pd.DataFrame, id_col: str,
                      sampling: SamplingConfig, progress: bool = True) -> pd.DataFrame:
    """``sampling.n`` continuations of the grading chain after each row's ``revised_prefix`` (the outcome filter's
    sampler, App. F; InT's too): ``id_col``, ``continuation`` 0..n-1, ``text``, ``mark`` (NaN when unparsed),
    ``parse_status``, ``n_prompt_tokens`` and ``n_tokens`` (generated)."""
    index = response_index(datasets)
    prompts, maxes = [], []
    for r in rows.itertuples():
        q, resp = index[(r.dataset, r.response_id)]
        prompts.append(policy.grading_input(q, resp.answer) + r.revised_prefix)
        maxes.append(int(q.max_mark))
    gen = policy_generate(policy, prompts, sampling, ids=rows[id_col].tolist(), progress=progress)
    parses = [read_final_mark(t, maxes[i]) for t, i in zip(gen["text"], gen["prompt_index"])]
    return pd.DataFrame({id_col: gen["response_id"], "continuation": gen["rollout_id"].astype(int),
                         "text": gen["text"], "mark": [np.nan if p.mark is None else float(p.mark) for p in parses],
                         "parse_status": [p.status for p in parses], "n_prompt_tokens": gen["n_prompt_tokens"],
                         "n_tokens": gen["n_tokens"]})


def continue_revisions(policy: Policy, datasets: dict[str, Dataset], rewrites: pd.DataFrame,
                       settings: RevisionConfig, *, seed: int, progress: bool = True) -> pd.DataFrame:
    """N continuations (``settings.n_continuations``, App. F) after each accepted revised prefix, sampled at
    ``continuation_decoding`` with the continuation budget (``continue_prefixes``, keyed by ``unit_id``);
    ``settings`` is the ``revision`` section ``resolved`` against the rollouts' budget."""
    budget = settings.continuation_decoding.max_new_tokens
    if budget < 1:
        raise ValueError("revision.continuation_decoding.max_new_tokens is 0 (the rollouts' budget): pass "
                         "P.revision.resolved(P.rollouts)")
    return continue_prefixes(policy, datasets, rewrites[rewrites["status"] == OK], "unit_id",
                             revision_sampling(settings.continuation_decoding, settings, seed, CONTINUATIONS,
                                               settings.n_continuations, budget), progress)


def truncated(continuations: pd.DataFrame, budget: int) -> pd.Series:
    """Continuations that used their whole token budget without a parsed mark (counted in 04, never kept)."""
    return (continuations["n_tokens"] >= budget) & continuations["mark"].isna()


def per_rule(selected: pd.DataFrame, rewrites: pd.DataFrame, continuations: pd.DataFrame):
    """(revisions, continuations) for ``pool.outcome_filter``: one revision per row of ``selected`` (ROLLOUT,
    k, rule), revision_id = "<rule>:<unit_id>", sharing the unit's rewrite and continuations."""
    units = rewrites.set_index([*ROLLOUT, "k"])
    sel = selected[[*ROLLOUT, "k", "rule"]].astype({"k": int, "rollout_id": int})
    rev = sel.join(units[["unit_id", "gold", "status", "reasons", "target", "sub_steps", "revised_prefix"]],
                   on=[*ROLLOUT, "k"], how="left")
    if rev["unit_id"].isna().any():
        r = rev[rev["unit_id"].isna()].iloc[0]
        raise KeyError(f"no rewrite for {r.dataset}/{r.response_id}/{r.rollout_id} step {r.k} (rule {r.rule})")
    rev["revision_id"] = rev["rule"] + ":" + rev["unit_id"]
    cont = rev.loc[rev["status"] == OK, ["revision_id", "unit_id"]].merge(continuations, on="unit_id")
    return rev.reset_index(drop=True), cont.drop(columns="unit_id")
