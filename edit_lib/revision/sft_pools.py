"""Every SFT pool of 05 and its bookkeeping (Sec. 2.2 "Pool composition", App. B, Table 6).

Each pool holds only its own dataset's rows. EDIT's pool and its Table 6 ablations: the rule's kept revisions
plus ``sft.golden_per_revision`` golden rollouts per kept revision, drawn from the correct rollouts of the same
Phase-1 responses in one seeded order per dataset (so the arms share their golden prefix). InT's pool: its kept
interventions, no golden rollouts (App. B: "the difference is the golden anchor set"). A profile's SFT baselines
(``run.baselines``): the pool each draws (``systems.baseline_pools``). ``sft.max_pool`` caps every pool the same way
(``pool.cap_pool``); every arm then trains App. B's full epochs over what it holds.
"""
from __future__ import annotations

from typing import Mapping

import pandas as pd

from edit_lib.revision.pool import bookkeeping, build_pool, cap_pool
from edit_lib.systems import EDIT_SFT, INT_SFT, baseline_pools


def _own(df: pd.DataFrame, ds: str) -> pd.DataFrame:
    return df[df["dataset"] == ds]


def build_pools(pool_source: pd.DataFrame, datasets, edit: tuple[pd.DataFrame, pd.DataFrame],
                int_outcome: pd.DataFrame, int_pools: Mapping[str, pd.DataFrame], ablations: Mapping[str, object],
                ablation_dataset: str, sft, seed: int) -> tuple[dict, pd.DataFrame]:
    """(pools keyed by (system, dataset), bookkeeping table). ``edit`` = (EDIT's outcome table, its
    continuations); ``int_pools`` = InT's pool per dataset (``baselines.intervention_runs.int_pool``);
    ``ablations`` = name -> repair pass (``variants.RepairPass``) on ``ablation_dataset``; ``sft`` the profile's SFT
    section."""
    g = sft.golden_per_revision
    full, books = {}, []
    for ds in datasets:
        full[(EDIT_SFT, ds)] = build_pool(_own(pool_source, ds), _own(edit[0], ds), edit[1], "edit", g, seed)
        full[(INT_SFT, ds)] = int_pools[ds]
    books += [bookkeeping(pool_source, edit[0], "edit", g).assign(system=EDIT_SFT),
              bookkeeping(pool_source, int_outcome, "int").assign(system=INT_SFT, golden_rollouts=0,
                                                                  golden_per_kept=0.0)]
    abl_source = _own(pool_source, ablation_dataset)
    for name, p in ablations.items():
        full[(name, ablation_dataset)] = build_pool(abl_source, _own(p.outcome, ablation_dataset),
                                                    p.rule_continuations, name, g, seed)
        books.append(bookkeeping(abl_source, p.outcome, name, g).assign(system=name))
    for (name, ds), pool in baseline_pools(pool_source, datasets, sft, seed).items():
        full[(name, ds)] = pool
        books.append(pd.DataFrame([dict(system=name, dataset=ds, rule=name)]))
    pools = {k: cap_pool(v, sft.max_pool, seed) for k, v in full.items()}
    book = pd.concat(books, ignore_index=True)
    key = list(zip(book["system"], book["dataset"]))
    book["pool_size"] = [len(full.get(k, [])) for k in key]
    book["pool_trained"] = [len(pools.get(k, [])) for k in key]
    book["revisions_trained"] = [int((pools[k]["source"] != "golden").sum()) if k in pools else 0 for k in key]
    book["golden_trained"] = [int((pools[k]["source"] == "golden").sum()) if k in pools else 0 for k in key]
    rejected = [c for c in book.columns if c.startswith("rejected_")]
    book[rejected] = book[rejected].fillna(0).astype(int)  # a reason one system never met is 0 for it
    return pools, book[["system", *[c for c in book.columns if c != "system"]]]
