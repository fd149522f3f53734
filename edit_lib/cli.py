"""``edit-suite``'s command line: the argument parser of every subcommand (``build_parser``) and ``main``; the
handlers and their exit codes are in ``edit_lib/cli_commands.py``."""
from __future__ import annotations

import argparse
import sys

from edit_lib.cli_commands import (COMPARE_EXIT, HEADLINE_IMAGE, README_EXIT, ROOT, RUN_EXIT, VALIDATE_EXIT,
                                   cmd_bench, cmd_book, cmd_build_grader, cmd_check_gpu, cmd_compare, cmd_sweep,
                                   cmd_export, cmd_golden, cmd_pilot, cmd_profile, cmd_readme, cmd_run,
                                   cmd_validate)
from edit_lib.systems import BASE_DGPO, BASE_GRPO

# `edit-suite --help`'s description, word for word the docstring it was until the handlers moved to
# cli_commands.py; argparse joins its lines into one paragraph
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
    gd.add_argument("--refresh", action="store_true", help="rewrite the golden file of the run's kernels from the run, or write "
                                                            "one for kernels that have none (deliberately)")
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
    except ValueError as e:  # a profile that does not load (ConfigError), whichever command read it: exit 2
        from edit_lib.config import ConfigError
        if not isinstance(e, ConfigError):
            raise
        print(f"edit-suite {args.cmd}: {e.args[0] if e.args else e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `edit-suite profile --keys | head`: the reader left; say nothing more
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
