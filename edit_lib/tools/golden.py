"""The smoke golden file: the smoke run's key numbers, checked with a tolerance and refreshed deliberately.

``tests/golden/smoke.json`` holds one flat mapping ``"stage/table/row/column" -> value`` read from a smoke run's
results JSON (`PICKS`: 00 split sizes of the Table 8 analogue, 01 Base metrics and rollout summary, 02
final-boundary agreement of the probe, 03 Table 11 r values, 04 Table 12 counts, 05 pool bookkeeping, 07 metrics of
every system, 08 Table 14, 09 the significance table; rows of the paper's systems only: ``PAPER_SYSTEMS``).
``tests/tools/test_golden.py`` compares a fresh smoke run with it; ``edit-suite golden --refresh`` rewrites it after
a change that is meant to move the numbers (say which and why in the commit). Counts and labels must match exactly,
floats within the file's ``tolerance.abs`` or their pick's own (``Pick.tol``: Table 11's r, a count of near-tied
pairs). Numbers depend on the torch build and CPU only through floating-point round-off, but the smoke run trains
its grader from scratch, so round-off can flip a sampled token or a near-tie in a rank: one file per kernel family,
each keeping its run's ``numerics`` (``smoke.json``, AVX-512, and ``smoke.<cpu_capability>.json``, e.g.
``smoke.AVX2.json``); a run is compared with the file of its own ``cpu_capability`` (``golden_file_for``). The row
keying (``row_key``, ``key_columns``: ROW_KEYS, then MORE_ROW_KEYS where those leave rows alike) and ``same_value``
are shared with ``edit-suite compare`` (``tools.compare``), which keys every table, not only the PICKS.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edit_lib.artifacts import RunPaths
from edit_lib.systems import SYSTEMS

GOLDEN_FILE = Path(__file__).resolve().parents[2] / "tests" / "golden" / "smoke.json"
DEFAULT_TOLERANCE = 1e-4  # floats: absorbs round-off across BLAS builds, not a changed token


@dataclass(frozen=True)
class Pick:
    """Columns of one recorded table that the golden file keeps; the first table name present is read (a
    renamed table keeps its numbers), and the first name is the one used in the keys."""

    stage: str
    tables: tuple[str, ...]
    values: tuple[str, ...]
    tol: float | None = None  # its floats' own tolerance (None: the file's); why, where it is set

    def holds(self, key: str) -> bool:
        return key.startswith(f"{self.stage}/{self.tables[0]}/")


PICKS = (
    Pick("00_data", ("table8", "table6"), ("responses", "questions")),
    Pick("01_base_policy", ("base_metrics",), ("n", "n_invalid", "qwk", "acc", "within1", "mae")),
    Pick("01_base_policy", ("rollout_summary",), ("rollouts", "responses", "incorrect_share",
                                                  "mixed_response_share", "parse_failure_share", "mean_steps")),
    Pick("02_probing", ("final_agreement",), ("rollouts", "argmax_agrees", "mean_p_of_generated")),
    # r counts pairs of steps (or rollout means) ordered as hypothesised; the signals are differences of float32
    # NLL sums, which two CPUs' kernels (Intel's and AMD's AVX-512 alike) round about 1e-5 apart, and that flips
    # a near-tied pair: 0.0015 (one pair of 1,320) seen between the two. A few pairs, not a changed audit.
    Pick("03_audit_validation", ("table11", "table9"), ("r",), tol=0.004),
    Pick("04_counterfactual_selection", ("table12",), ("revisions", "rewrites", "accepted", "successes", "retained")),
    Pick("05_edit_sft", ("pool_bookkeeping",), ("revisions_tried", "accepted", "kept", "golden_rollouts", "pool_size")),
    Pick("05_edit_sft", ("sft_runs",), ("n_pairs", "steps")),
    Pick("07_evaluation", ("metrics",), ("n", "n_invalid", "qwk", "acc")),
    Pick("08_rsr_interventions", ("table14",), ("n", "n_scored", "rsr", "floor_rate", "ib_rsr")),
    Pick("09_significance", ("significance",), ("qwk", "delta", "p_holm", "n_paired")),
)
# The golden numbers are the paper's systems' (name or label); a profile's own baselines (``run.baselines``, the
# smoke's toy) are checked by their recipe's test, so adding one leaves every golden file as it was.
PAPER_SYSTEMS = frozenset(s.name for s in SYSTEMS) | frozenset(s.label for s in SYSTEMS)
# Columns that identify a row (those present, in this order, joined by '/').
ROW_KEYS = ("system", "dataset", "split", "decoding", "read", "reduction", "signal", "level", "rule", "seed", "subject",
            "edit", "scope")
# Further columns that tell rows apart where ROW_KEYS leave two alike (a bin, a step, a status...): `key_columns`
# adds those it needs, in this order. The PICKS need none, so the golden file's keys are ROW_KEYS' alone.
MORE_ROW_KEYS = ("metric", "family", "kind", "versus", "rival", "pair", "label", "source", "read_used", "hypothesis",
                 "policy", "component", "method", "Method", "arm", "init", "status", "error", "opportunity", "mark",
                 "correct", "covered", "unit", "response_id", "rollout_id", "k", "step", "bin", "bin_left", "u_bin",
                 "u", "lo", "beta_drift")


class GoldenError(ValueError):
    """A results table the golden file cannot key unambiguously, or a malformed golden file."""


def key_numbers(run_dir: str | Path, picks: tuple[Pick, ...] = PICKS) -> dict[str, Any]:
    """The key numbers of one run folder (``runs/<profile>``); stages without a results file are left out."""
    paths = RunPaths(Path(run_dir))
    out: dict[str, Any] = {}
    for pick in picks:
        f = paths.results_file(pick.stage)
        if not f.exists():
            continue
        tables = json.loads(f.read_text()).get("tables", {})
        name = next((t for t in pick.tables if t in tables), None)
        if name is None:
            continue
        for row in tables[name]:
            if "system" in row and row["system"] not in PAPER_SYSTEMS:
                continue
            rk = row_key(row)
            for col in pick.values:
                if col not in row:
                    continue
                key = f"{pick.stage}/{pick.tables[0]}/{rk}/{col}"
                if key in out:
                    raise GoldenError(f"{f}: table {name!r} has two rows keyed {rk!r}; add the column that "
                                      f"tells them apart to golden.ROW_KEYS")
                out[key] = row[col]
    return out


def row_key(row: dict, columns: tuple[str, ...] = ROW_KEYS) -> str:
    """A row's key: the values of the ``columns`` it has, in order, joined by '/' ('all' when it has none)."""
    return "/".join(str(row[c]) for c in columns if c in row) or "all"


def key_columns(*tables: list) -> tuple[str, ...] | None:
    """The columns that key the rows of every table given (the same table of two runs): ROW_KEYS, then each of
    MORE_ROW_KEYS, in order, that tells more rows apart, until no two rows of a table share a key. None when
    the rows are not records or even all of them leave two rows alike (the table cannot be keyed)."""
    if not all(isinstance(t, list) and all(isinstance(r, dict) for r in t) for t in tables):
        return None
    cols = list(ROW_KEYS)

    def alike(cs: list[str]) -> int:  # rows that share their key with an earlier row
        return sum(len(t) - len({row_key(r, tuple(cs)) for r in t}) for t in tables)

    n = alike(cols)
    for c in MORE_ROW_KEYS:
        if n == 0:
            break
        if any(c in r for t in tables for r in t) and alike(cols + [c]) < n:
            cols.append(c)
            n = alike(cols)
    return tuple(cols) if n == 0 else None


def same_value(a: Any, b: Any, tol: float) -> bool:
    """Counts, labels, booleans and None equal exactly (True is not the count 1); floats within ``tol``; NaN
    equals NaN."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b  # True is not the count 1
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return a == b
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= tol


def key_tolerance(key: str, tol: float, picks: tuple[Pick, ...] = PICKS) -> float:
    """The tolerance of ``key``'s floats: its pick's own (``Pick.tol``), else ``tol``."""
    return next((p.tol for p in picks if p.tol is not None and p.holds(key)), tol)


def compare(golden: dict[str, Any], numbers: dict[str, Any], tol: float = DEFAULT_TOLERANCE) -> list[str]:
    """Differences between the golden numbers and a run's, one line each (empty: the run matches); floats
    within ``tol`` or their pick's own tolerance (``key_tolerance``)."""
    diffs = []
    for key in sorted(set(golden) | set(numbers)):
        if key not in numbers:
            diffs.append(f"missing in the run: {key} (golden {golden[key]!r})")
        elif key not in golden:
            diffs.append(f"not in the golden file: {key} = {numbers[key]!r}")
        elif not same_value(golden[key], numbers[key], key_tolerance(key, tol)):
            diffs.append(f"changed: {key}: golden {golden[key]!r}, run {numbers[key]!r}")
    return diffs


def read_golden(path: str | Path = GOLDEN_FILE) -> tuple[dict[str, Any], float]:
    """(numbers, absolute tolerance) of a golden file."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no golden file {path}: create it with `edit-suite golden --refresh`")
    data = json.loads(path.read_text())
    if not isinstance(data.get("numbers"), dict):
        raise GoldenError(f"{path}: expected a 'numbers' mapping")
    return data["numbers"], float(data.get("tolerance", {}).get("abs", DEFAULT_TOLERANCE))


def run_numerics(run_dir: str | Path) -> dict | None:
    """The kernels a run's first stage recorded (``runner.keys``), or None when it recorded none."""
    first = Path(run_dir) / "results" / "00_data.json"
    return json.loads(first.read_text()).get("numerics") if first.exists() else None


def golden_numerics(path: str | Path = GOLDEN_FILE) -> dict | None:
    """The kernels of the run a golden file was refreshed from, or None (a file written before they were kept)."""
    return json.loads(Path(path).read_text()).get("numerics")


def golden_files(folder: str | Path | None = None) -> list[Path]:
    """The golden files of a folder: ``smoke.json`` first, then one ``smoke.<cpu_capability>.json`` per other
    kernel family."""
    folder = Path(folder or GOLDEN_FILE.parent)
    return [f for f in [folder / GOLDEN_FILE.name] + sorted(folder.glob("smoke.*.json")) if f.exists()]


def golden_file_for(numerics: dict | None, folder: str | Path | None = None) -> Path | None:
    """The golden file refreshed under the same ``cpu_capability`` as ``numerics`` (a run's), or None when no
    file has it: the smoke run's numbers follow the kernels (module docstring), so only that file can judge it."""
    cap = (numerics or {}).get("cpu_capability")
    return next((f for f in golden_files(folder) if cap and (golden_numerics(f) or {}).get("cpu_capability") == cap),
                None)


def new_golden_file(numerics: dict | None, folder: str | Path | None = None) -> Path:
    """Where a refresh under kernels that have no golden file yet writes: ``smoke.json`` when the folder has none,
    else ``smoke.<cpu_capability>.json``."""
    folder = Path(folder or GOLDEN_FILE.parent)
    cap = (numerics or {}).get("cpu_capability")
    if not (folder / GOLDEN_FILE.name).exists() or not cap:
        return folder / GOLDEN_FILE.name
    if not str(cap).isalnum():
        raise GoldenError(f"cpu_capability {cap!r} cannot name a golden file")
    return folder / f"smoke.{cap}.json"


def write_golden(numbers: dict[str, Any], path: str | Path = GOLDEN_FILE, tol: float | None = None,
                 numerics: dict | None = None) -> Path:
    """Write a golden file (the tolerance of an existing file is kept unless ``tol`` is given), with the kernels
    of the run it comes from: the smoke run trains its grader from scratch, so another machine can move it."""
    path = Path(path)
    if tol is None:
        tol = read_golden(path)[1] if path.exists() else DEFAULT_TOLERANCE
    payload = dict(profile="smoke", refresh="edit-suite golden --refresh", tolerance={"abs": tol},
                   numerics=numerics, numbers=dict(sorted(numbers.items())))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1, sort_keys=False) + "\n")
    return path


def golden_cli(refresh: bool = False, run_dir: str | None = None, run_root: str | None = None,
               path: str | Path | None = None) -> int:
    """`edit-suite golden`: compare a smoke run with the golden file of its kernels (exit 1 on a difference, 2 when
    there is no run or no such file) or, with ``refresh``, rewrite that file from it (a new one for kernels that
    have none). Without ``run_dir`` the smoke profile is run first (stages whose results are up to date are
    skipped); ``path`` fixes the file instead of choosing it by the run's ``numerics``."""
    if run_dir is None:
        from edit_lib.runner.run import run
        run("smoke", run_root=run_root)
        run_dir = str(RunPaths.for_profile("smoke", run_root).root)
    numbers = key_numbers(run_dir)
    if not numbers:
        print(f"edit-suite golden: no results in {run_dir}")
        return 2
    here = run_numerics(run_dir)
    if path is None:
        path = golden_file_for(here) or (new_golden_file(here) if refresh else None)
    if path is None:
        have = ", ".join(f"{f.name} ({(golden_numerics(f) or {}).get('cpu_capability')})" for f in golden_files())
        print(f"edit-suite golden: no golden file for this run's kernels ({(here or {}).get('cpu_capability')}); "
              f"there are: {have or 'none'}. `edit-suite golden --refresh` writes {new_golden_file(here).name} "
              "from this run")
        return 2
    path = Path(path)
    old, tol = read_golden(path) if path.exists() else ({}, DEFAULT_TOLERANCE)
    diffs = compare(old, numbers, tol)
    if refresh:
        write_golden(numbers, path, numerics=here)
        print(f"wrote {path}: {len(numbers)} numbers from {run_dir}; "
              + (f"{len(diffs)} differed from the old file" if old else "a new file"))
        for d in diffs if old else []:
            print("  " + d)
        if old and set(old) != set(numbers):  # check-gpu's tolerances are per key (tests/tools/test_check_gpu.py)
            print("the keys changed: remake tests/golden/smoke_spread.json with `edit-suite check-gpu --spread` "
                  "from smoke runs under -p run.seed=0, 1, 2")
        return 0
    for d in diffs:
        print(d)
    made_on = golden_numerics(path)
    if diffs and made_on and here and made_on != here:
        print(f"the golden file was refreshed from a run with numerics {made_on}; this run's are {here}")
    print(f"{len(diffs)} difference(s) from {path}" if diffs else f"{run_dir} matches {path}")
    return 1 if diffs else 0
