"""Dated records the generated pages end with (edit_lib/book/build.py, book/records/): a page gets its own record
and its run's, in that order; every record in the repository says when and on what it was measured."""
import re

import pytest

from edit_lib.book.build import BOOK_DIR, RECORDS_DIR, records_for


def test_a_page_gets_its_record_then_its_runs(tmp_path):
    (tmp_path / "results.md").write_text("## all runs\n")
    (tmp_path / "results-demo.md").write_text("## the demo\n\ntext\n")
    assert records_for("results", "demo", tmp_path) == ["", "## all runs", "", "## the demo", "", "text"]
    assert records_for("results", "smoke", tmp_path) == ["", "## all runs"]
    assert records_for("claims", "demo", tmp_path) == []


RECORDS = sorted(RECORDS_DIR.glob("*.md"))


def test_the_records_folder_is_in_the_book_sources_and_not_a_page():
    assert RECORDS and RECORDS_DIR.parent == BOOK_DIR
    assert "records/" not in (BOOK_DIR / "_toc.yml").read_text()
    assert "only_build_toc_files: true" in (BOOK_DIR / "_config.yml").read_text()  # not built as pages


@pytest.mark.parametrize("record", RECORDS, ids=lambda p: p.name)
def test_every_record_is_dated_and_opens_with_a_section(record):
    text = record.read_text()
    assert text.startswith("## "), "a record is a section of the page it ends"
    first = text.split("\n\n")[1]  # the italic line under the heading says when and on what
    assert first.startswith("*") and re.search(r"20\d\d-\d\d-\d\d", first), first
    page = record.stem.split("-")[0]
    assert page in {"performance", "results", "real_model", "study", "scale", "claims", "reproducibility",
                    "variants"}
