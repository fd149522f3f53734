"""The systems table (edit_lib/systems.py): the paper's columns, table membership and row order, adapter
resolution, and that no other module of edit_lib retypes a system id."""
import ast
import sys
from pathlib import Path

import pytest

from edit_lib import systems as S


def test_main_table_columns_follow_the_paper():
    cols = [s.main_column for s in S.SYSTEMS if s.main_column]
    assert cols == ["Base", "GRPO", "DGPO", "InT SFT", "InT RL", "EDIT-SFT", "EDIT-RL"]  # Tables 1-2, left to right
    assert [s.name for s in S.in_table("Table 5")] == ["base", "base_grpo", "base_edit_rl", "edit_sft_grpo",
                                                       "edit_sft_edit_rl"]
    assert {s.name for s in S.in_table("Table 4")} == {"edit_sft_grpo", "edit_sft_edit_rl"}
    assert {s.name for s in S.in_table("Table 6")} == {"edit_sft", "wo_localiser", "wo_checklist", "wo_atomic"}
    with pytest.raises(KeyError, match="'gpt' names no system"):
        S.system("gpt")


def test_resolve_reads_the_adapter_maps_of_05_and_06():
    sft = {"edit_sft": {"a": "/05/edit/a"}, "int_sft": {}}
    rl = {"edit_sft_edit_rl": {"a": {"43": {"adapter": "/06/r43", "init_adapter": "/05/edit/a"},
                                     "42": {"adapter": "/06/r42", "init_adapter": "/05/edit/a"}}}}
    assert S.resolve("base", ["a", "b"], sft, rl) == [S.Graded("base", "a", None, None, None),
                                                      S.Graded("base", "b", None, None, None)]
    assert S.resolve("edit_sft", ["a", "b"], sft, rl) == [S.Graded("edit_sft", "a", None, "/05/edit/a", None)]
    assert S.resolve("int_sft", ["a"], sft, rl) == []  # an empty pool trained nothing
    got = S.resolve("edit_sft_edit_rl", ["a", "b"], sft, rl)
    assert [(g.seed, g.adapter, g.init_adapter) for g in got] == [(42, "/06/r42", "/05/edit/a"),
                                                                  (43, "/06/r43", "/05/edit/a")]
    assert S.resolve("base_dgpo", ["a"], sft, rl) == []


def test_not_run_reads_run_skip_systems_in_table_order():
    from types import SimpleNamespace
    from edit_lib.config import RunConfig
    prof = lambda names: SimpleNamespace(run=RunConfig(skip_systems=names))  # noqa: E731
    assert S.not_run(prof([])) == []
    assert S.not_run(prof(["wo_atomic", "base_dgpo"])) == ["base_dgpo", "wo_atomic"]  # SYSTEMS order
    rows = S.not_run_table(prof(["base_dgpo"]))
    assert rows == [dict(system="base_dgpo", label="DGPO", stage="06_rl", status=S.NOT_RUN)]
    with pytest.raises(ValueError, match=r"unknown system\(s\) \['gpt'\]"):
        S.not_run(prof(["gpt"]))
    with pytest.raises(ValueError, match="'base' cannot be skipped"):
        S.not_run(prof(["base"]))


def test_initialisation_is_matched_by_folder_not_by_name():
    """InT-RL starts from InT-SFT, whose adapter also lives under 05_edit_sft/: the label comes from 05's map."""
    root = "/runs/demo/artifacts/05_edit_sft/k123/adapters"
    sft = {"edit_sft": {"a": f"{root}/edit_sft/a"}, "int_sft": {"a": f"{root}/int_sft/a"}}
    g = lambda system, init: S.Graded(system, "a", 42, "/06/x", init)
    assert S.initialisation(g("int_sft_int_rl", f"{root}/int_sft/a"), sft) == "InT-SFT"
    assert S.initialisation(g("edit_sft_edit_rl", f"{root}/edit_sft/a"), sft) == "EDIT-SFT"
    assert S.initialisation(g("base_grpo", None), sft) == "Base"
    moved = {k: {d: p.replace("/runs/demo", "/elsewhere/demo") for d, p in v.items()} for k, v in sft.items()}
    assert S.initialisation(g("int_sft_int_rl", f"{root}/int_sft/a"), moved) == "InT-SFT"  # a copied run folder
    with pytest.raises(KeyError, match="none of 05's SFT adapters"):
        S.initialisation(g("base_grpo", "/elsewhere"), sft)


# ---------------------------------------------------------------- one list: no module retypes a system id

LIB = Path(__file__).resolve().parents[1] / "edit_lib"
# (module file name, id): a string equal to a system id that is not the system, with why.
NOT_A_SYSTEM = {
    ("providers.py", "base"): "the provider kind 'base' (a Base model's loader), not the system",
    ("policy.py", "base"): "providers.find('base', ...): the provider kind",
    ("parallel.py", "base"): "providers.find / register('base', ...) in a worker: the provider kind",
    ("keys.py", "base"): "providers.register('base', ...) in register_all: the provider kind",
    ("dry_run.py", "base"): "providers.find('base', ...): the provider kind",
    ("export.py", "base"): "the provider kind, the export's folder and record key for the Base model (the card too)",
    ("export.py", "int_sft"): "the profile section int_sft (InT's SFT settings), in the model card",
    ("keys.py", "int_sft"): "the profile section int_sft (InT's SFT settings)",
    ("warmup.py", "base"): "the warm-up record's Base model name",
    ("sft.py", "base"): "the SFT summary's Base model name",
}


def system_id_literals(root: Path) -> dict[tuple[str, str], list[str]]:
    """(module file name, id) -> ['path:line', ...] for every string literal equal to a system id in ``root``'s
    modules other than systems.py (docstrings and longer strings mentioning an id are prose, not counted)."""
    out: dict[tuple[str, str], list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        if path.name == "systems.py" and path.parent == root:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in S.BY_NAME:
                out.setdefault((path.name, node.value), []).append(f"{path.relative_to(root)}:{node.lineno}")
    return out


def test_no_module_but_systems_py_spells_a_system_id():
    """systems.py is the one list: a module names a system by ``systems``' constants or helpers, never by a
    literal id (display labels such as "EDIT-RL" and prose are not ids). Each allowance is still needed."""
    found = system_id_literals(LIB)
    bad = sorted(loc for key, locs in found.items() if key not in NOT_A_SYSTEM for loc in locs)
    assert not bad, f"system ids spelled outside edit_lib/systems.py (use its constants): {bad}"
    assert sorted(set(NOT_A_SYSTEM) - set(found)) == [], "allowances no module needs any more"


def test_the_id_check_fails_on_a_module_that_retypes_a_system(tmp_path):
    (tmp_path / "systems.py").write_text('EDIT_RL = "edit_sft_edit_rl"\n')  # the list itself may spell it
    (tmp_path / "tables.py").write_text('"""Table 4: edit_sft_edit_rl minus GRPO (prose)."""\n'
                                        'LABEL = "EDIT-RL"\nFAMILY = ("base_grpo", "edit_sft_edit_rl")\n')
    assert system_id_literals(tmp_path) == {("tables.py", "base_grpo"): ["tables.py:3"],
                                            ("tables.py", "edit_sft_edit_rl"): ["tables.py:3"]}


def test_tables_list_their_systems_in_the_papers_row_order():
    assert S.names("Table 5") == ("base", "base_grpo", "base_edit_rl", "edit_sft_grpo", "edit_sft_edit_rl")
    assert S.names("Table 4") == S.names("Table 10") == ("edit_sft_grpo", "edit_sft_edit_rl")  # EDIT-RL minus GRPO
    assert S.names("Table 6") == ("edit_sft", *S.ABLATIONS)
    assert S.MAIN == ("base", *S.PAPER_FAMILY) and len(S.PAPER_FAMILY) == 6  # App. G: six comparisons vs Base
    for table in S.ROW_ORDER:  # ROW_ORDER and System.tables agree on every table's members
        assert sorted(S.names(table)) == sorted(s.name for s in S.SYSTEMS if table in s.tables)
    constants = {v for k, v in vars(S).items() if k.isupper() and isinstance(v, str) and v in S.BY_NAME}
    assert constants == set(S.BY_NAME)  # every system has its constant


def test_row_order_disagreeing_with_the_table_is_an_error(monkeypatch):
    monkeypatch.setitem(S.ROW_ORDER, "Table 4", ("edit_sft_grpo",))
    with pytest.raises(ValueError, match=r"ROW_ORDER\['Table 4'\]"):
        S.in_table("Table 4")


# ---------------------------------------------------------------- how each system is made: one row each

def test_rl_rows_say_the_papers_initialisation_arm_and_trainer():
    """Sec. 3 Baselines, Tables 4-5, Table 9: what 06 trains, written out here from the paper, read by rl_runs."""
    want = {"base_grpo": ("base", "grpo", "grpo"), "base_dgpo": ("base", "grpo", "dgpo"),
            "base_edit_rl": ("base", "edit_rl", "grpo"), "edit_sft_grpo": ("edit_sft", "grpo", "grpo"),
            "edit_sft_edit_rl": ("edit_sft", "edit_rl", "grpo"), "int_sft_int_rl": ("int_sft", "grpo", "grpo")}
    assert {s.name: (s.init, s.arm, s.trainer) for s in S.of_source("rl")} == want
    from edit_lib.baselines.dgpo import DGPOTrainer
    assert S.TRAINERS["dgpo"] is DGPOTrainer and S.TRAINERS["grpo"] is None


def test_ablation_rows_switch_off_one_part_each():
    """Table 6: each ablation rewrites one rule's picks with one part of the rewriter off (App. F)."""
    from edit_lib.revision.generation import RewriteVariant
    from edit_lib.revision.phase1 import ABLATIONS
    assert ABLATIONS == {"wo_localiser": ("self_audit", RewriteVariant(hints=False)),
                         "wo_checklist": ("edit", RewriteVariant(checklist=False)),
                         "wo_atomic": ("edit", RewriteVariant(atomic=False))}
    assert S.family("Table 6") == S.ABLATIONS and S.FAMILIES["Table 6"] == "edit_sft"
    with pytest.raises(ValueError, match="unknown Holm family 'Table 9'"):
        S.family("Table 9")


def test_every_system_reads_only_sections_its_stage_declares():
    from edit_lib.runner.keys import STAGES
    for s in S.SYSTEMS:
        assert set(s.sections) <= set(STAGES[s.stage].sections), s.name


# ---------------------------------------------------------------- baselines a profile adds (run.baselines)

def _baseline_file(tmp_path, body: str, name: str = "mine.py"):
    f = tmp_path / name
    f.write_text("from edit_lib.systems import BASE, System, baseline\n" + body)
    return f


def test_a_baseline_file_adds_a_main_table_column(tmp_path):
    f = _baseline_file(tmp_path, 'SYS = System("mine", "Mine", "05_edit_sft", "sft", "Mine", ("Table 1", "Table 2"), '
                                 'init=BASE)\n@baseline(SYS)\ndef pool(inputs):\n    return inputs.source\n')
    assert S.load_baselines([str(f)]) == ["mine"] == S.load_baselines([str(f)])  # once per process
    assert S.baseline_path("~/mine.py") == Path.home() / "mine.py"  # a home folder's file, as the shell writes it
    assert S.main_systems() == (*S.MAIN, "mine") and S.system("mine").label == "Mine"
    assert S.all_systems()[-1].name == "mine" and "mine" not in S.PAPER_FAMILY
    import pandas as pd
    src = pd.DataFrame(dict(dataset=["a", "b"], x=[1, 2]))
    pools = S.baseline_pools(src, {"a": None, "b": None}, None, 0)
    assert list(pools) == [("mine", "a"), ("mine", "b")] and pools[("mine", "b")]["x"].tolist() == [2]


@pytest.mark.parametrize("body, message", [
    ("x = 1\n", "registers no baseline"),
    ('@baseline(System("edit_sft", "E", "05_edit_sft", "sft", None, (), init=BASE))\ndef f(i): pass\n',
     "one of the paper's systems"),
    ('@baseline(System("m", "M", "05_edit_sft", "sft", None, (), init=BASE, family="Table 3"))\ndef f(i): pass\n',
     "family must be None"),
    ('@baseline(System("m", "M", "07_evaluation", "sft", None, (), init=BASE))\ndef f(i): pass\n',
     "source/stage must be"),
    ('@baseline(System("m", "M", "06_rl", "rl", None, (), init="gpt", arm="grpo"))\ndef f(i): pass\n',
     "init 'gpt' names no system"),
    ('@baseline(System("m", "M", "06_rl", "rl", None, ("Table 5",), init=BASE, arm="grpo"))\ndef f(i): pass\n',
     "joins Tables 1-2 only"),
])
def test_a_bad_baseline_file_is_an_error_naming_it(tmp_path, body, message):
    with pytest.raises(ValueError, match=message):
        S.load_baselines([str(_baseline_file(tmp_path, body, "bad.py"))])


def test_two_files_naming_one_baseline_is_an_error(tmp_path):
    body = ('SYS = System("twin", "Twin", "05_edit_sft", "sft", None, (), init=BASE)\n'
            '@baseline(SYS)\ndef pool(inputs):\n    return inputs.source\n')
    files = [str(_baseline_file(tmp_path, body, name)) for name in ("a.py", "b.py")]
    with pytest.raises(ValueError, match="'twin' is registered by two files"):
        S.load_baselines(files)


def test_a_missing_baseline_file_stops_the_run_before_any_notebook(tmp_path):
    from edit_lib.config import ConfigError
    from edit_lib.runner.dry_run import preflight
    with pytest.raises(ConfigError, match=r"run.baselines: nope.py is not a file"):
        preflight("smoke", ["run.baselines=[nope.py]"])
    with pytest.raises(ConfigError, match=r"baselines must be a list of paths of Python files"):
        preflight("smoke", ["run.baselines=[toy]"])
    modules = {m for m in sys.modules if m.startswith("edit_baselines.")}
    preflight("smoke")  # its toy baseline loads, and the check leaves the process's systems as they were
    assert "toy_rft" not in S.BY_NAME and {m for m in sys.modules if m.startswith("edit_baselines.")} == modules


def test_a_baseline_files_code_joins_the_keys_of_the_stages_that_read_it(tmp_path):
    from edit_lib.config import load_profile
    from edit_lib.runner.keys import module_fingerprints, STAGES
    from edit_lib.runner.stage import NOTEBOOK_DIR
    f = tmp_path / "b.py"
    f.write_text("import edit_lib.revision.pool\n")
    prof = load_profile("smoke", [f"run.baselines=[{f}]"])
    got = {n: module_fingerprints(NOTEBOOK_DIR / f"{n}.ipynb", prof, n) for n in ("05_edit_sft", "09_significance")}
    assert all(f"run.baselines:{f}" in g for g in got.values())
    assert "edit_lib/revision/pool.py" in got["09_significance"]  # the library modules it imports
    f.write_text("import edit_lib.revision.pool  # edited\n")
    again = module_fingerprints(NOTEBOOK_DIR / "09_significance.ipynb", prof, "09_significance")
    assert again != got["09_significance"]
    assert "run.baselines" not in STAGES["08_rsr_interventions"].sections  # 08 grades rsr.systems only


def test_an_rl_baseline_joins_06s_plan_with_its_own_trainer(tmp_path):
    from edit_lib.config import load_profile
    from edit_lib.train.rl_runs import plan_runs
    f = _baseline_file(tmp_path, 'SYS = System("my_rl", "My RL", "06_rl", "rl", "My RL", ("Table 1", "Table 2"), '
                                 'init="edit_sft", arm="grpo", trainer="edit_lib.baselines.dgpo:DGPOTrainer")\n'
                                 '@baseline(SYS)\ndef rl():\n    pass\n')
    S.load_baselines([str(f)])
    prof = load_profile("smoke")
    plan = plan_runs(prof, ["synth_sas"], {"edit_sft": {"synth_sas": "/05/edit_sft/synth_sas"}}, tmp_path)
    mine = plan[plan["system"] == "my_rl"].to_dict("records")
    assert [(r["init"], r["arm"], r["trainer"], r["seed"], r["init_adapter"]) for r in mine] == [
        ("edit_sft", "grpo", "edit_lib.baselines.dgpo:DGPOTrainer", 0, "/05/edit_sft/synth_sas")]  # Tables 1-3: seed 0
    assert S.BASELINES["my_rl"].pool is None
