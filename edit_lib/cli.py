"""``edit-suite``'s command line: the handlers of its subcommands with the exit codes the parser shows as their
epilogs, the argument parser of every subcommand (``build_parser``, which dispatches to the handlers through
``set_defaults(fn=...)``) and ``main``.

Each handler turns the parsed arguments into one call of the module that does the work (``runner.run``,
``book.build``, ``book.readme``, ``data.validate``, ``tools.*``, ``embedded.build``, ``config``), and that
call's errors into its documented exit code in one way: ``exits`` maps their types to codes, and ``main`` prints
the ``CommandFailed`` it raises as one line, ``edit-suite <command>: <message>``.

Longer than 400 lines because the parser and the handlers it names are one concern: a subcommand's options and
what it does with them, read side by side.
"""
from __future__ import annotations

import argparse
import json
import sys
from contextlib import contextmanager
from pathlib import Path

from edit_lib.systems import BASE_DGPO, BASE_GRPO


ROOT = Path(__file__).resolve().parents[1]


RUN_EXIT = """exit codes:
  0  every stage ran or was up to date
  1  a notebook failed (the message names the cell; the executed copy is kept)
  2  usage error, before any notebook runs: unknown notebook, a profile file that is not valid YAML (the
     message names file:line:column), unknown or mistyped profile key or override, an unknown data source,
     a dataset or system a section names that the profile lacks, a missing profile or input data file
  3  a dataset dropped more records than data.max_skipped_fraction allows (see skipped_records.jsonl)"""


class CommandFailed(Exception):
    """A subcommand's end with its documented exit code: ``main`` prints ``edit-suite <command>: <message>`` on
    stderr and returns ``code``. Handlers raise it through ``exits``, or directly for a usage error they find."""

    def __init__(self, code: int, message: object, command: str | None = None):
        super().__init__(message)
        self.code, self.command = code, command


def message(e: BaseException) -> str:
    """An exception's one-line message: a KeyError's own text unquoted, else ``str(e)``."""
    return str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)


@contextmanager
def exits(codes: dict, command: str | None = None):
    """Turn an exception inside the block whose type ``codes`` names ({type or tuple of types: exit code}, the
    first that matches) into ``CommandFailed`` with that code; any other exception passes. A ``ConfigError``
    (a profile that does not load) exits 2 from ``main`` whichever command read it."""
    try:
        yield
    except Exception as e:
        code = next((c for types, c in codes.items() if isinstance(e, types)), None)
        if code is None:
            raise
        raise CommandFailed(code, message(e), command) from e


def cmd_run(a: argparse.Namespace) -> int:
    from edit_lib.runner.dry_run import preflight
    from edit_lib.runner.run import NotebookFailed, TooManySkipped, run

    if a.dry_run:  # plan, parameter counts and a memory estimate; nothing runs, nothing is downloaded
        from edit_lib.runner.dry_run import dry_run, format_dry_run
        with exits({(KeyError, FileNotFoundError, ValueError): 2}, "run --dry-run"):
            _, missing = preflight(a.profile, a.param, need_data=False, dry_run=True)
            print(format_dry_run(dry_run(a.profile, a.param, only=a.only, run_root=a.run_root, force=a.force,
                                         reuse_stale=a.reuse_stale, gpu=a.gpu, gpus=a.gpus)))
        for line in missing:  # a real run would stop on these before 00_data
            print(f"note: input data missing: {line}")
        return 0
    with exits({ValueError: 2}):  # profile, overrides, cross-references, skip_systems, input files
        preflight(a.profile, a.param, need_data=not a.only or "00_data" in a.only)
    import signal
    # SIGTERM (`timeout`, a batch system) as Ctrl-C: the kernel and the run's engine end with the run
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with exits({NotebookFailed: 1, TooManySkipped: 3, KeyError: 2}):
        run(a.profile, only=a.only, force=a.force, overrides=a.param, run_root=a.run_root,
            reuse_stale=a.reuse_stale, quiet=a.quiet, time_split=a.time_split, variant=a.variant)
    return 0


def cmd_book(a: argparse.Namespace) -> int:
    from edit_lib.book.build import build_book

    # RuntimeError: the Sphinx build failed (warnings are errors), its log in the message says why
    with exits({FileNotFoundError: 2, RuntimeError: 1}):
        out = build_book(a.profile, run_root=a.run_root, out=a.out, variant=a.variant)
    print(f"book: {out}")
    return 0


README_EXIT = """exit codes:
  0  the README's headline block and figure were written (or, with --check, already match the run's results)
  1  --check only: the block or the figure's numbers differ from what the results render (run without --check)
  2  usage error: unknown profile, no results folder for the run, README missing or without the markers"""
HEADLINE_IMAGE = "book/images/headline.png"  # the README's figure; its plotted numbers in headline.json beside it


def cmd_readme(a: argparse.Namespace) -> int:
    """Render the run's headline into the README between its results markers and refresh the headline figure
    (``edit_lib.book.readme``)."""
    from edit_lib.artifacts import RunPaths
    from edit_lib.config import load_profile
    from edit_lib.book.readme import BEGIN, END, MarkersMissing, update_readme

    name = load_profile(a.profile).name
    results = RunPaths.for_profile(name, a.run_root).results
    readme = Path(a.readme) if a.readme else ROOT / "README.md"
    image = Path(a.image) if a.image else readme.parent / HEADLINE_IMAGE  # beside the README it belongs to
    if not results.is_dir():
        raise CommandFailed(2, f"{results} does not exist: run `edit-suite run --profile {a.profile}` first "
                               f"(or pass the --run-root that holds {name}/)")
    with exits({(MarkersMissing, FileNotFoundError): 2}):
        differs = update_readme(readme, results, image, write=not a.check)
    what = {"text": f"the block between {BEGIN} and {END} in {readme}",
            "figure": f"the figure's numbers ({image.with_suffix('.json')})"}
    if a.check:
        if differs:
            raise CommandFailed(1, f"{' and '.join(what[d] for d in differs)} differ from what {results} renders: "
                                   f"run `edit-suite readme --profile {a.profile}`")
        print(f"{readme} and {image}: match {results}")
        return 0
    print(f"{readme}: {'rewrote ' + ' and '.join(what[d] for d in differs) if differs else 'already up to date'} "
          f"from {results}")
    return 0


VALIDATE_EXIT = """exit codes:
  0  the data is valid: the pipeline can build and run it
  1  the data is invalid: the message names file, line and field (with --on-error skip: records were dropped)
  2  usage error: bad arguments, a missing file or folder (PATH or --questions), a format that does not fit"""


def cmd_validate(a: argparse.Namespace) -> int:
    from edit_lib.data.schema import DataError
    from edit_lib.data.validate import UsageError, check_path

    try:
        out = check_path(a.path, fmt=a.format, questions=a.questions, on_error=a.on_error,
                         mark_scale=a.mark_scale, encoding_errors=a.encoding_errors)
    except DataError as e:  # the data's verdict, not the command's failure: said as `invalid: ...`
        print(f"invalid: {e}", file=sys.stderr)
        return 1
    except (FileNotFoundError, UsageError) as e:
        raise CommandFailed(2, f"error: {e}", "data validate") from e
    if out.skipped:  # what is left would load with on_error: skip, but the data as given is not valid
        print(f"without the skipped records: {out.summary.removeprefix('OK ')}")
        print(f"invalid: {out.skipped.summary(head=5)}", file=sys.stderr)
        return 1
    print(out.summary)
    return 0


def cmd_bench(a: argparse.Namespace) -> int:
    from edit_lib.model.gguf_model import RealModelMissing
    from edit_lib.tools.bench import bench_cli

    with exits({(FileNotFoundError, RealModelMissing): 2}, f"bench {a.what}"):
        return bench_cli(a.what, a.profile, a.run_root)


def cmd_pilot(a: argparse.Namespace) -> int:
    from edit_lib.tools.pilot_rl import format_pilot, pilot_rl_seeds

    with exits({ValueError: 2}, f"pilot {a.what}"):
        r = pilot_rl_seeds(a.profile, a.param, a.dataset, a.seeds, system=a.system, run_root=a.run_root,
                           target=a.target)
    print(format_pilot(r))
    return 0


def cmd_build_grader(a: argparse.Namespace) -> int:
    from edit_lib.embedded.build import build_grader_cli

    return build_grader_cli(recipe=a.recipe, out=a.out, minutes=a.minutes, replace_shipped=a.replace_shipped)


def cmd_profile(a: argparse.Namespace) -> int:
    from edit_lib.config import CONFIG_DIR, describe, lineage, load_profile, to_dict

    if a.keys:
        rows = describe()
        width = max(len(k) for k, _, _ in rows)
        for key, default, help_ in rows:
            print(f"{key:{width}s} {json.dumps(default):>24s}  {help_}")
        return 0
    prof = load_profile(a.profile, a.param)
    for base in map(Path.resolve, lineage(a.profile)[1:]):  # on stderr: stdout stays the profile's JSON
        shown = base.relative_to(CONFIG_DIR.parent) if base.is_relative_to(CONFIG_DIR.parent) else base
        print(f"extends: {base.stem} ({shown})", file=sys.stderr)
    print(json.dumps(to_dict(prof), indent=2))
    return 0


def cmd_golden(a: argparse.Namespace) -> int:
    from edit_lib.tools.golden import golden_cli

    return golden_cli(refresh=a.refresh, run_dir=a.run_dir, run_root=a.run_root)


COMPARE_EXIT = """exit codes:
  0  no differences (with --conclusions: the same conclusions)
  1  differences (profile values, stage keys, tables, rows or numbers); with --conclusions: not the same
     conclusions (a ledger verdict, an estimate outside the other run's interval, or a count differs)
  2  usage error: a path that is not a run folder (the message names what is missing)"""


def cmd_compare(a: argparse.Namespace) -> int:
    from edit_lib.tools.compare import NotARunFolder, compare_cli, variant_folder

    with exits({NotARunFolder: 2}):
        a.run_b = variant_folder(a.run_a, a.run_b)
        if a.conclusions:
            from edit_lib.book.conclusions import conclusions_cli
            return conclusions_cli(a.run_a, a.run_b, json_out=a.json, book=a.book)
        return compare_cli(a.run_a, a.run_b, json_out=a.json, book=a.book, tol=a.tol, limit=a.limit)


def cmd_sweep(a: argparse.Namespace) -> int:
    from edit_lib.runner.run import NotebookFailed
    from edit_lib.tools.sweep import is_swept, sweep

    if a.render:
        from edit_lib.book.variants_page import sensitivity_record
        with exits({(OSError, ValueError, KeyError): 2}, "sweep --render"):
            print(sensitivity_record([Path(f) for f in a.render]))
        return 0
    swept = [p for p in a.param if is_swept(p)]
    if len(swept) != 1:
        raise CommandFailed(2, f"give exactly one -p KEY=V1,V2,... (got {len(swept)}: {swept})")
    with exits({KeyError: 2, (NotebookFailed, RuntimeError): 1}):
        sweep(a.profile, swept[0], [p for p in a.param if p is not swept[0]], a.until, a.run_root, a.jobs)
    return 0


def cmd_export(a: argparse.Namespace) -> int:
    from edit_lib.tools.export import ExportError, export_cli

    with exits({(ExportError, FileNotFoundError): 2}):
        return export_cli(a)


def cmd_check_gpu(a: argparse.Namespace) -> int:
    from edit_lib.tools.check_gpu import GPUUnavailable, check_gpu_cli

    with exits({(GPUUnavailable, FileNotFoundError): 2}):
        return check_gpu_cli(a)


# `edit-suite --help`'s description; argparse joins its lines into one paragraph
DESCRIPTION = ("edit-suite: run the notebooks, build the book, render the README's headline, validate data, build "
               "the grader, benchmark, check a GPU, compare and export runs.")


def _version() -> str:
    """The installed package's version, or pyproject.toml's when the source tree runs without being installed."""
    from importlib import metadata

    try:
        return metadata.version("edit-suite")
    except metadata.PackageNotFoundError:
        import tomllib
        return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def _profile_names() -> str:
    """The profiles in configs/ today (a new YAML file there is a new name in `run --help`)."""
    from edit_lib.config.loading import CONFIG_DIR

    return ", ".join(sorted(f.stem for f in CONFIG_DIR.glob("*.yaml"))) or "none found"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="edit-suite", description=DESCRIPTION)
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = p.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("run", help="execute the notebooks of a profile with papermill", epilog=RUN_EXIT,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("--profile", default="demo",
                   help=f"a name in configs/ ({_profile_names()}) or the path of a YAML profile file "
                        "(default: demo)")
    r.add_argument("--only", nargs="+", metavar="NB", help="run only these notebooks (e.g. 00_data)")
    r.add_argument("--force", action="store_true", help="recompute stages whose key is unchanged")
    r.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                   help="override a profile value, e.g. -p rollouts.n_per_response=4 (repeatable)")
    r.add_argument("--run-root", default=None,
                   help="folder that holds <profile>/ runs (default: $EDIT_RUN_ROOT or the repository's runs/)")
    r.add_argument("--variant", default=None, metavar="NAME",
                   help="the name of the variant folder a run whose -p values change a stage key writes to "
                        "(<run root>/<profile>/variants/NAME; default: named from the changed values); such a run "
                        "never writes the main run, and reads the stages it shares with it from there")
    r.add_argument("--reuse-stale", action="store_true",
                   help="keep the results of a stage whose only change is library code (recorded as "
                        "reused_stale in its results JSON and shown in the book); never the default")
    r.add_argument("--quiet", action="store_true",
                   help="print only the runner's lines (stage start / done, warnings), not the stages' output and "
                        "progress bars; runs/<profile>/logs/<stage>.log gets that output either way")
    r.add_argument("--time-split", action="store_true",
                   help="time each stage that runs: seconds in model forward passes, in generation outside them, in "
                        "training (backward, optimiser steps) and the rest, written to runs/<profile>/timing/"
                        "<stage>.json and shown by `edit-suite bench suite` (edit_lib/runner/time_split.py); "
                        "timers only, no result changes (the outermost module call is timed; the book's "
                        "Performance page records what they cost on the demo)")
    r.add_argument("--dry-run", action="store_true",
                   help="execute nothing: print the stage plan, the policy's parameter counts with the profile's "
                        "LoRA (Qwen3-8B built on the meta device, nothing downloaded) and a GPU memory estimate "
                        "per stage (edit_lib/runner/dry_run.py)")
    r.add_argument("--gpu", default="h100", metavar="NAME",
                   help="--dry-run: the GPU of the GPU-hours estimate: h100, h200, a100 or l40s (default h100; "
                        "edit_lib/runner/time_estimate.py); another name exits 2")
    r.add_argument("--gpus", type=int, default=None, metavar="N",
                   help="--dry-run: also each stage's wall-clock hours on N such GPUs (one node or several, "
                        "ops.cluster), from its GPU-hours and how wide the suite runs it "
                        "(edit_lib/runner/time_estimate.py: wall_clock)")
    r.set_defaults(fn=cmd_run)

    b = sub.add_parser("book", help="build the Jupyter Book from a run's executed notebooks")
    b.add_argument("--profile", default="demo", help="a name in configs/ or the path of a YAML profile file")
    b.add_argument("--run-root", default=None, help="as for `run`")
    b.add_argument("--out", default=None, help="build folder (default: <run root>/<profile>/book)")
    b.add_argument("--variant", default=None, metavar="NAME",
                   help="the book of variant NAME of the profile's run (<run root>/<profile>/variants/NAME/book)")
    b.set_defaults(fn=cmd_book)

    rd = sub.add_parser("readme", help="render a run's headline numbers into README.md between its results markers "
                                       "and its headline figure",
                        epilog=README_EXIT, formatter_class=argparse.RawDescriptionHelpFormatter)
    rd.add_argument("--profile", default="demo", help="a name in configs/ or the path of a YAML profile file")
    rd.add_argument("--run-root", default=None, help="as for `run`")
    rd.add_argument("--readme", default=None, help="the README to update (default: the repository's README.md)")
    rd.add_argument("--image", default=None,
                    help=f"the headline figure to write, a PNG with its numbers as JSON beside it (default: "
                         f"{HEADLINE_IMAGE} in the README's folder)")
    rd.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 when the README's block or the figure's numbers differ from what "
                         "the results render")
    rd.set_defaults(fn=cmd_readme)

    d = sub.add_parser("data", help="data utilities")
    dsub = d.add_subparsers(dest="data_cmd", required=True)
    from edit_lib.data.validate import FORMATS
    v = dsub.add_parser("validate", help="check data with the loaders' own code; exit 0 valid, 1 invalid, 2 usage",
                        description="Check a data file or folder the way 00_data loads it (strict UTF-8, no empty "
                                    "files, a train and an evaluation split).", epilog=VALIDATE_EXIT,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    v.add_argument("path")
    v.add_argument("--format", default="auto", choices=FORMATS, help="what PATH is (default: guessed)")
    v.add_argument("--questions", default=None, help="questions file, to check a responses file fully")
    v.add_argument("--on-error", default="raise", choices=["raise", "skip"],
                   help="raise: stop at the first bad record; skip: check every record, print the count per "
                        "reason and the first few")
    v.add_argument("--mark-scale", type=int, default=1, metavar="K",
                   help="the loader option mark_scale: marks are multiples of 1/K (2 for half marks)")
    v.add_argument("--encoding-errors", default="strict", choices=["strict", "replace"],
                   help="ASAP only: replace (and count) invalid UTF-8 bytes instead of failing")
    v.set_defaults(fn=cmd_validate)

    from edit_lib.tools.bench import BENCHMARKS, choices_help  # the one list of benchmarks (a light module)

    be = sub.add_parser("bench", help="speed benchmarks (packed vs naive; shaping: EDIT-RL vs GRPO step time; "
                                      "generation: two processes vs one), one JSON line each")
    be.add_argument("what", choices=list(BENCHMARKS), help=choices_help())
    of_a_run = " / ".join(name for name, spec in BENCHMARKS.items() if spec.reads_run)
    be.add_argument("--profile", default="demo", help=f"bench {of_a_run}: the run to read")
    be.add_argument("--run-root", default=None, help="results go to <run root>/bench/ (default: runs/)")
    be.set_defaults(fn=cmd_bench)

    pi = sub.add_parser("pilot", help="rl-seeds: train one outcome-reward RL arm from Base under several seeds and "
                                      "report its seed SD, its move from Base and Table 4's MDE by seed count (to "
                                      "choose an RL regime and the seed count before any EDIT-RL run)")
    pi.add_argument("what", choices=["rl-seeds"])
    pi.add_argument("--profile", default="demo", help="a name in configs/ or the path of a YAML profile file")
    pi.add_argument("-p", "--param", action="append", default=[], help="override, e.g. rl.learning_rate=3e-4")
    pi.add_argument("--dataset", default="synth_bio", help="the dataset trained and graded (its OOD test split)")
    pi.add_argument("--seeds", nargs="+", type=int, default=[42, 43, 44, 45, 46])
    pi.add_argument("--system", default=BASE_GRPO, choices=[BASE_GRPO, BASE_DGPO], help="an arm from Base, "
                    "outcome reward (edit_lib/tools/pilot_rl.py: PILOT_SYSTEMS)")
    pi.add_argument("--target", type=float, default=0.05, help="Table 4's MDE goal (the study profile: 0.05)")
    pi.add_argument("--run-root", default=None, help="runs go to <run root>/<profile>/pilot/ (default: runs/)")
    pi.set_defaults(fn=cmd_pilot)

    g = sub.add_parser("build-grader", help="build the embedded tiny grader from nothing")
    g.add_argument("--recipe", default="embedded", help="embedded | micro")
    g.add_argument("--out", default=None, help="output folder, must not exist (default: a new folder in the "
                                               "cache, $EDIT_SUITE_CACHE or ~/.cache/edit-suite)")
    g.add_argument("--replace-shipped", action="store_true",
                   help="write the `embedded` build over the shipped weights in edit_lib/embedded/assets/grader")
    g.add_argument("--minutes", type=float, default=None, help="override the recipe's time budget")
    g.set_defaults(fn=cmd_build_grader)

    pr = sub.add_parser("profile", help="show a resolved profile (the profiles it extends on stderr), or every key "
                                    "with its help")
    pr.add_argument("--profile", default="demo", help="a name in configs/ or the path of a YAML profile file")
    pr.add_argument("-p", "--param", action="append", default=[])
    pr.add_argument("--keys", action="store_true", help="list every key, default and help text")
    pr.set_defaults(fn=cmd_profile)

    gd = sub.add_parser("golden", help="compare the smoke run's key numbers with the golden file of its kernels "
                                       "(tests/golden/smoke.json for AVX-512, smoke.<cpu_capability>.json for "
                                       "others; exit 1 on a difference, 2 without one), or --refresh that file")
    gd.add_argument("--refresh", action="store_true", help="rewrite the golden file of the run's kernels from the "
                                                            "run, or write one for kernels that have none (deliberately)")
    gd.add_argument("--run-dir", default=None, help="an existing smoke run folder (runs/smoke) instead of running")
    gd.add_argument("--run-root", default=None, help="where the smoke profile is run (as for `run`)")
    gd.set_defaults(fn=cmd_golden)

    cp = sub.add_parser("compare", help="two run folders: the profile values that differ, then each table's numbers "
                                        "that moved, with their intervals and whether the move is beyond them",
                        epilog=COMPARE_EXIT, formatter_class=argparse.RawDescriptionHelpFormatter)
    cp.add_argument("run_a", metavar="RUN_A", help="a run folder, e.g. runs/demo (the reference: its intervals)")
    cp.add_argument("run_b", metavar="RUN_B", help="another run folder, e.g. /tmp/other/demo, or the name of a "
                                                   "variant of RUN_A (RUN_A/variants/NAME)")
    cp.add_argument("--json", default=None, metavar="FILE", help="also write the whole comparison as JSON")
    cp.add_argument("--book", action="store_true",
                    help="keep the comparison in RUN_A/compare/ so that `edit-suite book` shows it as a page")
    cp.add_argument("--tol", type=float, default=0.0, help="floats within this absolute difference are equal "
                                                           "(default 0: exact; the golden file uses 1e-4)")
    cp.add_argument("--limit", type=int, default=20, help="moved values shown per table (0: all)")
    cp.add_argument("--conclusions", action="store_true",
                    help="judge conclusions, not digits: every claims-ledger verdict equal, every headline estimate "
                         "inside the other run's 95%% interval, every count of inputs equal (--tol, --limit unused)")
    cp.set_defaults(fn=cmd_compare)

    sw = sub.add_parser("sweep", help="one run per value of a profile value (the main run where it is the profile's "
                                      "value, else a variant beside it) and each metric it reaches against the value "
                                      "in the main run's book (edit_lib/tools/sweep.py)")
    sw.add_argument("--profile", default="demo", help="a name in configs/ or the path of a YAML profile file")
    sw.add_argument("-p", "--param", action="append", default=[], metavar="KEY=V1,V2,...",
                    help="the swept value with its values, e.g. -p selection.shortlist_k=1,3,5 (exactly one -p with "
                         "commas); any other -p is fixed for every run, e.g. -p run.skip_systems=[base_grpo]")
    sw.add_argument("--until", default=None, metavar="STAGE",
                    help="the last stage to run, e.g. 04_counterfactual_selection for Table 12 (default: every stage)")
    sw.add_argument("--jobs", type=int, default=1,
                    help="runs at once, each its own `edit-suite run` process (default 1: one after another)")
    sw.add_argument("--run-root", default=None, help="as for `run`")
    sw.add_argument("--render", nargs="+", default=None, metavar="SWEEP_JSON",
                    help="run nothing: print the markdown record of these sweep files (runs/<profile>/sweeps/"
                         "*.json; their tables, machine and commit), as book/records/variants-demo.md holds it")
    sw.set_defaults(fn=cmd_sweep)

    cg = sub.add_parser("check-gpu", help="the smoke profile on CUDA in float32 and bfloat16 beside a CPU run, each "
                                          "compared with the CPU golden file; per-stage times and peak GPU memory "
                                          "(exit 1 when float32 disagrees, 2 without a GPU)")
    cg.add_argument("--run-root", default="runs/check-gpu", help="one run folder per arm below it")
    cg.add_argument("--profile", default="smoke", help="the profile the golden file was made from")
    cg.add_argument("--arms", nargs="+", default=["cpu", "float32", "bfloat16"],
                    choices=["cpu", "float32", "bfloat16"], help="which runs (default: all three at once)")
    cg.add_argument("--timeout", type=float, default=420.0, help="seconds the runs may take together")
    cg.add_argument("--spread", nargs="+", metavar="RUN_DIR", default=None,
                    help="instead: write tests/golden/smoke_spread.json from smoke runs under different run.seed")
    cg.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], help="the run.seed of each --spread folder")
    cg.add_argument("--memory", action="store_true",
                    help="instead: the dry run's GPU memory estimate against a small Qwen3-architecture model's "
                         "allocation in 01, 02, 05 and 06 (writes <run root>/check_memory.json)")
    cg.add_argument("--layers", type=int, default=2, help="--memory: decoder layers of the small Qwen3 model")
    cg.set_defaults(fn=cmd_check_gpu)

    ex = sub.add_parser("export", help="one graded policy of a run as a folder plain transformers + peft load "
                                       "(merged, or Base + adapters in stacking order), with a model card "
                                       "(edit_lib/tools/export.py); exit 2 when the run lacks it")
    ex.add_argument("--profile", default="demo", help="a name in configs/ or the path of a YAML profile file")
    ex.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                    help="the overrides the run was made with (its model values are checked against 07's)")
    ex.add_argument("--system", required=True, help="a system of the run, e.g. edit_sft_edit_rl (edit_lib/systems.py)")
    ex.add_argument("--dataset", required=True, help="a dataset the system was trained on (Base: graded on)")
    ex.add_argument("--seed", type=int, default=None, help="an RL seed (default: the first, as Tables 1-3 report)")
    ex.add_argument("--out", required=True, help="the export folder (must not exist or be empty, unless --force)")
    ex.add_argument("--merge", action="store_true", help="write one merged model instead of Base + adapters")
    ex.add_argument("--force", action="store_true", help="replace a non-empty --out (its contents are deleted)")
    ex.add_argument("--run-root", default=None, help="as for `run`")
    ex.set_defaults(fn=cmd_export)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args) or 0)
    except CommandFailed as e:
        print(f"edit-suite {e.command or args.cmd}: {e}", file=sys.stderr)
        return e.code
    except ValueError as e:  # a profile that does not load (ConfigError), whichever command read it: exit 2
        from edit_lib.config import ConfigError
        if not isinstance(e, ConfigError):
            raise
        print(f"edit-suite {args.cmd}: {message(e)}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `edit-suite profile --keys | head`: the reader left; say nothing more
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
