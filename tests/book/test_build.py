"""The book built from the session's smoke run (Sphinx warnings as errors): every chapter of the generated
table of contents is built, every image and internal link resolves, no page shows progress-bar noise or the
absolute run root, MathJax is served from the build, the run's own notebooks are untouched; and, where a
Chromium is installed, every chapter opened headless shows its figures and renders its math."""
import hashlib
import json
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml

from edit_lib.book.build import build_book
from edit_lib.book.claims import CLAIMS

pytestmark = pytest.mark.notebook
CHROMIUMS = ("chromium", "chromium-browser", "google-chrome")


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.ipynb"))}


@pytest.fixture(scope="session")
def smoke_book(smoke_run, tmp_path_factory):
    run_dir, _ = smoke_run
    before = _digest(run_dir / "notebooks")
    out = tmp_path_factory.mktemp("book")
    index = build_book("smoke", run_root=str(run_dir.parent), out=out)
    return dict(run_dir=run_dir, out=out, html=index.parent, before=before)


def _chapters(out: Path) -> list[str]:
    """Every document of the generated _toc.yml (globs expanded), as a path without suffix."""
    toc = yaml.safe_load((out / "_toc.yml").read_text())
    docs = [toc["root"]]

    def walk(entries):
        for e in entries:
            if "file" in e:
                docs.append(e["file"])
            if "glob" in e:
                docs.extend(str(p.relative_to(out).with_suffix("")) for p in sorted(out.glob(e["glob"] + ".*")))
            walk(e.get("sections", []))
    for part in toc["parts"]:
        walk(part["chapters"])
    return docs


class _Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in {"img": ("src",), "a": ("href",), "script": ("src",), "link": ("href",)}.get(tag, ()):
            if a.get(key):
                self.refs.append((tag, a[key]))


def _pages(html: Path) -> list[Path]:
    return sorted(p for p in html.rglob("*.html") if not {"_static", "_sources"} & set(p.relative_to(html).parts))


def test_every_chapter_of_the_toc_is_built(smoke_book):
    docs = _chapters(smoke_book["out"])
    assert {"intro", "executed/results", "executed/scale", "executed/claims", "executed/reproducibility", "executed/performance",
            "executed/index", "executed/00_data", "executed/09_significance", "data_cards", "reproduce",
            "method"} <= set(docs)
    missing = [d for d in docs if not (smoke_book["html"] / f"{d}.html").exists()]
    assert not missing, missing


def test_images_and_internal_links_resolve(smoke_book):
    html, broken, n_img = smoke_book["html"], [], 0
    for page in _pages(html):
        parser = _Refs()
        parser.feed(page.read_text())
        for tag, ref in parser.refs:
            parts = urlsplit(ref)
            if parts.scheme or ref.startswith(("#", "//", "mailto:", "javascript:")) or not parts.path:
                continue
            n_img += tag == "img"
            target = (page.parent / unquote(parts.path)).resolve()
            if not target.exists():
                broken.append(f"{page.relative_to(html)}: <{tag}> {ref}")
    assert not broken, broken
    assert n_img >= 10  # the pipeline figure and the notebooks' figures
    assert (html / "_images" / "pipeline.png").exists() or any(html.rglob("pipeline*.png"))


def test_pages_show_no_progress_noise_nor_the_run_root(smoke_book):
    roots = {str(smoke_book["run_dir"].parent), str(smoke_book["run_dir"].parent.resolve())}
    bad = []
    for page in _pages(smoke_book["html"]):
        text = page.read_text()
        bad += [f"{page.name}: {w}" for w in ["it/s]", "TqdmWarning", *roots] if w in text]
    assert not bad, bad
    raw = (smoke_book["run_dir"] / "notebooks" / "01_base_policy.ipynb").read_text()
    assert "it/s]" in raw, "the run's own notebooks keep their progress output"
    assert _digest(smoke_book["run_dir"] / "notebooks") == smoke_book["before"]


def test_no_directive_option_leaks_into_the_text(smoke_book):
    """A figure or table option (':width: 100%') never shows as text: a multi-line option value once broke the
    intro's figure directive and its caption began mid-sentence."""
    leaks = []
    for page in _pages(smoke_book["html"]):
        text = re.sub(r"<[^>]+>", " ", page.read_text())
        leaks += [f"{page.name}: {m.group(0).strip()}" for m in
                  re.finditer(r"(?m)^\s*:(width|alt|name|align|height|scale|class|figwidth|widths|header-rows):[^\n]*",
                              text)]
    assert not leaks, leaks


def test_the_reproduce_page_is_the_books_own(smoke_book):
    """book/reproduce.md is the command reference, no longer an include of the README."""
    page = (smoke_book["html"] / "reproduce.html").read_text()
    assert "_include/README" not in (smoke_book["out"] / "reproduce.md").read_text()
    assert "The paper profile on GPUs" in page and "check-gpu" in page and "paper-sas" in page


def test_mathjax_is_served_from_the_build(smoke_book):
    html = smoke_book["html"]
    assert (html / "_static" / "mathjax" / "tex-chtml.js").exists()
    with_math = []
    for page in _pages(html):  # Sphinx loads MathJax on the pages that hold math
        srcs = re.findall(r'<script[^>]*src="([^"]*mathjax[^"]*)"', page.read_text(), re.I)
        assert not any(re.match(r"(https?:)?//", s) for s in srcs), (page.name, srcs)
        assert not re.search(r"https?://[^\"' ]*mathjax", page.read_text(), re.I), page.name
        with_math += [page.name] if srcs else []
    assert "method.html" in with_math


def test_generated_pages_come_from_the_run(smoke_book):
    out = smoke_book["out"] / "executed"
    results, ledger = (out / "results.md").read_text(), (out / "claims.md").read_text()
    assert "profile `smoke`" in results and "Qwen3-8B on SAS-Bench and a private dataset" in results
    for n in ("Table 1", "Table 3", "Table 4", "Table 7", "Table 10", "Table 12", "Table 13", "Table 14"):
        assert f"## {n}:" in results, n
    assert all(f"## {c}: " in ledger for c in CLAIMS)
    repro = (out / "reproducibility.md").read_text()
    assert "transformers" in repro and "09_significance" in repro and "CPU count" in repro
    perf = (out / "performance.md").read_text()
    assert "## Wall time per stage" in perf and "## Measured on the reference machine (dated)" in perf  # its record
    assert not (out / "study.md").exists()  # the study chapter is in the demo's and the study's book only
    scale = (out / "scale.md").read_text()
    assert "## Data (Table 8)" in scale and "10,159 / 12" in scale  # the paper's Private-Biology train split
    smoke = json.loads((smoke_book["run_dir"] / "results" / "00_data.json").read_text())
    first = smoke["tables"]["table8"][0]  # the run's own sizes, read back from its 00 results
    assert f"| {first['dataset']} | {int(first['responses']):,} / {int(first['questions'])}" in scale
    assert "174,587,904" in scale  # Qwen3-8B's LoRA count, computed from the stored config


# ------------------------------------------------------------------ in a browser

CHECK = """<script>window.addEventListener('load', () => setTimeout(() => {
  const imgs = [...document.images], bad = imgs.filter(i => !(i.complete && i.naturalWidth > 0));
  document.body.setAttribute('data-img-check', imgs.length + ':' + bad.map(i => i.getAttribute('src')).join(','));
}, 500));</script>"""


def _chromium() -> str | None:
    return next((shutil.which(c) for c in CHROMIUMS if shutil.which(c)), None)


def _open(browser: str, page: Path) -> str:
    probe = page.with_name(page.stem + ".__check__.html")  # same folder: relative paths resolve as in the page
    probe.write_text(page.read_text().replace("</body>", CHECK + "</body>"))
    try:
        return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
                               "--virtual-time-budget=15000", "--dump-dom", probe.as_uri()],
                              capture_output=True, text=True, timeout=120).stdout
    finally:
        probe.unlink()


def test_chapters_render_in_a_browser(smoke_book):
    browser = _chromium()
    if browser is None:
        pytest.skip(f"no Chromium ({', '.join(CHROMIUMS)}) on PATH: install one (Debian: apt-get install chromium) "
                    f"to check that figures load and math renders")
    html = smoke_book["html"]
    pages = [html / f"{d}.html" for d in _chapters(smoke_book["out"])]
    with ThreadPoolExecutor(4) as pool:
        doms = dict(zip(pages, pool.map(lambda p: _open(browser, p), pages)))
    n_math = 0
    for page, dom in doms.items():
        m = re.search(r'data-img-check="(\d+):([^"]*)"', dom)
        assert m, f"{page.name}: the page did not finish loading"
        assert m.group(2) == "", f"{page.name}: images that did not load: {m.group(2)}"
        want = page.read_text().count('class="math notranslate')
        got = dom.count("<mjx-container")
        assert got >= want and "<mjx-merror" not in dom, f"{page.name}: {got} rendered of {want} math elements"
        n_math += got
    assert n_math > 0 and int(re.search(r'data-img-check="(\d+)', doms[html / "intro.html"]).group(1)) >= 1
