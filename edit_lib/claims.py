"""The paper's claims as data, each checked against one run's results JSON (the book's claims ledger).

A ``Claim`` holds the paper's sentence (quoted, or closely paraphrased where marked), where the paper says it,
the results tables it is checked against, its rule in words, and ``check``: a function of the run's results
(``{stage: results JSON dict}``) that returns a verdict and what it found. Verdicts: ``supported``,
``not supported``, ``inconclusive`` (at the suite's own interval or threshold, stated in the rule) and
``not run`` (the results lack the table or the systems the rule needs). Nothing is typed in from the paper
except the sentence; every number a verdict quotes is computed from the results.

Datasets are matched to the paper's by 07's Tables 1 and 2 (without 07: every dataset of the table). A claim
on several datasets is supported where every one supports it, not supported where any does not, else
inconclusive.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from statsmodels.stats.proportion import confint_proportions_2indep

SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE, NOT_RUN = "supported", "not supported", "inconclusive", "not run"
VERDICTS = (SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE, NOT_RUN)
MOVED = 1e-4  # a KL / JSD below this: the RL policies did not move from the frozen reference


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
    """Suite dataset -> the paper's dataset it stands for ('SAS', 'Private-Biology', ...), from 07's tables."""
    out = {r["dataset"]: "SAS" for r in rows(results, "07_evaluation", "table1") or []}
    out.update({r["dataset"]: f"Private-{r['paper_subject']}" for r in rows(results, "07_evaluation", "table2") or []})
    return out


def _datasets(results: dict, table: list[dict], paper: set[str]) -> list[str]:
    have, known = sorted({r["dataset"] for r in table}), paper_datasets(results)
    return [d for d in have if known.get(d) in paper] if known else have


def _f(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def combine(per: list[tuple[str, str, str]]) -> tuple[str, str]:
    """[(dataset, verdict, found)] -> one verdict: every dataset supported, or any not supported, else
    inconclusive; datasets that were not run are listed but do not count unless none was run."""
    ran, found = [v for _, v, _ in per if v != NOT_RUN], "; ".join(f"`{d}`: {f}" for d, _, f in per) or "no dataset"
    v = (NOT_RUN if not ran else NOT_SUPPORTED if NOT_SUPPORTED in ran
         else SUPPORTED if all(v == SUPPORTED for v in ran) else INCONCLUSIVE)
    return v, found


def by_interval(est: float, lo: float | None, hi: float | None) -> str:
    """Claimed effect > 0: interval above 0 supported, estimate <= 0 not supported, else inconclusive."""
    return NOT_RUN if est is None else NOT_SUPPORTED if est <= 0 else SUPPORTED if lo is not None and lo > 0 \
        else INCONCLUSIVE


def _props(d: str, what: str, a: tuple, b: tuple) -> tuple[str, str, str]:
    """One dataset's verdict on a[0]/a[1] > b[0]/b[1] by Newcombe's 95% interval of the difference."""
    diff, (lo, hi) = a[0] / a[1] - b[0] / b[1], confint_proportions_2indep(*a, *b, method="newcomb", compare="diff")
    return d, by_interval(diff, lo, hi), f"{what} {a[0]}/{a[1]} vs {b[0]}/{b[1]}: {_f(diff)} [{_f(lo)}, {_f(hi)}]"


def best(values: dict[str, float], target: str, lower: bool = False) -> str:
    """``target`` strictly best of ``values`` (Nones ignored): supported; tied: inconclusive; beaten: not."""
    vals = {k: (-v if lower else v) for k, v in values.items() if v is not None}
    if target not in vals:
        return NOT_RUN
    others = [v - vals[target] for k, v in vals.items() if k != target]
    return NOT_SUPPORTED if any(o > 1e-12 for o in others) else INCONCLUSIVE if any(abs(o) <= 1e-12 for o in others) \
        else SUPPORTED


# ------------------------------------------------------------------ the rules: (results, rows) -> (verdict, found)

def _table3(system: str):
    def check(res, t):
        alpha, per = 1 - float((res["09_significance"].get("extra") or {}).get("ci", 0.95)), []
        for d in _datasets(res, t, {"SAS"}):
            mine = [r for r in t if r["dataset"] == d and r["system"] == system]
            r = next((r for s in ("all held-out", "ood_test") for r in mine if r["scope"] == s), {})
            v = (NOT_RUN if r.get("delta") is None else NOT_SUPPORTED if r["delta"] <= 0
                 else SUPPORTED if r["p_holm"] < alpha else INCONCLUSIVE)
            per.append((d, v, "not graded" if v == NOT_RUN else f"Δ {_f(r['delta'])} [{_f(r['delta_ci_low'])}, "
                        f"{_f(r['delta_ci_high'])}], Holm p {r['p_holm']:.3g} ({r['scope']}, {r['n_paired']:.0f} q.)"))
        return combine(per)
    return check


def _table4(res, t):
    return combine([(r["dataset"], by_interval(r["delta"], r["delta_ci_low"], r["delta_ci_high"]),
                     f"Δ {_f(r['delta'])} [{_f(r['delta_ci_low'])}, {_f(r['delta_ci_high'])}] over {r['n_seeds']} "
                     f"seeds, EDIT-RL ahead on {r['wins']} of them") for r in t if r.get("metric", "qwk") == "qwk"])


def _best_of(values: dict[str, dict[str, float]], lower=("mae",)) -> tuple[str, str]:
    """{metric: {system: value}} -> is EDIT-RL the best on every metric (combined), and on which not."""
    vs = {m: best(v, "edit_sft_edit_rl", lower=m in lower) for m, v in values.items()}
    return combine([(m, v, v) for m, v in vs.items()])[0], ", ".join(f"{m} {v}" for m, v in vs.items()) or "no rows"


def _table5(res, t):
    per = []
    for d in sorted({r["dataset"] for r in t}):
        mine = [r for r in t if r["dataset"] == d]
        cols = [c for c in ("id_qwk", "id_acc", "ood_qwk", "ood_acc") if any(r.get(c) is not None for r in mine)]
        per.append((d, *_best_of({c: {r["system"]: r.get(c) for r in mine} for c in cols})))
    return combine(per)


def _main_table(paper: set[str], metrics: tuple[str, ...]):
    def check(res, t):
        per = []
        for d in _datasets(res, t, paper):
            mine = [r for r in t if r["dataset"] == d and r["split"] == "ood"]
            mine = [r for r in mine if r["subject"] == "Avg"] or mine  # several subjects: their average
            vals = {r["metric"]: {k: r.get(k) for k in SYSTEM_COLUMNS} for r in mine if r["metric"] in metrics}
            per.append((d, *_best_of(vals)))
        return combine(per)
    return check


def _table10(position: bool):
    def check(res, t):
        per = []
        for d in sorted({r["dataset"] for r in t}):
            s = {r["system"]: r for r in t if r["dataset"] == d}
            g, e = s.get("edit_sft_grpo"), s.get("edit_sft_edit_rl")
            if g is None or e is None:
                per.append((d, NOT_RUN, "one of the two arms is missing"))
            elif position:
                rise_g, rise_e = g["jsd_late"] - g["jsd_early"], e["jsd_late"] - e["jsd_early"]
                v = INCONCLUSIVE if g["jsd"] < MOVED else SUPPORTED if 0 < rise_g and rise_e < rise_g else NOT_SUPPORTED
                per.append((d, v, f"late - early JSD: GRPO {_f(rise_g)}, EDIT-RL {_f(rise_e)}"))
            else:
                ratio = g["kl"] / e["kl"] if e["kl"] > 0 else float("inf")
                v = INCONCLUSIVE if g["kl"] < MOVED else SUPPORTED if ratio >= 1.5 else NOT_SUPPORTED
                per.append((d, v, f"KL GRPO {g['kl']:.3g} / EDIT-RL {e['kl']:.3g} = {ratio:.2f}x"))
        return combine(per)
    return check


def _table12(res, t):
    per = []
    for d in _datasets(res, t, {"SAS", "Private-Biology"}):
        s = {r["rule"]: r for r in t if r["dataset"] == d}
        e, r = s.get("edit"), s.get("random")
        if not e or not r or not e["revisions"] or not r["revisions"]:
            per.append((d, NOT_RUN, "no revisions"))
            continue
        per.append(_props(d, "Success@N EDIT vs random", (e["successes"], e["revisions"]),
                          (r["successes"], r["revisions"])))
    return combine(per)


def _table6(names: tuple[str, ...]):
    def check(res, t):
        per = []
        for d in sorted({r["dataset"] for r in t}):
            q = {r["system"]: r["qwk"] for r in t if r["dataset"] == d}
            for n in names:
                if q.get("edit_sft") is None or q.get(n) is None:
                    per.append((d, NOT_RUN, f"{n} not graded"))
                    continue
                gap = q["edit_sft"] - q[n]
                v = SUPPORTED if gap >= 0.01 else NOT_SUPPORTED if gap <= -0.01 else INCONCLUSIVE
                per.append((d, v, f"QWK EDIT-SFT {q['edit_sft']:.3f} - {n} {q[n]:.3f} = {_f(gap)}"))
        return combine(per)
    return check


def _table7(res, t):
    per = []
    for d in _datasets(res, t, {"Private-Biology"}):
        ae = {r["system"]: r["ae_rsr_overall"] for r in t if r["dataset"] == d}
        per.append((d, best(ae, "edit_sft", lower=True), "AE-RSR " + ", ".join(f"{k} {_f(v)}" for k, v in ae.items())))
    return combine(per)


def _table11(signals: tuple[str, ...], levels: tuple[str, ...], negligible: bool = False):
    def check(res, t):
        red, per = (res["03_audit_validation"].get("extra") or {}).get("reduction", "sum"), []
        for s, lv in [(s, lv) for s in signals for lv in levels]:
            r = next((r for r in t if r["signal"] == s and r["level"] == lv and r["reduction"] == red), None)
            if r is None or r.get("p") is None or r.get("r") is None:  # no test: no annotator labels (cpu-real)
                per.append((s, NOT_RUN, f"{lv}: {'no row' if r is None else 'no test (no labelled steps)'}"))
                continue
            if negligible:
                v = SUPPORTED if r["p"] < 0.05 and r["r"] < 0.1 else NOT_SUPPORTED if r["r"] >= 0.3 else INCONCLUSIVE
            else:
                v = SUPPORTED if r["p"] < 0.05 and r["r"] >= 0.3 else NOT_SUPPORTED if r["r"] <= 0 else INCONCLUSIVE
            per.append((s, v, f"{lv}: r {r['r']:.2f}, p {r['p']:.2g}"))
        return combine(per)
    return check


def _table13(res, t):
    per = []
    for d in _datasets(res, t, {"SAS"}):
        n = {s: [sum(r[k] for r in t if r["dataset"] == d and r["system"] == s) for k in ("marked_zero", "gold_zero")]
             for s in ("edit_sft", "int_sft")}
        ok = {"edit_sft", "int_sft"} <= {r["system"] for r in t if r["dataset"] == d} and all(x[1] for x in n.values())
        per.append(_props(d, "zero recall EDIT-SFT vs InT-SFT", n["edit_sft"], n["int_sft"]) if ok
                   else (d, NOT_RUN, "InT-SFT or EDIT-SFT not graded, or no zero-score response"))
    return combine(per)


SYSTEM_COLUMNS = ("base", "base_grpo", "base_dgpo", "int_sft", "int_sft_int_rl", "edit_sft", "edit_sft_edit_rl")
_SIG = ("supported when Δ > 0 and the Holm-corrected p (09's cluster bootstrap, paired by question) is below 1 "
        "minus 09's interval level; not supported when Δ <= 0; inconclusive otherwise. On the SAS-like "
        "dataset(s), all held-out questions (OOD where there is no ID split).")
_GAP = "supported when the gap is >= 0.01 QWK, not supported when <= -0.01, inconclusive between (no interval)."
_BEST = "strictly best on each supported, beaten on any not supported, ties only inconclusive (no interval)."
CLAIMS: tuple[Claim, ...] = (
    Claim("edit-rl-significant", "Sec. 3.2, Table 3", "“[EDIT's] gains are two to three times larger and remain "
          "significant (both p=0.0006)” — EDIT-RL against Base", "09_significance", "significance",
          "Paired Δ QWK of EDIT-RL vs Base: " + _SIG, _table3("edit_sft_edit_rl")),
    Claim("edit-sft-significant", "Sec. 3.2, Table 3", "The same sentence, for EDIT-SFT against Base",
          "09_significance", "significance", "Paired Δ QWK of EDIT-SFT vs Base: " + _SIG, _table3("edit_sft")),
    Claim("rl-seeds", "Sec. 3.2, Table 4", "“EDIT-RL outperforms GRPO in all three paired runs on both datasets, "
          "and the paired 95% CI excludes zero on Private-Biology.”", "07_evaluation", "table4",
          "Seed-wise paired Δ OOD QWK (EDIT-SFT+EDIT-RL minus EDIT-SFT+GRPO, same seeds), per dataset: supported "
          "when its t-interval over seeds lies above 0, not supported when Δ <= 0, else inconclusive.", _table4),
    Claim("sft-rl-grid", "Sec. 3.2, Table 5", "“the full combination EDIT-SFT+EDIT-RL is best on every metric”",
          "07_evaluation", "table5", "EDIT-SFT+EDIT-RL against every other arm on ID/OOD QWK and ACC (one "
          "seed, as the paper's): " + _BEST, _table5),
    Claim("ood-best", "Sec. 3.2, Table 2", "“EDIT-RL attains the highest OOD QWK on both subjects”",
          "07_evaluation", "table2", "OOD QWK of EDIT-RL against the other main-table systems, on each "
          "Private-Science-like dataset EDIT-RL was graded on: " + _BEST,
          _main_table({"Private-Biology", "Private-Physics"}, ("qwk",))),
    Claim("sas-avg-best", "Sec. 3.2, Table 1", "“EDIT-RL achieves the best results on average across all "
          "metrics” (SAS)", "07_evaluation", "table1", "Subject-average ACC, within-1, QWK and MAE (lower is "
          "better) of EDIT-RL against the other main-table systems on the SAS-like dataset: " + _BEST,
          _main_table({"SAS"}, ("acc", "within1", "qwk", "mae"))),
    Claim("localiser", "App. F (and Sec. 3.3), Table 6", "“removing the localiser costs 4.3 QWK points on "
          "SAS-History”", "07_evaluation", "table6", "QWK of EDIT-SFT minus w/o Localiser on the ablation "
          "dataset: " + _GAP, _table6(("wo_localiser",))),
    Claim("ablations", "Sec. 3.3, Table 6", "“removing any module degrades performance”", "07_evaluation",
          "table6", "QWK of EDIT-SFT minus each ablation (w/o Localiser, Checklist, Atomic), each: " + _GAP,
          _table6(("wo_localiser", "wo_checklist", "wo_atomic"))),
    Claim("counterfactual", "App. F, Table 12", "“EDIT-selected steps recover the gold mark more often than "
          "position-matched random steps on both datasets.”", "04_counterfactual_selection", "table12",
          "Success@N of EDIT minus position-matched random (successes / revisions) with Newcombe's 95% interval, "
          "on the SAS-like and Biology-like datasets: interval above 0 supported, difference <= 0 not supported, "
          "inconclusive otherwise.", _table12),
    Claim("twice-as-close", "App. D, Table 10", "“Plain GRPO ... drifts about twice as far (KL=0.064)”: EDIT-RL "
          "stays about 2x closer to the frozen EDIT-SFT probe", "06_rl", "table10_divergence",
          f"Ratio KL(EDIT-SFT+GRPO) / KL(EDIT-SFT+EDIT-RL): >= 1.5 supported, below not supported; inconclusive "
          f"when GRPO's KL < {MOVED:g} (the policies did not move). Table 10 has no interval.", _table10(False)),
    Claim("drift-position", "App. D, Table 10", "GRPO drifts further “and increasingly so deeper in the chain”, "
          "while EDIT-RL “is flat across chain position”", "06_rl", "table10_divergence",
          f"Late-minus-early tercile JSD: supported when GRPO's rises and EDIT-RL's rises less, not supported "
          f"otherwise; inconclusive when GRPO's JSD < {MOVED:g}.", _table10(True)),
    Claim("audit-separates", "App. E, Table 11", "“Answer Grounding separates the two classes with a large effect "
          "(r=0.71) ... and Prefix Grounding likewise (r=0.58), and both survive collapsing to per-rollout means”",
          "03_audit_validation", "table11", "G^a and raw G^p at the suite's NLL reduction, per step and per "
          "rollout mean: supported when every one-sided Mann-Whitney p < 0.05 and rank-biserial r >= 0.3; not "
          "supported when any r <= 0; inconclusive otherwise.", _table11(("G_a", "G_p"), ("step", "rollout mean"))),
    Claim("rubric-negligible", "App. E, Table 11", "“Rubric Grounding ... is statistically significant but "
          "practically negligible” (r=0.08)", "03_audit_validation", "table11", "G^rho per step: supported "
          "when p < 0.05 and r < 0.1; not supported when r >= 0.3; inconclusive otherwise.",
          _table11(("G_rho",), ("step",), negligible=True)),
    Claim("most-rule-responsive", "Abstract; Sec. 3.4, Table 7", "“[EDIT-SFT] is the most rule-responsive of "
          "all evaluated systems”", "08_rsr_interventions", "table7", "Overall AE-RSR on the Biology-like "
          "dataset: EDIT-SFT strictly lowest supported, another lower not supported, tied inconclusive (08 "
          "gives no interval).", _table7),
    Claim("zero-credit", "Sec. 3.2, App. H, Table 13", "“InT-SFT never withholds full credit on zero-score "
          "Physics responses, whereas EDIT-SFT correctly does so on 64% of them”", "07_evaluation", "table13",
          "Zero recall pooled over the SAS-like dataset's zero-score responses, EDIT-SFT minus InT-SFT with "
          "Newcombe's 95% interval: above 0 supported, <= 0 not supported, inconclusive otherwise.", _table13),
)


def evaluate(results: dict) -> list[Verdict]:
    """Every claim's verdict on one run's results ({stage: results JSON dict}); 'not run' where the table the
    claim is checked against is absent or empty."""
    return [Verdict(c, *(c.check(results, t) if (t := rows(results, c.stage, c.table))
                         else (NOT_RUN, f"{c.stage} has no `{c.table}` table"))) for c in CLAIMS]
