"""What 07 shows, assembled from the evaluation tables: the graded policies and the systems without one, Tables 1
and 2 in the paper's layout beside the paper's own numbers (reference data, ``paper_reference``), and the
metrics under the forced read (cpu-real's departure)."""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from edit_lib import paper_reference
from edit_lib.evaluation.predictions import FORCED, forced_view
from edit_lib.evaluation.tables import beside_paper, main_table, metrics_long
from edit_lib.systems import BY_NAME, all_systems, initialisation, main_systems, resolve


def graded_plan(datasets, sft_adapters: dict, rl_adapters: dict) -> tuple[list, pd.DataFrame]:
    """(every policy 05 and 06 saved, per system in ``SYSTEMS`` order, a profile's baselines last; the table of
    them with each RL system's initialisation)."""
    graded = [g for s in all_systems() for g in resolve(s.name, list(datasets), sft_adapters, rl_adapters)]
    plan = pd.DataFrame([dict(system=g.system, label=BY_NAME[g.system].label, dataset=g.dataset, seed=g.seed,
                              initialisation=initialisation(g, sft_adapters)) for g in graded])
    return graded, plan


def absent_systems(plan: pd.DataFrame, skipped: list[str]) -> list[str]:
    """Systems with no saved policy that the profile did not leave out (e.g. an empty SFT pool in 05)."""
    have = set(plan["system"]) if len(plan) else set()
    return [s.name for s in all_systems() if s.name not in have and s.name not in skipped]


@dataclass
class MainTableView:
    """One of Tables 1-2 as 07 shows it: the tables it records, a sentence, and the frames to display."""
    tables: dict
    note: str
    frames: list = field(default_factory=list)


def main_table_view(m: pd.DataFrame, datasets, table: str, profile_name: str) -> MainTableView:
    """``table`` ('Table 1' or 'Table 2') in the paper's layout (``tables.main_table``) and, where the paper has a
    counterpart row, the paper's values beside it (``tables.beside_paper``). A profile's baselines
    (``run.baselines``) are columns after the paper's."""
    main = list(main_systems())
    labels = {n: BY_NAME[n].main_column for n in main}
    tab = main_table(m, datasets, main, table)
    key = table.lower().replace(" ", "")
    if tab.empty:
        return MainTableView({key: tab}, f"{table}: no dataset of this run has that layout")
    comp = beside_paper(tab, paper_reference.table(table), main)
    view = MainTableView({key: tab, f"{key}_beside_paper": comp},
                         f"{table} (suite: {', '.join(tab['dataset'].unique())}; profile {profile_name})",
                         [tab.drop(columns="paper_subject").rename(columns=labels).round(3)])
    have = comp.dropna(subset=["paper"])
    if len(have):
        view.note += f"; below it, {table} as the paper reports it (Qwen3-8B), rows with a counterpart here"
        view.frames.append(have.pivot_table(index=["subject", "split", "metric"], columns="system", values="paper",
                                            sort=False)[[s for s in main if s in set(have["system"])]]
                           .rename(columns=labels))
    return view


def forced_read_metrics(preds: pd.DataFrame, m: pd.DataFrame, invalid_as: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the metrics with the forced read filling failed parses, with ``n_forced``; QWK under both reads side by
    side) for ``eval.forced_read`` (a departure: reported beside the parse-only metrics, never mixed)."""
    view = forced_view(preds)
    forced = view.assign(n_forced=view["parse_status"].eq(FORCED)).groupby(
        ["system", "dataset", "split"], dropna=False)["n_forced"].sum().reset_index()
    mf = metrics_long(view, invalid_as).merge(forced, on=["system", "dataset", "split"])
    both = pd.concat([m[m["subject"] == "all"].assign(read="parsed"), mf[mf["subject"] == "all"].assign(read="parsed+forced")])
    return mf, both.pivot_table(index=["dataset", "split", "read"], columns="system", values="qwk", aggfunc="first")
