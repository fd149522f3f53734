"""The smoke golden file (edit_lib.tools.golden): the mechanism on hand-made results, and the smoke run against
tests/golden/smoke.json.

The comparison with the real smoke run is marked `notebook`: it reuses the session's smoke run (the
`smoke_run` fixture that tests/notebooks/ and tests/runner/test_run.py execute anyway, so it adds no run of its own),
or reads an existing run folder given by EDIT_GOLDEN_RUN (e.g. runs/smoke) without running anything. After a
change meant to move the numbers: `edit-suite golden --refresh`.
"""
import json
import os
from pathlib import Path

import pytest

from edit_lib.tools.golden import (GOLDEN_FILE, GoldenError, Pick, compare, golden_cli, golden_file_for, golden_files,
                                    golden_numerics, key_numbers, key_tolerance, new_golden_file, read_golden,
                                    run_numerics, write_golden)


def _write_results(run_dir: Path, stage: str, tables: dict) -> None:
    f = run_dir / "results" / f"{stage}.json"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps(dict(notebook=stage, tables=tables)))


@pytest.fixture()
def fake_run(tmp_path):
    run = tmp_path / "smoke"
    _write_results(run, "00_data", {"table6": [  # the old name: read, keyed by the current one
        dict(dataset="s", split="train", responses=24, questions=8, schemes="pts:5"),
        dict(dataset="s", split="ood_test", responses=12, questions=4, schemes="lor:4")]})
    _write_results(run, "01_base_policy", {"base_metrics": [
        dict(system="Base", dataset="s", split="ood_test", n=12, n_invalid=1, qwk=0.25, acc=0.5, within1=0.75,
             mae=1.5, qwk_pooled=0.3)]})
    return run


def test_key_numbers_flat_keys_first_table_name_and_missing_stages(fake_run):
    nums = key_numbers(fake_run)
    assert nums == {"00_data/table8/s/train/responses": 24, "00_data/table8/s/train/questions": 8,
                    "00_data/table8/s/ood_test/responses": 12, "00_data/table8/s/ood_test/questions": 4,
                    "01_base_policy/base_metrics/Base/s/ood_test/n": 12,
                    "01_base_policy/base_metrics/Base/s/ood_test/n_invalid": 1,
                    "01_base_policy/base_metrics/Base/s/ood_test/qwk": 0.25,
                    "01_base_policy/base_metrics/Base/s/ood_test/acc": 0.5,
                    "01_base_policy/base_metrics/Base/s/ood_test/within1": 0.75,
                    "01_base_policy/base_metrics/Base/s/ood_test/mae": 1.5}
    # qwk_pooled is not picked; 02 and 03 have no results here and simply contribute nothing


def test_ambiguous_rows_are_an_error(tmp_path):
    _write_results(tmp_path, "x", {"t": [dict(dataset="a", v=1), dict(dataset="a", v=2)]})
    with pytest.raises(GoldenError, match="two rows keyed 'a'"):
        key_numbers(tmp_path, picks=(Pick("x", ("t",), ("v",)),))


def test_compare_tolerance_exact_counts_missing_and_new_keys():
    golden = {"a/qwk": 0.5, "a/n": 10, "a/none": None, "a/gone": 1.0, "a/label": "x"}
    run = {"a/qwk": 0.50005, "a/n": 10, "a/none": None, "a/new": 2.0, "a/label": "x"}
    diffs = compare(golden, run, tol=1e-4)
    assert diffs == ["missing in the run: a/gone (golden 1.0)", "not in the golden file: a/new = 2.0"]
    assert compare(golden | {"a/gone": 1.0}, run | {"a/gone": 1.0, "a/new": None}, tol=1e-4) == [
        "not in the golden file: a/new = None"]
    moved = compare({"q": 0.5, "n": 10, "m": None}, {"q": 0.502, "n": 11, "m": 0.0}, tol=1e-3)
    assert moved == ["changed: m: golden None, run 0.0", "changed: n: golden 10, run 11",
                     "changed: q: golden 0.5, run 0.502"]
    assert compare({"n": 10}, {"n": 10.00001}, tol=1e-3) == []  # a count written as a float still compares
    assert compare({"b": True}, {"b": 1}, tol=1.0) == ["changed: b: golden True, run 1"]


def test_write_read_roundtrip_keeps_tolerance(tmp_path, fake_run):
    path = tmp_path / "golden.json"
    write_golden(key_numbers(fake_run), path, tol=0.01)
    nums, tol = read_golden(path)
    assert tol == 0.01 and compare(nums, key_numbers(fake_run), tol) == []
    write_golden({"x": 1}, path)  # a refresh keeps the file's tolerance
    assert read_golden(path) == ({"x": 1}, 0.01)
    with pytest.raises(FileNotFoundError, match="--refresh"):
        read_golden(tmp_path / "none.json")


def test_golden_cli_check_and_refresh(tmp_path, fake_run, capsys):
    path = tmp_path / "golden.json"
    assert golden_cli(refresh=True, run_dir=str(fake_run), path=path) == 0
    assert golden_cli(run_dir=str(fake_run), path=path) == 0
    assert golden_numerics(path) is None  # the fake run recorded no kernels
    f = fake_run / "results" / "00_data.json"
    f.write_text(json.dumps(json.loads(f.read_text()) | dict(numerics=dict(cpu_capability="AVX2"))))
    assert golden_cli(refresh=True, run_dir=str(fake_run), path=path) == 0
    assert golden_numerics(path) == run_numerics(fake_run) == dict(cpu_capability="AVX2")
    _write_results(fake_run, "01_base_policy", {"base_metrics": [
        dict(system="Base", dataset="s", split="ood_test", n=12, n_invalid=1, qwk=0.35, acc=0.5, within1=0.75,
             mae=1.5)]})
    assert golden_cli(run_dir=str(fake_run), path=path) == 1
    out = capsys.readouterr().out
    assert "changed: 01_base_policy/base_metrics/Base/s/ood_test/qwk: golden 0.25, run 0.35" in out
    assert "numerics" not in out  # the same kernels: nothing to say
    f.write_text(json.dumps(json.loads(f.read_text()) | dict(numerics=dict(cpu_capability="AVX512"))))
    assert golden_cli(run_dir=str(fake_run), path=path) == 1
    assert "refreshed from a run with numerics {'cpu_capability': 'AVX2'}" in capsys.readouterr().out
    assert golden_cli(refresh=True, run_dir=str(fake_run), path=path) == 0
    assert "the keys changed" not in capsys.readouterr().out  # the same keys: the seed-spread file still fits
    _write_results(fake_run, "01_base_policy", {"base_metrics": [
        dict(system="Base", dataset="s", split="id_test", n=12, n_invalid=1, qwk=0.35, acc=0.5, within1=0.75,
             mae=1.5)]})
    assert golden_cli(refresh=True, run_dir=str(fake_run), path=path) == 0
    assert "the keys changed: remake tests/golden/smoke_spread.json" in capsys.readouterr().out
    assert golden_cli(run_dir=str(fake_run), path=path) == 0


@pytest.mark.notebook
def test_smoke_run_matches_golden_file(request):
    """The smoke run's key numbers equal the golden file of its kernels (tests/golden/smoke.json for AVX-512,
    smoke.AVX2.json for AVX2) within its tolerance; kernels with no file of their own cannot be judged: skip."""
    run_dir = os.environ.get("EDIT_GOLDEN_RUN")
    if run_dir is None:
        run_dir, _ = request.getfixturevalue("smoke_run")
    here = run_numerics(run_dir)
    path = golden_file_for(here)
    if path is None:
        pytest.skip(f"no golden file for this machine's kernels ({here}): the smoke run's numbers follow them; "
                    f"`edit-suite golden --refresh` writes tests/golden/{new_golden_file(here).name}")
    golden, tol = read_golden(path)
    diffs = compare(golden, key_numbers(run_dir), tol)
    assert not diffs, (f"the smoke run differs from tests/golden/{path.name}; if the change is intended, run "
                       "`edit-suite golden --refresh` on a machine of each kernel family that has a file and say "
                       f"why in the commit (this run's numerics: {here}, the file's: {golden_numerics(path)}):\n"
                       + "\n".join(diffs))


def test_the_committed_golden_files_one_per_kernel_family_with_the_same_picks():
    """Each committed golden file records the kernels it was made under, no two share them, and all hold the same
    picked tables and columns (the same code: a pick added to one file's refresh and not the other's shows here).
    Their rows may differ: under AVX2 two of 05's EDIT pools the AVX-512 run left empty hold pairs, so 07 and 08
    grade those systems there too."""
    files = golden_files()
    caps = [(golden_numerics(f) or {}).get("cpu_capability") for f in files]
    assert files[0] == GOLDEN_FILE and caps[0] == "AVX512" and None not in caps and len(set(caps)) == len(caps)
    assert all(f.name == f"smoke.{c}.json" for f, c in zip(files[1:], caps[1:]))
    picked = [{(k.split("/")[0], k.split("/")[1], k.rsplit("/", 1)[1]) for k in read_golden(f)[0]} for f in files]
    assert all(p == picked[0] for p in picked[1:]), [sorted(p ^ picked[0])[:5] for p in picked[1:]]


def test_a_run_is_judged_by_the_file_of_its_kernels(tmp_path, fake_run, capsys, monkeypatch):
    folder = tmp_path / "golden"
    f = fake_run / "results" / "00_data.json"

    def kernels(cap):
        f.write_text(json.dumps(json.loads(f.read_text()) | dict(numerics=dict(cpu_capability=cap))))
        return run_numerics(fake_run)

    avx512 = kernels("AVX512")
    assert golden_file_for(avx512, folder) is None and new_golden_file(avx512, folder) == folder / "smoke.json"
    write_golden(key_numbers(fake_run), new_golden_file(avx512, folder), numerics=avx512)
    avx2 = kernels("AVX2")
    assert golden_file_for(avx2, folder) is None and new_golden_file(avx2, folder) == folder / "smoke.AVX2.json"
    write_golden(key_numbers(fake_run) | {"00_data/table8/s/train/responses": 25}, folder / "smoke.AVX2.json",
                 numerics=avx2)
    assert golden_files(folder) == [folder / "smoke.json", folder / "smoke.AVX2.json"]
    assert golden_file_for(avx2, folder) == folder / "smoke.AVX2.json"
    assert golden_file_for(avx512, folder) == folder / "smoke.json"
    assert golden_file_for(dict(cpu_capability="DEFAULT"), folder) is None and golden_file_for(None, folder) is None
    with pytest.raises(GoldenError, match="cannot name"):
        new_golden_file(dict(cpu_capability="../x"), folder)
    # the CLI picks the file by the run's kernels: the AVX2 file differs in one count, the AVX-512 one does not
    import edit_lib.tools.golden as golden_mod
    monkeypatch.setattr(golden_mod, "GOLDEN_FILE", folder / "smoke.json")
    assert golden_cli(run_dir=str(fake_run)) == 1
    assert "changed: 00_data/table8/s/train/responses: golden 25, run 24" in capsys.readouterr().out
    kernels("AVX512")
    assert golden_cli(run_dir=str(fake_run)) == 0
    kernels("SVE256")
    assert golden_cli(run_dir=str(fake_run)) == 2
    assert "no golden file for this run's kernels (SVE256)" in capsys.readouterr().out
    assert golden_cli(refresh=True, run_dir=str(fake_run)) == 0
    assert golden_file_for(run_numerics(fake_run), folder) == folder / "smoke.SVE256.json"


def test_table11_r_has_its_own_tolerance_of_a_few_pairs():
    """Table 11's r moves by a pair or two between CPUs (a near-tie of float32 NLL differences), nothing else
    gets its tolerance, and a real change of r still fails."""
    g = {"03_audit_validation/table11/sum/G_p/rollout mean/r": 1.0, "01_base_policy/base_metrics/B/s/t/qwk": 0.5}
    assert key_tolerance("03_audit_validation/table11/sum/G_p/rollout mean/r", 1e-4) == 0.004
    assert key_tolerance("01_base_policy/base_metrics/B/s/t/qwk", 1e-4) == 1e-4
    one_pair = {"03_audit_validation/table11/sum/G_p/rollout mean/r": 1.0 - 2 / 1320,
                "01_base_policy/base_metrics/B/s/t/qwk": 0.5}
    assert compare(g, one_pair) == []
    moved = one_pair | {"03_audit_validation/table11/sum/G_p/rollout mean/r": 0.99,
                        "01_base_policy/base_metrics/B/s/t/qwk": 0.5015}
    assert compare(g, moved) == ["changed: 01_base_policy/base_metrics/B/s/t/qwk: golden 0.5, run 0.5015",
                                 "changed: 03_audit_validation/table11/sum/G_p/rollout mean/r: golden 1.0, run 0.99"]
