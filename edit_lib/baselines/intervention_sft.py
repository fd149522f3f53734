"""InT-SFT baseline (Sec. 3, Baselines (4); App. B, Compute budget; Yang et al. 2026, "intervention training"): the
policy reads its own incorrect rollout cut into numbered sub-steps, names the FIRST critical error and writes one
intervention step in its own voice; leak-free interventions after which some continuation reaches the answer are
kept, and the SFT target is prefix + intervention (never the continuation).

* The pure rules: ``split_substeps``, ``parse_intervention`` (failure reasons, never raises on model output),
  ``leaked_forms`` / ``screen`` (the leak filter) and ``sft_completion`` (the SFT target, also the prefix the
  continuations start from); the prompt is ``prompts.rewrite.render_int_prompt``.
* Driven by the policy: ``propose`` (sampled, parsed and leak-screened proposals per incorrect rollout),
  ``self_audit_selection`` (Table 6 / Figure 4's "w/o localiser"), ``interventions`` (the first usable proposal
  per rollout), ``continue_interventions`` and ``int_pool`` (the kept interventions as SFT completions); the
  outcome filter is EDIT's (``revision.pool.outcome_filter``).

Departures: book/departures.md, sections "InT-SFT (edit_lib/baselines/intervention_sft.py)" and "InT-SFT runs
(edit_lib/baselines/intervention_sft.py)".
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

import pandas as pd

from edit_lib.config import Decoding, IntConfig
from edit_lib.data.schema import Dataset
from edit_lib.model.generate import policy_generate, SamplingConfig
from edit_lib.model.policy import Policy
from edit_lib.prompts.rewrite import render_in_rule, render_int_prompt
from edit_lib.revision.generation import continue_prefixes, response_index
from edit_lib.segment import check_rule, segment, split_steps


# parse outcomes; the order here is the order of the checks in ``parse_intervention``
OK = "ok"
NO_INTERVENTION, NO_FIRST_ERROR = "no_intervention_block", "no_first_error_block"
BAD_INDEX, BEYOND_T = "bad_step_index", "index_beyond_T"
EMPTY, AFTER_ERROR = "empty_intervention", "after_error"
LEAK = "leak"  # dropped by the leak filter (``screen``)
REASONS = (NO_INTERVENTION, NO_FIRST_ERROR, BAD_INDEX, BEYOND_T, EMPTY, AFTER_ERROR, LEAK)

def split_substeps(completion: str, rule: str = "auto") -> list[str]:
    """InT's numbered sub-steps of a grading rollout: the steps s_1..s_T of Sec. 2.1 (book/departures.md)."""
    return split_steps(completion, check_rule(rule))


@dataclass(frozen=True)
class InterventionParse:
    """A parsed proposal: ``status`` is OK or one of REASONS; fields are None where the parse failed."""

    status: str
    location: int | None = None  # the sub-step the intervention replaces (1-based); later ones are dropped
    first_error: int | None = None
    text: str | None = None
    verification: str | None = None  # the log, kept for display (InT does not parse it either)


def _tag(name: str) -> re.Pattern:
    open_ = r"<\s*" + r"\s*_\s*".join(name.split("_"))  # canonical text writes "first _ error"
    close = r"<\s*/\s*" + r"\s*_\s*".join(name.split("_")) + r"\s*>"
    return re.compile(open_ + r'\b([^>]*)>(.*?)' + close, re.DOTALL | re.IGNORECASE)


_VERIFY, _ERROR, _INTERVENTION = _tag("verification"), _tag("first_error"), _tag("intervention")
_STEP_ATTR = re.compile(r'step\s*=\s*"([^"]*)"', re.IGNORECASE)
_LEADING_STEP = re.compile(r"^step\s*\d(?:\s?\d)*\s*:\s*", re.IGNORECASE)


def _index(attrs: str, n_steps: int) -> tuple[int | None, str]:
    m = _STEP_ATTR.search(attrs)
    raw = re.sub(r"\s+", "", m.group(1)) if m else ""
    if not raw.isdigit() or int(raw) < 1:
        return None, BAD_INDEX
    return (int(raw), OK) if int(raw) <= n_steps else (None, BEYOND_T)


def parse_intervention(text: str, n_steps: int) -> InterventionParse:
    """Parse InT's output blocks (Yang et al. 2026) for an attempt of ``n_steps`` = T sub-steps.

    The last block of each kind counts (as in InT's parser). Checks, in order: an intervention block, a
    first-error block, both step indices integers in 1..T, a non-empty intervention, and the intervention
    no later than the first error (InT's self-check 3). Never raises on model output."""
    blocks = _INTERVENTION.findall(text or "")
    if not blocks:
        return InterventionParse(NO_INTERVENTION)
    errors = _ERROR.findall(text)
    if not errors:
        return InterventionParse(NO_FIRST_ERROR)
    verification = _VERIFY.findall(text)
    log = verification[-1][1].strip() if verification else None
    first_error, status = _index(errors[-1][0], n_steps)
    if status != OK:
        return InterventionParse(status, verification=log)
    location, status = _index(blocks[-1][0], n_steps)
    if status != OK:
        return InterventionParse(status, first_error=first_error, verification=log)
    body = _LEADING_STEP.sub("", " ".join(blocks[-1][1].split()))  # one step: one line, no "step N:" marker
    if not body:
        return InterventionParse(EMPTY, location, first_error, None, log)
    if location > first_error:
        return InterventionParse(AFTER_ERROR, location, first_error, body, log)
    return InterventionParse(OK, location, first_error, body, log)


_UNITS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
          "sixteen seventeen eighteen nineteen").split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()


def number_word_pattern(n: int) -> re.Pattern | None:
    """The spelled-out forms of ``n`` (0-99; 'twenty one' / 'twenty-one'); None beyond 99."""
    if not 0 <= n <= 99:
        return None
    if n < 20:
        body = _UNITS[n]
    else:
        tens, unit = _TENS[n // 10 - 2], n % 10
        body = (rf"{tens}[\s-]*{_UNITS[unit]}" if unit else
                rf"{tens}(?![\s-]*(?:{'|'.join(_UNITS[1:10])})\b)")
    return re.compile(rf"\b{body}\b", re.IGNORECASE)


_NUMBER = re.compile(r"(?<![\d.])(\d(?: ?\d)*)(?! ?\d)(\s?\.\s?\d)?")
_FRACTION_AFTER = re.compile(r"^\s*/\s*\d")
_DENOMINATOR = re.compile(r"\d\s*/\s*$")  # "m/M": M is the public maximum, not a stated mark


def leaked_forms(text: str, gold: int, index_words: Iterable[str] = ("point", "step")) -> tuple[str, ...]:
    """The forms in which ``text`` states the gold mark m*: any of 'digit', 'fraction', 'word' (module
    docstring, leak rule; InT drops such interventions, Yang et al. 2026). Empty when it does not leak."""
    forms: set[str] = set()
    index_before = re.compile(rf"\b(?:{'|'.join(map(re.escape, index_words))})\s*$", re.IGNORECASE) \
        if index_words else None
    for m in _NUMBER.finditer(text):
        if m.group(2) or int(m.group(1).replace(" ", "")) != gold:
            continue  # a decimal, or another number
        if _DENOMINATOR.search(text[:m.start()]):
            continue
        if _FRACTION_AFTER.match(text[m.end():]):
            forms.add("fraction")
        elif index_before is None or not index_before.search(text[:m.start()]):
            forms.add("digit")
    word = number_word_pattern(gold)
    if word is not None and word.search(text):
        forms.add("word")
    return tuple(sorted(forms))


def screen(text: str, n_steps: int, gold: int, index_words: Iterable[str] = ("point", "step")
           ) -> InterventionParse:
    """Parse a proposal and apply InT's leak filter: a parsed intervention that states m* gets status LEAK."""
    p = parse_intervention(text, n_steps)
    if p.status == OK and leaked_forms(p.text, gold, index_words):
        return InterventionParse(LEAK, p.location, p.first_error, p.text, p.verification)
    return p


def sft_completion(substeps: Sequence[str], proposal: InterventionParse, rule: str = "markers") -> str:
    """InT's SFT target and the prefix the continuations start from: sub-steps before the intervention's
    location, then the intervention as the next step, in the grader's step format (``rule``: the rollout's
    resolved ``steps.rule``, ``prompts.rewrite.render_in_rule``); no continuation and no final-mark line (Yang et al.
    2026; Sec. 3 Baselines). It is trained without a final EOS (``train.sft.train_sft(eos=False)``), so the
    adapter does not learn to stop before the mark."""
    if proposal.status != OK or proposal.location is None or proposal.text is None:
        raise ValueError(f"only a usable intervention (status 'ok') builds a target, got {proposal.status!r}")
    if proposal.location > len(substeps):
        raise ValueError(f"intervention location {proposal.location} beyond the {len(substeps)} sub-steps")
    return render_in_rule(list(substeps[:proposal.location - 1]) + [proposal.text], rule)


# ---------------------------------------------------------------- InT-SFT driven by the policy

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
