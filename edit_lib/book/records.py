"""Dated text the generated pages end with (``book/records/``): page ``P`` of run ``N`` gets ``records/P.md`` and
``records/P-N.md`` where they exist (``performance.md`` on every run's performance page, ``results-demo.md`` on the
demo's results page, ``real_model-cpu-real.md`` in the cpu-real chapter, ``study.md`` in the study chapter). They
hold what only a measured run can say, each block headed by its date and commit, so a page never passes them off
as its own run's numbers; older figures are in CHANGELOG.md. The folder is not in the book's table of contents
(``only_build_toc_files``): its files are read here, not built as pages."""
from __future__ import annotations

from pathlib import Path

RECORDS_DIR = Path(__file__).resolve().parents[2] / "book" / "records"


def records_for(page: str, run: str, folder: Path = RECORDS_DIR) -> list[str]:
    """The lines of ``<folder>/<page>.md`` then ``<folder>/<page>-<run>.md`` (those that exist), each after a blank
    line; [] when neither does."""
    out = []
    for f in (folder / f"{page}.md", folder / f"{page}-{run}.md"):
        if f.is_file():
            out += ["", *f.read_text(encoding="utf-8").rstrip("\n").split("\n")]
    return out
