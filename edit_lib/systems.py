"""Every graded system as data (Tables 1, 2, 4, 5, 6; Sec. 3): which stage makes it, where its adapter is
recorded, and which paper tables it appears in (in the paper's row order: :func:`in_table`). Evaluation,
rule-sensitivity interventions, significance, the claims and the book read this one table, so adding a system is
one row; a module naming a system by its role (EDIT-RL, the Table 6 ablations) uses the constants below.

Where an adapter is recorded: 05's results JSON holds ``extra.adapters`` (system -> dataset -> folder, the SFT
adapters on Base), 06's holds ``extra.rl_adapters`` (system -> dataset -> seed -> {adapter, init_adapter}: the
RL adapter over its merged initialisation). ``resolve`` turns a system and those two maps into the concrete
policies to grade, one per dataset (and seed), each loadable with
``policy.load_policy_from_profile(profile, adapter=..., init_adapter=...)``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from edit_lib.registry import Registry


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


BASE, BASE_GRPO, BASE_DGPO, BASE_EDIT_RL = "base", "base_grpo", "base_dgpo", "base_edit_rl"
INT_SFT, INT_RL = "int_sft", "int_sft_int_rl"
EDIT_SFT, EDIT_SFT_GRPO, EDIT_RL = "edit_sft", "edit_sft_grpo", "edit_sft_edit_rl"
WO_LOCALISER, WO_CHECKLIST, WO_ATOMIC = "wo_localiser", "wo_checklist", "wo_atomic"

SYSTEMS: tuple[System, ...] = (
    System(BASE, "Base", "01_base_policy", "base", "Base", ("Table 1", "Table 2", "Table 3", "Table 5", "Table 13")),
    System(BASE_GRPO, "GRPO", "06_rl", "rl", "GRPO", ("Table 1", "Table 2", "Table 3", "Table 5", "Table 13")),
    System(BASE_DGPO, "DGPO", "06_rl", "rl", "DGPO", ("Table 1", "Table 2", "Table 3", "Table 13")),
    System(INT_SFT, "InT-SFT", "05_edit_sft", "sft", "InT SFT", ("Table 1", "Table 2", "Table 3", "Table 13")),
    System(INT_RL, "InT-RL", "06_rl", "rl", "InT RL", ("Table 1", "Table 2", "Table 3", "Table 13")),
    System(EDIT_SFT, "EDIT-SFT", "05_edit_sft", "sft", "EDIT-SFT",
           ("Table 1", "Table 2", "Table 3", "Table 6", "Table 13")),
    System(EDIT_RL, "EDIT-RL", "06_rl", "rl", "EDIT-RL",
           ("Table 1", "Table 2", "Table 3", "Table 4", "Table 5", "Table 7", "Table 10", "Table 13")),
    System(BASE_EDIT_RL, "Base+EDIT-RL", "06_rl", "rl", None, ("Table 5",)),
    System(EDIT_SFT_GRPO, "EDIT-SFT+GRPO", "06_rl", "rl", None, ("Table 4", "Table 5", "Table 10")),
    System(WO_LOCALISER, "w/o Localiser", "05_edit_sft", "sft", None, ("Table 6",)),
    System(WO_CHECKLIST, "w/o Checklist", "05_edit_sft", "sft", None, ("Table 6",)),
    System(WO_ATOMIC, "w/o Atomic", "05_edit_sft", "sft", None, ("Table 6",)),
)
BY_NAME: Registry[System] = Registry("system (systems.SYSTEMS)")
BY_NAME.update({s.name: s for s in SYSTEMS})
# The paper's row order where it is not ``SYSTEMS`` order (same members as ``System.tables``, checked below):
# Table 5's grid by initialisation then RL, Base first; Tables 4 and 10 GRPO then EDIT-RL (EDIT-RL minus GRPO).
ROW_ORDER = {"Table 4": (EDIT_SFT_GRPO, EDIT_RL), "Table 10": (EDIT_SFT_GRPO, EDIT_RL),
             "Table 5": (BASE, BASE_GRPO, BASE_EDIT_RL, EDIT_SFT_GRPO, EDIT_RL)}


@dataclass(frozen=True)
class Graded:
    """A concrete policy to grade: a system on one dataset (and RL seed), with its adapter folders (None: none)."""

    system: str
    dataset: str
    seed: int | None
    adapter: str | None
    init_adapter: str | None


def system(name: str) -> System:
    """The system called ``name``; an unknown name is a ``registry.UnknownName`` (a KeyError) listing the known ones."""
    return BY_NAME[name]


def in_table(table: str) -> list[System]:
    """The systems of one paper table (e.g. 'Table 5'), in the paper's row order (``ROW_ORDER``, else ``SYSTEMS``
    order); an error where ``ROW_ORDER`` and ``System.tables`` disagree on the table's members."""
    members = [s for s in SYSTEMS if table in s.tables]
    if table not in ROW_ORDER:
        return members
    if sorted(ROW_ORDER[table]) != sorted(s.name for s in members):
        raise ValueError(f"systems.py: ROW_ORDER[{table!r}] = {ROW_ORDER[table]} but System.tables puts "
                         f"{[s.name for s in members]} in {table}")
    return [BY_NAME[n] for n in ROW_ORDER[table]]


def names(table: str) -> tuple[str, ...]:
    """The names of :func:`in_table`'s systems."""
    return tuple(s.name for s in in_table(table))


MAIN = tuple(s.name for s in SYSTEMS if s.main_column)  # the columns of Tables 1-2, Base first
PAPER_FAMILY = tuple(n for n in names("Table 3") if n != BASE)  # App. G: Table 3's six comparisons against Base
ABLATIONS = tuple(n for n in names("Table 6") if n != EDIT_SFT)  # Table 6, each against EDIT-SFT


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
    skipped = list(profile.run.skip_systems)
    unknown = [n for n in skipped if n not in BY_NAME]
    if unknown:
        raise ValueError(f"run.skip_systems: unknown system(s) {unknown}; known: {sorted(BY_NAME)}")
    if BASE in skipped:
        raise ValueError(f"run.skip_systems: {BASE!r} cannot be skipped (every table compares with it)")
    return [s.name for s in SYSTEMS if s.name in skipped]


def not_run_table(profile) -> list[dict]:
    """One row per system left out by the profile, with the reason, for a stage's results."""
    return [dict(system=n, label=BY_NAME[n].label, stage=BY_NAME[n].stage, status=NOT_RUN) for n in not_run(profile)]
