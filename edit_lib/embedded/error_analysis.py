"""App. H error analysis on the synthetic world: is a wrong mark a synthesis error or an evidence error?

The paper reads prediction disagreements between two systems and finds that most are "final score-band or
credit-synthesis errors rather than missed evidence or rubric mapping". The synthetic world has the ground
truth that reading needs: the coverage of every marking point. A wrong greedy completion is classified from
its own grounding steps ("point i ... ; answer ... ; verdict ; credit c", the teacher's grammar,
``teacher._judge``):

* ``evidence``: some point's written credit differs from its true credit (the point's value, or 1 under LoR,
  when covered; 0 otherwise), or a point is judged twice or not at all: missed evidence or rubric mapping;
* ``synthesis``: every point is judged once with its true credit and the mark is still wrong: the error is in
  adding credits, the cap, rounding or the band (final score-band or credit synthesis);
* ``unreadable``: no grounding step parses (counted, never guessed).

Real data has no coverage, so this analysis is the synthetic world's only (07 says so on other data).
"""
from __future__ import annotations

import re
from collections import Counter

import pandas as pd

from edit_lib.data.schema import Dataset, LevelScheme, Question, Response
from edit_lib.embedded.behaviour import _num
from edit_lib.embedded.tokenizer import canonicalize
from edit_lib.systems import BASE, BASE_GRPO, EDIT_RL, EDIT_SFT, INT_SFT

ERROR_KINDS = ("synthesis", "evidence", "unreadable")
_POINT = re.compile(r"^point (\d+)\b.*; credit ([0-9][0-9 .]*)$")


def written_credits(steps) -> list[tuple[int, float]] | None:
    """(point index, credit) of every grounding step that parses; None when none does."""
    out = []
    for s in steps:
        m = _POINT.match(canonicalize(str(s)).strip().lower())
        if m:
            c = _num(m.group(2))
            if c is not None:
                out.append((int(m.group(1)), c))
    return out or None


def error_kind(q: Question, r: Response, steps, mark) -> str | None:
    """The App. H kind of one graded response (``ERROR_KINDS``), None when its mark is right. A failed parse
    (``mark`` missing) is classified like any wrong mark."""
    if mark is not None and not pd.isna(mark) and int(mark) == r.gold:
        return None
    written = written_credits(steps)
    if written is None:
        return "unreadable"
    lor = isinstance(q.scheme, LevelScheme)
    cov = {c.point_id: c.covered for c in r.coverage}
    truth = {i + 1: ((1.0 if lor else p.value) if cov.get(p.id) else 0.0) for i, p in enumerate(q.scheme.points)}
    counts = Counter(i for i, _ in written)
    if set(counts) != set(truth) or any(n != 1 for n in counts.values()):
        return "evidence"
    if any(abs(c - truth[i]) > 1e-9 for i, c in written):
        return "evidence"
    return "synthesis"


def classify(preds: pd.DataFrame, datasets: dict[str, Dataset]) -> pd.DataFrame:
    """``preds`` (07's predictions: system, seed, dataset, response_id, steps, mark) with an ``error_kind``
    column (None where the mark is right). Responses without coverage get None and ``has_coverage`` False."""
    kinds, has_cov = [], []
    index = {name: {r.id: r for r in ds.responses} for name, ds in datasets.items()}
    for row in preds.itertuples():
        r = index[row.dataset].get(row.response_id)
        if r is None or not r.coverage:
            kinds.append(None)
            has_cov.append(False)
            continue
        has_cov.append(True)
        kinds.append(error_kind(datasets[row.dataset].question(r), r, row.steps, row.mark))
    return preds.assign(error_kind=kinds, has_coverage=has_cov)


def error_kind_shares(classified: pd.DataFrame, by=("system", "dataset")) -> pd.DataFrame:
    """Per group: wrong predictions and the share of each kind among them (App. H)."""
    wrong = classified[classified["error_kind"].notna()]
    rows = []
    for key, g in wrong.groupby(list(by), sort=True):
        c = Counter(g["error_kind"])
        rows.append(dict(zip(by, key if isinstance(key, tuple) else (key,)), wrong=len(g),
                         **{f"{k}_share": c.get(k, 0) / len(g) for k in ERROR_KINDS}))
    return pd.DataFrame(rows)


def disagreements(classified: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """App. H: per dataset, the responses on which systems ``a`` and ``b`` give different marks, and the kinds
    of the wrong marks among them (both can be wrong; each wrong mark counts once)."""
    cols = ["dataset", "response_id"]
    both = classified[classified["system"] == a].merge(classified[classified["system"] == b], on=cols,
                                                       suffixes=("_a", "_b"))
    both = both[both["has_coverage_a"]]
    differ = both[both["mark_a"].astype("Float64").fillna(-1) != both["mark_b"].astype("Float64").fillna(-1)]
    rows = []
    for ds, g in differ.groupby("dataset", sort=True):
        kinds = Counter(k for col in ("error_kind_a", "error_kind_b") for k in g[col] if pd.notna(k))
        n = sum(kinds.values())
        rows.append(dict(pair=f"{a} vs {b}", dataset=ds, disagreements=len(g), wrong_marks=n,
                         **{f"{k}_share": (kinds.get(k, 0) / n if n else float("nan")) for k in ERROR_KINDS}))
    return pd.DataFrame(rows)


#: The pairs of systems whose disagreements App. H reads (EDIT-SFT against InT-SFT and Base; EDIT-RL's full
#: recipe against GRPO from Base).
PAIRS = ((EDIT_SFT, INT_SFT), (EDIT_SFT, BASE), (EDIT_RL, BASE_GRPO))


def app_h_tables(preds: pd.DataFrame, datasets: dict[str, Dataset], pairs=PAIRS) -> dict[str, pd.DataFrame]:
    """App. H's two tables from one seed's greedy predictions: the share of each error kind among wrong marks
    per system and dataset (``apph_error_kinds``) and the kinds among the disagreements of ``pairs``
    (``apph_disagreements``); both empty when no response has per-point coverage."""
    classified = classify(preds, datasets)
    if not classified["has_coverage"].any():
        return dict(apph_error_kinds=pd.DataFrame(), apph_disagreements=pd.DataFrame())
    dis = [disagreements(classified, a, b) for a, b in pairs]
    return dict(apph_error_kinds=error_kind_shares(classified),
                apph_disagreements=pd.concat(dis, ignore_index=True) if dis else pd.DataFrame())
