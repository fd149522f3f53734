"""Where a profile's warm-up Base lives (``model.warmup``; trained by ``train.warmup``, notebook 01), and its guard.

A departure from the paper for models too small to grade zero-shot (the ``cpu-real`` profile): the paper's Base
(Qwen3-8B) grades zero-shot (App. B). The warm-up trains on training answers only: the grading prompt in, a
judgement of a few steps (Sec. 2.1's step structure) ending in the gold mark out, templated or naming the rubric
points a lexical matcher finds (``element_judgement``). The LoRA adapter is merged into the weights and saved
once in the suite's cache under a key of everything it was computed from: the base weights, ``model.warmup``, the
data section and the contents of its files, the run seed, the code of the modules that build and train it (and,
with a held-out curve, ``eval`` and ``steps.rule``). Every stage then loads that folder as Base
(``policy.load_policy_from_profile``); when it is missing, the error names the notebook that trains it.

The budget guard (``model.warmup.guard``, a suite check): a warm-up Base that does not grade makes every later
comparison against it meaningless (Tables 1-3, App. G), so its held-out curve is judged while it trains
(``point_verdict``): ``stop`` ends 01 (``WarmupGuardStop``), ``warn`` goes on with a caveat. Its values stay out
of the warm-up's key: they decide whether the run goes on, never the weights.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, replace
from pathlib import Path
from typing import Sequence

import pandas as pd

from edit_lib.artifacts import path_digest
from edit_lib.config import REVISER_ROLES, WarmupConfig
from edit_lib.data.key_elements import ElementMatch
from edit_lib.data.schema import LevelScheme, Question
from edit_lib.fingerprints import code_fingerprint
from edit_lib.providers import weights_id
from edit_lib.prompts.grading import format_final_line



GUARD_FIELDS = ("guard", "guard_after", "guard_min_qwk", "guard_min_gain", "guard_max_mark_share",
                "guard_share_margin")


class WarmupGuardStop(RuntimeError):
    """``model.warmup.guard: stop`` fired: the message gives the step, the numbers and what to change."""


def judged(step: int, cfg) -> bool:
    """Whether the curve point at ``step`` is judged (``cfg`` a ``WarmupConfig``)."""
    return step > 0 and step >= math.ceil(cfg.guard_after * cfg.steps)


def point_verdict(point: dict, previous: dict | None, cfg) -> str | None:
    """Why the guard fires at curve ``point`` (``previous`` the point before it), or None. A point holds the held-out
    macro QWK, ``top_share`` (the largest share one mark, "unparsed" included, takes of a dataset's held-out
    gradings) and ``gold_share`` (that mark's share of the same answers' gold marks). The rule:

    * a point is judged from step ``ceil(guard_after * steps)`` on (step 0 is the untrained model);
    * a judged point before the last step fires when its QWK is below ``guard_min_qwk`` and it is **flat** (QWK
      rose less than ``guard_min_gain`` since the previous point) or **degenerate** (``top_share`` above
      ``guard_max_mark_share`` and above ``gold_share + guard_share_margin``: skewed gold marks may rightly put
      most answers on one mark, and a Base that grades them puts a few more there): low and not on its way up;
    * the last point fires when its QWK is below ``guard_min_qwk`` or it is degenerate: training is over."""
    step, qwk = int(point["step"]), float(point["qwk"])
    share = point.get("top_share")
    share = float("nan") if share is None else float(share)
    last = step >= cfg.steps
    low = not qwk >= cfg.guard_min_qwk  # a NaN QWK (one mark for every answer) is low
    gold = point.get("gold_share")
    over = share > cfg.guard_max_mark_share and (gold is None or share > float(gold) + cfg.guard_share_margin)
    flat = previous is None or not qwk - float(previous["qwk"]) >= cfg.guard_min_gain
    fires = (low or over) if last else low and (flat or over)
    if not (judged(step, cfg) and fires):
        return None
    why = []
    if low:
        why.append(f"held-out QWK {qwk:.3f} is below model.warmup.guard_min_qwk={cfg.guard_min_qwk:g}")
    if low and not last and flat and previous is not None:
        why.append(f"rose {qwk - float(previous['qwk']):+.3f} since step {int(previous['step'])} (less than "
                   f"guard_min_gain={cfg.guard_min_gain:g})")
    if over:
        gold_text = "" if gold is None else (f" and than its {float(gold):.0%} of the gold marks + "
                                             f"guard_share_margin={cfg.guard_share_margin:.0%}")
        why.append(f"{point.get('top_mark', 'one mark')} takes {share:.0%} of the held-out gradings (more than "
                   f"guard_max_mark_share={cfg.guard_max_mark_share:.0%}{gold_text})")
    where = "after its last step" if last else f"at step {step} of {cfg.steps}"
    return (f"model.warmup.guard: the warm-up Base {where}: " + "; ".join(why) +
            f" ({int(point.get('n', 0))} held-out answers): a Base that does not grade makes every comparison "
            "against it meaningless")


def top_mark(graded, dataset: str) -> dict:
    """{top_share, top_mark, gold_share} of one dataset's graded rows (columns ``mark``, ``gold``): the mark the
    Base gives most often ("unparsed" for a failed parse), its share of the rows and of their gold marks."""
    marks = graded["mark"].map(lambda m: "unparsed" if pd.isna(m) else str(int(m)))
    shares = marks.value_counts(normalize=True, sort=False).sort_index()
    mark = shares.idxmax()
    gold = float((graded["gold"].map(lambda g: str(int(g))) == mark).mean())
    return dict(top_share=float(shares[mark]), top_mark=f"{dataset}: mark {mark}", gold_share=gold)


def verdict(points: Sequence[dict], cfg) -> str | None:
    """The guard's message on a finished curve: the last point's (`point_verdict`), or None."""
    if not points or cfg.guard == "off":
        return None
    return point_verdict(points[-1], points[-2] if len(points) > 1 else None, cfg)


def stop_message(message: str) -> str:
    """What ``guard: stop`` raises with: the verdict and what to change."""
    return (f"{message}. 01 stops here (model.warmup.guard=stop) before the later stages spend their budget; "
            "set -p model.warmup.guard=warn to go on anyway, or change the warm-up (steps, learning_rate, "
            "judgement, mark_weight, roles) or the data (01's loss figure shows whether the mark tokens' own loss "
            "fell).")


#: The judgement's steps before the final line; {M} is the question's maximum mark.
# ---------------------------------------------------------------- the warm-up Base: its judgements and its key

JUDGEMENT_STEPS = ("The rubric awards up to {M} marks.",
                   "I compare the answer with what the rubric asks for.",
                   "I count the marks the answer earns.")
#: The modules whose code decides the warm-up Base (hashed with everything they import, ``fingerprints``).
CODE = ("edit_lib.model.warmup", "edit_lib.train.warmup", "edit_lib.train.packed_sft")


def judgement(max_mark: int, gold: int) -> str:
    """The templated judgement the warm-up trains on: ``JUDGEMENT_STEPS`` one per line, then the final line with
    the gold mark (the line ``prompts.grading.read_final_mark`` parses)."""
    return "\n".join([s.format(M=max_mark) for s in JUDGEMENT_STEPS] + [format_final_line(gold, max_mark)])


def short_label(text: str, words: int = 6) -> str:
    """The first words of a key element's rubric text, the label a key-element judgement names it by."""
    ws = text.split()
    return " ".join(ws[:words]).rstrip(".,;:") + (" ..." if len(ws) > words else "")


#: A judgement's wording by scheme kind (``train.warmup.point_kind``): its first line, one line per point
#: found, the line when none is found, the count line ({n} found, {N} listed, {s}/{v} plural endings).
WORDING = {
    "lor": ("The rubric scores the number of key elements the answer states.",
            "The answer states key element {i}: {label}", "The answer states no key element.",
            "{n} key element{s} earn{v} {gold} of {M} marks."),
    "pts": ("The rubric awards the marks of each point the answer states.",
            "The answer states point {i}: {label}", "The answer states no marking point.",
            "{n} point{s} earn{v} {gold} of {M} marks."),
    "text": ("The rubric's reference makes {N} points; the mark follows how many the answer states.",
             "The answer states rubric point {i}: {label}", "The answer states no point of the rubric.",
             "{n} of {N} rubric points earn {gold} of {M} marks."),
}


def element_judgement(q: Question, gold: int, match: ElementMatch | None, texts: Sequence[str] | None = None,
                      kind: str = "lor") -> str:
    """The judgement naming the points a lexical matcher found (``model.warmup.judgement``; Sec. 2.1's one
    judgement per line): one line per point found (``WORDING[kind]``), a line counting them into the mark, the
    final line with the gold mark. ``texts``: the rubric's point texts (``train.warmup.rubric_points``;
    default a LoR scheme's key elements). ``match`` None (the matcher disagrees with the gold mark, or there are
    no points) gives the template ``judgement``: the judgement then names no point."""
    if texts is None:
        texts = [p.text for p in q.scheme.points] if isinstance(q.scheme, LevelScheme) else []
    if match is None or not texts:
        return judgement(q.max_mark, gold)
    if match.band != gold:
        raise ValueError(f"question {q.id}: a key-element judgement needs a match that reaches the gold mark {gold}")
    head, item, none, count = WORDING[kind]
    n, fill = len(match.present), dict(N=len(texts), gold=gold, M=q.max_mark)
    lines = [head.format(**fill)] + [item.format(i=i, label=short_label(texts[i - 1])) for i in match.present]
    lines.append(none if n == 0 else count.format(n=n, s="s" if n > 1 else "", v="" if n > 1 else "s", **fill))
    return "\n".join(lines + [format_final_line(gold, q.max_mark)])


def full_profile(profile):
    """The profile behind a stage's view. A stage's view guards the sections its key covers; the warm-up Base
    also depends on the data section, which every stage that loads a model covers through its upstream
    00_data key, so its lookup reads the full profile."""
    return vars(profile).get("_obj", profile)


def base_warmup(cfg: WarmupConfig) -> WarmupConfig:
    """The warm-up that trains Base: ``cfg`` itself, or under ``role_model: separate`` its roles without the
    reviser's (``REVISER_ROLES``). The reviser's own fields are reset, so a Base does not depend on them: a
    separate reviser's Base is the grading-only warm-up of the same values (one cache folder)."""
    if cfg.role_model != "separate":
        return replace(cfg, role_steps=WarmupConfig.role_steps)
    # role_phase orders role batches among grading's: with the roles gone it changes nothing
    return replace(cfg, roles=[r for r in cfg.roles if r not in REVISER_ROLES], role_model="shared",
                   role_steps=WarmupConfig.role_steps, role_phase=WarmupConfig.role_phase)


def reviser_warmup(cfg: WarmupConfig) -> WarmupConfig | None:
    """The separate reviser's warm-up (``role_model: separate``; a departure, book/departures.md): the reviser's
    roles of ``cfg`` alone for ``role_steps`` steps, no held-out grading curve and no guard (it does not grade).
    None when the roles are the Base's (``shared``)."""
    if cfg.role_model != "separate":
        return None
    return base_warmup(replace(cfg, roles=[r for r in cfg.roles if r in REVISER_ROLES], steps=cfg.role_steps,
                               curve_every=0, guard="off", role_model="shared", role_phase="mixed"))


def keyed_warmup(cfg: WarmupConfig) -> WarmupConfig:
    """``model.warmup`` as the stage keys hash it, so a value that changes nothing moves no key: its defaults when
    no warm-up trains (``steps`` 0), ``role_steps`` at its default unless a separate reviser trains."""
    if cfg.steps <= 0:
        return WarmupConfig()
    return cfg if cfg.role_model == "separate" else base_warmup(cfg)


def with_warmup(profile, cfg: WarmupConfig):
    """The full profile with ``model.warmup`` replaced by ``cfg``: how the reviser's warm-up gets its own key and
    folder from the Base's profile."""
    profile = full_profile(profile)
    return replace(profile, model=replace(profile.model, warmup=cfg))


def warmup_key(profile) -> str:
    """Hash of everything the warm-up Base is computed from (module docstring)."""
    from edit_lib.data.registry import input_paths
    profile = full_profile(profile)
    h = hashlib.sha256()
    # the guard decides whether 01 goes on, never the weights
    warmup = {k: v for k, v in asdict(base_warmup(profile.model.warmup)).items() if k not in GUARD_FIELDS}
    parts = dict(weights=weights_id(profile.model.name_or_path, profile.model.hub_commit), warmup=warmup,
                 data=[asdict(d) for d in profile.data.datasets], seed=profile.run.seed)
    if profile.model.warmup.curve_every > 0:  # the held-out curve in its summary is graded as 01 grades
        parts.update(curve_eval=asdict(profile.eval), curve_rule=profile.steps.rule)
    h.update(json.dumps(parts, sort_keys=True, default=str).encode())
    for spec in profile.data.datasets:
        for p in input_paths(spec):
            h.update(path_digest(p).encode())
    h.update(code_fingerprint(*CODE).encode())
    return h.hexdigest()[:16]


def warmup_dir(profile) -> Path:
    """The cache folder of the profile's warm-up Base."""
    from edit_lib.artifacts import cache_dir
    profile = full_profile(profile)
    return cache_dir() / "warmup" / f"{profile.model.name_or_path.replace('/', '_')}-{warmup_key(profile)}"


def find_warmup_base(profile) -> Path:
    """The trained warm-up Base of ``profile``; FileNotFoundError naming notebook 01 (which trains it) if absent."""
    out = warmup_dir(profile)
    if not (out / "config.json").exists():
        raise FileNotFoundError(f"model.warmup: the warm-up Base of profile {full_profile(profile).name!r} is not trained yet "
                                f"(expected {out}); notebook 01_base_policy trains it (edit-suite run --profile "
                                f"{profile.name} --only 01_base_policy)")
    return out


def reviser_dir(profile) -> Path | None:
    """The cache folder of the profile's separate reviser (``reviser_warmup``), or None when it has none."""
    cfg = reviser_warmup(full_profile(profile).model.warmup)
    return None if cfg is None or profile.model.warmup.steps <= 0 else warmup_dir(with_warmup(profile, cfg))


def warmup_summary(profile) -> dict | None:
    """The summary of the profile's warm-up Base, or None when the profile has none or it is not trained yet."""
    if profile.model.warmup.steps <= 0:
        return None
    f = warmup_dir(profile) / "warmup_summary.json"
    return json.loads(f.read_text()) if f.exists() else None


def warmup_report(profile) -> tuple[dict, pd.DataFrame, str]:
    """What 01 shows of the profile's warm-up Base: (its steps, seconds and pairs, its loss curve, an example of
    the templated judgement it trains on)."""
    summary = warmup_summary(profile)
    curve = pd.DataFrame(summary["loss_curve"]).assign(system="format warm-up", dataset="training split")
    if "mark_loss" in curve:  # the final line's mark tokens alone (train.packed_sft.mark_tokens), a line of its own
        marks = curve.dropna(subset=["mark_loss"]).assign(loss=lambda d: d["mark_loss"], system="its mark tokens alone")
        curve = pd.concat([curve, marks], ignore_index=True).drop(columns="mark_loss")
    keys = ("steps", "seconds", "build_seconds", "pairs", "thresholds", "heldout_answers")
    return {k: summary.get(k) for k in keys}, curve, summary["example_judgement"]


def reviser_report(profile) -> dict | None:
    """What 01 shows of the separate reviser (``role_model: separate``): its steps, seconds and pairs per role, or
    None when the profile has none or it is not trained yet."""
    folder = reviser_dir(profile)
    f = folder / "warmup_summary.json" if folder is not None else None
    if f is None or not f.exists():
        return None
    summary = json.loads(f.read_text())
    return {k: summary.get(k) for k in ("steps", "seconds", "build_seconds", "pairs")}


def warmup_heldout_curve(profile) -> pd.DataFrame:
    """The warm-up Base's held-out QWK against its optimiser steps (``model.warmup.curve_every``): greedy
    grading of training answers it never trained on (the test splits are never used), macro over questions;
    an empty table when the profile draws no curve."""
    summary = warmup_summary(profile) or {}
    return pd.DataFrame(summary.get("heldout_curve") or [],
                        columns=["step", "qwk", "acc", "n", "n_invalid", "top_share", "top_mark", "gold_share",
                                 "mark_shares"])


def warmup_guard_caveats(profile) -> list[str]:
    """Under ``model.warmup.guard: warn``: the guard's verdict on the finished held-out curve as a caveat every
    later notebook carries (``model.warmup``), or []; ``stop`` never gets here with one (01 stopped)."""
    summary = warmup_summary(profile) or {}
    why = verdict(summary.get("heldout_curve") or [], profile.model.warmup)
    return [f"warm-up Base: {why}"] if why and profile.model.warmup.guard == "warn" else []
