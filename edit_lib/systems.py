"""Every graded system as data (Tables 1, 2, 4, 5, 6; Sec. 3): which stage makes it, where its adapter is
recorded, and which paper tables it appears in. Evaluation, rule-sensitivity interventions, significance and
the book read this one table, so adding a system is one row.

Where an adapter is recorded: 05's results JSON holds ``extra.adapters`` (system -> dataset -> folder, the SFT
adapters on Base), 06's holds ``extra.rl_adapters`` (system -> dataset -> seed -> {adapter, init_adapter}: the
RL adapter over its merged initialisation). ``resolve`` turns a system and those two maps into the concrete
policies to grade, one per dataset (and seed), each loadable with
``policy.load_policy_from_profile(profile, adapter=..., init_adapter=...)``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class System:
    """One system: ``name`` (the key in the stage's adapter map), ``label`` (as the paper writes it), the stage
    that makes it, ``source`` ('base', 'sft' for 05's ``adapters`` or 'rl' for 06's ``rl_adapters``), its column
    in Tables 1-2 (None when it is not a main-table column) and the paper tables it appears in."""

    name: str
    label: str
    stage: str
    source: str
    main_column: str | None
    tables: tuple[str, ...]


SYSTEMS: tuple[System, ...] = (
    System("base", "Base", "01_base_policy", "base", "Base", ("Table 1", "Table 2", "Table 3", "Table 13")),
    System("base_grpo", "GRPO", "06_rl", "rl", "GRPO", ("Table 1", "Table 2", "Table 3", "Table 5", "Table 13")),
    System("base_dgpo", "DGPO", "06_rl", "rl", "DGPO", ("Table 1", "Table 2", "Table 3", "Table 13")),
    System("int_sft", "InT-SFT", "05_edit_sft", "sft", "InT SFT", ("Table 1", "Table 2", "Table 3", "Table 13")),
    System("int_sft_int_rl", "InT-RL", "06_rl", "rl", "InT RL", ("Table 1", "Table 2", "Table 3", "Table 13")),
    System("edit_sft", "EDIT-SFT", "05_edit_sft", "sft", "EDIT-SFT",
           ("Table 1", "Table 2", "Table 3", "Table 6", "Table 13")),
    System("edit_sft_edit_rl", "EDIT-RL", "06_rl", "rl", "EDIT-RL",
           ("Table 1", "Table 2", "Table 3", "Table 4", "Table 5", "Table 7", "Table 10", "Table 13")),
    System("base_edit_rl", "Base+EDIT-RL", "06_rl", "rl", None, ("Table 5",)),
    System("edit_sft_grpo", "EDIT-SFT+GRPO", "06_rl", "rl", None, ("Table 4", "Table 5", "Table 10")),
    System("wo_localiser", "w/o Localiser", "05_edit_sft", "sft", None, ("Table 6",)),
    System("wo_checklist", "w/o Checklist", "05_edit_sft", "sft", None, ("Table 6",)),
    System("wo_atomic", "w/o Atomic", "05_edit_sft", "sft", None, ("Table 6",)),
)
BY_NAME = {s.name: s for s in SYSTEMS}


@dataclass(frozen=True)
class Graded:
    """A concrete policy to grade: a system on one dataset (and RL seed), with its adapter folders (None: none)."""

    system: str
    dataset: str
    seed: int | None
    adapter: str | None
    init_adapter: str | None


def system(name: str) -> System:
    """The system called ``name``; an unknown name is an error listing the known ones."""
    if name not in BY_NAME:
        raise KeyError(f"unknown system {name!r}; known: {sorted(BY_NAME)}")
    return BY_NAME[name]


def in_table(table: str) -> list[System]:
    """The systems of one paper table (e.g. 'Table 5'), in ``SYSTEMS`` order."""
    return [s for s in SYSTEMS if table in s.tables]


def resolve(name: str, datasets, sft_adapters: dict, rl_adapters: dict) -> list[Graded]:
    """The policies of system ``name`` on ``datasets`` (names): Base on every dataset; an SFT system where 05
    saved its adapter; an RL system for every dataset and seed 06 trained. A dataset a system was not trained
    on (an empty pool, a dataset outside ``rl.datasets``) is simply absent from the result."""
    s = system(name)
    if s.source == "base":
        return [Graded(name, d, None, None, None) for d in datasets]
    if s.source == "sft":
        by_ds = sft_adapters.get(name, {})
        return [Graded(name, d, None, by_ds[d], None) for d in datasets if d in by_ds]
    by_ds = rl_adapters.get(name, {})
    out = []
    for d in datasets:
        for seed, a in sorted(by_ds.get(d, {}).items(), key=lambda kv: int(kv[0])):
            out.append(Graded(name, d, int(seed), a["adapter"], a.get("init_adapter")))
    return out


def initialisation(g: Graded, sft_adapters: dict) -> str:
    """The label of the policy an RL system ``g`` started from (App. B: RL trains over the merged SFT model):
    the SFT system whose saved adapter (05's ``adapters``: system -> dataset -> folder ``.../<system>/<dataset>``)
    is ``g.init_adapter``, 'Base' without one. Matched on the folder's last two parts (a copied or moved run keeps
    them), never on a name anywhere in the path (InT's adapter also lives under 05_edit_sft/)."""
    if not g.init_adapter:
        return "Base"
    tail = Path(g.init_adapter).parts[-2:]
    for name, by_ds in sft_adapters.items():
        if any(Path(p).parts[-2:] == tail for p in by_ds.values()):
            return system(name).label
    raise KeyError(f"{g.system}/{g.dataset}: its initialisation {g.init_adapter} is none of 05's SFT adapters")


NOT_RUN = "not run on this profile (run.skip_systems)"


def not_run(profile) -> list[str]:
    """The systems ``profile`` leaves out (``run.skip_systems``), in ``SYSTEMS`` order; an unknown name, or Base
    (every other system is compared with it), is an error naming the key."""
    names = list(profile.run.skip_systems)
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise ValueError(f"run.skip_systems: unknown system(s) {unknown}; known: {sorted(BY_NAME)}")
    if "base" in names:
        raise ValueError("run.skip_systems: 'base' cannot be skipped (every table compares with it)")
    return [s.name for s in SYSTEMS if s.name in names]


def not_run_table(profile) -> list[dict]:
    """One row per system left out by the profile, with the reason, for a stage's results."""
    return [dict(system=n, label=BY_NAME[n].label, stage=BY_NAME[n].stage, status=NOT_RUN) for n in not_run(profile)]
