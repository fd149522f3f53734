"""Training the warm-up Base (what and why: ``model.warmup``): LoRA SFT on (grading prompt, judgement) pairs from every
training answer of the data files (never the test answers; decoupled from 01's Phase-1 sample), mark-balanced, with a
held-out QWK curve on training answers kept out; one question per batch with its shared prompt prefix laid out once
(``train.packed_sft``); merged and saved once under ``model.warmup.warmup_dir`` (01 calls ``ensure_warmup_base``).
``model.warmup.roles`` adds the Phase-1 roles (checklist, rewrite, InT proposal, continuation), equal numbers each,
one question and role per batch in the order of ``model.warmup.role_phase`` (``warmup_batches``); a role left out is
written zero-shot; under ``role_model: separate`` a second warm-up of the same weights, the reviser, learns them
after the Base passed its guard. The book reports each role's parse share.

Judgements and role examples name, per scheme kind, LoR and PTS points or a free-text rubric's clauses
(``rubric_points``) that the lexical matcher (``data.key_elements.match_texts``) finds at a per-question threshold,
only where the match's mark is the gold mark; an example its role's checker rejects is dropped and counted.
Longer than 400 lines because the examples and the training are one.
Details: book/departures.md, section "A warm-up judgement for every scheme kind (edit_lib/train/warmup.py)";
book/departures.md, section "The warm-up's roles (edit_lib/train/warmup.py)".
"""
from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from edit_lib.artifacts import scratch_dir
from edit_lib.config import WARMUP_ROLES, ConfigError, LoraConfig, Profile, WarmupConfig
from edit_lib.data.key_elements import _stems, element_keywords, ElementMatch, fit_threshold, match_texts
from edit_lib.data.schema import Dataset, FreeTextScheme, LevelScheme, PointsScheme, Question, Response, round_half_up
from edit_lib.model.rollouts import greedy_grades
from edit_lib.model.warmup import (JUDGEMENT_STEPS, WORDING, base_warmup, element_judgement, full_profile, judgement,
                                   reviser_warmup, short_label, warmup_dir, warmup_key, warmup_summary, with_warmup,
                                   WarmupGuardStop, point_verdict, stop_message, top_mark, verdict)
from edit_lib.prompts.grading import render_scheme
from edit_lib.prompts.rewrite import (render_int_output, render_int_prompt, render_checklist_prompt, render_in_rule,
                                      render_rewrite_block, render_rewrite_prompt, drawn_hints)
from edit_lib.revision.checklist import (Checklist, parse_checklist, clauses, parse_free_checklist, rubric_text,
                                         span_tokens)
from edit_lib.revision.mimicry import detect_mimicry
from edit_lib.train.packed_sft import group_batches


def training_answers(profile: Profile) -> dict[str, Dataset]:
    """Every dataset of the profile with its whole training split: the warm-up draws from the training answers
    the data files hold, not from the profile's per-question sample (``max_per_question`` is lifted), so it is
    decoupled from 01's rollout sample. The test splits are dropped: the warm-up never sees them."""
    from edit_lib.data.registry import build_dataset
    profile = full_profile(profile)  # the data section: 01's key covers it through its upstream 00_data key
    out = {}
    for spec in profile.data.datasets:
        opts = {k: v for k, v in spec.options.items() if k != "max_per_question"}
        ds = build_dataset(dataclasses.replace(spec, options=opts), seed=profile.run.seed,
                           on_error=profile.data.on_error)
        ds.responses = ds.split("train")
        out[spec.name] = ds
    return out


def balanced_sample(responses: Sequence[Response], n: int, seed: int) -> tuple[list[Response], dict]:
    """``n`` of one question's training answers with every gold mark drawn alike (``model.warmup.balanced``): the
    marks present share ``n`` (the remainder goes to marks in a seeded order); a mark with fewer answers than its
    share gives all of them, repeated in a seeded order. Returns the sample and {mark: [drawn, distinct]}."""
    rng = np.random.default_rng(seed)
    by: dict[int, list[Response]] = {}
    for r in responses:
        by.setdefault(r.gold, []).append(r)
    marks = sorted(by)
    order = [marks[i] for i in rng.permutation(len(marks))]
    share = {m: n // len(marks) + (1 if k < n % len(marks) else 0) for k, m in enumerate(order)}
    out, report = [], {}
    for m in marks:
        rs, want = by[m], share[m]
        perm = list(rng.permutation(len(rs)))
        idx = perm[:want] if want <= len(rs) else (perm * (want // len(rs) + 1))[:want]
        out += [rs[i] for i in idx]
        report[m] = [want, min(want, len(rs))]
    return out, report


def split_curve_answers(ds: Dataset, cfg: WarmupConfig, seed: int) -> tuple[list[Response], list[Response]]:
    """(pool, held-out): ``cfg.curve_answers`` training answers per question (a seeded sample, natural mark mix)
    held out for the curve of held-out QWK when ``cfg.curve_every`` > 0; the rest is the warm-up's pool."""
    if cfg.curve_every <= 0:
        return list(ds.responses), []
    rng = np.random.default_rng(seed + 1)
    pool, held = [], []
    for qid in sorted(ds.questions):
        rs = [r for r in ds.responses if r.question_id == qid]
        pick = set(rng.choice(len(rs), size=min(cfg.curve_answers, len(rs) // 2), replace=False).tolist())
        held += [r for i, r in enumerate(rs) if i in pick]
        pool += [r for i, r in enumerate(rs) if i not in pick]
    return pool, held


def _judgement(q, gold: int, answer: str, cfg: WarmupConfig, thresholds: dict) -> tuple[str, bool | None]:
    """The target judgement of one pair (``model.warmup.judgement``) and whether the matcher agreed (None where
    no matcher applies: the template, a scheme ``key_elements`` leaves to it, a rubric without points)."""
    named = cfg.judgement == "points" or (cfg.judgement == "key_elements" and isinstance(q.scheme, LevelScheme))
    texts = rubric_points(q) if named else ()
    if not texts:
        return judgement(q.max_mark, gold), None
    match = match_answer(q, answer, thresholds[q.id])
    agree = match.band == gold
    return element_judgement(q, gold, match if agree else None, texts, point_kind(q)), agree


def fit_thresholds(datasets: dict[str, Dataset]) -> dict[str, dict]:
    """The lexical matcher's threshold for each question with rubric points (``rubric_match``: any scheme kind),
    fitted on its training answers: {question id: {threshold, balanced_agreement}}."""
    out = {}
    for ds in datasets.values():
        for qid, q in ds.questions.items():
            rs = [r for r in ds.responses if r.question_id == qid]
            if rs and rubric_points(q):
                t, ag = fit_question_threshold(q, [r.answer for r in rs], [r.gold for r in rs])
                out[qid] = {"threshold": t, "balanced_agreement": round(ag, 4)}
    return out


def _role_pool(q, rs: list[Response], threshold: float, report: dict) -> list[Response]:
    """The answers of one question a Phase-1 role can be written from: the rubric has points (``rubric_match``)
    and the matcher's mark is the gold mark (below); the others are counted under ``no_elements`` or
    ``matcher_disagrees``."""
    if not rubric_points(q):
        report["no_elements"] = report.get("no_elements", 0) + len(rs)
        return []
    ok = [r for r in rs if match_answer(q, r.answer, threshold).band == r.gold]
    report["matcher_disagrees"] = report.get("matcher_disagrees", 0) + len(rs) - len(ok)
    return ok


def warmup_pairs(policy, datasets: dict[str, Dataset], cfg: WarmupConfig, seed: int = 0,
                 thresholds: dict | None = None) -> tuple[list[tuple[str, str]], list[str], dict]:
    """(pairs, groups, report): (prompt input, completion) pairs from the training answers of every dataset
    (``datasets``: training answers only, ``training_answers``), for every role of ``cfg.roles``: the grading
    judgement (``cfg.judgement``) and the Phase-1 roles (below, from answers on which the matcher agrees
    with the gold band): ``cfg.responses_per_question`` grading pairs and ``cfg.role_responses_per_question`` of
    each Phase-1 role per question, mark-balanced (``balanced_sample``) or a plain seeded sample. Pairs over
    ``cfg.max_length`` tokens are left out and counted in the report, as are the matcher's agreements and left-outs.
    ``groups[i]`` is pair i's question and role (the warm-up batches one group at a time, ``train.packed_sft``)."""
    rng = np.random.default_rng(seed)
    thresholds = thresholds or {}
    pairs, groups = [], []
    report = {"candidates": 0, "too_long": 0, "kept": 0, "by_dataset": {}, "marks": {}, "matcher": {},
              "roles": {role: {"kept": 0, "too_long": 0} for role in cfg.roles}}
    for name, ds in datasets.items():
        by_q: dict[str, list] = {}
        for r in ds.split("train"):
            by_q.setdefault(r.question_id, []).append(r)
        kept = 0
        for qid in sorted(by_q):
            threshold = thresholds.get(qid, {}).get("threshold", 0.5)  # the matcher's, fitted on these answers
            for role in cfg.roles:
                rr = report["roles"][role]
                rs = by_q[qid] if role == "grading" else _role_pool(ds.questions[qid], by_q[qid], threshold, rr)
                if not rs:
                    continue
                n = cfg.responses_per_question if role == "grading" else cfg.role_responses_per_question
                if cfg.balanced:
                    chosen, marks = balanced_sample(rs, n, int(rng.integers(2**31)))
                    report["marks"][qid if role == "grading" else f"{qid}/{role}"] = marks
                else:
                    chosen = [rs[i] for i in sorted(rng.choice(len(rs), size=min(len(rs), n), replace=False))]
                for r in chosen:
                    q = ds.question(r)
                    agree = None
                    if role == "grading":
                        prompt = policy.grading_input(q, r.answer)
                        comp, agree = _judgement(q, r.gold, r.answer, cfg,
                                                 {k: v["threshold"] for k, v in thresholds.items()})
                    else:
                        ex = role_example(role, q, r, threshold, rng, policy.prompt_style)
                        if isinstance(ex, str):
                            rr[ex] = rr.get(ex, 0) + 1
                            continue
                        prompt = policy.grading_input(q, r.answer) + ex[0] if role == "continuation" else \
                            policy.input_text(ex[0])  # a continuation goes on after the grading prompt, as in 04
                        comp = ex[1]
                    report["candidates"] += 1
                    if len(policy.tokenizer(prompt + comp)["input_ids"]) + 1 > cfg.max_length:  # + EOS
                        report["too_long"] += 1
                        rr["too_long"] += 1
                        continue
                    if agree is not None:  # the matcher's agreement over the pairs kept
                        t = report["matcher"].setdefault(q.id, {"pairs": 0, "agree": 0})
                        t["pairs"] += 1
                        t["agree"] += agree
                    pairs.append((prompt, comp))
                    groups.append(q.id if role == "grading" else f"{q.id}/{role}")  # role_of_group reads it
                    kept += 1
                    rr["kept"] += 1
        report["by_dataset"][name] = kept
    report["kept"] = len(pairs)
    if not pairs:
        raise ValueError(f"model.warmup: no training pair fits model.warmup.max_length={cfg.max_length} tokens "
                         f"({report['too_long']} of {report['candidates']} too long); raise it")
    order = rng.permutation(len(pairs))  # marks interleaved within a question's batches
    return [pairs[i] for i in order], [groups[i] for i in order], report


def warmup_lora(cfg: WarmupConfig) -> LoraConfig:
    """The warm-up's LoRA: rank ``cfg.lora_r``, alpha = 2r (as App. B's 64/128), all seven projections, no
    dropout, on the last ``cfg.lora_layers`` layers (``train.packed_sft.lora_on_layers``)."""
    return LoraConfig(r=cfg.lora_r, alpha=2 * cfg.lora_r, dropout=0.0)


def ensure_warmup_base(profile: Profile, datasets: dict[str, Dataset] | None = None, progress: bool = True) -> Path:
    """The warm-up Base's folder, trained on first use (on the profile's training answers, ``training_answers``;
    ``datasets`` is not read, kept for callers) and reused while its key holds. ``warmup_summary.json`` beside
    the weights records the pairs, the matcher's agreement, the loss curve, the held-out QWK curve and the time."""
    from edit_lib.model.hf import merge_lora, save_model_and_tokenizer
    from edit_lib.model.policy import Policy, load_policy
    from edit_lib.train.packed_sft import train_packed
    out = warmup_dir(profile)
    if (out / "config.json").exists():
        return out
    cfg = base_warmup(profile.model.warmup)  # under role_model: separate, without the reviser's roles
    if cfg.steps <= 0:
        raise ValueError("model.warmup.steps is 0: this profile has no warm-up Base")
    t0 = time.perf_counter()
    m = dataclasses.replace(profile.model, warmup=WarmupConfig())  # the plain Base
    model, tok, kind = load_policy(m.name_or_path, m)
    policy = Policy(model=model, tokenizer=tok, kind=kind, name=m.name_or_path, prefix_cache=m.prefix_cache)
    train = training_answers(profile)
    held, pools = {}, {}
    for name, ds in train.items():
        pool, held[name] = split_curve_answers(ds, cfg, profile.run.seed)
        pools[name] = Dataset(ds.name, ds.questions, pool, ds.meta)
    if progress:
        print(f"warm-up Base: {cfg.steps} steps on {sum(len(d.responses) for d in pools.values())} training "
              f"answers of {', '.join(pools)}, {sum(map(len, held.values()))} held out for the curve", flush=True)
    thresholds = fit_thresholds(pools) if cfg.judgement != "template" or set(cfg.roles) - {"grading"} else {}
    pairs, groups, report = warmup_pairs(policy, pools, cfg, profile.run.seed, thresholds)
    report["trained"] = trained_per_role(groups, cfg, profile.run.seed)
    points: list = []
    hook = curve_hook(policy, held, train, cfg, profile.eval, profile.steps.rule, points,
                      progress=progress) if cfg.curve_every > 0 else None
    with scratch_dir(out.parent, "warmup-") as tmp:  # a killed warm-up's folder goes at the next one
        res = train_packed(policy, pairs, groups, steps=cfg.steps, batch_size=batch_size_of(cfg),
                           learning_rate=cfg.learning_rate, lora=warmup_lora(cfg), lora_layers=cfg.lora_layers,
                           seed=profile.run.seed, progress=progress, on_step=hook,
                           batches=warmup_batches(groups, cfg, profile.run.seed), mark_weight=cfg.mark_weight)
        part = tmp / "merged"
        save_model_and_tokenizer(merge_lora(res.policy.model), tok, part)
        grading = [c for (_, c), g in zip(pairs, groups) if role_of_group(g) == "grading"] or [pairs[0][1]]
        example = next((c for c in grading if " states " in c), grading[0])  # a judgement naming points, if any
        (part / "warmup_summary.json").write_text(json.dumps(
            {"key": warmup_key(profile), "base": m.name_or_path, "pairs": report, "steps": res.steps,
             "seconds": res.seconds, "build_seconds": time.perf_counter() - t0, "loss_curve": res.loss_curve,
             "heldout_curve": points, "heldout_answers": {k: len(v) for k, v in held.items()},
             "thresholds": thresholds, "example_judgement": example}, indent=1, default=int))
        if not (out / "config.json").exists():
            shutil.rmtree(out, ignore_errors=True)
            part.rename(out)  # a complete folder or none
    return out


def _trained(profile, datasets, what: str) -> Path:
    """``ensure_warmup_base``, stopping when its key moved meanwhile (it hashes the code on disk: edited while the
    warm-up trained), so no later lookup reads another key's folder."""
    folder = ensure_warmup_base(profile, datasets)
    if warmup_dir(profile) != folder:
        raise RuntimeError(f"model.warmup: {what} was saved as {folder.name}, but its key now gives "
                           f"{warmup_dir(profile).name}: the library's code or the data changed while 01 ran; "
                           "run 01 again (the trained weights stay cached under their old key)")
    return folder


def prepare_base(profile: Profile, datasets: dict[str, Dataset]) -> str:
    """01's Base: trains the format warm-up when ``model.warmup.steps`` > 0 (cpu-real; a departure from the paper,
    whose Base grades zero-shot, App. B) and says which Base the run grades with. Under ``model.warmup.guard:
    stop`` a finished curve the guard fires on stops 01 here (``model.warmup.point_verdict``; the trained Base stays
    cached); else a separate reviser (``role_model: separate``) trains next."""
    cfg = profile.model.warmup
    if cfg.steps <= 0:
        return f"Base: {profile.model.name_or_path}, zero-shot (the paper's setting)"
    folder = _trained(profile, datasets, "the warm-up Base")
    why = verdict(warmup_summary(profile)["heldout_curve"], cfg) if cfg.guard == "stop" else None
    if why:
        raise WarmupGuardStop(stop_message(why))
    reviser = reviser_warmup(cfg)
    if reviser is None:
        return f"warm-up Base: {folder.name}"
    # the reviser trains once the Base passed the guard: a Base that does not grade stops the run before it
    roles = _trained(with_warmup(profile, reviser), datasets, "the separate reviser")
    return f"warm-up Base: {folder.name}; the separate reviser of {', '.join(reviser.roles)}: {roles.name}"


# ------------------------------------------------------------------ the order of the batches (model.warmup.role_phase)
# A pair's group is its question (grading) or '<question>/<role>' (a Phase-1 role); a batch holds pairs of one group
# (``train.packed_sft.group_batches``). ``mixed`` cycles through one seeded order of all batches. ``first`` gives
# each role batch once, in a seeded order, then grading's batches in their own seeded order, cycled for the
# remaining steps, so the last steps teach the mark alone (book/departures.md says why).


def role_of_group(group: str) -> str:
    """The role of a warm-up batch group ('<question>' grades, '<question>/<role>' is a Phase-1 role; a question
    id that itself holds a '/' stays a grading group)."""
    head, _, tail = group.rpartition("/")
    return tail if head and tail in WARMUP_ROLES and tail != "grading" else "grading"


def batch_size_of(cfg: WarmupConfig):
    """The warm-up's batch size of a group: ``cfg.batch_size`` for grading, ``cfg.role_batch_size`` else."""
    return lambda group: cfg.batch_size if role_of_group(group) == "grading" else cfg.role_batch_size


def _batches_of(groups: Sequence[str], keep: list[int], cfg: WarmupConfig, seed: int) -> list[list[int]]:
    """``group_batches`` of the pairs ``keep`` (indices into ``groups``), returned as indices into ``groups``."""
    part = group_batches([groups[i] for i in keep], batch_size_of(cfg), seed)
    return [[keep[j] for j in b] for b in part]


def warmup_batches(groups: Sequence[str], cfg: WarmupConfig, seed: int) -> list[list[int]]:
    """The pair indices of each of the warm-up's ``cfg.steps`` optimiser steps, in order (module docstring)."""
    if cfg.role_phase == "mixed":
        cycle = group_batches(groups, batch_size_of(cfg), seed)
        return [cycle[s % len(cycle)] for s in range(cfg.steps)]
    roles = [i for i, g in enumerate(groups) if role_of_group(g) != "grading"]
    grading = [i for i, g in enumerate(groups) if role_of_group(g) == "grading"]
    first = _batches_of(groups, roles, cfg, seed) if roles else []
    rest = _batches_of(groups, grading, cfg, seed) if grading else []
    if not rest or len(first) >= cfg.steps:
        raise ConfigError(f"model.warmup.role_phase='first': the {len(first)} role batches leave no step of the "
                          f"{cfg.steps} for grading's {len(rest)} batches (raise model.warmup.steps or "
                          "role_batch_size)")
    return first + [rest[s % len(rest)] for s in range(cfg.steps - len(first))]


def trained_per_role(groups: Sequence[str], cfg: WarmupConfig, seed: int) -> dict:
    """{role: [examples trained on, optimiser steps]} over the warm-up's steps (``warmup_batches``)."""
    out: dict[str, list[int]] = {}
    for b in warmup_batches(groups, cfg, seed):
        t = out.setdefault(role_of_group(groups[b[0]]), [0, 0])
        t[0] += len(b)
        t[1] += 1
    return out


# ------------------------------------------------------------------ the held-out curve (model.warmup.curve_every)
# Held-out training answers graded greedily as 01 grades (App. B's greedy grading, Tables 1-2 metrics) while the
# warm-up trains, each point judged by the budget guard (``model.warmup``).


def curve_hook(policy, held: dict[str, list[Response]], datasets: dict[str, Dataset], cfg: WarmupConfig,
               eval_cfg, rule: str, points: list, progress: bool = False):
    """The trainer's ``on_step`` hook that greedy-grades the held-out training answers at step 0, every
    ``cfg.curve_every`` steps and at the last step, appending {step, qwk, acc, n, n_invalid, top_share, top_mark,
    gold_share, mark_shares} to ``points``: the curve of held-out QWK (macro over questions, ``eval.invalid_as``)
    against warm-up steps that 01 draws, with the largest share one mark takes of a dataset's gradings, that mark's
    share of their gold marks, and every mark's (``mark_shares``). Under ``cfg.guard == 'stop'`` a point before the
    last step at which the guard fires (``model.warmup``) stops the warm-up there. ``progress``: a line per
    point and the gradings' bar, so the trainer's bar standing still while a point is graded says why."""
    def point(model, step: int) -> None:
        if step % cfg.curve_every and step != cfg.steps:
            return
        model.eval()
        p = dataclasses.replace(policy, model=model)
        if progress:
            print(f"warm-up step {step}: grading {sum(map(len, held.values()))} held-out answers (the curve)",
                  flush=True)
        rows = {"step": step, "n": 0, "n_invalid": 0, "qwk": [], "acc": [], "top_share": 0.0, "mark_shares": []}
        for name, rs in held.items():
            if rs:
                df, m = greedy_grades(p, datasets[name], rs, eval_cfg, rule=rule, progress=progress)
                rows["n"] += m["n"]
                rows["n_invalid"] += m["n_invalid"]
                rows["qwk"].append(m["qwk"])
                rows["acc"].append(m["acc"])
                rows["mark_shares"].append(f"{name}: {mark_shares(df)}")
                top = top_mark(df, name)
                if top["top_share"] > rows["top_share"]:
                    rows.update(top)
        points.append({**rows, "qwk": float(np.nanmean(rows["qwk"])), "acc": float(np.mean(rows["acc"])),
                       "mark_shares": "; ".join(rows["mark_shares"])})
        if cfg.guard == "stop" and step < cfg.steps:
            why = point_verdict(points[-1], points[-2] if len(points) > 1 else None, cfg)
            if why:
                raise WarmupGuardStop(stop_message(why))

    return point


def mark_shares(graded) -> str:
    """Each mark's share of a dataset's graded rows (column ``mark``; "unparsed" for a failed parse) beside its
    share of their gold marks (``gold``), e.g. '0 3% (gold 11%), 1 47% (56%)': the held-out curve per mark, which
    shows a warm-up that settles on one mark (book/records/real_model-cpu-real.md)."""
    marks = graded["mark"].map(lambda m: "unparsed" if pd.isna(m) else str(int(m)))
    gold = graded["gold"].map(lambda g: str(int(g)))
    keys = sorted(set(marks) | set(gold), key=lambda k: (k == "unparsed", int(k) if k.isdigit() else 0))
    return ", ".join(f"{k} {(marks == k).mean():.0%} ({'gold ' if i == 0 else ''}{(gold == k).mean():.0%})"
                     for i, k in enumerate(keys))


# ---------------------------------------------------------------- the examples: judgements and roles

def rubric_points(q: Question) -> tuple[str, ...]:
    """The point texts a judgement of ``q`` can name (module docstring): a PTS or LoR scheme's points, a
    free-text rubric's clauses; () when there are none (a free-text rubric without text)."""
    if isinstance(q.scheme, (PointsScheme, LevelScheme)):
        return tuple(p.text for p in q.scheme.points)
    if not rubric_text(q):
        return ()
    out, seen = [], set()
    for c in clauses(rubric_text(q)):
        key = tuple(span_tokens(c))
        if key not in seen and _stems(c):
            seen.add(key)
            out.append(c)
    return tuple(out)


def points_mark(q: Question, present: Sequence[int]) -> int:
    """The mark the points ``present`` (1-based indices into ``rubric_points``) reach under ``q``'s scheme
    (module docstring)."""
    s = q.scheme
    if isinstance(s, (PointsScheme, LevelScheme)):
        return s.gold([s.points[i - 1].id for i in present])
    n = len(rubric_points(q))
    if not n:
        return 0
    return round_half_up(q.max_mark * len(present) / n)


def match_answer(q: Question, answer: str, threshold: float) -> ElementMatch:
    """The points of ``q`` that ``answer`` states, their evidence sentences and the mark they reach (``band``)."""
    present, evidence = match_texts(rubric_points(q), answer, threshold)
    return ElementMatch(present, evidence, points_mark(q, present))


def fit_question_threshold(q: Question, answers: Sequence[str], golds: Sequence[int]) -> tuple[float, float]:
    """(threshold, balanced agreement) of ``q``'s matcher on training answers (``key_elements.fit_threshold``)."""
    return fit_threshold(lambda a, t: match_answer(q, a, t).band, answers, golds)


def point_kind(q: Question) -> str:
    """'lor', 'pts' or 'text': the wording a judgement or role example uses for ``q``'s points."""
    return "text" if isinstance(q.scheme, FreeTextScheme) else q.scheme.kind


# ---------------------------------------------------------------- the Phase-1 role examples
# checklist: every point verbatim, covered with the matched sentence as evidence or not covered, then the count line
# (``revision.checklist`` or, for a free-text rubric, ``checklist.verify_free`` verifies it); rewrite: the templated
# judgement's steps (no final line) as the attempt, one step rewritten as one sub-step naming the points found (no
# mark; ``revision.mimicry`` must pass it); intervention: the same attempt verified step by step, its counting step
# the first error and one step naming the points found (InT's leak filter must pass it); continuation: the attempt
# up to a drawn step, replaced by that point step, continued by the template's remaining steps and the gold mark.

def short_evidence(sentence: str, keywords: frozenset[str], max_words: int = 10) -> str:
    """The words of a matched sentence from its first keyword to its last (``element_match``'s stems), at most
    ``max_words``: a whole-word span of the answer, shorter than the sentence the matcher read."""
    words = sentence.split()
    hits = [j for j, w in enumerate(words) if set(_stems(w)) & keywords] or [0]
    return " ".join(words[hits[0]:min(hits[-1] + 1, hits[0] + max_words)])


#: What a role example calls a rubric point, by ``point_kind``.
NOUN = {"lor": "key element", "pts": "marking point", "text": "rubric point"}


def role_checklist(q: Question, match: ElementMatch) -> str:
    """The checklist (Sec. 2.2) of one answer: each rubric point verbatim (``rubric_points``; a
    free-text rubric's as 'point i: ...', ``prompts.rewrite.CHECKLIST_FORMAT_FREE``), covered with the span of the
    sentence the matcher found it in (``short_evidence``), or not covered; then 'covered n of N points'."""
    texts = rubric_points(q)
    keys = element_keywords(list(texts))
    ev = {i: short_evidence(s, keys[i - 1]) for i, s in zip(match.present, match.evidence)}
    sep = ":" if point_kind(q) == "text" else ""
    lines = [f"point {i}{sep} {t} ; {'covered' if i in ev else 'not covered'} ; evidence {ev.get(i, 'none')}"
             for i, t in enumerate(texts, start=1)]
    return "\n".join(lines + [f"covered {len(ev)} of {len(texts)} points"])


def checklist_verifies(q: Question, text: str, answer: str) -> bool:
    """True when ``text`` verifies as ``q``'s checklist: listed points (``checklist.parse_checklist``) or a
    free-text rubric's (``checklist.parse_free_checklist``), as 04 verifies the model's."""
    if point_kind(q) == "text":
        return isinstance(parse_free_checklist(text, rubric_text(q), answer), Checklist)
    return isinstance(parse_checklist(text, [p.text for p in q.scheme.points], answer), Checklist)


def element_step(q: Question, present: Sequence[int]) -> str:
    """One step naming the rubric points found by their words (``short_label``), no index or count (InT's leak
    filter reads any digit equal to the mark as a leak); none found is a step saying so."""
    kind = point_kind(q)
    if not present:
        return WORDING[kind][2]
    texts = rubric_points(q)
    return f"The answer states these {NOUN[kind]}s: " + " ; ".join(short_label(texts[i - 1]) for i in present)


def template_attempt(q: Question) -> list[str]:
    """The attempt the roles repair: the templated judgement's steps (``model.warmup.JUDGEMENT_STEPS``), the
    reasoning steps of a warm-up Base rollout (its final line, with the wrong mark, is not a step)."""
    return [s.format(M=q.max_mark) for s in JUDGEMENT_STEPS]


def role_rewrite(q: Question, r: Response, match: ElementMatch, rng: np.random.Generator) -> tuple[str, str] | None:
    """(rewrite prompt, rewrite block) of one answer (App. J / Figure 6): a drawn step of the templated attempt
    rewritten as one step naming the elements found (``element_step``; one sub-step, since Figure 6 allows several
    only when the prefix has synthesised criteria, which the template's has not); None when the mimicry detector
    rejects it."""
    steps, subs = template_attempt(q), [element_step(q, match.present)]
    k = int(rng.integers(1, len(steps) + 1))
    checklist = role_checklist(q, match)
    if detect_mimicry(subs, r.gold, q.max_mark, steps[:k - 1], r.answer, render_scheme(q), checklist):
        return None
    return (render_rewrite_prompt(q, r.answer, r.gold, steps, k, drawn_hints(rng, harmful=True), checklist),
            render_rewrite_block(k, subs))


def role_intervention(q: Question, r: Response, match: ElementMatch) -> tuple[str, str] | None:
    """(InT prompt, InT output) of one answer (Sec. 3 Baselines (4)): the templated attempt's first two steps
    correct, its counting step the first error, replaced by one step naming the elements found; None when InT's
    leak filter rejects that step."""
    from edit_lib.baselines.intervention_sft import OK, screen
    steps, step, noun = template_attempt(q), element_step(q, match.present), NOUN[point_kind(q)]
    out = render_int_output([(True, ""), (True, ""), (False, f"it names no {noun} of the answer")], 3,
                            f"the count names no {noun}", step)
    if screen(out, len(steps), r.gold).status != OK:
        return None
    return render_int_prompt(q, r.answer, r.gold, steps), out


def role_continuation(q: Question, r: Response, match: ElementMatch, rng: np.random.Generator) -> tuple[str, str]:
    """(revised prefix, continuation) of one answer (App. F: the chain regenerated after a revised step): the
    templated attempt up to a drawn step k, that step replaced by the one naming the elements found
    (``element_step``, the rewrite role's sub-step), one step per line as the template's judgement is written;
    then the template's steps after k and the final line with the gold mark. The warm-up puts the prefix after
    the grading prompt, as 04's continuations do (``revision.generation.continue_prefixes``)."""
    steps = template_attempt(q)
    k = int(rng.integers(1, len(steps) + 1))
    prefix = render_in_rule(steps[:k - 1] + [element_step(q, match.present)], "lines")
    return prefix, "\n".join(judgement(q.max_mark, r.gold).split("\n")[k:])


def role_example(role: str, q: Question, r: Response, threshold: float, rng: np.random.Generator,
                 style: str = "chat") -> tuple[str, str] | str:
    """(prompt, completion) of one answer in one Phase-1 role, or the reason it is left out: ``no_elements``
    (the rubric has no points, ``rubric_match``), ``matcher_disagrees`` (the matched points miss the gold mark) or
    ``checker_rejects`` (the role's own checker rejects the example). ``style``: the policy's prompt style."""
    if not rubric_points(q):
        return "no_elements"
    match = match_answer(q, r.answer, threshold)
    if match.band != r.gold:
        return "matcher_disagrees"
    if role == "checklist":
        text = role_checklist(q, match)
        ok = checklist_verifies(q, text, r.answer)
        out = (render_checklist_prompt(q, r.answer, r.gold, style), text) if ok else None
    elif role == "rewrite":
        out = role_rewrite(q, r, match, rng)
    elif role == "intervention":
        out = role_intervention(q, r, match)
    elif role == "continuation":  # (revised prefix, continuation): warmup_pairs puts the grading prompt first
        return role_continuation(q, r, match, rng)
    else:
        raise ValueError(f"model.warmup.roles: unknown role {role!r} (one of {WARMUP_ROLES})")
    return out if out is not None else "checker_rejects"
