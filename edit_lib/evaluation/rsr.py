"""Rule-faithfulness under rubric interventions (Sec. 3 "Rule-Faithfulness under Interventions", App. I;
Tables 7 and 14).

08's runs: which datasets are edited, the edited datasets with their recomputed gold, and every selected system
regraded under each edit (``rsr_targets``, ``edited_datasets``, ``regrade``). Over the rows of one (system, edit),
pairing predictions and gold under the original and the edited scheme:
RSR = mean|mark_edit - mark| / mean|gold_edit - gold| (App. I), floor rate (FR), in-rubric RSR (IB-RSR), and
AE-RSR = mean over edit conditions of |IB-RSR - 1| (lower is better). Rows whose prediction failed to parse
are left out and counted (``n_invalid``); a ratio with no gold change is NaN.

Details: book/departures.md, section "Rule-faithfulness under interventions (edit_lib/evaluation/rsr.py)".
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from edit_lib.config import ConfigError
from edit_lib.data.rubric_edits import EDIT_KIND, EDITS, regold, regold_from_gold
from edit_lib.evaluation.predictions import LazyPolicy
from edit_lib.random_streams import RSR_RESPONSES, seeded_subset, stream_seed

CONDITIONS = tuple(EDITS)  # lor_a1, lor_a2, lor_b1, pts_x0.5, pts_x1.5, pts_x2.0
LABELS = {"lor_a1": "LoR-A1 (+2)", "lor_a2": "LoR-A2 (x2)", "lor_b1": "LoR-B1 (diff)",
          "pts_x0.5": "PTS (x0.5)", "pts_x1.5": "PTS (x1.5)", "pts_x2.0": "PTS (x2.0)"}


def _ratio(num: np.ndarray, den: np.ndarray) -> float:
    if len(num) == 0:
        return float("nan")
    d = float(np.mean(den))
    return float(np.mean(num)) / d if d > 0 else float("nan")


def condition_metrics(rows: pd.DataFrame) -> dict:
    """RSR, floor rate and in-rubric RSR of one (system, edit) (App. I; module docstring), with counts."""
    ok = (rows["mark"].notna() & rows["mark_edit"].notna()).to_numpy(dtype=bool)
    r = rows[ok]
    dp = np.abs(r["mark_edit"].astype(float).to_numpy() - r["mark"].astype(float).to_numpy())
    dg = np.abs(r["gold_edit"].astype(float).to_numpy() - r["gold"].astype(float).to_numpy())
    floor = (r["mark_edit"].astype(float) == 0).to_numpy()
    return dict(n=int(len(rows)), n_invalid=int((~ok).sum()), n_scored=int(len(r)),
                n_in_rubric=int((~floor).sum()),
                mean_abs_dpred=float(dp.mean()) if len(r) else float("nan"),
                mean_abs_dgold=float(dg.mean()) if len(r) else float("nan"),
                rsr=_ratio(dp, dg), floor_rate=float(floor.mean()) if len(r) else float("nan"),
                ib_rsr=_ratio(dp[~floor], dg[~floor]))


def condition_table(pairs: pd.DataFrame) -> pd.DataFrame:
    """Table 14 (long): one row per (system, dataset, edit) with ``condition_metrics``; ``pairs`` has columns
    system, dataset, edit, response_id, gold, gold_edit, mark, mark_edit."""
    rows = []
    for (system, ds, edit), g in pairs.groupby(["system", "dataset", "edit"], sort=False):
        rows.append(dict(system=system, dataset=ds, edit=edit, family=EDIT_KIND[edit], **condition_metrics(g)))
    out = pd.DataFrame(rows)
    if len(out):
        out["order"] = out["edit"].map({c: i for i, c in enumerate(CONDITIONS)})
        out = out.sort_values(["dataset", "system", "order"], kind="stable").drop(columns="order")
    return out.reset_index(drop=True)


def ae_rsr(ib_rsr) -> float:
    """AE-RSR: mean over conditions of |IB-RSR - 1| (Sec. 3; NaN conditions left out, NaN if none is left)."""
    v = np.asarray([x for x in ib_rsr if not pd.isna(x)], dtype=float)
    return float(np.mean(np.abs(v - 1))) if len(v) else float("nan")


def signed_rsr_error(ib_rsr) -> float:
    """Mean of IB-RSR - 1 over conditions: signed, so over- and under-reaction cancel (why AE-RSR exists)."""
    v = np.asarray([x for x in ib_rsr if not pd.isna(x)], dtype=float)
    return float(np.mean(v - 1)) if len(v) else float("nan")


def summary_table(conditions: pd.DataFrame) -> pd.DataFrame:
    """Table 7: per (dataset, system), AE-RSR and floor rate (%, the mean over the family's conditions) for
    LoR and PTS, overall AE-RSR over every condition, and the signed mean beside it; ``conditions`` counts the
    conditions that entered each family (an edit with no question of its kind cannot)."""
    rows = []
    for (ds, system), g in conditions.groupby(["dataset", "system"], sort=False):
        row = dict(dataset=ds, system=system)
        for fam in ("lor", "pts"):
            f = g[g["family"] == fam]
            row[f"ae_rsr_{fam}"] = ae_rsr(f["ib_rsr"])
            row[f"floor_rate_pct_{fam}"] = 100 * float(f["floor_rate"].mean()) if len(f) else float("nan")
            row[f"conditions_{fam}"] = int(f["ib_rsr"].notna().sum())
        row["ae_rsr_overall"] = ae_rsr(g["ib_rsr"])
        row["signed_overall"] = signed_rsr_error(g["ib_rsr"])
        rows.append(row)
    return pd.DataFrame(rows)


def pair_predictions(original: pd.DataFrame, edited: pd.DataFrame) -> pd.DataFrame:
    """Rows of one (system, dataset, edit): predictions under the edited scheme (``edited``, whose ``gold`` is
    the edited gold) joined by response id to the same responses' predictions under the original scheme
    (``original``). A response missing from ``original`` is an error, never dropped."""
    o = original.drop_duplicates("response_id").set_index("response_id")
    missing = sorted(set(edited["response_id"]) - set(o.index))
    if missing:
        raise KeyError(f"{len(missing)} edited responses have no original prediction (e.g. {missing[:3]})")
    ids = edited["response_id"].tolist()
    return pd.DataFrame(dict(response_id=ids, question_id=edited["question_id"].tolist(),
                             gold=o.loc[ids, "gold"].astype(int).to_numpy(),
                             gold_edit=edited["gold"].astype(int).to_numpy(),
                             mark=pd.array(o.loc[ids, "mark"].tolist(), dtype="Int64"),
                             mark_edit=pd.array(edited["mark"].tolist(), dtype="Int64")))


# ------------------------------------------------------------------ 08's runs: the edited datasets, regraded

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
            sample = seeded_subset(pool, rsr_cfg.responses_per_edit, seed=stream_seed(seed, RSR_RESPONSES))
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
