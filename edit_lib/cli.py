"""``edit-suite``: run the notebooks, build the book, validate data, build the grader, benchmark."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _cmd_run(a: argparse.Namespace) -> int:
    from .config import ConfigError
    from .pipeline import NotebookFailed, run

    try:
        run(a.profile, only=a.only, force=a.force, overrides=a.param, run_root=a.run_root)
    except NotebookFailed as e:
        print(f"edit-suite run: {e}", file=sys.stderr)
        return 1
    except (ConfigError, KeyError) as e:
        print(f"edit-suite run: {e.args[0] if e.args else e}", file=sys.stderr)
        return 2
    return 0


def _cmd_book(a: argparse.Namespace) -> int:
    from .book import build_book

    out = build_book(a.profile, run_root=a.run_root)
    print(f"book: {out}")
    return 0


def _cmd_validate(a: argparse.Namespace) -> int:
    from .data.errors import DataError
    from .data.validate import validate_path

    try:
        summary = validate_path(a.path, fmt=a.format, questions=a.questions)
    except DataError as e:
        print(f"invalid: {e}", file=sys.stderr)
        return 1
    except FileNotFoundError as e:
        print(f"invalid: {e}", file=sys.stderr)
        return 2
    print(summary)
    return 0


def _cmd_bench(a: argparse.Namespace) -> int:
    from .bench import run_bench

    result = run_bench(a.what, out_dir=Path(a.run_root or ROOT / "runs") / "bench")
    print(json.dumps(result, sort_keys=True))
    return 0


def _cmd_build_grader(a: argparse.Namespace) -> int:
    from .embedded.build import build_grader_cli

    return build_grader_cli(recipe=a.recipe, out=a.out, minutes=a.minutes)


def _cmd_profile(a: argparse.Namespace) -> int:
    from .config import describe, load_profile, to_dict

    if a.keys:
        for key, default, help_ in describe():
            print(f"{key:38s} {json.dumps(default):>24s}  {help_}")
        return 0
    prof = load_profile(a.profile, a.param)
    print(json.dumps(to_dict(prof), indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="edit-suite", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("run", help="execute the notebooks of a profile with papermill")
    r.add_argument("--profile", default="demo", help="configs/<profile>.yaml (smoke, demo, paper, ...)")
    r.add_argument("--only", nargs="+", metavar="NB", help="run only these notebooks (e.g. 00_data)")
    r.add_argument("--force", action="store_true", help="recompute stages whose key is unchanged")
    r.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                   help="override a profile value, e.g. -p rollouts.n_per_response=4 (repeatable)")
    r.add_argument("--run-root", default=None, help="folder holding runs/<profile> (default: ./runs)")
    r.set_defaults(fn=_cmd_run)

    b = sub.add_parser("book", help="build the Jupyter Book from a run's executed notebooks")
    b.add_argument("--profile", default="demo")
    b.add_argument("--run-root", default=None)
    b.set_defaults(fn=_cmd_book)

    d = sub.add_parser("data", help="data utilities")
    dsub = d.add_subparsers(dest="data_cmd", required=True)
    v = dsub.add_parser("validate", help="check a data file; exits non-zero on the first bad record")
    v.add_argument("path")
    v.add_argument("--format", default="auto",
                   help="auto | questions | responses | dataset | asap | sasbench")
    v.add_argument("--questions", default=None, help="questions file, to check a responses file fully")
    v.set_defaults(fn=_cmd_validate)

    be = sub.add_parser("bench", help="speed benchmarks (packed vs naive), one JSON line each")
    be.add_argument("what", choices=["probe", "audit"])
    be.add_argument("--run-root", default=None)
    be.set_defaults(fn=_cmd_bench)

    g = sub.add_parser("build-grader", help="build the embedded tiny grader from nothing")
    g.add_argument("--recipe", default="embedded", help="embedded | micro")
    g.add_argument("--out", default=None, help="output folder (default: the shipped asset folder)")
    g.add_argument("--minutes", type=float, default=None, help="override the recipe's time budget")
    g.set_defaults(fn=_cmd_build_grader)

    pr = sub.add_parser("profile", help="show a resolved profile, or every key with its help")
    pr.add_argument("--profile", default="demo")
    pr.add_argument("-p", "--param", action="append", default=[])
    pr.add_argument("--keys", action="store_true", help="list every key, default and help text")
    pr.set_defaults(fn=_cmd_profile)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.fn(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
