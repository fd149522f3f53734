"""The systems table (edit_lib/systems.py): the paper's columns, table membership and row order, adapter
resolution, and that no other module of edit_lib retypes a system id."""
import ast
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
    ("bases.py", "base"): "providers.find('base', ...): the provider kind",
    ("parallel.py", "base"): "providers.find / register('base', ...) in a worker: the provider kind",
    ("register.py", "base"): "providers.register('base', ...): the provider kind",
    ("dry_run.py", "base"): "providers.find('base', ...): the provider kind",
    ("preflight.py", "base"): "providers.KINDS' kind 'base', which has no provider option to check",
    ("export.py", "base"): "the provider kind, the export's folder and record key for the Base model",
    ("model_card.py", "base"): "the manifest's record of the Base model",
    ("model_card.py", "int_sft"): "the profile section int_sft (InT's SFT settings)",
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
