"""Named random streams (edit_lib/random_streams.py): deterministic, one seed per (run seed, name), the same in
every process, every name written once in the module's table; and no stream left to seed arithmetic
(``seed * 1000 + k``) in edit_lib/ or the notebooks."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from edit_lib import random_streams as R

ROOT = Path(__file__).resolve().parents[1]


def test_a_stream_seed_is_deterministic_and_a_32_bit_int():
    for name in R.STREAMS:
        a, b = R.stream_seed(42, name), R.stream_seed(42, name)
        assert a == b and type(a) is int and 0 <= a < 2 ** 32


def test_distinct_names_and_distinct_run_seeds_give_distinct_seeds():
    for seed in (0, 1, 42, 43):
        got = [R.stream_seed(seed, n) for n in R.STREAMS]
        assert len(set(got)) == len(R.STREAMS), f"run seed {seed}: two streams share a seed"
    assert len({R.stream_seed(s, R.REWRITES) for s in (0, 1, 42, 43)}) == 4


def test_the_same_name_and_seed_give_the_same_value_in_another_process():
    """Python's hash() is salted per process; the name's key is not (another PYTHONHASHSEED, same seeds)."""
    code = ("import json; from edit_lib import random_streams as R; "
            "print(json.dumps([R.stream_seed(s, n) for s in (0, 42) for n in R.STREAMS]))")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [R.stream_seed(s, n) for s in (0, 42) for n in R.STREAMS]


def test_the_derivation_is_pinned():
    """The streams are part of every sampled number: a change of hash or SeedSequence would move them all."""
    assert R.name_key("revision.rewrites") == 0xecdc54a9  # `printf revision.rewrites | sha256sum`
    assert R.stream_seed(42, R.REWRITES) == 1758062707


def test_every_stream_is_named_once_in_the_table_and_unknown_ones_are_refused():
    assert len(set(R.STREAMS)) == len(R.STREAMS)
    constants = {k: v for k, v in vars(R).items() if k.isupper() and isinstance(v, str)}
    assert sorted(constants.values()) == sorted(R.STREAMS)  # every constant is a stream, every stream a constant
    for const, name in constants.items():
        assert R.__doc__.count(f"``{const}`` ``{name}``:") == 1, f"{const} is not in the module's table"
    with pytest.raises(ValueError, match="unknown random stream 'revision.rewrite'"):
        R.stream_seed(0, "revision.rewrite")
    with pytest.raises(ValueError, match="must be a non-negative integer, got -1"):
        R.stream_seed(-1, R.REWRITES)


SEED_ARITHMETIC = re.compile(r"seed\w*\)?\s*\*\s*\d|\*\s*1000\s*\+")


def seed_arithmetic(text: str) -> list[str]:
    """Lines of ``text`` that derive a seed by arithmetic (``seed * k``, ``* 1000 +``)."""
    return [line.strip() for line in text.splitlines() if SEED_ARITHMETIC.search(line)]


def test_the_search_finds_seed_arithmetic_in_a_broken_copy():
    broken = "    sample = sample_responses(pool, n, seed=seed * 1000 + 8)\nx = P.run.seed*3\ny = k * 1000 + 1\n"
    assert len(seed_arithmetic(broken)) == 3
    assert seed_arithmetic("seed=stream_seed(P.run.seed, RSR_RESPONSES)\nn_seeds * len(x)\n") == []


def test_no_seed_arithmetic_in_the_library_or_the_notebooks():
    hits = []
    for path in sorted((ROOT / "edit_lib").rglob("*.py")):
        hits += [f"{path.relative_to(ROOT)}: {line}" for line in seed_arithmetic(path.read_text())]
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        code = "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"]
                         if c["cell_type"] == "code")
        hits += [f"{path.relative_to(ROOT)}: {line}" for line in seed_arithmetic(code)]
    assert not hits, "derive a distinct stream with edit_lib.random_streams.stream_seed, not arithmetic:\n" + \
        "\n".join(hits)
