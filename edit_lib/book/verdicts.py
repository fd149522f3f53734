"""How the claims ledger judges (edit_lib/book/claims.py): the verdicts, the paper's datasets a run's stand for,
a verdict from an interval (never from a point estimate alone) with the MDE beside it, and Holm's level for
Table 3's family (App. G).
"""
from __future__ import annotations

from statsmodels.stats.proportion import confint_proportions_2indep

from edit_lib import paper_reference
from edit_lib.power import normal_mde, se_from_interval
from edit_lib.systems import PAPER_FAMILY

SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
PARTLY_RUN, NOT_RUN, NOT_MEANINGFUL = "partly run", "not run", "not meaningful on this data"
VERDICTS = (SUPPORTED, CONTRADICTED, INCONCLUSIVE, PARTLY_RUN, NOT_RUN, NOT_MEANINGFUL)
SCOPES = ("all held-out", "ood_test")  # 09's scope a claim on a dataset reads, in this order


def rows(results: dict, stage: str, table: str) -> list[dict] | None:
    """The rows of one results table, or None when the stage or the table is absent or empty."""
    return ((results.get(stage) or {}).get("tables") or {}).get(table) or None


def paper_datasets(results: dict) -> dict[str, str]:
    """Suite dataset -> the paper's dataset it stands for ('SAS', 'Private-Biology', ...), from 07's tables; a
    dataset 09 pooled from several ('a+b') maps where all its parts map to the same one."""
    out = {r["dataset"]: "SAS" for r in rows(results, "07_evaluation", "table1") or []}
    out.update({r["dataset"]: f"Private-{r['paper_subject']}" for r in rows(results, "07_evaluation", "table2") or []})
    return out


def _known(known: dict[str, str], d: str) -> str | None:
    parts = {known.get(x) for x in str(d).split("+")}
    return known.get(d) or (parts.pop() if len(parts) == 1 else None)


def dataset_parts(d: str) -> frozenset[str]:
    return frozenset(str(d).split("+"))


def sas_history(results: dict) -> set[str]:
    """The datasets standing for SAS-History (Tables 4, 6 and 12's SAS dataset): a SAS-like dataset whose only
    Table 1 subject is History, else the run's one SAS-like dataset."""
    t1 = [r for r in rows(results, "07_evaluation", "table1") or [] if "+" not in str(r["dataset"])]
    subjects = {r["dataset"]: set() for r in t1}
    for r in t1:
        subjects[r["dataset"]] |= {str(r.get("subject")).lower()} - {"avg"}
    return {d for d, s in subjects.items() if s == {"history"}} or (set(subjects) if len(subjects) == 1 else set())


def stands_for(results: dict, d: str) -> set[str]:
    """The paper's datasets ``d`` stands for: its :func:`paper_datasets` name, and 'SAS-History' where
    :func:`sas_history` says so."""
    known = paper_datasets(results)
    return ({_known(known, d)} - {None}) | ({"SAS-History"} if d in sas_history(results) else set())


def judged_datasets(results: dict, table: list[dict], paper: set[str]) -> tuple[list[str], list[str]]:
    """(the table's datasets standing for ``paper``'s, the ``paper`` datasets none of them stands for); without
    07's mapping every dataset of the table and nothing missing."""
    have = sorted({r["dataset"] for r in table})
    if not paper_datasets(results):
        return have, []
    names = {d: stands_for(results, d) & paper for d in have}
    mine = [d for d in have if names[d]]
    return mine, sorted(paper.difference(*names.values()))


def signed(x) -> str:
    return "n/a" if x is None else f"{x:+.3f}"


def combine(per: list[tuple[str, str, str]], missing: list[str] = ()) -> tuple[str, str]:
    """[(item, verdict, found)] -> one verdict: contradicted where any item is; partly run where the claim's
    ``missing`` datasets/systems or some items were not run; supported where every item is; else inconclusive;
    not run where no item ran."""
    found = "; ".join(f"`{d}`: {f}" for d, _, f in per) or "no dataset"
    if missing:
        found += f"; the run lacks {', '.join(missing)}"
    ran = [v for _, v, _ in per if v != NOT_RUN]
    v = (NOT_RUN if not ran else CONTRADICTED if CONTRADICTED in ran
         else PARTLY_RUN if missing or len(ran) < len(per) else SUPPORTED if all(v == SUPPORTED for v in ran)
         else INCONCLUSIVE)
    return v, found


# Magnitude verdicts: where a claim's sentence gives a number, that number against this run's interval of it
MAGNITUDES = ("the paper's value inside", "the interval below it", "the interval above it", "no interval")
INSIDE, BELOW, ABOVE, NO_INTERVAL = MAGNITUDES


def magnitude(lo: float | None, hi: float | None, paper_lo: float, paper_hi: float | None = None) -> str:
    """Where the paper's number (or range ``[paper_lo, paper_hi]``) lies against this run's interval ``[lo, hi]``:
    inside it (for a range: the two overlap), the interval wholly below it, or wholly above it."""
    paper_hi = paper_lo if paper_hi is None else paper_hi
    if lo is None or hi is None or lo != lo or hi != hi:
        return NO_INTERVAL
    return BELOW if hi < paper_lo else ABOVE if lo > paper_hi else INSIDE


def sized(what: str, lo, hi, paper: str, paper_lo: float, paper_hi: float | None = None,
          fmt: str = "+.3f") -> tuple[str, str]:
    """(magnitude verdict, text) of ``what``'s interval ``[lo, hi]`` against the paper's number ``paper`` (its
    value ``paper_lo``, or the range up to ``paper_hi``)."""
    v = magnitude(lo, hi, paper_lo, paper_hi)
    ival = "no interval" if v == NO_INTERVAL else f"[{format(lo, fmt)}, {format(hi, fmt)}]"
    return v, f"{v}: {what} {ival} against the paper's {paper}"


def combine_sizes(items: list[tuple[str, str, str]]) -> tuple[str, str]:
    """[(item, magnitude, text)] -> (one magnitude: the items' own where they agree, else 'mixed'; their texts);
    ('', '') for a claim whose sentence gives no number."""
    if not items:
        return "", ""
    seen = {v for _, v, _ in items}
    return (seen.pop() if len(seen) == 1 else "mixed"), "; ".join(f"`{d}`: {text}" for d, _, text in items)


def by_interval(lo: float | None, hi: float | None) -> str:
    """Claimed effect > 0: the interval above 0 supported, at or below 0 contradicted, else inconclusive."""
    return NOT_RUN if lo is None or hi is None else SUPPORTED if lo > 0 else CONTRADICTED if hi <= 0 \
        else INCONCLUSIVE


def paper_value(table: str, metric: str, system: str, dataset: str | None = None,
                subject: str | None = None) -> float | None:
    """The paper's value from ``paper_reference.csv`` (shown beside an MDE), or None."""
    t = paper_reference.table(table)
    t = t[(t["metric"] == metric) & (t["system"] == system) & ((t["dataset"] == dataset) if dataset else True)
          & ((t["subject"] == subject) if subject else True)]
    return float(t["value"].iloc[0]) if len(t) else None


def interval_text(what: str, est, lo, hi, mde=None, paper=None, v: str = INCONCLUSIVE, level: str = "") -> str:
    """``what est [lo, hi]``, the MDE (80% power; ``level``: the test level it is at, where not 5%) whenever it is
    known (an inconclusive verdict says 'n/a' where it is not) and the paper's effect: every verdict states what
    the run could have detected."""
    out = f"{what} {signed(est)} [{signed(lo)}, {signed(hi)}]"
    known = mde is not None and mde == mde
    if known or v == INCONCLUSIVE:
        out += f", MDE {f'{mde:.3f}' if known else 'n/a'} (80% power{', ' + level if level else ''})"
        out += f" vs the paper's {signed(paper)}" if paper is not None else ""
    return out


def proportions_verdict(d: str, what: str, a: tuple, b: tuple, paper: float | None = None) -> tuple[str, str, str]:
    """One dataset's verdict on a[0]/a[1] > b[0]/b[1] by Newcombe's 95% interval of the difference (MDE from
    the interval's normal-equivalent SE)."""
    diff, (lo, hi) = a[0] / a[1] - b[0] / b[1], confint_proportions_2indep(*a, *b, method="newcomb", compare="diff")
    v = by_interval(lo, hi)
    return d, v, interval_text(f"{what} {a[0]}/{a[1]} vs {b[0]}/{b[1]}:", diff, lo, hi,
                               normal_mde(se_from_interval(lo, hi)), paper, v)


def pairwise_row(res: dict, d: str, system: str, versus: str | None = None, kind: str = "pair",
              scopes: tuple[str, ...] = SCOPES) -> dict | None:
    """09's paired cluster-bootstrap comparison (``pairwise``) of ``system`` on dataset ``d`` (a pooled 'a+b' in
    any order; the first of ``scopes`` it has), against ``versus`` (or its runner-up)."""
    mine = [r for r in rows(res, "09_significance", "pairwise") or [] if dataset_parts(r["dataset"]) == dataset_parts(d)
            and r["system"] == system and r.get("kind") == kind and (versus is None or r["versus"] == versus)]
    return next((r for s in scopes for r in mine if r["scope"] == s), None)


def bootstrap_verdict(r: dict, what: str, paper: float | None = None, mde: float | None = None,
                  level: str = "") -> tuple[str, str]:
    """Verdict and text of one 09 comparison (``mde``: in place of the row's, at ``level``): too few questions is
    inconclusive whatever the interval."""
    v = by_interval(r.get("delta_ci_low"), r.get("delta_ci_high"))
    if r.get("few_questions") and v != NOT_RUN:
        v = INCONCLUSIVE
    text = interval_text(what, r.get("delta"), r.get("delta_ci_low"), r.get("delta_ci_high"),
                         r.get("mde") if mde is None else mde, paper, v, level)
    return v, text + (f" ({r['scope']}, {r.get('n_paired', 0):.0f} q.{', too few questions' if r.get('few_questions') else ''})")


def _p(r: dict) -> float:
    return 1.0 if r.get("p") is None or r["p"] != r["p"] else float(r["p"])  # a missing p counts as 1 (09)


def holm_level(r: dict, t: list[dict], alpha: float) -> tuple[float, int, int]:
    """(Holm's threshold alpha / (m - rank + 1) at ``r``'s rank, rank, m) in its scope's family of the paper's
    comparisons against Base (App. G: m = 6; a member the scope lacks counts as p = 1; ties take the best rank,
    as Holm's adjusted p does)."""
    m = len(PAPER_FAMILY)
    fam = [x for x in t if (x["dataset"], x["scope"]) == (r["dataset"], r["scope"]) and x["system"] in PAPER_FAMILY]
    rank = 1 + sum(_p(x) < _p(r) for x in fam)
    return alpha / (m - rank + 1), rank, m


def holm_mde(r: dict, t: list[dict], alpha: float) -> tuple[float, str]:
    """The MDE (80% power) of a Holm-judged comparison at its Holm threshold (:func:`holm_level`), from its
    bootstrap SE (App. G), and the level in words."""
    a, rank, m = holm_level(r, t, alpha)
    return normal_mde(r.get("delta_se"), alpha=a), f"at Holm's threshold {alpha:g}/{m - rank + 1} = {a:.4g}"


def pooled(res: dict, t: list[dict], paper: str = "SAS") -> tuple[str | None, list[str], list[str]]:
    """(the dataset of 09's table pooling every dataset standing for ``paper``, the others of them, missing):
    App. G pools SAS's 37 held-out questions; one SAS-like dataset is its own pool; None where no row pools all."""
    mine, missing = judged_datasets(res, t, {paper})
    every = frozenset().union(*map(dataset_parts, mine))
    pool = next((d for d in mine if dataset_parts(d) == every), None)
    return pool, [d for d in mine if d != pool], missing


def significance_row(t: list[dict], d: str, system: str) -> dict:
    mine = [r for r in t if r["dataset"] == d and r["system"] == system]
    return next((r for s in SCOPES for r in mine if r["scope"] == s), {})
