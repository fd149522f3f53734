"""InT-SFT driven by the policy (Sec. 3 Baselines (4); Yang et al. 2026): proposals, the self-audit picks they
imply, continuations after prefix + intervention, the outcome filter and the SFT pool. The pure rules (prompt,
parser, leak filter, SFT target) are in ``baselines.intervention_sft``.

* ``propose``: ``IntConfig.n_proposals`` sampled, parsed and leak-screened proposals per incorrect rollout;
* ``self_audit_selection``: the self-audit rule of Table 6 / Figure 4 ("w/o localiser");
* ``interventions``: the first usable proposal per rollout, as a revisions table for ``revision.pool.outcome_filter``;
* ``continue_interventions``: ``IntConfig.n_continuations`` continuations after each usable prefix;
* ``int_pool``: the kept interventions as SFT completions (InT's pool, App. B).

Departures from the paper and from public code:
book/departures.md, section "InT-SFT runs (edit_lib/baselines/intervention_runs.py)".
"""
from __future__ import annotations

import pandas as pd

from edit_lib.config import Decoding, IntConfig
from edit_lib.data.schema import Dataset
from edit_lib.model.generate import SamplingConfig, policy_generate
from edit_lib.model.policy import Policy
from edit_lib.revision.generation import continue_prefixes, response_index
from edit_lib.segment import segment
from edit_lib.baselines.intervention_sft import (AFTER_ERROR, LEAK, OK, InterventionParse, screen, sft_completion,
                                                 split_substeps)
from edit_lib.prompts.rewrite import render_int_prompt

ROLLOUT = ["dataset", "response_id", "rollout_id"]
NAMED_ERROR = (OK, LEAK, AFTER_ERROR)  # statuses whose proposal parsed a first-error index


def propose(policy: Policy, datasets: dict[str, Dataset], rollouts: pd.DataFrame, cfg: IntConfig, seed: int,
            batch_size: int = 32, progress: bool = True) -> pd.DataFrame:
    """InT proposals for each rollout of ``rollouts`` (01's table, the incorrect rollouts to repair): ROLLOUT,
    ``proposal`` 0..K-1, ``n_steps``, ``text``, ``status``, ``location``, ``first_error``, ``intervention``,
    ``n_prompt_tokens``, ``n_tokens``. Sampled as ``cfg.decoding`` says under ``seed``."""
    index = response_index(datasets)
    recs = rollouts[[*ROLLOUT, "text"]].to_dict("records")
    subs = [split_substeps(r["text"], cfg.rule) for r in recs]
    keep = [i for i, s in enumerate(subs) if s]  # a rollout with no step has nothing to verify
    prompts = []
    for i in keep:
        q, resp = index[(recs[i]["dataset"], recs[i]["response_id"])]
        prompts.append(policy.input_text(render_int_prompt(q, resp.answer, int(resp.gold), subs[i])))
    sampling = SamplingConfig.of(cfg.decoding, n=cfg.n_proposals, batch_size=batch_size, seed=seed)
    gen = policy_generate(policy, prompts, sampling, progress=progress)
    rows = []
    for g in gen.itertuples():
        i = keep[int(g.prompt_index)]
        r = recs[i]
        gold = int(index[(r["dataset"], r["response_id"])][1].gold)
        p = screen(g.text, len(subs[i]), gold, cfg.index_words)
        rows.append({**{c: r[c] for c in ROLLOUT}, "proposal": int(g.rollout_id), "n_steps": len(subs[i]),
                     "text": g.text, "status": p.status, "location": p.location, "first_error": p.first_error,
                     "intervention": p.text, "n_prompt_tokens": int(g.n_prompt_tokens), "n_tokens": int(g.n_tokens)})
    cols = [*ROLLOUT, "proposal", "n_steps", "text", "status", "location", "first_error", "intervention",
            "n_prompt_tokens", "n_tokens"]
    out = pd.DataFrame(rows, columns=cols)
    return out.astype({"location": "Int64", "first_error": "Int64"}).sort_values([*ROLLOUT, "proposal"]) \
        .reset_index(drop=True)


def self_audit_selection(proposals: pd.DataFrame) -> pd.DataFrame:
    """The self-audit rule (Table 6 "w/o localiser", Figure 4): per rollout, the first-error step of its first
    proposal that names one (``NAMED_ERROR``). Columns ROLLOUT, k, n_steps, u = k/T, rule = 'self_audit'."""
    named = proposals[proposals["status"].isin(NAMED_ERROR)].sort_values([*ROLLOUT, "proposal"])
    first = named.drop_duplicates(ROLLOUT)
    out = first[ROLLOUT].copy()
    out["k"] = first["first_error"].astype(int).to_numpy()
    out["n_steps"] = first["n_steps"].astype(int).to_numpy()
    out["u"] = out["k"] / out["n_steps"]
    out["rule"] = "self_audit"
    return out.reset_index(drop=True)


def interventions(proposals: pd.DataFrame, rollouts: pd.DataFrame, cfg: IntConfig) -> pd.DataFrame:
    """One InT revision per rollout in ``proposals`` (book/departures.md): ROLLOUT, revision_id, rule 'int',
    k, gold, status, intervention, revised_prefix (the SFT target, also the continuations' prefix)."""
    roll = rollouts.set_index(ROLLOUT)
    rows = []
    for key, g in proposals.sort_values("proposal").groupby(ROLLOUT, sort=True):
        rec = roll.loc[key]
        use = g[g["status"] == OK]
        row = dict(zip(ROLLOUT, key), revision_id="int:" + "/".join(map(str, key)), rule="int",
                   gold=int(rec["gold"]), intervention=None, revised_prefix="")
        if len(use):
            u = use.iloc[0]
            p = InterventionParse(OK, int(u["location"]), int(u["first_error"]), u["intervention"])
            row.update(k=int(u["location"]), status=OK, intervention=u["intervention"],
                       revised_prefix=sft_completion(split_substeps(rec["text"], cfg.rule), p,
                                                     segment(rec["text"], cfg.rule).rule))
        else:
            row.update(k=-1, status=f"no_usable_{g['status'].iloc[0]}")
        rows.append(row)
    return pd.DataFrame(rows, columns=[*ROLLOUT, "revision_id", "rule", "k", "gold", "status", "intervention",
                                       "revised_prefix"])


def continue_interventions(policy: Policy, datasets: dict[str, Dataset], revisions: pd.DataFrame, cfg: IntConfig,
                           decoding: Decoding, batch_size: int, seed: int, progress: bool = True) -> pd.DataFrame:
    """``cfg.n_continuations`` continuations of the grading chain after each usable prefix + intervention, decoded
    as EDIT's (``decoding``: ``revision.continuation_decoding`` resolved, App. F) for the same outcome filter
    (InT's; ``revision.generation.continue_prefixes``, keyed by ``revision_id``)."""
    sampling = SamplingConfig.of(decoding, n=cfg.n_continuations, batch_size=batch_size, seed=seed)
    return continue_prefixes(policy, datasets, revisions[revisions["status"] == OK], "revision_id", sampling,
                             progress)


def int_pool(outcome: pd.DataFrame) -> pd.DataFrame:
    """InT's SFT pool (App. B): every kept intervention as prefix + intervention, no golden rollouts, trained
    without a final EOS (``sft_runs.train_all``). Columns ROLLOUT, source 'intervention', revision_id, k,
    completion."""
    kept = outcome[outcome["kept"]]
    return kept[[*ROLLOUT, "revision_id", "k"]].assign(source="intervention",
                                                       completion=kept["revised_prefix"].to_numpy())[
        [*ROLLOUT, "source", "revision_id", "k", "completion"]].reset_index(drop=True)
