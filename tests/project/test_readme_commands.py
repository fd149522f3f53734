"""The README keeps itself true: every `edit-suite` command it shows parses with the CLI's own parser (subcommand,
flags, choices, `--only` stages), every profile it names is a file in configs/ (or the profile file its own code
creates, loaded with the YAML block it shows), every `-p` key exists in the profile schema (the profile loaded
with the overrides), every `make` target and variable is the Makefile's, every repository path it names exists
and every page of the built book it links is one the book build writes. ``problems(text)`` lists what is
wrong; a deliberately broken README shows that each kind of fault is found."""
import re
import shlex
from pathlib import Path

import pytest
import yaml

from edit_lib.cli import build_parser
from edit_lib.config import ConfigError, load_profile
from edit_lib.runner.keys import STAGES
from edit_lib.tools.sweep import is_swept, split_values

REPO = Path(__file__).resolve().parents[2]
CONFIGS = {f.stem for f in (REPO / "configs").glob("*.yaml")}
TOP = {p.name for p in REPO.iterdir() if not p.name.startswith(".")} | {".ci", ".venv"}
OUTPUTS = ("runs/", "runs-", "exports/", "my/", "/", "~", "$", "http")  # what a command writes, or the user's
BOOK_HTML = re.compile(r"runs/[\w.-]+/book/_build/html/(.+)\.html$")


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M)


def commands(text: str) -> list[str]:
    """Every shell command of the bash blocks (continuations joined, comments cut, split at && and ;)."""
    out = []
    for lang, body in code_blocks(text):
        if lang not in ("bash", "sh"):
            continue
        for line in body.replace("\\\n", " ").splitlines():
            line = re.sub(r"(^|\s)#.*$", "", line).strip()
            out += [c.strip() for c in re.split(r"&&|;", line) if c.strip()]
    return out


def inline_commands(text: str) -> list[str]:
    """The prose's code spans that are `edit-suite` or `make` commands (often partial: `edit-suite compare`)."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return [c for c in re.findall(r"`([^`\n]+)`", prose) if re.match(r"(\.venv/bin/)?edit-suite |make ", c)]


def _created_profiles(text: str) -> dict[str, Path]:
    """Profile files the README's own commands create: `cp configs/X.yaml Y.yaml` -> {Y.yaml: configs/X.yaml}."""
    return {dst: REPO / src for src, dst in re.findall(r"\bcp (configs/[\w.-]+\.yaml) ([\w./-]+\.ya?ml)", text)}


def _profile(name: str, text: str, tmp: Path) -> str:
    """A loadable profile for ``name``: a configs/ name, or the README's created file built in ``tmp`` from its
    source profile with the sections of the README's YAML blocks put in place."""
    created = _created_profiles(text)
    if name in created:
        raw = yaml.safe_load(created[name].read_text())
        for lang, body in code_blocks(text):
            if lang in ("yaml", "yml"):
                raw.update(yaml.safe_load(body))
        f = tmp / Path(name).name
        f.write_text(yaml.safe_dump(raw))
        return str(f)
    if name not in CONFIGS:
        raise ConfigError(f"profile {name!r} is neither in configs/ ({sorted(CONFIGS)}) nor created by the README")
    return name


def _tokens(cmd: str) -> list[str]:
    """The command's arguments after `edit-suite`, VAR=value prefixes dropped."""
    tokens = shlex.split(cmd)
    while tokens and re.fullmatch(r"\w+=.*", tokens[0]):
        tokens.pop(0)
    return tokens[1:]


def _first_values(params: list[str]) -> list[str]:
    """A swept value (`edit-suite sweep -p key=v1,v2`) as its first value; any other as it is."""
    return [f"{p.split('=')[0]}={split_values(p)[1][0]}" if is_swept(p) else p for p in params]


def _partial(cmd: str, text: str, tmp: Path) -> list[str]:
    """A command named in prose: its subcommand exists, every flag it shows is one of that subcommand's, every
    profile it names exists and every `-p` key is in the schema."""
    tokens, parser = _tokens(cmd), build_parser()
    while tokens and not tokens[0].startswith("-") and parser._subparsers is not None:
        choices = parser._subparsers._group_actions[0].choices
        if tokens[0] not in choices:
            return [f"`{cmd}`: no subcommand {tokens[0]!r} (choices: {sorted(choices)})"]
        parser, tokens = choices[tokens[0]], tokens[1:]
    flags = [t.split("=")[0] for t in tokens if t.startswith("-")]
    out = [f"`{cmd}`: no option {f}" for f in flags if f not in parser._option_string_actions]
    if out or ("--profile" not in tokens and "-p" not in tokens):
        return out
    prof = tokens[tokens.index("--profile") + 1] if "--profile" in tokens else "demo"
    params = [tokens[i + 1] for i, t in enumerate(tokens) if t == "-p" and i + 1 < len(tokens)]
    try:
        load_profile(_profile(prof, text, tmp), _first_values(params))
    except (ConfigError, ValueError, KeyError) as e:
        out.append(f"`{cmd}`: {e}")
    return out


def _edit_suite(cmd: str, text: str, tmp: Path) -> list[str]:
    tokens = ["edit-suite", *_tokens(cmd)]
    try:
        a = build_parser().parse_args(tokens[1:])
    except SystemExit:
        return [f"`{cmd}`: the CLI's parser rejects it"]
    out = [p for p in _partial(cmd, text, tmp) if "no option" in p]  # argparse takes abbreviations; the README not
    if getattr(a, "only", None) and set(a.only) - set(STAGES):
        out.append(f"`{cmd}`: unknown stage(s) {sorted(set(a.only) - set(STAGES))}")
    if "profile" in vars(a):
        try:
            load_profile(_profile(a.profile, text, tmp), _first_values(getattr(a, "param", []) or []))
        except (ConfigError, ValueError, KeyError) as e:
            out.append(f"`{cmd}`: {e}")
    return out


def _makefile() -> tuple[set[str], set[str]]:
    mk = (REPO / "Makefile").read_text()
    targets = set(re.findall(r"^([\w-]+)\s*:(?!=)", mk, flags=re.M))
    variables = set(re.findall(r"^(\w+)\s*[?:]?=", mk, flags=re.M))
    return targets, variables


def _make(cmd: str) -> list[str]:
    targets, variables = _makefile()
    out = []
    for tok in shlex.split(cmd)[1:]:
        if "=" in tok:
            if tok.split("=")[0] not in variables:
                out.append(f"`{cmd}`: the Makefile has no variable {tok.split('=')[0]}")
        elif tok not in targets:
            out.append(f"`{cmd}`: the Makefile has no target {tok!r} (targets: {sorted(targets)})")
    return out


def _book_pages() -> set[str]:
    """The pages of a built book: book/_toc.yml's files and what edit_lib/book/build.py writes per run."""
    toc = yaml.safe_load((REPO / "book" / "_toc.yml").read_text())
    found = set(re.findall(r"file: ([\w/-]+)", yaml.safe_dump(toc))) | {toc["root"], "index"}
    build = (REPO / "edit_lib" / "book" / "build.py").read_text()
    written = re.findall(r'"(\w+)": (?:book_\w+\.)?\w+_page\(', build) + re.findall(r'pages\["(\w+)"\] = book_', build)
    return found | {f"executed/{p}" for p in written} | {"executed/index"}


def paths(text: str) -> list[str]:
    """Repository paths the README names: backticked tokens with a / or a file extension, link targets, and
    tokens of commands that start with a top-level entry of the repository."""
    found = [p for p in re.findall(r"`([^`\s]+)`", text) if "/" in p or re.search(r"\.\w{2,5}$", p)]
    found += re.findall(r"\]\(([^)\s]+)\)", text)
    for cmd in commands(text):
        found += [t for t in shlex.split(cmd) if t.split("/")[0] in TOP and "/" in t and "=" not in t]
    return list(dict.fromkeys(found))


def _path(p: str, text: str) -> list[str]:
    if BOOK_HTML.search(p):
        page = BOOK_HTML.search(p).group(1)
        return [] if page in _book_pages() else [f"`{p}`: the book has no page {page!r} ({sorted(_book_pages())})"]
    if p.startswith(OUTPUTS) or p in _created_profiles(text) or "<" in p or "*" in p or "..." in p:
        return []
    if p.split("/")[0] not in TOP and not re.search(r"\.(md|py|ya?ml|json|toml|txt|cff|csv|jsonl)$", p):
        return []  # a module name, a key (edit_lib.foo, ops.report_to), a flag value: not a path
    if p.startswith(".venv/"):
        return []  # made by the set-up
    return [] if (REPO / p).exists() else [f"`{p}`: no such file or folder in the repository"]


def problems(text: str, tmp: Path) -> list[str]:
    """Everything the README states that the repository does not bear out."""
    out = []
    for cmd in commands(text):
        head = cmd.split()[0]
        if head.endswith("edit-suite"):
            out += _edit_suite(cmd, text, tmp)
        elif head == "make":
            out += _make(cmd)
    for cmd in inline_commands(text):
        out += _partial(cmd, text, tmp) if cmd.split()[0].endswith("edit-suite") else _make(cmd)
    for p in paths(text):
        out += _path(p, text)
    for name in re.findall(r"^\| `([\w-]+)` \|", text, flags=re.M):  # the profiles table's first column
        if name not in CONFIGS:
            out.append(f"profiles table: no configs/{name}.yaml")
    return out


def test_the_readme_shows_commands_and_paths_that_exist(tmp_path):
    text = (REPO / "README.md").read_text()
    assert len([c for c in commands(text) if "edit-suite" in c.split()[0]]) >= 10  # the parser did find them
    assert not problems(text, tmp_path), "\n".join(problems(text, tmp_path))


@pytest.mark.parametrize("broken, found", [
    ("edit-suite run --profile demo --colour", "the CLI's parser rejects it"),
    ("edit-suite bench probes", "the CLI's parser rejects it"),
    ("edit-suite run --profile demo --qui", "no option --qui"),
    ("edit-suite run --profile papers", "profile 'papers'"),
    ("edit-suite run --profile demo -p rl.wokers=8", "unknown key(s) ['wokers']"),
    ("edit-suite run --profile demo --only 07_evaluate", "unknown stage(s) ['07_evaluate']"),
    ("make demos", "no target 'demos'"),
    ("make setup TORCH_IDX=x", "no variable TORCH_IDX"),
    ("cat configs/missing.yaml", "`configs/missing.yaml`: no such file"),
])
def test_a_broken_command_is_found(tmp_path, broken, found):
    """Each kind of fault in a code block is reported (so the test above can fail)."""
    text = (REPO / "README.md").read_text() + f"\n```bash\n{broken}\n```\n"
    assert any(found in p for p in problems(text, tmp_path)), problems(text, tmp_path)


def test_broken_prose_is_found(tmp_path):
    """A missing path in backticks or a link, a book page the build does not write, a profile in the table that
    configs/ lacks, a bad key in the README's own profile snippet: each is reported."""
    text = (REPO / "README.md").read_text()
    text += ("\nSee `edit_lib/nowhere.py`, [the page](book/nowhere.md) and "
             "[a page](runs/demo/book/_build/html/executed/nowhere.html).\n\n| `paper-xl` | x | y | z |\n")
    text += "\n```yaml\nmodel: {name_or_pth: x}\n```\n"
    found = "\n".join(problems(text, tmp_path))
    for part in ("`edit_lib/nowhere.py`: no such file", "`book/nowhere.md`: no such file",
                 "no page 'executed/nowhere'", "no configs/paper-xl.yaml", "unknown key(s) ['name_or_pth']"):
        assert part in found, found
