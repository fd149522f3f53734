"""Build the Jupyter Book (1.x, offline) from one run: its executed notebooks and results JSON.

The book's sources (``book/``) are copied into a build folder (``--out``, default ``<run root>/<profile>/book``)
with cleaned copies of the executed notebooks, a status page and the pages ``book_pages`` and
``performance_page`` write from the results JSON (results beside the paper, the claims ledger, reproducibility,
performance with the ``--time-split`` breakdown; a comparison page per ``<run>/compare/*.json`` that ``edit-suite
compare A B --book`` kept, ``conclusions.compare_page``; the study chapter in the demo's and the study's part,
``scale.study_page``), each ending with its dated records (``records_for``); the intro gets the pipeline figure
(``draw_pipeline``: stages 00-09 on EDIT's two phases, the paper's Fig. 2 in words) and a list of the runs. It is
built there with Sphinx warnings as errors; nothing is written into the repository or a run folder. MathJax is
served from the build (``sphinx-mathjax-offline``), so math renders offline.

Cleaning (copies only): progress-bar noise (tqdm bars, ``Loading weights`` bars, tqdm's IProgress warning) is
dropped from stream outputs, every other output is kept, and the absolute run root is written ``runs``.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml

from edit_lib.artifacts import RunPaths
from edit_lib.book import conclusions as book_compare, headline as book_headline, pages as book_pages
from edit_lib.book import real_model as book_real, scale as book_scale
from edit_lib.book.pages import label, render, stage_table
from edit_lib.book.variants_page import sweeps_of, variants_page
from edit_lib.config import load_profile
from edit_lib.runner.keys import STAGES
from edit_lib.runner.run import mismatched_upstream
from edit_lib.runner.time_split import breakdown
from edit_lib.runner.variants import main_root, paths_for, variants_of
from edit_lib.tools.bench import SPLIT_COLUMNS, SPLIT_LEGEND


BOOK_DIR = Path(__file__).resolve().parents[2] / "book"
REPO_DIR = BOOK_DIR.parent
_GENERATED = ("_build", "executed", "_include", "figures")  # what a build folder holds besides copies of book/
_INCLUDED = ("data_cards",)  # repository files the book's pages include (copied into _include/)
RELATIVE_ROOT = "runs"  # how a page writes the run root


#: Model names that are the suite's own graders (every other policy is a pretrained model: book_real's chapter).
EMBEDDED_MODELS = ("embedded", "micro")
STUDY_BOOKS = ("demo", "study")  # runs whose book holds the study chapter


def _status_lines(paths: RunPaths, stage: str, mismatched: dict[str, list[str]]) -> list[str]:
    """What a reader must know about one stage's results: stale reuse, results computed from other upstream
    results than those shown, warnings, skipped records."""
    f = paths.results_file(stage)
    if not f.exists():
        return []
    res = json.loads(f.read_text())
    lines = [f"  * key `{res.get('key')}`, {res.get('seconds', 0)} s"]
    if stage in mismatched:
        lines.append(f"  * **INCONSISTENT**: computed from other results of {', '.join(mismatched[stage])} than "
                     f"the ones shown here; run `edit-suite run --only {stage}` again")
    if res.get("reused_stale"):
        mods = ", ".join(f"`{m}`" for m in res.get("stale_modules", [])) or "none of its own"
        ups = ", ".join(res.get("stale_upstream", []))
        lines.append(f"  * **STALE: reused with `--reuse-stale`**: computed before these library files changed: {mods}"
                     + (f"; upstream reused stale: {ups}" if ups else ""))
    lines += [f"  * **WARNING**: {w}" for w in res.get("warnings", [])]
    for s in res.get("skipped", []):
        if s.get("n_skipped"):
            lines.append(f"  * **{s['n_skipped']} of {s['n_records']} records of `{s['dataset']}` skipped**: "
                         + ", ".join(f"{r} ({n})" for r, n in s.get("by_reason", {}).items()))
    return lines


# ------------------------------------------------------------------ cleaning the notebook copies

def _noise(line: str) -> bool:
    """A tqdm progress bar (``12%|#  | 3/24 [00:01<00:09, 2.1it/s]``) or a ``Loading weights`` bar."""
    bar = "%|" in line and re.search(r"(/s|s/[a-z]+)[\],]", line) is not None  # it/s, s/it, unit/s, s/unit
    return bar or (line.lstrip().startswith("Loading weights") and "%|" in line)


def clean_stream(text: str) -> str:
    """A stream output as a reader wants it: each line as a terminal would leave it after its carriage
    returns, progress bars and tqdm's IProgress warning (which names a local path) dropped."""
    out, skip_next = [], False
    for line in text.split("\n"):
        line = line.rsplit("\r", 1)[-1]
        if skip_next and line.lstrip().startswith("from .autonotebook"):
            skip_next = False
            continue
        skip_next = "TqdmWarning" in line
        if not skip_next and not _noise(line):
            out.append(line)
    return "\n".join(out)


def clean_notebook(nb: dict, run_roots: list[str], label: str | None = None) -> dict:
    """A cleaned copy of an executed notebook (``nb`` is not modified): progress noise dropped from stream
    outputs (an output left blank is removed), every occurrence of a run root written ``runs``, and an
    optional markdown ``label`` placed under the notebook's title."""
    text = json.dumps(nb)
    for root in sorted({r for r in run_roots if r and Path(r).is_absolute()}, key=len, reverse=True):
        esc = json.dumps(root.rstrip("/"))[1:-1]
        text = re.sub(re.escape(esc) + r"(?=/|\\|\"|'|\s|<|$)", RELATIVE_ROOT, text)
    nb = json.loads(text)
    for cell in nb.get("cells", []):
        outs = []
        for o in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            if o.get("output_type") == "stream":
                o["text"] = clean_stream("".join(o["text"]) if isinstance(o["text"], list) else o["text"])
                if not o["text"].strip():
                    continue
            outs.append(o)
        if cell.get("cell_type") == "code":
            cell["outputs"] = outs
    if label:
        cells = nb.setdefault("cells", [])
        first = cells[0] if cells else {}
        titled = first.get("cell_type") == "markdown" and "".join(first.get("source", "")).lstrip().startswith("# ")
        cells.insert(1 if titled else 0, {"cell_type": "markdown", "id": "edit-suite-run-label", "metadata": {},
                                          "source": label})
    return nb


# ------------------------------------------------------------------ the pipeline figure (intro)

def draw_pipeline(path: Path) -> Path:
    """The suite's stages on EDIT's two phases (the paper's Fig. 2 in words), as a PNG."""
    from matplotlib.figure import Figure  # no pyplot: leaves the caller's backend alone
    from matplotlib.patches import FancyBboxPatch

    fig = Figure(figsize=(13, 5.2))
    ax = fig.subplots()
    ax.set(xlim=(0, 13), ylim=(0, 5.2))
    ax.axis("off")
    for x, y, w, h, c, t in ((2.35, 2.55, 10.5, 2.35, "#e8f0fb", "Phase 1: EDIT-SFT (Sec. 2.2, Alg. 1)"),
                             (6.9, 0.2, 5.95, 2.0, "#fbefe6", "Phase 2: EDIT-RL (Sec. 2.3)")):
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02", fc=c, ec="#999", lw=0.8))
        ax.text(x + 0.1, y + h - 0.22, t, fontsize=10, weight="bold", va="top")
    boxes = {  # key: (x, y, text)
        "00": (1.0, 3.75, "00 data\n(App. A, Table 8)"), "01": (1.0, 2.0, "01 Base policy\n+ rollouts"),
        "p": (3.3, 3.45, "probe + audit\n02, 03\n(Eq. 1-4)"), "s": (5.4, 3.45, "candidate\nselection\n04 (Alg. 1)"),
        "r": (7.5, 3.45, "atomic revision,\nrubric checklist\n04"),
        "f": (9.6, 3.45, "outcome filter\n(N continuations)\n04"), "sft": (11.8, 3.45, "SFT pool\n-> LoRA SFT\n05"),
        "rl": (10.6, 1.05, "belief-shaped GRPO\n(frozen EDIT-SFT probe)\n06, Eq. 5-7"),
        "07": (5.6, 1.05, "07 evaluation\n(Tables 1, 2, 4-6, 13)"), "08": (2.6, 1.6, "08 rubric edits\n(Tables 7, 14)"),
        "09": (2.6, 0.5, "09 significance\n(Table 3)")}
    texts = {k: ax.text(x, y, t, ha="center", va="center", fontsize=8.5,
                        bbox=dict(boxstyle="round,pad=0.4", fc="white", ec="#335", lw=1))
             for k, (x, y, t) in boxes.items()}
    for a, b in (("00", "01"), ("01", "p"), ("p", "s"), ("s", "r"), ("r", "f"), ("f", "sft"), ("sft", "rl"),
                 ("rl", "07"), ("07", "08"), ("07", "09")):
        ax.annotate("", boxes[b][:2], boxes[a][:2], arrowprops=dict(
            arrowstyle="-|>", color="#335", lw=1.2, patchA=texts[a].get_bbox_patch(),
            patchB=texts[b].get_bbox_patch(), shrinkA=2, shrinkB=2))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130, bbox_inches="tight")
    return path


# ------------------------------------------------------------------ staging

def _copy_sources(dest: Path) -> None:
    if dest.resolve() == BOOK_DIR.resolve() or BOOK_DIR.resolve() in dest.resolve().parents:
        raise FileNotFoundError(f"--out {dest} is the book's source folder; choose a folder outside it")
    if dest.exists() and any(dest.iterdir()) and not (dest / "_toc.yml").exists():
        raise FileNotFoundError(f"--out {dest} exists and is not a book build folder; choose a new folder")
    for gen in _GENERATED:
        shutil.rmtree(dest / gen, ignore_errors=True)
    for item in BOOK_DIR.iterdir():
        if item.name in _GENERATED:
            continue
        target = dest / item.name
        if item.is_dir():
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(item, target)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(item, target)
    for name in _INCLUDED:
        src, target = REPO_DIR / name, dest / "_include" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src, target) if src.is_dir() else shutil.copy2(src, target)


def _results(paths: RunPaths) -> dict:
    return {s: json.loads(paths.results_file(s).read_text()) for s in STAGES if paths.results_file(s).exists()}


def _stage_run(dest: Path, folder: str, profile: str, run_root: str | None, variant: str | None = None) -> dict:
    """One run's chapters in ``dest/folder`` (a ``variant`` of the profile's run: that one's); returns its toc part.
    Each page ends with its dated records (``records_for``); the demo's and the study's part get the study chapter
    (``scale.study_page``); a main run with variants gets the Variants page (``variants_page``)."""
    prof = load_profile(profile)
    name = prof.name
    paths = paths_for(name, run_root, variant)
    nbs = sorted(p for p in paths.notebooks.glob("*.ipynb") if p.stem in STAGES)
    results = _results(paths)
    out = dest / folder
    out.mkdir(parents=True)
    roots = [str(main_root(paths).parent), str(main_root(paths).parent.resolve())]
    tag = book_pages.label(name, results)
    shown = f"{name}, variant {variant}" if variant else name
    for nb in nbs:
        cleaned = clean_notebook(json.loads(nb.read_text()), roots, tag)
        (out / nb.name).write_text(json.dumps(cleaned, indent=1))
    rel = f"{RELATIVE_ROOT}/{name}" + (f"/variants/{variant}" if variant else "")
    lines = [f"# Executed notebooks (run `{shown}`)", "", tag, "",
             f"These notebooks were executed by papermill with the `{shown}` profile; their numbers are in "
             f"`{rel}/results/` (paths on these pages are relative to the run root, written `{RELATIVE_ROOT}/`; "
             f"progress bars are left out of the outputs).", ""]
    mismatched = mismatched_upstream(paths)
    for nb in nbs:
        lines += [f"* `{nb.stem}` — {STAGES[nb.stem].title}", *_status_lines(paths, nb.stem, mismatched)]
    if paths.skipped_records.exists():
        lines += ["", f"Every skipped record is listed in `{rel}/{paths.skipped_records.name}`."]
    if paths.figures.exists():
        lines += ["", f"Figures are also saved as PNG files in `{rel}/figures/`."]
    (out / "index.md").write_text("\n".join(lines) + "\n")
    headline = book_headline.headline_rows(results)
    figure = book_headline.draw(headline, out / "headline.png")
    pages = {"results": book_pages.results_page(name, results, headline, figure and figure.name),
             "claims": book_pages.claims_page(name, results),
             "reproducibility": book_pages.reproducibility_page(name, results, prof),
             "performance": performance_page(name, results, paths.root.parent / "bench",
                                                              breakdown(paths.root, results)),
             "scale": book_scale.scale_page(name, results, prof)}
    chapters = [{"file": f"{folder}/results"}, {"file": f"{folder}/scale"}, {"file": f"{folder}/claims"}]
    if prof.model.name_or_path not in EMBEDDED_MODELS:  # a pretrained model: its own chapter, beside the demo run
        demo_results = _results(RunPaths.for_profile("demo", run_root))
        pages["real_model"] = book_real.real_model_page(name, results, prof,
                                                        ("demo", demo_results) if demo_results else None)
        chapters.insert(0, {"file": f"{folder}/real_model"})
    if name in STUDY_BOOKS:  # the demo sized for power, from the study run of this run root when it has one
        study = results if name == "study" else _results(RunPaths.for_profile("study", run_root))
        pages["study"] = book_scale.study_page(load_profile("demo"), load_profile("study"), study,
                                               f"{RELATIVE_ROOT}/study/results/")
        chapters.append({"file": f"{folder}/study"})
    if variant is None and (variants_of(paths.root) or sweeps_of(paths.root)  # runs beside this one
                            or records_for("variants", name)):
        pages["variants"] = variants_page(paths.root, out)
        chapters.append({"file": f"{folder}/variants"})
    for page, text in book_compare.compare_pages(paths.root).items():  # kept by `edit-suite compare A B --book`
        pages[page] = text
        chapters.append({"file": f"{folder}/{page}"})
    for page, text in pages.items():
        text = "\n".join([text.rstrip("\n"), *records_for(page, name)])
        for root in sorted(set(roots), key=len, reverse=True):
            text = text.replace(root, RELATIVE_ROOT)
        (out / f"{page}.md").write_text(text + "\n")
    return {"caption": f"Run: {shown}", "chapters": [
        *chapters, {"file": f"{folder}/index", "sections": [{"glob": f"{folder}/[0-9]*"}]},
        {"file": f"{folder}/reproducibility"}, {"file": f"{folder}/performance"}]}


def stage_executed_notebooks(profile: str, run_root: str | None = None, out: str | Path | None = None,
                             variant: str | None = None) -> Path:
    """Copy the book sources into the build folder with cleaned copies of ``<run root>/<profile>/notebooks/*.ipynb``
    and the run's generated pages, in ``executed/``. Returns the build folder."""
    name = load_profile(profile).name
    paths = paths_for(name, run_root, variant)
    dest = Path(out) if out is not None else paths.root / "book"
    if not any(p.stem in STAGES for p in paths.notebooks.glob("*.ipynb")):
        raise FileNotFoundError(f"no executed notebooks in {paths.notebooks}: "
                                f"run `edit-suite run --profile {profile}` first")
    _copy_sources(dest)
    toc = yaml.safe_load((BOOK_DIR / "_toc.yml").read_text())
    toc.setdefault("parts", []).append(_stage_run(dest, "executed", profile, run_root, variant))
    intro = ["", "## The runs in this book", "",
             f"* **Run `{name}`**: {{doc}}`executed/results`, {{doc}}`executed/claims`, "
             f"{{doc}}`executed/index`, {{doc}}`executed/reproducibility`, {{doc}}`executed/performance`."]
    (dest / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False))
    draw_pipeline(dest / "figures" / "pipeline.png")
    with open(dest / "intro.md", "a") as f:
        f.write("\n".join(intro) + "\n")
    return dest


def build_book(profile: str, run_root: str | None = None, out: str | Path | None = None,
               variant: str | None = None) -> Path:
    """Render ``<out>/_build/html`` with jupyter-book 1.x, Sphinx warnings as errors; never re-executes a
    notebook. Returns index.html. ``variant``: the book of that variant of the profile's run."""
    dest = stage_executed_notebooks(profile, run_root, out, variant)
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", str(dest), "--warningiserror", "--keep-going"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"jupyter-book build failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                           f"{proc.stderr[-3000:]}")
    index = dest / "_build" / "html" / "index.html"
    if not index.exists():
        raise RuntimeError(f"jupyter-book finished but {index} is missing:\n{proc.stdout[-2000:]}")
    return index


# ------------------------------------------------------------------ dated records (``book/records/``)
# Page ``P`` of run ``N`` ends with ``records/P.md`` and ``records/P-N.md`` where they exist (``performance.md`` on
# every run's performance page, ``results-demo.md`` on the demo's results page, ``real_model-cpu-real.md`` in the
# cpu-real chapter, ``study.md`` in the study chapter): what only a measured run can say, each block headed by its
# date and commit, so a page never passes them off as its own run's numbers. The folder is not in the book's table
# of contents (``only_build_toc_files``): its files are read here, not built as pages.

RECORDS_DIR = Path(__file__).resolve().parents[2] / "book" / "records"


def records_for(page: str, run: str, folder: Path = RECORDS_DIR) -> list[str]:
    """The lines of ``<folder>/<page>.md`` then ``<folder>/<page>-<run>.md`` (those that exist), each after a blank
    line; [] when neither does."""
    out = []
    for f in (folder / f"{page}.md", folder / f"{page}-{run}.md"):
        if f.is_file():
            out += ["", *f.read_text(encoding="utf-8").rstrip("\n").split("\n")]
    return out


# ------------------------------------------------------------------ the performance page of one run
# Wall time per stage, where it goes (forward passes, generation, training, the rest) for the stages run with
# ``edit-suite run --time-split``, and the ``edit-suite bench`` results next to the run.


def _flat(d: dict, prefix: str = "") -> list[dict]:
    out = []
    for k, v in d.items():
        if isinstance(v, dict):
            out += _flat(v, f"{prefix}{k}.")
        elif isinstance(v, list) and v and all(isinstance(x, (int, float)) for x in v):
            out.append({"field": prefix + k, "value": f"{len(v)} values, median {pd.Series(v).median():.3g}"})
        elif not isinstance(v, list):
            out.append({"field": prefix + k, "value": v})
    return out


def split_table(split: dict[str, dict]) -> pd.DataFrame:
    """Where each timed stage's seconds went (``runner.time_split.breakdown``: {stage: its timing}), in seconds
    and as a share of the stage's wall time; empty when no stage of the run was timed."""
    rows = []
    for stage, t in split.items():
        wall = t["wall_seconds"]
        rows.append(dict(stage=stage, seconds=f"{wall:.1f}", **{c: f"{t[f]:.1f}" for c, f in SPLIT_COLUMNS.items()},
                         **{f"{c} %": f"{100 * t[f] / max(wall, 1e-9):.1f}"
                            for c, f in list(SPLIT_COLUMNS.items())[:4]}))
    return pd.DataFrame(rows)


def performance_page(name: str, results: dict, bench_dir: Path, split: dict[str, dict]) -> str:
    """The page (``templates/performance.md.j2``): ``results`` ({stage: results JSON}), ``split``
    (``split_table``), ``bench_dir``'s JSON files."""
    st = stage_table(results)
    if len(st):
        st = st.assign(minutes=st.seconds / 60, percent=(100 * st.seconds / max(st.seconds.sum(), 1e-9)).round(1))
        st = st[["stage", "seconds", "minutes", "percent"]]
    benches = [dict(name=f.stem, table=pd.DataFrame(_flat(json.loads(f.read_text()))))
               for f in (sorted(bench_dir.glob("*.json")) if bench_dir.is_dir() else [])]
    return render("performance", name=name, label=label(name, results), stages=st,
                  total=float(st.seconds.sum()) if len(st) else 0.0, split=split_table(split),
                  split_legend=SPLIT_LEGEND, benches=benches, bench_dir=bench_dir.name)
