"""The paper's claims as data, each checked against one run's results JSON (the book's claims ledger).
Longer than 300 lines because each claim's sentence, rule and check are kept together, to be audited in one place.

A ``Claim`` holds the paper's sentence, where the paper says it, the results table it is checked against, its
rule in words, and ``check``: a function of the run's results that returns a verdict and what it found. Verdicts
(``supported``, ``contradicted``, ``inconclusive``, ``partly run``, ``not run``, ``not meaningful on this data``)
are decided by intervals, never by a point estimate alone. Each rule judges exactly the scope its sentence states
(the paper's datasets a run's stand for: :func:`stands_for`); rows outside it may be shown, never judged.

Details: book/departures.md, section "The claims ledger (edit_lib/book/claims.py)".
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from statsmodels.stats.proportion import confint_proportions_2indep

from edit_lib import paper_reference
from edit_lib.evaluation.caveats import run_caveats
from edit_lib.evaluation.significance import PAPER_FAMILY
from edit_lib.power import normal_mde, se_from_interval, seed_mde, seed_mde_multiple

SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
PARTLY_RUN, NOT_RUN, NOT_MEANINGFUL = "partly run", "not run", "not meaningful on this data"
VERDICTS = (SUPPORTED, CONTRADICTED, INCONCLUSIVE, PARTLY_RUN, NOT_RUN, NOT_MEANINGFUL)
SCOPES = ("all held-out", "ood_test")  # 09's scope a claim on a dataset reads, in this order


@dataclass(frozen=True)
class Claim:
    id: str
    where: str
    sentence: str
    stage: str  # the results JSON the claim is checked against ...
    table: str  # ... and its table
    rule: str
    check: Callable[[dict, list[dict]], tuple[str, str]]  # (results, the table's rows) -> (verdict, found)


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    verdict: str
    found: str  # the numbers the rule read, per dataset


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


def _parts(d: str) -> frozenset[str]:
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


def _datasets(results: dict, table: list[dict], paper: set[str]) -> tuple[list[str], list[str]]:
    """(the table's datasets standing for ``paper``'s, the ``paper`` datasets none of them stands for); without
    07's mapping every dataset of the table and nothing missing."""
    have = sorted({r["dataset"] for r in table})
    if not paper_datasets(results):
        return have, []
    names = {d: stands_for(results, d) & paper for d in have}
    mine = [d for d in have if names[d]]
    return mine, sorted(paper.difference(*names.values()))


def _f(x) -> str:
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
    out = f"{what} {_f(est)} [{_f(lo)}, {_f(hi)}]"
    known = mde is not None and mde == mde
    if known or v == INCONCLUSIVE:
        out += f", MDE {f'{mde:.3f}' if known else 'n/a'} (80% power{', ' + level if level else ''})"
        out += f" vs the paper's {_f(paper)}" if paper is not None else ""
    return out


def _props(d: str, what: str, a: tuple, b: tuple, paper: float | None = None) -> tuple[str, str, str]:
    """One dataset's verdict on a[0]/a[1] > b[0]/b[1] by Newcombe's 95% interval of the difference (MDE from
    the interval's normal-equivalent SE)."""
    diff, (lo, hi) = a[0] / a[1] - b[0] / b[1], confint_proportions_2indep(*a, *b, method="newcomb", compare="diff")
    v = by_interval(lo, hi)
    return d, v, interval_text(f"{what} {a[0]}/{a[1]} vs {b[0]}/{b[1]}:", diff, lo, hi,
                               normal_mde(se_from_interval(lo, hi)), paper, v)


def _pairwise(res: dict, d: str, system: str, versus: str | None = None, kind: str = "pair",
              scopes: tuple[str, ...] = SCOPES) -> dict | None:
    """09's paired cluster-bootstrap comparison (``pairwise``) of ``system`` on dataset ``d`` (a pooled 'a+b' in
    any order; the first of ``scopes`` it has), against ``versus`` (or its runner-up)."""
    mine = [r for r in rows(res, "09_significance", "pairwise") or [] if _parts(r["dataset"]) == _parts(d)
            and r["system"] == system and r.get("kind") == kind and (versus is None or r["versus"] == versus)]
    return next((r for s in scopes for r in mine if r["scope"] == s), None)


def _boot_verdict(r: dict, what: str, paper: float | None = None, mde: float | None = None,
                  level: str = "") -> tuple[str, str]:
    """Verdict and text of one 09 comparison (``mde``: in place of the row's, at ``level``): too few questions is
    inconclusive whatever the interval."""
    v = by_interval(r.get("delta_ci_low"), r.get("delta_ci_high"))
    if r.get("few_questions") and v != NOT_RUN:
        v = INCONCLUSIVE
    text = interval_text(what, r.get("delta"), r.get("delta_ci_low"), r.get("delta_ci_high"),
                         r.get("mde") if mde is None else mde, paper, v, level)
    return v, text + (f" ({r['scope']}, {r.get('n_paired', 0):.0f} q.{', too few questions' if r.get('few_questions') else ''})")


# ------------------------------------------------------------------ the rules: (results, rows) -> (verdict, found)

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
    mine, missing = _datasets(res, t, {paper})
    every = frozenset().union(*map(_parts, mine))
    pool = next((d for d in mine if _parts(d) == every), None)
    return pool, [d for d in mine if d != pool], missing


def _sig_row(t: list[dict], d: str, system: str) -> dict:
    mine = [r for r in t if r["dataset"] == d and r["system"] == system]
    return next((r for s in SCOPES for r in mine if r["scope"] == s), {})


def _table3(system: str):
    """Table 3 (App. G): ``system`` against Base on the pooled held-out SAS questions only; each subject's own
    row is shown, not judged (App. H draws no conclusion from per-subject splits)."""
    def check(res, t):
        alpha = 1 - float((res["09_significance"].get("extra") or {}).get("ci", 0.95))
        d, subjects, missing = pooled(res, t)
        r = _sig_row(t, d, system) if d else {}
        if d is None:  # no SAS-like dataset, or no scope pooling them all
            per = [("SAS", NOT_RUN, "no 09 scope pools every SAS-like dataset")] if subjects else []
        elif r.get("delta") is None or r.get("status") == NOT_RUN:
            per = [(d, NOT_RUN, "not graded")]
        else:
            mde, level = holm_mde(r, t, alpha)
            v, text = _boot_verdict(r, "Δ vs Base", paper_value("Table 3", "delta_vs_base", system), mde, level)
            if v == SUPPORTED and not (r.get("p_holm") is not None and r["p_holm"] < alpha):
                v = INCONCLUSIVE  # the interval excludes 0, the Holm-corrected test (m = 6) does not
            p = r.get("p_shown") or ("n/a" if r.get("p_holm") is None else f"{r['p_holm']:.3g}")
            per = [(d, v, f"{text}, Holm p {p}")]
        v, found = combine(per, missing)
        shown = [(s, _sig_row(t, s, system)) for s in subjects]
        shown = [f"`{s}` {_f(r.get('delta'))} [{_f(r.get('delta_ci_low'))}, {_f(r.get('delta_ci_high'))}]"
                 for s, r in shown if r.get("delta") is not None]
        return v, found + (f"; per subject, shown, not judged: {', '.join(shown)}" if shown else "")
    return check


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
    paper = paper_value("Table 4", "delta", "edit_sft_edit_rl", paper_ds) if paper_ds else None
    return (interval_text("Δ", r["delta"], r.get("delta_ci_low"), r.get("delta_ci_high"), r.get("mde"), paper, v)
            + f" over {r['n_seeds']} seeds (t-interval; MDE by noncentral t)"
            + seeds_to_see(paper, r.get("delta_sd"), int(r["n_seeds"])))


def _table4(res, t):
    """Table 4: EDIT-RL ahead of GRPO on every seed on each dataset; the CI judged on Private-Biology only."""
    mine_ds, missing = _datasets(res, t, {"SAS-History", "Private-Biology"})
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


def _table5(res, t):
    per = []
    for d in sorted({r["dataset"] for r in t}):
        mine = [r for r in t if r["dataset"] == d]
        for c in (c for c in ("id_qwk", "id_acc", "ood_qwk", "ood_acc") if any(r.get(c) is not None for r in mine)):
            per.append((f"{d} {c}", *_no_interval({r["system"]: r.get(c) for r in mine}, "edit_sft_edit_rl", c)))
    return combine(per)


RUNNER_UP_RESPONSES = "response_runner_up"  # 09's response-level EDIT-RL minus runner-up (OOD splits)


def _best(res: dict, rs: list[dict], pair: Callable) -> tuple[list, set]:
    """Items of an 'EDIT-RL best' claim on main-table rows ``rs``: QWK by ``pair(res, dataset)`` (a paired
    interval's (verdict, text), or None), other metrics by :func:`_no_interval`; and the systems a row lacks."""
    per, absent = [], set()
    for r in rs:
        d, vals = r["dataset"], {k: r.get(k) for k in SYSTEM_COLUMNS}
        absent |= {k for k, v in vals.items() if v is None}
        pw = pair(res, d) if r["metric"] == "qwk" else None
        if vals["edit_sft_edit_rl"] is None:
            per.append((f"{d} {r['metric']}", NOT_RUN, "EDIT-RL not graded"))
        elif pw is not None:
            per.append((f"{d} qwk", *pw))
        else:
            per.append((f"{d} {r['metric']}", *_no_interval(vals, "edit_sft_edit_rl", r["metric"],
                                                            lower=r["metric"] == "mae")))
    return per, absent - {"edit_sft_edit_rl"}


def _response_runner_up(res: dict, d: str, versus: str) -> tuple[str, str] | None:
    """09's response-level bootstrap (``response_runner_up``) of EDIT-RL minus ``versus`` on ``d``'s OOD answers."""
    r = next((r for r in rows(res, "09_significance", RUNNER_UP_RESPONSES) or [] if r["dataset"] == d
              and r["split"] == "ood_test" and r["system"] == "edit_sft_edit_rl" and r["versus"] == versus), None)
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
    q = _pairwise(res, d, "edit_sft_edit_rl", kind="runner-up", scopes=("ood_test",))
    if q is None:
        return None
    v, text = _boot_verdict(q, f"OOD QWK EDIT-RL minus runner-up {q['versus']}, question-level bootstrap (App. G):")
    if not q.get("few_questions"):
        return v, text
    r = _response_runner_up(res, d, q["versus"])
    return (v, text + f"; no response-level comparison in 09 `{RUNNER_UP_RESPONSES}`") if r is None \
        else (r[0], f"{r[1]}; question-level, too few questions: {text}")


def _ood_best(res, t):
    """Table 2: EDIT-RL's OOD QWK against its runner-up on each Private-Science-like dataset."""
    mine_ds, missing = _datasets(res, t, {"Private-Biology", "Private-Physics"})
    rs = [r for r in t if r["dataset"] in mine_ds and r["split"] == "ood" and r["metric"] == "qwk"]
    per, absent = _best(res, rs, _ood_pair)
    return combine(per, missing + sorted(absent))


def _avg_pair(res: dict, d: str) -> tuple[str, str] | None:
    q = _pairwise(res, d, "edit_sft_edit_rl", kind="runner-up")
    return None if q is None else _boot_verdict(q, f"question-pooled QWK EDIT-RL minus runner-up {q['versus']} "
                                                   "(App. G):")


def _sas_avg_best(res, t):
    """Table 1's SAS-Avg rows only (one subject: its rows are the average); per-subject rows are not judged."""
    mine_ds, missing = _datasets(res, t, {"SAS"})
    rs = [r for r in t if r["dataset"] in mine_ds and r["split"] == "ood" and r["metric"] in SAS_METRICS]
    avg = [r for r in rs if r["subject"] == "Avg"]
    if not avg and len({(r["dataset"], r["subject"]) for r in rs}) == 1:
        avg = rs
    per, absent = _best(res, avg, _avg_pair)
    if rs and not avg:
        per = [("SAS-Avg", NOT_RUN, "Table 1 has no subject average")]
    return combine(per, missing + sorted(absent))


def _table10(position: bool):
    def check(res, t):
        per = []
        for d in sorted({r["dataset"] for r in t}):
            s = {r["system"]: r for r in t if r["dataset"] == d}
            g, e = s.get("edit_sft_grpo"), s.get("edit_sft_edit_rl")
            if g is None or e is None:
                per.append((d, NOT_RUN, "one of the two arms is missing"))
            elif position:
                per.append((d, INCONCLUSIVE, f"late - early JSD: GRPO {_f(g['jsd_late'] - g['jsd_early'])}, "
                            f"EDIT-RL {_f(e['jsd_late'] - e['jsd_early'])}; no interval in table10_divergence"))
            else:
                ratio = g["kl"] / e["kl"] if e["kl"] > 0 else float("inf")
                per.append((d, INCONCLUSIVE, f"KL GRPO {g['kl']:.3g} / EDIT-RL {e['kl']:.3g} = {ratio:.2f}x; no "
                            "interval in table10_divergence"))
        return combine(per)
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


def _table12(res, t):
    """Table 12 on its two datasets, SAS-History and Private-Biology: Success@4 of EDIT minus position-matched
    random; the fallback's denominator is rewrites (App. F: "the fraction of rewrites")."""
    per, (mine_ds, missing) = [], _datasets(res, t, {"SAS-History", "Private-Biology"})
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
            per.append(_props(d, "Success@N EDIT vs random (successes / rewrites)", (e["successes"], e["rewrites"]),
                              (r["successes"], r["rewrites"])))
    return combine(per, missing)


def _table6(names: tuple[str, ...]):
    def check(res, t):
        per = []
        for d in sorted({r["dataset"] for r in t}):
            q = {r["system"]: r["qwk"] for r in t if r["dataset"] == d}
            for n in names:
                pw = _pairwise(res, d, "edit_sft", n)
                if q.get("edit_sft") is None or q.get(n) is None:
                    per.append((f"{d} {n}", NOT_RUN, f"{n} not graded"))
                elif pw is None:
                    per.append((f"{d} {n}", INCONCLUSIVE, f"QWK EDIT-SFT {q['edit_sft']:.3f} - {n} {q[n]:.3f}: no "
                                f"paired interval (09 `pairwise`)"))
                else:
                    paper = [paper_value("Table 6", "qwk", x, "SAS-History") for x in ("edit_sft", n)]
                    per.append((f"{d} {n}", *_boot_verdict(pw, f"pooled QWK EDIT-SFT minus {n}", None if None in paper
                                                           else paper[0] - paper[1])))
        return combine(per)
    return check


def _table7(res, t):
    mine_ds, missing = _datasets(res, t, {"Private-Biology"})
    return combine([(d, *_no_interval({r["system"]: r["ae_rsr_overall"] for r in t if r["dataset"] == d},
                                      "edit_sft", "AE-RSR", lower=True)) for d in mine_ds], missing)


def _table11(signals: tuple[str, ...], levels: tuple[str, ...], negligible: bool = False):
    """The one-sided Mann-Whitney test is the interval: p < 0.05 excludes "no separation" (with r beyond the
    claim's size), p > 0.95 excludes separation in the claimed direction."""
    def check(res, t):
        red, per = (res["03_audit_validation"].get("extra") or {}).get("reduction", "sum"), []
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


def _table13(res, t):
    """Table 13 / App. H, Physics only: zero recall of EDIT-SFT minus InT-SFT on the SAS-like data's zero-score
    Physics responses."""
    per, (mine_ds, missing) = [], _datasets(res, t, {"SAS"})
    for d in mine_ds:
        phys = [r for r in t if r["dataset"] == d and str(r.get("subject")).lower() == "physics"]
        if not phys:
            continue
        n = {s: [sum(r[k] for r in phys if r["system"] == s) for k in ("marked_zero", "gold_zero")]
             for s in ("edit_sft", "int_sft")}
        ok = {"edit_sft", "int_sft"} <= {r["system"] for r in phys} and all(x[1] for x in n.values())
        per.append(_props(f"{d} Physics", "zero recall EDIT-SFT vs InT-SFT", n["edit_sft"], n["int_sft"]) if ok
                   else (f"{d} Physics", NOT_RUN, "InT-SFT or EDIT-SFT not graded, or no zero-score response"))
    if mine_ds and not per:
        per = [("Physics", NOT_RUN, "no Physics responses in the SAS-like data")]
    return combine(per, missing)


SYSTEM_COLUMNS = ("base", "base_grpo", "base_dgpo", "int_sft", "int_sft_int_rl", "edit_sft", "edit_sft_edit_rl")
SAS_METRICS = ("acc", "within1", "qwk", "mae")
_SIG = ("judged on the pooled held-out SAS questions only (App. G pools all 37; here 09's scope pooling every "
        "SAS-like dataset, one such dataset being its own pool); each subject's row is shown, not judged (App. H "
        "draws no conclusion from per-subject splits). Supported when 09's 95% paired interval (cluster bootstrap "
        "by question) lies above 0 and its Holm p (family of six, App. G) is below alpha = 1 minus 09's interval "
        "level; contradicted when the interval lies at or below 0; inconclusive otherwise, and always below "
        "significance.min_questions questions. The MDE beside it (80% power) is at the comparison's Holm threshold "
        "alpha / (m - rank + 1) at its rank among the m = 6, not at alpha.")
_T3 = ("“pooling all 37 held-out questions with equal weight ... [EDIT's] gains are two to three times larger and "
       "remain significant (both p=0.0006)”")
_PAIR = ("09's paired cluster-bootstrap interval of the pooled QWK difference (`pairwise`): above 0 supported, at or "
         "below 0 contradicted, else (or below significance.min_questions questions) inconclusive; no interval: "
         "inconclusive.")
_NOINT = "the results hold no interval for it, so the verdict is inconclusive (the values are shown)."
CLAIMS: tuple[Claim, ...] = (
    Claim("edit-rl-significant", "Sec. 3.2, App. G, Table 3", _T3 + " — EDIT-RL against Base", "09_significance",
          "significance", "Paired Δ QWK of EDIT-RL vs Base, " + _SIG, _table3("edit_sft_edit_rl")),
    Claim("edit-sft-significant", "Sec. 3.2, App. G, Table 3", _T3 + " — EDIT-SFT against Base", "09_significance",
          "significance", "Paired Δ QWK of EDIT-SFT vs Base, " + _SIG, _table3("edit_sft")),
    Claim("rl-seeds", "Sec. 3.2, Table 4", "“EDIT-RL outperforms GRPO in all three paired runs on both datasets, "
          "and the paired 95% CI excludes zero on Private-Biology.”", "07_evaluation", "table4",
          "Seed-wise OOD QWK, EDIT-SFT+EDIT-RL against EDIT-SFT+GRPO (same seeds), on the datasets standing for "
          "SAS-History and Private-Biology. Wins, on each: supported when EDIT-RL is ahead on every seed (at least "
          "three), contradicted when it is not ahead on some seed (a count over this run's seeds, as the sentence's "
          "is), inconclusive with fewer than three seeds. CI, on the Private-Biology one only: supported when the "
          "paired t-interval over seeds lies above 0, contradicted when at or below 0, else inconclusive (with the "
          "seed-level MDE, noncentral t, beside the paper's Δ); SAS-History's interval is shown, not judged.",
          _table4),
    Claim("sft-rl-grid", "Sec. 3.2, Table 5", "“the full combination EDIT-SFT+EDIT-RL is best on every metric”",
          "07_evaluation", "table5", "EDIT-SFT+EDIT-RL against every other arm on ID/OOD QWK and ACC (one "
          "seed, as the paper's): " + _NOINT, _table5),
    Claim("ood-best", "Sec. 3.2, Table 2", "“EDIT-RL attains the highest OOD QWK on both subjects”",
          "07_evaluation", "table2", "QWK on OOD answers only (09's `ood_test` scope, never the ID answers) of "
          "EDIT-RL minus its runner-up among the main-table systems, on each Private-Science-like dataset: 09's "
          "paired cluster-bootstrap interval by question (`pairwise`, App. G); where that split has fewer than "
          "significance.min_questions questions (the paper profile's OOD splits have 2 and 3), 09's paired "
          "response-level bootstrap (`" + RUNNER_UP_RESPONSES + "`: the same questions, responses resampled; it "
          "speaks for these questions only). Above 0 supported, at or below 0 contradicted, else inconclusive; no "
          "interval: inconclusive. `found` names the test used. Partly run when a main-table system is absent.",
          _ood_best),
    Claim("sas-avg-best", "Sec. 3.2, Table 1", "“EDIT-RL achieves the best results on average across all "
          "metrics” (SAS)", "07_evaluation", "table1", "The subject average only (Table 1's SAS-Avg rows; one "
          "subject: its rows); per-subject rows are not judged. ACC, within-1, QWK and MAE (lower is better) of "
          "EDIT-RL against the other main-table systems: QWK by 09's paired cluster-bootstrap interval of the "
          "question-pooled QWK difference against its runner-up on the scope pooling every SAS-like dataset "
          "(`pairwise`; above 0 supported, at or below 0 contradicted, else, or below significance.min_questions "
          "questions, inconclusive; no interval: inconclusive); ACC, within-1 and MAE: " + _NOINT, _sas_avg_best),
    Claim("localiser", "App. F (and Sec. 3.3), Table 6", "“removing the localiser costs 4.3 QWK points on "
          "SAS-History”", "07_evaluation", "table6", "QWK of EDIT-SFT minus w/o Localiser on the ablation "
          "dataset: " + _PAIR, _table6(("wo_localiser",))),
    Claim("ablations", "Sec. 3.3, Table 6", "“removing any module degrades performance”", "07_evaluation",
          "table6", "QWK of EDIT-SFT minus each ablation (w/o Localiser, Checklist, Atomic), each: " + _PAIR,
          _table6(("wo_localiser", "wo_checklist", "wo_atomic"))),
    Claim("counterfactual", "App. F, Table 12", "“EDIT-selected steps recover the gold mark more often than "
          "position-matched random steps on both datasets.”", "04_counterfactual_selection", "table12",
          "Success@N of EDIT minus position-matched random, on Table 12's two datasets only (those standing for "
          "SAS-History and Private-Biology): 04's paired bootstrap interval where its table has one, else "
          "Newcombe's 95% interval of successes / rewrites (App. F: the fraction of rewrites): above 0 supported, "
          "at or below 0 contradicted, else inconclusive (MDE from the interval's SE).", _table12),
    Claim("twice-as-close", "App. D, Table 10", "“Plain GRPO ... drifts about twice as far (KL=0.064)”: EDIT-RL "
          "stays about 2x closer to the frozen EDIT-SFT probe", "06_rl", "table10_divergence",
          "Ratio KL(EDIT-SFT+GRPO) / KL(EDIT-SFT+EDIT-RL): " + _NOINT, _table10(False)),
    Claim("drift-position", "App. D, Table 10", "GRPO drifts further “and increasingly so deeper in the chain”, "
          "while EDIT-RL “is flat across chain position”", "06_rl", "table10_divergence",
          "Late-minus-early tercile JSD of both arms: " + _NOINT, _table10(True)),
    Claim("audit-separates", "App. E, Table 11", "“Answer Grounding separates the two classes with a large effect "
          "(r=0.71) ... and Prefix Grounding likewise (r=0.58), and both survive collapsing to per-rollout means”",
          "03_audit_validation", "table11", "G^a and raw G^p at the suite's NLL reduction, per step and per "
          "rollout mean, by the one-sided Mann-Whitney test (its 95% one-sided interval of the shift): supported "
          "when every p < 0.05 with rank-biserial r >= 0.3; contradicted when any p > 0.95 (separated the other "
          "way); inconclusive otherwise.", _table11(("G_a", "G_p"), ("step", "rollout mean"))),
    Claim("rubric-negligible", "App. E, Table 11", "“Rubric Grounding ... is statistically significant but "
          "practically negligible” (r=0.08)", "03_audit_validation", "table11", "G^rho per step: supported "
          "when the one-sided p < 0.05 with r < 0.1; contradicted when p > 0.95 (separated the other way); "
          "inconclusive otherwise (r has no interval).",
          _table11(("G_rho",), ("step",), negligible=True)),
    Claim("most-rule-responsive", "Abstract; Sec. 3.4, Table 7", "“[EDIT-SFT] is the most rule-responsive of "
          "all evaluated systems”", "08_rsr_interventions", "table7", "Overall AE-RSR on the Biology-like "
          "dataset, EDIT-SFT against its runner-up: " + _NOINT, _table7),
    Claim("zero-credit", "Sec. 3.2, App. H, Table 13", "“InT-SFT never withholds full credit on zero-score "
          "Physics responses, whereas EDIT-SFT correctly does so on 64% of them”", "07_evaluation", "table13",
          "Zero recall on the SAS-like data's zero-score Physics responses only, EDIT-SFT minus InT-SFT with "
          "Newcombe's 95% interval: above 0 supported, at or below 0 contradicted, else inconclusive.", _table13),
)


def evaluate(results: dict) -> list[Verdict]:
    """Every claim's verdict on one run's results ({stage: results JSON dict}); 'not run' where the table the
    claim is checked against is absent or empty; 'not meaningful on this data' for every claim that ran when
    01's results record caveats (``caveats.run_caveats``)."""
    caveats, out = run_caveats(results.get("01_base_policy")), []
    for c in CLAIMS:
        t = rows(results, c.stage, c.table)
        v, found = c.check(results, t) if t else (NOT_RUN, f"{c.stage} has no `{c.table}` table")
        if caveats and v != NOT_RUN:
            v, found = NOT_MEANINGFUL, f"01_base_policy records caveats ({'; '.join(caveats)}); the rule found: {found}"
        out.append(Verdict(c, v, found))
    return out
