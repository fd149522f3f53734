"""The paper's value beside each cell of the wide results tables (edit_lib/book/pages.py)."""
import pandas as pd

from edit_lib import paper_reference
from edit_lib.book.pages import beside_cells, with_paper_values


def test_each_cell_gets_the_papers_value_of_its_subject_split_metric_and_system():
    suite = pd.DataFrame([
        dict(dataset="s", subject="history", paper_subject="History", split="ood", metric="qwk", base=0.5,
             edit_sft=0.61234, base_grpo=None),
        dict(dataset="s", subject="biology", paper_subject="Biology", split="ood", metric="qwk", base=0.4,
             edit_sft=0.7, base_grpo=None)])
    ref = paper_reference.table("Table 1")
    out, n = with_paper_values(suite, ref, ["base", "edit_sft", "base_grpo"])
    want = {s: ref[(ref.subject == "History") & (ref.metric == "qwk") & (ref.system == s)].value.item()
            for s in ("base", "edit_sft")}
    assert out.at[0, "base"] == f"0.500 ({want['base']:.3f})"
    assert out.at[0, "edit_sft"] == f"0.612 ({want['edit_sft']:.3f})"
    assert out.at[0, "base_grpo"] is None and n == 2       # a blank suite cell stays blank
    assert out.at[1, "base"] == 0.4                          # the paper has no SAS Biology row
    assert suite.at[0, "base"] == 0.5                        # the caller's frame is not changed


def test_only_the_wide_tables_get_paper_values_and_a_note():
    suite = pd.DataFrame([dict(dataset="b", paper_subject="Biology", split="id", metric="acc", base=0.3)])
    out, note = beside_cells("Table 2", suite, paper_reference.table("Table 2"), ["base"])
    assert "(" in out.at[0, "base"] and note.startswith("; each cell: suite (paper)")
    same, note = beside_cells("Table 5", suite, paper_reference.table("Table 5"), ["base"])
    assert same.at[0, "base"] == 0.3 and note == ""
    nothing, note = beside_cells("Table 2", suite.assign(paper_subject="Chemistry"), paper_reference.table("Table 2"),
                                 ["base"])
    assert nothing.at[0, "base"] == 0.3 and note == ""
