"""The systems table (edit_lib/systems.py): the paper's columns, table membership, and adapter resolution."""
import pytest

from edit_lib import systems as S


def test_main_table_columns_follow_the_paper():
    cols = [s.main_column for s in S.SYSTEMS if s.main_column]
    assert cols == ["Base", "GRPO", "DGPO", "InT SFT", "InT RL", "EDIT-SFT", "EDIT-RL"]  # Tables 1-2, left to right
    assert [s.name for s in S.in_table("Table 5")] == ["base_grpo", "edit_sft_edit_rl", "base_edit_rl",
                                                       "edit_sft_grpo"]
    assert {s.name for s in S.in_table("Table 4")} == {"edit_sft_grpo", "edit_sft_edit_rl"}
    assert {s.name for s in S.in_table("Table 6")} == {"edit_sft", "wo_localiser", "wo_checklist", "wo_atomic"}
    with pytest.raises(KeyError, match="unknown system 'gpt'"):
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
