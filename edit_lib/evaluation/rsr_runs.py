"""08's interventions (App. I): which datasets are edited, the edited datasets with their recomputed gold, and
every selected system regraded under each edit (``rsr`` computes Tables 7 and 14 from the pairs)."""
from __future__ import annotations

import pandas as pd

from edit_lib.config import ConfigError
from edit_lib.data.rubric_edits import EDITS, regold, regold_from_gold
from edit_lib.evaluation.predictions import LazyPolicy
from edit_lib.evaluation.rsr import pair_predictions, sample_responses
from edit_lib.random_streams import RSR_RESPONSES, stream_seed


def rsr_targets(rsr_cfg, datasets: dict) -> tuple[list[str], list[str]]:
    """(the datasets under intervention: ``rsr.datasets``, else every dataset with a PTS or LoR question; one
    warning per named dataset whose every rubric is free text, to which no App. I edit applies)."""
    unknown = sorted(set(rsr_cfg.datasets) - set(datasets))
    if unknown:
        raise ConfigError(f"rsr.datasets names datasets this run does not have: {unknown}; it has {sorted(datasets)}")
    structured = {n for n, ds in datasets.items() if any(q.scheme.kind in ("pts", "lor") for q in ds.questions.values())}
    targets = list(rsr_cfg.datasets) or sorted(structured)
    warnings = [f"{n}: every question has a free-text rubric; no App. I edit applies to it, so it has no RSR"
                for n in targets if n not in structured]
    return [n for n in targets if n in structured], warnings


def edited_datasets(targets: list[str], datasets: dict, rsr_cfg, seed: int) -> tuple[dict, pd.DataFrame]:
    """({(dataset, edit): (edited dataset, the sampled responses to regrade)}, the regold table). The gold is
    recomputed from coverage where every response has it (exact), else from the gold and the scheme; where both
    exist, the table says whether they agree. The responses are drawn from the ``RSR_RESPONSES`` stream of ``seed``
    (the run's seed; App. I)."""
    edited, rows = {}, []
    for name in targets:
        ds = datasets[name]
        full_cov = all(r.coverage for r in ds.responses)
        orig_gold = {r.id: r.gold for r in ds.responses}
        for edit in EDITS:
            derived = regold_from_gold(ds, edit)
            exact = regold(ds, edit) if full_cov else None
            use = exact if exact is not None else derived
            pool = [r for r in use.responses if r.split in rsr_cfg.splits]
            sample = sample_responses(pool, rsr_cfg.responses_per_edit, seed=stream_seed(seed, RSR_RESPONSES))
            edited[(name, edit)] = (use, sample)
            row = dict(dataset=name, edit=edit, gold_from="coverage" if exact is not None else "gold and scheme",
                       questions=len({r.question_id for r in pool}), responses=len(pool), sampled=len(sample),
                       mean_abs_dgold=(sum(abs(r.gold - orig_gold[r.id]) for r in sample) / len(sample))
                       if sample else None,
                       needs_coverage=use.meta["regold"].get("excluded_responses_needs_coverage", 0))
            if exact is not None:
                ex = {r.id: r.gold for r in exact.responses}
                row["gold_only_agrees"] = all(ex.get(r.id) == r.gold for r in derived.responses)
                row["gold_only_covers"] = len(derived.responses) / max(1, len(exact.responses))
            rows.append(row)
    return edited, pd.DataFrame(rows)


def regrade(cache, graded: list, preds: pd.DataFrame, edited: dict, targets: list[str], systems) -> tuple:
    """(pairs of each selected system's prediction before and after every edit, its first seed for RL systems;
    the (system, dataset) pairs with no policy on this profile). ``cache``: 07's ``PredictionCache``."""
    first: dict = {}
    for g in graded:
        if g.seed is not None:
            first[g.system] = min(first.get(g.system, g.seed), g.seed)
    todo = [g for g in graded if g.system in systems and g.dataset in targets
            and (g.seed is None or g.seed == first[g.system])]
    missing = [(s, n) for n in targets for s in systems if not any(g.system == s and g.dataset == n for g in todo)]
    parts = []
    for g in todo:
        print(f"{g.system} / {g.dataset}", flush=True)
        lazy = LazyPolicy(cache.profile, g)
        orig = preds[(preds["system"] == g.system) & (preds["dataset"] == g.dataset)
                     & ((preds["seed"].isna()) if g.seed is None else (preds["seed"] == g.seed))]
        for edit in EDITS:
            ds_e, sample = edited[(g.dataset, edit)]
            if sample:
                e = cache.predict(g, ds_e, sample, progress=True, policy=lazy)
                parts.append(pair_predictions(orig, e).assign(system=g.system, dataset=g.dataset, edit=edit))
    return (pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()), missing
