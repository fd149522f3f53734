"""The claims ledger's rules (edit_lib/book/claims.py): one check per claim, ``(results, the table's rows) ->
(verdict, found)`` (and, where the sentence gives a number, its magnitude verdict), each judging exactly the scope
and quantity its claim's sentence states (``stands_for``) and deciding by an interval; and how they judge: the
verdicts, the paper's datasets a run's stand for, a verdict from an interval (never from a point estimate alone)
with the MDE beside it, and Holm's level for Table 3's family (App. G). Longer than 400 lines because every claim's
rule is here, beside the helpers they share (runner-up, Holm's level, magnitudes): one reading of the paper's
sentences, not one file per sentence.
"""
from __future__ import annotations

from typing import Callable

from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from edit_lib import paper_reference
from edit_lib.power import normal_mde, se_from_interval, seed_mde, seed_mde_multiple
from edit_lib.systems import EDIT_RL, EDIT_SFT, EDIT_SFT_GRPO, INT_SFT, MAIN, PAPER_FAMILY


# ---------------------------------------------------------------- how a claim is judged

SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
PARTLY_RUN, NOT_RUN, NOT_MEANINGFUL = "partly run", "not run", "not meaningful on this data"
VERDICTS = (SUPPORTED, CONTRADICTED, INCONCLUSIVE, PARTLY_RUN, NOT_RUN, NOT_MEANINGFUL)
SCOPES = ("all held-out", "ood_test")  # 09's scope a claim on a dataset reads, in this order


def first_in_scopes(rows: list[dict], scopes: tuple[str, ...] = SCOPES, default: dict | None = None) -> dict | None:
    """The first of ``rows`` whose scope is the first of ``scopes`` that any of them has, else ``default``."""
    return next((r for s in scopes for r in rows if r["scope"] == s), default)


def rows(results: dict, stage: str, table: str) -> list[dict] | None:
    """The rows of one results table, or None when the stage or the table is absent or empty."""
    return ((results.get(stage) or {}).get("tables") or {}).get(table) or None


def extra(results: dict, stage: str, key: str, default=None):
    """A value the stage's notebook kept beside its tables (``ctx.extra``), ``default`` when either is absent."""
    return ((results.get(stage) or {}).get("extra") or {}).get(key, default)


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
    return first_in_scopes(mine, scopes)


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
    return first_in_scopes([r for r in t if r["dataset"] == d and r["system"] == system], default={})


# ---------------------------------------------------------------- the rules

SYSTEM_COLUMNS = MAIN  # the main tables' columns (Tables 1-2), as 07 records them
SAS_METRICS = ("acc", "within1", "qwk", "mae")


def table3(system: str):
    """Table 3 (App. G): ``system`` against Base on the pooled held-out SAS questions only; each subject's own
    row is shown, not judged (App. H draws no conclusion from per-subject splits)."""
    def check(res, t):
        alpha = 1 - float(extra(res, "09_significance", "ci", 0.95))
        d, subjects, missing = pooled(res, t)
        r = significance_row(t, d, system) if d else {}
        if d is None:  # no SAS-like dataset, or no scope pooling them all
            per = [("SAS", NOT_RUN, "no 09 scope pools every SAS-like dataset")] if subjects else []
        elif r.get("delta") is None or r.get("status") == NOT_RUN:
            per = [(d, NOT_RUN, "not graded")]
        else:
            mde, level = holm_mde(r, t, alpha)
            v, text = bootstrap_verdict(r, "Δ vs Base", paper_value("Table 3", "delta_vs_base", system), mde, level)
            if v == SUPPORTED and not (r.get("p_holm") is not None and r["p_holm"] < alpha):
                v = INCONCLUSIVE  # the interval excludes 0, the Holm-corrected test (m = 6) does not
            p = r.get("p_shown") or ("n/a" if r.get("p_holm") is None else f"{r['p_holm']:.3g}")
            per = [(d, v, f"{text}, Holm p {p}")]
        v, found = combine(per, missing)
        shown = [(s, significance_row(t, s, system)) for s in subjects]
        shown = [f"`{s}` {signed(r.get('delta'))} [{signed(r.get('delta_ci_low'))}, {signed(r.get('delta_ci_high'))}]"
                 for s, r in shown if r.get("delta") is not None]
        return (v, found + (f"; per subject, shown, not judged: {', '.join(shown)}" if shown else ""),
                combine_sizes([_gain_ratio(res, d, r.get("scope"), system)] if d and r else []))
    return check


def _gain_ratio(res: dict, d: str, scope: str | None, system: str) -> tuple[str, str, str]:
    """Sec. 3.2's "two to three times larger" on Table 3: 09's ratio of ``system``'s gain over Base to the mean gain
    of GRPO and InT-SFT (``gain_ratio``), its interval against the paper's range."""
    r = next((r for r in rows(res, "09_significance", "gain_ratio") or [] if r["dataset"] == d
              and r.get("scope") == scope and r["system"] == system), None)
    paper = "two to three times", paper_value("Sec. 3.2", "gain_ratio_low", ""), paper_value("Sec. 3.2",
                                                                                              "gain_ratio_high", "")
    what = "the ratio of its gain to the mean gain of GRPO and InT-SFT (09 `gain_ratio`)"
    if r is None:
        return d, NO_INTERVAL, f"{NO_INTERVAL}: no `gain_ratio` row (GRPO or InT-SFT not graded)"
    if not r["defined"]:
        return d, NO_INTERVAL, (f"{NO_INTERVAL}: {what} is {r['ratio']:.2f}, but the baselines' mean gain "
                                f"[{signed(r['denominator_ci_low'])}, {signed(r['denominator_ci_high'])}] reaches 0")
    v, text = sized(f"{what} {r['ratio']:.2f}", r["ratio_ci_low"], r["ratio_ci_high"], paper[0], *paper[1:],
                    fmt=".2f")
    return d, v, text


def seeds_to_see(effect: float | None, sd: float | None, n: int) -> str:
    """What Table 4 would need to detect ``effect`` at 80% power (paired t over seeds, ``power.seed_mde``): the
    seed-difference SD at this run's ``n`` seeds, and the seeds at this run's ``sd`` (searched up to 30)."""
    if not effect or sd is None or sd != sd or n < 2:
        return ""
    need_n = next((k for k in range(2, 31) if seed_mde(sd, k) <= abs(effect)), None)
    return (f"; to see the paper's {effect:+.3f} at 80% power the seed-to-seed SD of the difference would have to "
            f"be at most {abs(effect) / seed_mde_multiple(n):.4f} with {n} seeds (it is {sd:.4f}), or this SD would "
            f"need {need_n if need_n else 'more than 30'} seeds")


def _wins(r: dict) -> str:
    """Table 4's "all three paired runs": every seed a win (at least three seeds), a count of this run's seeds."""
    wins, n = int(r["wins"]), int(r["n_seeds"])
    return CONTRADICTED if wins < n else SUPPORTED if n >= 3 else INCONCLUSIVE


def _seed_ci(res: dict, r: dict, v: str) -> str:
    """Table 4's paired Δ over seeds: t-interval, MDE by noncentral t, the paper's Δ and what would detect it."""
    paper_ds = next(iter(sorted(stands_for(res, r["dataset"]) & {"SAS-History", "Private-Biology"})), None)
    paper = paper_value("Table 4", "delta", EDIT_RL, paper_ds) if paper_ds else None
    return (interval_text("Δ", r["delta"], r.get("delta_ci_low"), r.get("delta_ci_high"), r.get("mde"), paper, v)
            + f" over {r['n_seeds']} seeds (t-interval; MDE by noncentral t)"
            + seeds_to_see(paper, r.get("delta_sd"), int(r["n_seeds"])))


def table4(res, t):
    """Table 4: EDIT-RL ahead of GRPO on every seed on each dataset; the CI judged on Private-Biology only."""
    mine_ds, missing = judged_datasets(res, t, {"SAS-History", "Private-Biology"})
    bio = [d for d in mine_ds if "Private-Biology" in stands_for(res, d)] if paper_datasets(res) else mine_ds
    per = []
    for r in (r for r in t if r.get("metric", "qwk") == "qwk" and r["dataset"] in mine_ds):
        d, won = r["dataset"], f"EDIT-RL ahead on {r['wins']}/{r['n_seeds']} seeds"
        if d in bio:
            per += [(f"{d} wins", _wins(r), won)]
            v = by_interval(r.get("delta_ci_low"), r.get("delta_ci_high"))
            per += [(f"{d} CI", v, _seed_ci(res, r, v))]
        else:
            per += [(f"{d} wins", _wins(r), f"{won}; CI shown, not judged: {_seed_ci(res, r, INCONCLUSIVE)}")]
    return combine(per, missing)


def _no_interval(values: dict[str, float | None], target: str, what: str, lower: bool = False) -> tuple[str, str]:
    """A best-of with no paired interval in the results: inconclusive, naming the runner-up that needs one."""
    vals = {k: v for k, v in values.items() if v is not None}
    if target not in vals:
        return NOT_RUN, f"{what}: {target} not graded"
    rivals = {k: v for k, v in vals.items() if k != target}
    if not rivals:
        return NOT_RUN, f"{what}: no other system"
    ru = (min if lower else max)(rivals, key=rivals.get)
    return INCONCLUSIVE, (f"{what}: {target} {vals[target]:.3f} vs runner-up {ru} {vals[ru]:.3f}, no paired "
                          f"interval in the results")


def table5(res, t):
    """Table 5, on Private-Biology only (the dataset standing for it), every metric and split of its grid."""
    mine_ds, missing = judged_datasets(res, t, {"Private-Biology"})
    per = []
    for d in mine_ds:
        mine = [r for r in t if r["dataset"] == d]
        for c in (c for c in ("id_qwk", "id_acc", "ood_qwk", "ood_acc") if any(r.get(c) is not None for r in mine)):
            per.append((f"{d} {c}", *_no_interval({r["system"]: r.get(c) for r in mine}, EDIT_RL, c)))
    return combine(per, missing)


RUNNER_UP_RESPONSES = "response_runner_up"  # 09's response-level EDIT-RL minus runner-up (OOD splits)


def _best(res: dict, rs: list[dict], pair: Callable) -> tuple[list, set]:
    """Items of an 'EDIT-RL best' claim on main-table rows ``rs``: QWK by ``pair(res, dataset)`` (a paired
    interval's (verdict, text), or None), other metrics by :func:`_no_interval`; and the systems a row lacks."""
    per, absent = [], set()
    for r in rs:
        d, vals = r["dataset"], {k: r.get(k) for k in SYSTEM_COLUMNS}
        absent |= {k for k, v in vals.items() if v is None}
        pw = pair(res, d) if r["metric"] == "qwk" else None
        if vals[EDIT_RL] is None:
            per.append((f"{d} {r['metric']}", NOT_RUN, "EDIT-RL not graded"))
        elif pw is not None:
            per.append((f"{d} qwk", *pw))
        else:
            per.append((f"{d} {r['metric']}", *_no_interval(vals, EDIT_RL, r["metric"],
                                                            lower=r["metric"] == "mae")))
    return per, absent - {EDIT_RL}


def _response_runner_up(res: dict, d: str, versus: str) -> tuple[str, str] | None:
    """09's response-level bootstrap (``response_runner_up``) of EDIT-RL minus ``versus`` on ``d``'s OOD answers."""
    r = next((r for r in rows(res, "09_significance", RUNNER_UP_RESPONSES) or [] if r["dataset"] == d
              and r["split"] == "ood_test" and r["system"] == EDIT_RL and r["versus"] == versus), None)
    if r is None:
        return None
    v = by_interval(r.get("delta_lo"), r.get("delta_hi"))
    return v, interval_text(f"OOD QWK EDIT-RL minus runner-up {versus}, response-level bootstrap (09 "
                            f"`{RUNNER_UP_RESPONSES}`; these {r['n_questions']:.0f} questions' {r['n_responses']:.0f} "
                            "responses only):", r.get("delta"), r.get("delta_lo"), r.get("delta_hi"), r.get("mde"),
                            None, v)


def _ood_pair(res: dict, d: str) -> tuple[str, str] | None:
    """Table 2, OOD answers only: EDIT-RL minus its runner-up by App. G's question-level bootstrap, or, where
    that has too few questions, by 09's response-level one."""
    q = pairwise_row(res, d, EDIT_RL, kind="runner-up", scopes=("ood_test",))
    if q is None:
        return None
    v, text = bootstrap_verdict(q, f"OOD QWK EDIT-RL minus runner-up {q['versus']}, question-level bootstrap (App. G):")
    if not q.get("few_questions"):
        return v, text
    r = _response_runner_up(res, d, q["versus"])
    return (v, text + f"; no response-level comparison in 09 `{RUNNER_UP_RESPONSES}`") if r is None \
        else (r[0], f"{r[1]}; question-level, too few questions: {text}")


def ood_best(res, t):
    """Table 2: EDIT-RL's OOD QWK against its runner-up on each Private-Science-like dataset."""
    mine_ds, missing = judged_datasets(res, t, {"Private-Biology", "Private-Physics"})
    rs = [r for r in t if r["dataset"] in mine_ds and r["split"] == "ood" and r["metric"] == "qwk"]
    per, absent = _best(res, rs, _ood_pair)
    return combine(per, missing + sorted(absent))


def sas_avg_best(res, t):
    """Table 1's SAS-Avg only, the plain mean of its subjects as Table 1 prints it (one subject: its rows): EDIT-RL
    against its runner-up on that same average, metric by metric, by 09's paired bootstrap with questions resampled
    within each subject (`subject_average`); per-subject rows are not judged."""
    mine_ds, missing = judged_datasets(res, t, {"SAS"})
    rs = [r for r in t if r["dataset"] in mine_ds and r["split"] == "ood" and r["metric"] in SAS_METRICS]
    avg = [r for r in rs if r["subject"] == "Avg"] or (rs if len({(r["dataset"], r["subject"]) for r in rs}) == 1
                                                       else [])
    absent = {k for r in avg for k in SYSTEM_COLUMNS if r.get(k) is None} - {EDIT_RL}
    boot = {r["metric"]: r for r in rows(res, "09_significance", "subject_average") or []}
    per = []
    for r in avg:
        m, b = r["metric"], boot.get(r["metric"])
        if r.get(EDIT_RL) is None:
            per.append((f"SAS-Avg {m}", NOT_RUN, "EDIT-RL not graded"))
        elif b is not None and b.get("subjects_missing"):
            per.append((f"SAS-Avg {m}", NOT_RUN, f"EDIT-RL not graded on {b['subjects_missing']}"))
        elif b is None:
            per.append((f"SAS-Avg {m}", *_no_interval({k: r.get(k) for k in SYSTEM_COLUMNS}, EDIT_RL, m,
                                                      lower=m == "mae")))
        else:
            v = by_interval(b.get("delta_ci_low"), b.get("delta_ci_high"))
            v = INCONCLUSIVE if b.get("few_questions") and v != NOT_RUN else v
            what = (f"{m} on the subject average, EDIT-RL {b['value']:.3f} against runner-up {b['versus']} "
                    f"{b['versus_value']:.3f}; EDIT-RL's advantage{' (lower MAE)' if m == 'mae' else ''}, "
                    f"questions resampled within each of {b['subjects']:.0f} subjects (09 `subject_average`):")
            per.append((f"SAS-Avg {m}", v, interval_text(what, b["delta"], b.get("delta_ci_low"),
                                                         b.get("delta_ci_high"), b.get("mde"), None, v)))
    if rs and not avg:
        per = [("SAS-Avg", NOT_RUN, "Table 1 has no subject average")]
    return combine(per, missing + sorted(absent))


def table10(position: bool):
    """Table 10 (App. D), on Private-Biology only (the dataset standing for it)."""
    def check(res, t):
        per, (mine_ds, missing) = [], judged_datasets(res, t, {"Private-Biology"})
        for d in mine_ds:
            s = {r["system"]: r for r in t if r["dataset"] == d}
            g, e = s.get(EDIT_SFT_GRPO), s.get(EDIT_RL)
            if g is None or e is None:
                per.append((d, NOT_RUN, "one of the two arms is missing"))
            elif position:
                per.append((d, INCONCLUSIVE, f"late - early JSD: GRPO {signed(g['jsd_late'] - g['jsd_early'])}, "
                            f"EDIT-RL {signed(e['jsd_late'] - e['jsd_early'])}; no interval in table10_divergence"))
            else:
                ratio = g["kl"] / e["kl"] if e["kl"] > 0 else float("inf")
                per.append((d, INCONCLUSIVE, f"KL GRPO {g['kl']:.3g} / EDIT-RL {e['kl']:.3g} = {ratio:.2f}x; no "
                            "interval in table10_divergence"))
        return combine(per, missing)
    return check


def rerank_share(res: dict, dataset: str) -> str:
    """How often the audit's re-rank (Alg. 1 line 4) changed the pick of belief shift alone on ``dataset`` (04's
    ``selection_counts``): where it rarely does, EDIT against belief-shift-only has no power."""
    bso = next((r for r in rows(res, "04_counterfactual_selection", "selection_counts") or []
                if r["dataset"] == dataset and r["rule"] == "belief_shift_only"), None)
    if not bso or not bso.get("rollouts_with_picks"):
        return ""
    n, same = int(bso["rollouts_with_picks"]), int(bso["same_steps_as_edit"])
    return f"; the audit's re-rank changed Alg. 1's pick on {n - same} of {n} rollouts ({(n - same) / n:.0%})"


def table12(res, t):
    """Table 12 on its two datasets, SAS-History and Private-Biology: Success@4 of EDIT minus position-matched
    random; the fallback's denominator is rewrites (App. F: "the fraction of rewrites")."""
    per, (mine_ds, missing) = [], judged_datasets(res, t, {"SAS-History", "Private-Biology"})
    for d in mine_ds:
        s = {r["rule"]: r for r in t if r["dataset"] == d}
        e, r = s.get("edit"), s.get("random")
        if not e or not r or not e.get("rewrites") or not r.get("rewrites"):
            per.append((d, NOT_RUN, "no rewrites"))
        elif e.get("delta_ci_low") is not None and e.get("delta_ci_high") is not None:  # a paired bootstrap by 04
            v = by_interval(e["delta_ci_low"], e["delta_ci_high"])
            per.append((d, v, interval_text("Success@N EDIT minus random (paired bootstrap):", e.get("delta"),
                                            e["delta_ci_low"], e["delta_ci_high"], normal_mde(e.get("delta_se")),
                                            None, v) + rerank_share(res, d)))
        else:
            per.append(proportions_verdict(d, "Success@N EDIT vs random (successes / rewrites)", (e["successes"], e["rewrites"]),
                              (r["successes"], r["rewrites"])))
    return combine(per, missing)


def table6(names: tuple[str, ...], size: bool = False):
    """Table 6 on SAS-History only (the dataset standing for it): EDIT-SFT against each ablation of ``names``; with
    ``size``, the paper's QWK difference (Table 6: 0.863 - 0.820 = 4.3 points for w/o Localiser) against the
    interval too."""
    def check(res, t):
        per, sizes, (mine_ds, missing) = [], [], judged_datasets(res, t, {"SAS-History"})
        for d in mine_ds:
            q = {r["system"]: r["qwk"] for r in t if r["dataset"] == d}
            for n in names:
                pw = pairwise_row(res, d, EDIT_SFT, n)
                paper = [paper_value("Table 6", "qwk", x, "SAS-History") for x in (EDIT_SFT, n)]
                paper = None if None in paper else paper[0] - paper[1]
                if q.get(EDIT_SFT) is None or q.get(n) is None:
                    per.append((f"{d} {n}", NOT_RUN, f"{n} not graded"))
                elif pw is None:
                    per.append((f"{d} {n}", INCONCLUSIVE, f"QWK EDIT-SFT {q[EDIT_SFT]:.3f} - {n} {q[n]:.3f}: no "
                                f"paired interval (09 `pairwise`)"))
                else:
                    per.append((f"{d} {n}", *bootstrap_verdict(pw, f"pooled QWK EDIT-SFT minus {n}", paper)))
                if size and paper is not None and q.get(EDIT_SFT) is not None and q.get(n) is not None:
                    lo, hi = (pw or {}).get("delta_ci_low"), (pw or {}).get("delta_ci_high")
                    sizes.append((f"{d} {n}", *sized(f"QWK EDIT-SFT minus {n}", lo, hi,
                                                     f"{100 * paper:.1f} points ({paper:+.3f})", paper)))
        v, found = combine(per, missing)
        return (v, found, combine_sizes(sizes)) if size else (v, found)
    return check


def table7(res, t):
    mine_ds, missing = judged_datasets(res, t, {"Private-Biology"})
    return combine([(d, *_no_interval({r["system"]: r["ae_rsr_overall"] for r in t if r["dataset"] == d},
                                      EDIT_SFT, "AE-RSR", lower=True)) for d in mine_ds], missing)


def table11(signals: tuple[str, ...], levels: tuple[str, ...], negligible: bool = False):
    """The one-sided Mann-Whitney test is the interval: p < 0.05 excludes "no separation" (with r beyond the
    claim's size), p > 0.95 excludes separation in the claimed direction."""
    def check(res, t):
        red, per = extra(res, "03_audit_validation", "reduction", "sum"), []
        for s, lv in [(s, lv) for s in signals for lv in levels]:
            r = next((r for r in t if r["signal"] == s and r["level"] == lv and r["reduction"] == red), None)
            if r is None or r.get("p") is None or r.get("r") is None:  # no test: no annotator labels (cpu-real)
                per.append((s, NOT_RUN, f"{lv}: {'no row' if r is None else 'no test (no labelled steps)'}"))
                continue
            size_ok = r["r"] < 0.1 if negligible else r["r"] >= 0.3
            v = CONTRADICTED if r["p"] > 0.95 else SUPPORTED if r["p"] < 0.05 and size_ok else INCONCLUSIVE
            per.append((s, v, f"{lv}: r {r['r']:.2f}, one-sided p {r['p']:.2g}"))
        return combine(per)
    return check


def table13(res, t):
    """Table 13 / App. H, Physics only: zero recall of EDIT-SFT minus InT-SFT on the SAS-like data's zero-score
    Physics responses; each system's recall (Wilson interval) against the sentence's "never" and 64%."""
    per, sizes, (mine_ds, missing) = [], [], judged_datasets(res, t, {"SAS"})
    for d in mine_ds:
        phys = [r for r in t if r["dataset"] == d and str(r.get("subject")).lower() == "physics"]
        if not phys:
            continue
        n = {s: [sum(r[k] for r in phys if r["system"] == s) for k in ("marked_zero", "gold_zero")]
             for s in (EDIT_SFT, INT_SFT)}
        ok = {EDIT_SFT, INT_SFT} <= {r["system"] for r in phys} and all(x[1] for x in n.values())
        per.append(proportions_verdict(f"{d} Physics", "zero recall EDIT-SFT vs InT-SFT", n[EDIT_SFT], n[INT_SFT]) if ok
                   else (f"{d} Physics", NOT_RUN, "InT-SFT or EDIT-SFT not graded, or no zero-score response"))
        if ok:  # "InT-SFT never withholds full credit ..., whereas EDIT-SFT correctly does so on 64% of them"
            for s, words in ((INT_SFT, "never"), (EDIT_SFT, None)):
                paper = paper_value("Table 13", "zero_recall_pct", s, subject="Physics") / 100
                lo, hi = proportion_confint(*n[s], alpha=0.05, method="wilson")
                sizes.append((f"{d} {s}", *sized(f"{s}'s zero recall {n[s][0]}/{n[s][1]} (Wilson 95%)", lo, hi,
                                                 words or f"{paper:.0%}", paper, fmt=".0%")))
    if mine_ds and not per:
        per = [("Physics", NOT_RUN, "no Physics responses in the SAS-like data")]
    return (*combine(per, missing), combine_sizes(sizes))
