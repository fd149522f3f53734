"""The handlers of ``edit-suite``'s subcommands (``cli.build_parser`` dispatches to them by name through
``set_defaults(fn=...)``) and the exit codes the parser shows as their epilogs.

Each handler turns the parsed arguments into one call of the module that does the work (``runner.run``,
``book.build``, ``book.readme``, ``data.validate``, ``tools.*``, ``embedded.build``, ``config``) and that
call's errors into an exit code with a one-line message."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


RUN_EXIT = """exit codes:
  0  every stage ran or was up to date
  1  a notebook failed (the message names the cell; the executed copy is kept)
  2  usage error, before any notebook runs: unknown notebook, a profile file that is not valid YAML (the
     message names file:line:column), unknown or mistyped profile key or override, an unknown data source,
     a dataset or system a section names that the profile lacks, a missing profile or input data file
  3  a dataset dropped more records than data.max_skipped_fraction allows (see skipped_records.jsonl)"""


def cmd_run(a: argparse.Namespace) -> int:
    from edit_lib.config import ConfigError
    from edit_lib.runner.run import NotebookFailed, TooManySkipped, run

    from edit_lib.runner.preflight import preflight

    if a.dry_run:  # plan, parameter counts and a memory estimate; nothing runs, nothing is downloaded
        from edit_lib.runner.dry_run import dry_run, format_dry_run
        try:
            _, missing = preflight(a.profile, a.param, need_data=False, dry_run=True)
            print(format_dry_run(dry_run(a.profile, a.param, only=a.only, run_root=a.run_root, force=a.force,
                                         reuse_stale=a.reuse_stale, gpu=a.gpu, gpus=a.gpus)))
        except (ConfigError, KeyError, FileNotFoundError, ValueError) as e:
            print(f"edit-suite run --dry-run: {e.args[0] if e.args else e}", file=sys.stderr)
            return 2
        for line in missing:  # a real run would stop on these before 00_data
            print(f"note: input data missing: {line}")
        return 0
    try:  # profile, overrides, cross-references, skip_systems and input files, before any notebook
        preflight(a.profile, a.param, need_data=not a.only or "00_data" in a.only)
    except ValueError as e:
        print(f"edit-suite run: {e.args[0] if e.args else e}", file=sys.stderr)
        return 2
    import signal
    # SIGTERM (`timeout`, a batch system) as Ctrl-C: the kernel and the run's engine end with the run
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        run(a.profile, only=a.only, force=a.force, overrides=a.param, run_root=a.run_root,
            reuse_stale=a.reuse_stale, quiet=a.quiet, time_split=a.time_split, variant=a.variant)
    except NotebookFailed as e:
        print(f"edit-suite run: {e}", file=sys.stderr)
        return 1
    except TooManySkipped as e:
        print(f"edit-suite run: {e}", file=sys.stderr)
        return 3
    except (ConfigError, KeyError) as e:
        print(f"edit-suite run: {e.args[0] if e.args else e}", file=sys.stderr)
        return 2
    return 0


def cmd_book(a: argparse.Namespace) -> int:
    from edit_lib.book.build import build_book

    from edit_lib.config import ConfigError

    try:
        out = build_book(a.profile, run_root=a.run_root, out=a.out, variant=a.variant)
    except (ConfigError, FileNotFoundError) as e:
        print(f"edit-suite book: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # the Sphinx build failed (warnings are errors): its log says why
        print(f"edit-suite book: the build failed: {e}", file=sys.stderr)
        return 1
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
    from edit_lib.config import ConfigError, load_profile
    from edit_lib.book.readme import BEGIN, END, MarkersMissing, update_readme

    try:
        name = load_profile(a.profile).name
    except ConfigError as e:
        print(f"edit-suite readme: {e}", file=sys.stderr)
        return 2
    results = RunPaths.for_profile(name, a.run_root).results
    readme = Path(a.readme) if a.readme else ROOT / "README.md"
    image = Path(a.image) if a.image else readme.parent / HEADLINE_IMAGE  # beside the README it belongs to
    if not results.is_dir():
        print(f"edit-suite readme: {results} does not exist: run `edit-suite run --profile {a.profile}` first "
              f"(or pass the --run-root that holds {name}/)", file=sys.stderr)
        return 2
    try:
        differs = update_readme(readme, results, image, write=not a.check)
    except (MarkersMissing, FileNotFoundError) as e:
        print(f"edit-suite readme: {e}", file=sys.stderr)
        return 2
    what = {"text": f"the block between {BEGIN} and {END} in {readme}",
            "figure": f"the figure's numbers ({image.with_suffix('.json')})"}
    if a.check:
        if differs:
            print(f"edit-suite readme: {' and '.join(what[d] for d in differs)} differ from what {results} "
                  f"renders: run `edit-suite readme --profile {a.profile}`", file=sys.stderr)
            return 1
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
    from edit_lib.data.errors import DataError
    from edit_lib.data.validate import UsageError, check_path

    try:
        out = check_path(a.path, fmt=a.format, questions=a.questions, on_error=a.on_error,
                         mark_scale=a.mark_scale, encoding_errors=a.encoding_errors)
    except DataError as e:
        print(f"invalid: {e}", file=sys.stderr)
        return 1
    except (FileNotFoundError, UsageError) as e:
        print(f"edit-suite data validate: error: {e}", file=sys.stderr)
        return 2
    if out.skipped:  # what is left would load with on_error: skip, but the data as given is not valid
        print(f"without the skipped records: {out.summary.removeprefix('OK ')}")
        print(f"invalid: {out.skipped.summary(head=5)}", file=sys.stderr)
        return 1
    print(out.summary)
    return 0


def cmd_bench(a: argparse.Namespace) -> int:
    from edit_lib.tools.bench import bench_cli

    return bench_cli(a.what, a.profile, a.run_root)


def cmd_pilot(a: argparse.Namespace) -> int:
    from edit_lib.config import ConfigError
    from edit_lib.tools.pilot_rl import format_pilot, pilot_rl_seeds

    try:
        r = pilot_rl_seeds(a.profile, a.param, a.dataset, a.seeds, system=a.system, run_root=a.run_root,
                           target=a.target)
    except (ConfigError, ValueError) as e:
        print(f"edit-suite pilot {a.what}: {e}", file=sys.stderr)
        return 2
    print(format_pilot(r))
    return 0


def cmd_build_grader(a: argparse.Namespace) -> int:
    from edit_lib.embedded.build import build_grader_cli

    return build_grader_cli(recipe=a.recipe, out=a.out, minutes=a.minutes, replace_shipped=a.replace_shipped)


def cmd_profile(a: argparse.Namespace) -> int:
    from edit_lib.config import CONFIG_DIR, describe, lineage, load_profile, to_dict

    if a.keys:
        for key, default, help_ in describe():
            print(f"{key:38s} {json.dumps(default):>24s}  {help_}")
        return 0
    from edit_lib.config import ConfigError

    try:
        prof = load_profile(a.profile, a.param)
        bases = lineage(a.profile)[1:]
    except ConfigError as e:
        print(f"edit-suite profile: {e}", file=sys.stderr)
        return 2
    for base in map(Path.resolve, bases):  # on stderr, so that stdout stays the profile's JSON
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
    try:
        a.run_b = variant_folder(a.run_a, a.run_b)
    except NotARunFolder as e:
        print(f"edit-suite compare: {e}", file=sys.stderr)
        return 2
    if a.conclusions:
        from edit_lib.book.conclusions import conclusions_cli
        return conclusions_cli(a.run_a, a.run_b, json_out=a.json, book=a.book)

    return compare_cli(a.run_a, a.run_b, json_out=a.json, book=a.book, tol=a.tol, limit=a.limit)


def cmd_sweep(a: argparse.Namespace) -> int:
    from edit_lib.config import ConfigError
    from edit_lib.runner.run import NotebookFailed
    from edit_lib.tools.sweep import is_swept, sweep

    if a.render:
        from edit_lib.book.variants_page import sensitivity_record
        try:
            print(sensitivity_record([Path(f) for f in a.render]))
        except (OSError, ValueError, KeyError) as e:
            print(f"edit-suite sweep --render: {e}", file=sys.stderr)
            return 2
        return 0
    swept = [p for p in a.param if is_swept(p)]
    if len(swept) != 1:
        print(f"edit-suite sweep: give exactly one -p KEY=V1,V2,... (got {len(swept)}: {swept})", file=sys.stderr)
        return 2
    try:
        sweep(a.profile, swept[0], [p for p in a.param if p is not swept[0]], a.until, a.run_root, a.jobs)
    except (ConfigError, KeyError) as e:
        print(f"edit-suite sweep: {e.args[0] if e.args else e}", file=sys.stderr)
        return 2
    except (NotebookFailed, RuntimeError) as e:
        print(f"edit-suite sweep: {e}", file=sys.stderr)
        return 1
    return 0


def cmd_export(a: argparse.Namespace) -> int:
    from edit_lib.tools.export import export_cli

    return export_cli(a)


def cmd_check_gpu(a: argparse.Namespace) -> int:
    from edit_lib.tools.check_gpu import check_gpu_cli

    return check_gpu_cli(a)
