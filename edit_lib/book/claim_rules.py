"""The claims ledger's rules (edit_lib/book/claims.py): one check per claim, ``(results, the table's rows) ->
(verdict, found)`` (and, where the sentence gives a number, its magnitude verdict), each judging exactly the scope
and quantity its claim's sentence states (``verdicts.stands_for``) and deciding by an interval (``verdicts``).
Longer than 300 lines because every claim's rule is here, beside the helpers they share (runner-up, Holm's level,
magnitudes): one reading of the paper's sentences, not one file per sentence.
"""
from __future__ import annotations

from typing import Callable

from statsmodels.stats.proportion import proportion_confint

from edit_lib.book.verdicts import (CONTRADICTED, INCONCLUSIVE, NO_INTERVAL, NOT_RUN, SUPPORTED, bootstrap_verdict,
                                    by_interval, combine, combine_sizes, holm_mde, interval_text, judged_datasets,
                                    pairwise_row, paper_datasets, paper_value, pooled, proportions_verdict, rows,
                                    signed, significance_row, sized, stands_for)
from edit_lib.power import normal_mde, seed_mde, seed_mde_multiple
from edit_lib.systems import EDIT_RL, EDIT_SFT, EDIT_SFT_GRPO, INT_SFT, MAIN

SYSTEM_COLUMNS = MAIN  # the main tables' columns (Tables 1-2), as 07 records them
SAS_METRICS = ("acc", "within1", "qwk", "mae")


def table3(system: str):
    """Table 3 (App. G): ``system`` against Base on the pooled held-out SAS questions only; each subject's own
    row is shown, not judged (App. H draws no conclusion from per-subject splits)."""
    def check(res, t):
        alpha = 1 - float((res["09_significance"].get("extra") or {}).get("ci", 0.95))
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
