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

import contextlib
import hashlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from edit_lib.registry import Lazy, Registry


@dataclass(frozen=True)
class System:
    """One system: ``name`` (the key in the stage's adapter map), ``label`` (as the paper writes it), the stage
    that makes it, ``source`` ('base', 'sft' for 05's ``adapters`` or 'rl' for 06's ``rl_adapters``), its column
    in Tables 1-2 (None when it is not a main-table column) and the paper tables it appears in. How it is made:
    ``init`` (the system whose policy it starts from, merged: App. B), ``arm`` (RL: the reward, 'grpo' or
    'edit_rl', Sec. 2.3; SFT: the rule whose picks feed its pool, Alg. 1, App. F), ``trainer`` (RL: a name of
    ``TRAINERS``), ``rewrite`` (the Phase-1 parts a Table 6 ablation switches off: ``RewriteVariant`` fields),
    ``family`` (its Holm family, App. G: the system it is compared with is ``FAMILIES[family]``) and
    ``sections`` (the profile sections its training reads, declared by its stage: ``runner/keys.py``)."""

    name: str
    label: str
    stage: str
    source: str
    main_column: str | None
    tables: tuple[str, ...]
    init: str | None = None
    arm: str = ""
    trainer: str = ""
    rewrite: tuple[str, ...] = ()
    family: str | None = None
    sections: tuple[str, ...] = ()


BASE, BASE_GRPO, BASE_DGPO, BASE_EDIT_RL = "base", "base_grpo", "base_dgpo", "base_edit_rl"
INT_SFT, INT_RL = "int_sft", "int_sft_int_rl"
EDIT_SFT, EDIT_SFT_GRPO, EDIT_RL = "edit_sft", "edit_sft_grpo", "edit_sft_edit_rl"
WO_LOCALISER, WO_CHECKLIST, WO_ATOMIC = "wo_localiser", "wo_checklist", "wo_atomic"

# Holm families (App. G): family -> the system each member is compared with. Table 3: the six systems against
# Base (m = 6); Table 6: the ablations against EDIT-SFT (09's pairwise table). A system of no family (None) is
# compared with Base in 09's "other" family, a profile's baselines in its "baseline" family, each Holm-corrected
# apart (``evaluation.significance.significance_table``).
FAMILIES = {"Table 3": BASE, "Table 6": EDIT_SFT}
# RL trainers (``System.trainer``): None is TRL's GRPOTrainer as ``train.rl`` configures it (Table 9).
TRAINERS: Registry = Registry("RL trainer (systems.TRAINERS)")
TRAINERS.update({"grpo": None, "dgpo": Lazy("edit_lib.baselines.dgpo:DGPOTrainer")})
_T123 = ("Table 1", "Table 2", "Table 3")
_MAIN, _RL, _SFT = (*_T123, "Table 13"), ("rl", "sft.lora"), ("sft", "revision")

SYSTEMS: tuple[System, ...] = (
    System(BASE, "Base", "01_base_policy", "base", "Base", (*_T123, "Table 5", "Table 13"), sections=("model",)),
    System(BASE_GRPO, "GRPO", "06_rl", "rl", "GRPO", (*_T123, "Table 5", "Table 13"), BASE, "grpo", "grpo",
           family="Table 3", sections=_RL),
    System(BASE_DGPO, "DGPO", "06_rl", "rl", "DGPO", _MAIN, BASE, "grpo", "dgpo", family="Table 3", sections=_RL),
    System(INT_SFT, "InT-SFT", "05_edit_sft", "sft", "InT SFT", _MAIN, BASE, "int", family="Table 3",
           sections=("sft", "int_sft")),
    System(INT_RL, "InT-RL", "06_rl", "rl", "InT RL", _MAIN, INT_SFT, "grpo", "grpo", family="Table 3", sections=_RL),
    System(EDIT_SFT, "EDIT-SFT", "05_edit_sft", "sft", "EDIT-SFT", (*_T123, "Table 6", "Table 13"), BASE, "edit",
           family="Table 3", sections=_SFT),
    System(EDIT_RL, "EDIT-RL", "06_rl", "rl", "EDIT-RL",
           (*_T123, "Table 4", "Table 5", "Table 7", "Table 10", "Table 13"), EDIT_SFT, "edit_rl", "grpo",
           family="Table 3", sections=(*_RL, "probe")),
    System(BASE_EDIT_RL, "Base+EDIT-RL", "06_rl", "rl", None, ("Table 5",), BASE, "edit_rl", "grpo",
           sections=(*_RL, "probe")),
    System(EDIT_SFT_GRPO, "EDIT-SFT+GRPO", "06_rl", "rl", None, ("Table 4", "Table 5", "Table 10"), EDIT_SFT, "grpo",
           "grpo", sections=_RL),
    System(WO_LOCALISER, "w/o Localiser", "05_edit_sft", "sft", None, ("Table 6",), BASE, "self_audit",
           rewrite=("hints",), family="Table 6", sections=_SFT),
    System(WO_CHECKLIST, "w/o Checklist", "05_edit_sft", "sft", None, ("Table 6",), BASE, "edit",
           rewrite=("checklist",), family="Table 6", sections=_SFT),
    System(WO_ATOMIC, "w/o Atomic", "05_edit_sft", "sft", None, ("Table 6",), BASE, "edit", rewrite=("atomic",),
           family="Table 6", sections=_SFT),
)
BY_NAME: Registry[System] = Registry("system (systems.SYSTEMS)")
BY_NAME.update({s.name: s for s in SYSTEMS})
BASELINES: Registry["Baseline"] = Registry("baseline (a file of run.baselines)", "run.baselines")


def all_systems() -> tuple[System, ...]:
    """``SYSTEMS`` and then the systems of the loaded baselines (``load_baselines``)."""
    return SYSTEMS + tuple(b.system for b in BASELINES.values())


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


def label(name: str) -> str:
    """How tables and figures name system ``name`` (``System.label``); ``name`` itself where ``BY_NAME`` lacks it."""
    return BY_NAME[name].label if name in BY_NAME else name


def in_table(table: str) -> list[System]:
    """The systems of one paper table (e.g. 'Table 5'), in the paper's row order (``ROW_ORDER``, else ``SYSTEMS``
    order, then the loaded baselines'); an error where ``ROW_ORDER`` and ``System.tables`` disagree on the table's
    members."""
    members = [s for s in all_systems() if table in s.tables]
    if table not in ROW_ORDER:
        return members
    if sorted(ROW_ORDER[table]) != sorted(s.name for s in members):
        raise ValueError(f"systems.py: ROW_ORDER[{table!r}] = {ROW_ORDER[table]} but System.tables puts "
                         f"{[s.name for s in members]} in {table}")
    return [BY_NAME[n] for n in ROW_ORDER[table]]


def names(table: str) -> tuple[str, ...]:
    """The names of :func:`in_table`'s systems."""
    return tuple(s.name for s in in_table(table))


def family(name: str) -> tuple[str, ...]:
    """The members of Holm family ``name`` (``FAMILIES``), in ``SYSTEMS`` order."""
    if name not in FAMILIES:
        raise ValueError(f"unknown Holm family {name!r}; known: {sorted(FAMILIES)}")
    return tuple(s.name for s in all_systems() if s.family == name)


def main_systems() -> tuple[str, ...]:
    """The columns of Tables 1-2 (``System.main_column``), Base first, the loaded baselines' last."""
    return tuple(s.name for s in all_systems() if s.main_column)


def of_source(source: str) -> tuple[System, ...]:
    """The systems a stage trains: ``source`` 'sft' (05) or 'rl' (06), the loaded baselines' included."""
    return tuple(s for s in all_systems() if s.source == source)


MAIN = tuple(s.name for s in SYSTEMS if s.main_column)  # the paper's columns of Tables 1-2, Base first
PAPER_FAMILY = family("Table 3")  # App. G: Table 3's six comparisons against Base
ABLATIONS = family("Table 6")  # Table 6, each against EDIT-SFT


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
    return [s.name for s in all_systems() if s.name in skipped]


def not_run_table(profile) -> list[dict]:
    """One row per system left out by the profile, with the reason, for a stage's results."""
    return [dict(system=n, label=BY_NAME[n].label, stage=BY_NAME[n].stage, status=NOT_RUN) for n in not_run(profile)]


# ------------------------------------------------------------------ baselines a profile adds (run.baselines)

@dataclass(frozen=True)
class Baseline:
    """A system defined outside the library, in a Python file a profile names (``run.baselines``;
    ``edit_lib/ARCHITECTURE.md``, "Add a baseline"). An SFT baseline (``source`` 'sft') gives ``pool(inputs)``,
    its SFT pool on one dataset from ``PoolInputs``, in the columns of ``revision.pool.build_pool`` (05 caps it
    with ``sft.max_pool`` and trains it as every arm); an RL baseline needs no code (its ``init``, ``arm`` and
    ``trainer``: ``TRAINERS`` or a ``"module:attr"`` of a ``GRPOTrainer`` subclass)."""

    system: System
    pool: Callable | None
    file: str


@dataclass(frozen=True)
class PoolInputs:
    """What an SFT baseline's pool is drawn from, for one dataset: ``source`` (the Phase-1 rollouts SFT pools
    draw on: the correct ones and 04's repaired ones, ``revision.phase1.pool_source``), the ``dataset`` object,
    the profile's ``sft`` section and the run's seed."""

    source: object  # a pandas DataFrame
    dataset: object
    sft: object
    seed: int


def baseline(system: System) -> Callable:
    """Decorator registering a baseline: ``@baseline(System(...))`` over its pool function (SFT) or over any
    function (RL). A name of the paper's systems, a stage other than 05 or 06, a table or Holm family of the
    paper, or an initialisation that is not a system is an error naming the file's system."""
    def decorate(fn):
        _check_baseline(system)
        b = Baseline(system, fn if system.source == "sft" else None, getattr(fn, "__module__", ""))
        if system.name in BASELINES and BASELINES[system.name].file != b.file:
            raise ValueError(f"run.baselines: system {system.name!r} is registered by two files (each needs a name "
                             "of its own)")
        BASELINES[system.name] = b
        BY_NAME[system.name] = system
        return fn
    return decorate


def _check_baseline(s: System) -> None:
    where = f"run.baselines: system {s.name!r}"
    if s.name in {x.name for x in SYSTEMS}:
        raise ValueError(f"{where} is one of the paper's systems; give it a name of its own")
    if (s.source, s.stage) not in {("sft", "05_edit_sft"), ("rl", "06_rl")}:
        raise ValueError(f"{where}: source/stage must be sft/05_edit_sft or rl/06_rl, got {s.source}/{s.stage}")
    if s.family is not None:
        raise ValueError(f"{where}: family must be None (the paper's Holm families stay the paper's; 09 compares "
                         "a baseline with Base in its 'baseline' family)")
    if set(s.tables) - {"Table 1", "Table 2"}:
        raise ValueError(f"{where}: a baseline joins Tables 1-2 only (main_column), got tables {s.tables}")
    if s.init not in BY_NAME:
        raise ValueError(f"{where}: init {s.init!r} names no system; known: {sorted(BY_NAME)}")
    if s.source == "rl" and s.arm not in ("grpo", "edit_rl"):
        raise ValueError(f"{where}: an RL arm is 'grpo' or 'edit_rl', got {s.arm!r}")


def baseline_path(file: str) -> Path:
    """A ``run.baselines`` entry as a file: absolute (``~`` expanded), or relative to the repository root."""
    path = Path(file).expanduser()
    return path if path.is_absolute() else Path(__file__).resolve().parents[1] / path


def load_baselines(files) -> list[str]:
    """Import every file of ``run.baselines`` (once while its systems stay registered) and return the names of the
    systems they register, in order. A missing file, a file that registers no baseline or two files with one name
    are errors naming the file."""
    names = []
    for f in files:
        path = baseline_path(f)
        if not path.is_file():
            raise FileNotFoundError(f"run.baselines: {f} is not a file (relative paths are to the repository root)")
        module = f"edit_baselines.{path.stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"
        got = [n for n, b in BASELINES.items() if b.file == module]
        if not got:  # its first load, or the registries were reset since: import it (again)
            spec = importlib.util.spec_from_file_location(module, path)
            mod = sys.modules[module] = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(mod)
            except Exception:
                del sys.modules[module]
                raise
            got = [n for n, b in BASELINES.items() if b.file == module]
        if not got:
            raise ValueError(f"run.baselines: {f} registers no baseline (decorate its pool with systems.baseline)")
        names += got
    return names


@contextlib.contextmanager
def baselines_loaded(files) -> Iterator[list[str]]:
    """``load_baselines`` for a while (the runner's preflight, the dry run's estimate): the names it registers,
    the process's systems and modules as they were afterwards."""
    entries, names, modules = BASELINES.snapshot(), BY_NAME.snapshot(), set(sys.modules)
    try:
        yield load_baselines(files)
    finally:
        BASELINES.restore(entries)
        BY_NAME.restore(names)
        for m in set(sys.modules) - modules:
            if m.startswith("edit_baselines."):
                del sys.modules[m]


def check_baselines(files) -> list[str]:
    """The names ``load_baselines`` would register, leaving the process's systems as they were."""
    with baselines_loaded(files) as names:
        return names


def baseline_pools(pool_source, datasets: dict, sft, seed: int) -> dict:
    """The SFT pools of the loaded SFT baselines keyed by (system, dataset), each drawn from its own dataset's
    rows of ``pool_source`` only (a pool never mixes worlds; Sec. 2.2 "Pool composition")."""
    return {(n, ds): b.pool(PoolInputs(pool_source[pool_source["dataset"] == ds], d, sft, seed))
            for n, b in BASELINES.items() if b.pool is not None for ds, d in datasets.items()}
