"""The paper's claims as data, each checked against one run's results JSON (the book's claims ledger).

A ``Claim`` holds the paper's sentence, where the paper says it, the results table it is checked against, its
rule in words, and ``check``: a function of the run's results that returns a verdict and what it found (the
checks: ``book/claim_rules.py``). Verdicts (``supported``, ``contradicted``, ``inconclusive``, ``partly run``,
``not run``, ``not meaningful on this data``) are decided by intervals, never by a point estimate alone, there
too. Each rule judges exactly the scope its sentence states (the paper's datasets a run's stand for:
``claim_rules.stands_for``); rows outside it may be shown, never judged.

Details: book/departures.md, section "The claims ledger (edit_lib/book/claims.py)".
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from edit_lib.book import claim_rules as rule
from edit_lib.book.claim_rules import (CONTRADICTED, INCONCLUSIVE, MAGNITUDES, NOT_MEANINGFUL, NOT_RUN, PARTLY_RUN,
                                       RUNNER_UP_RESPONSES, SCOPES, SUPPORTED, VERDICTS, rows)
from edit_lib.evaluation.caveats import run_caveats
from edit_lib.systems import ABLATIONS, EDIT_RL, EDIT_SFT, WO_LOCALISER
from edit_lib.registry import Registry

# Besides the ledger itself, the book reads these of the verdicts' vocabulary from here.
__all__ = ["CLAIMS", "Claim", "Verdict", "evaluate", "rows", "SCOPES", "VERDICTS", "SUPPORTED", "CONTRADICTED",
           "INCONCLUSIVE", "PARTLY_RUN", "NOT_RUN", "NOT_MEANINGFUL", "MAGNITUDES"]


@dataclass(frozen=True)
class Claim:
    id: str
    where: str
    sentence: str
    stage: str  # the results JSON the claim is checked against ...
    table: str  # ... and its table
    rule: str
    # (results, the table's rows) -> (verdict, found) or, where the sentence gives a number, (verdict, found,
    # (magnitude, what it read)) (``verdicts.combine_sizes``)
    check: Callable[[dict, list[dict]], tuple]


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    verdict: str
    found: str  # the numbers the rule read, per dataset
    magnitude: str = ""  # where the sentence gives a number: the paper's number against the interval (verdicts.sized)
    sized: str = ""  # what the magnitude verdict read, per item


_SIG = ("judged on the pooled held-out SAS questions only (App. G pools all 37; here 09's scope pooling every "
        "SAS-like dataset, one such dataset being its own pool); each subject's row is shown, not judged (App. H "
        "draws no conclusion from per-subject splits). Supported when 09's 95% paired interval (cluster bootstrap "
        "by question) lies above 0 and its Holm p (family of six, App. G) is below alpha = 1 minus 09's interval "
        "level; contradicted when the interval lies at or below 0; inconclusive otherwise, and always below "
        "significance.min_questions questions. The MDE beside it (80% power) is at the comparison's Holm threshold "
        "alpha / (m - rank + 1) at its rank among the m = 6, not at alpha. Magnitude (“two to three times "
        "larger”): 09's ratio of the gain to the mean gain of GRPO and InT-SFT (Table 3's gains near 0.03) with "
        "its interval from the same resamples, against the range 2-3; none where that mean gain's own interval "
        "reaches 0.")
_T3 = ("“pooling all 37 held-out questions with equal weight ... [EDIT's] gains are two to three times larger and "
       "remain significant (both p=0.0006)”")
_PAIR = ("09's paired cluster-bootstrap interval of the pooled QWK difference (`pairwise`): above 0 supported, at or "
         "below 0 contradicted, else (or below significance.min_questions questions) inconclusive; no interval: "
         "inconclusive.")
_NOINT = "the results hold no interval for it, so the verdict is inconclusive (the values are shown)."
CLAIMS: Registry[Claim] = Registry("claim", "a claims-ledger claim id")  # the ledger's order is this order
for _claim in (
    Claim("edit-rl-significant", "Sec. 3.2, App. G, Table 3", _T3 + " — EDIT-RL against Base", "09_significance",
          "significance", "Paired Δ QWK of EDIT-RL vs Base, " + _SIG, rule.table3(EDIT_RL)),
    Claim("edit-sft-significant", "Sec. 3.2, App. G, Table 3", _T3 + " — EDIT-SFT against Base", "09_significance",
          "significance", "Paired Δ QWK of EDIT-SFT vs Base, " + _SIG, rule.table3(EDIT_SFT)),
    Claim("rl-seeds", "Sec. 3.2, Table 4", "“EDIT-RL outperforms GRPO in all three paired runs on both datasets, "
          "and the paired 95% CI excludes zero on Private-Biology.”", "07_evaluation", "table4",
          "Seed-wise OOD QWK, EDIT-SFT+EDIT-RL against EDIT-SFT+GRPO (same seeds), on the datasets standing for "
          "SAS-History and Private-Biology. Wins, on each: supported when EDIT-RL is ahead on every seed (at least "
          "three), contradicted when it is not ahead on some seed (a count over this run's seeds, as the sentence's "
          "is), inconclusive with fewer than three seeds. CI, on the Private-Biology one only: supported when the "
          "paired t-interval over seeds lies above 0, contradicted when at or below 0, else inconclusive (with the "
          "seed-level MDE, noncentral t, beside the paper's Δ); SAS-History's interval is shown, not judged.",
          rule.table4),
    Claim("sft-rl-grid", "Sec. 3.2, Table 5", "“the full combination EDIT-SFT+EDIT-RL is best on every metric” "
          "(Private-Biology)", "07_evaluation", "table5", "EDIT-SFT+EDIT-RL against every other arm on ID/OOD QWK "
          "and ACC (one seed, as the paper's), on the dataset standing for Private-Biology only (not run without "
          "one): " + _NOINT, rule.table5),
    Claim("ood-best", "Sec. 3.2, Table 2", "“EDIT-RL attains the highest OOD QWK on both subjects”",
          "07_evaluation", "table2", "QWK on OOD answers only (09's `ood_test` scope, never the ID answers) of "
          "EDIT-RL minus its runner-up among the main-table systems, on each Private-Science-like dataset: 09's "
          "paired cluster-bootstrap interval by question (`pairwise`, App. G); where that split has fewer than "
          "significance.min_questions questions (the paper profile's OOD splits have 2 and 3), 09's paired "
          "response-level bootstrap (`" + RUNNER_UP_RESPONSES + "`: the same questions, responses resampled; it "
          "speaks for these questions only). Above 0 supported, at or below 0 contradicted, else inconclusive; no "
          "interval: inconclusive. `found` names the test used. Partly run when a main-table system is absent.",
          rule.ood_best),
    Claim("sas-avg-best", "Sec. 3.2, Table 1", "“EDIT-RL achieves the best results on average across all "
          "metrics” (SAS)", "07_evaluation", "table1", "Table 1's SAS-Avg only, the plain mean of the subjects' "
          "metrics as Table 1 prints it (one subject: its rows); per-subject rows are not judged. On each of ACC, "
          "within-1, QWK and MAE, EDIT-RL against its runner-up on that same average (the best other main-table "
          "system; lower MAE is better) by 09's paired cluster bootstrap with questions resampled within each "
          "subject (`subject_average`): EDIT-RL's advantage above 0 supported, at or below 0 contradicted, else (or "
          "below significance.min_questions questions in all) inconclusive. App. G's question-pooled QWK is "
          "another quantity and is not used.", rule.sas_avg_best),
    Claim("localiser", "App. F (and Sec. 3.3), Table 6", "“removing the localiser costs 4.3 QWK points on "
          "SAS-History”", "07_evaluation", "table6", "QWK of EDIT-SFT minus w/o Localiser on the dataset standing "
          "for SAS-History only (not run without one): " + _PAIR + " Magnitude: Table 6's 4.3 points (0.863 - "
          "0.820) against that interval.", rule.table6((WO_LOCALISER,), size=True)),
    Claim("ablations", "Sec. 3.3, Table 6", "“removing any module degrades performance” (SAS-History)",
          "07_evaluation", "table6", "QWK of EDIT-SFT minus each ablation (w/o Localiser, Checklist, Atomic) on the "
          "dataset standing for SAS-History only, each: " + _PAIR, rule.table6(ABLATIONS)),
    Claim("counterfactual", "App. F, Table 12", "“EDIT-selected steps recover the gold mark more often than "
          "position-matched random steps on both datasets.”", "04_counterfactual_selection", "table12",
          "Success@N of EDIT minus position-matched random, on Table 12's two datasets only (those standing for "
          "SAS-History and Private-Biology): 04's paired bootstrap interval where its table has one, else "
          "Newcombe's 95% interval of successes / rewrites (App. F: the fraction of rewrites): above 0 supported, "
          "at or below 0 contradicted, else inconclusive (MDE from the interval's SE).", rule.table12),
    Claim("twice-as-close", "App. D, Table 10", "“Plain GRPO ... drifts about twice as far (KL=0.064)”: EDIT-RL "
          "stays about 2x closer to the frozen EDIT-SFT probe (Private-Biology)", "06_rl", "table10_divergence",
          "Ratio KL(EDIT-SFT+GRPO) / KL(EDIT-SFT+EDIT-RL) on the dataset standing for Private-Biology only: "
          + _NOINT, rule.table10(False)),
    Claim("drift-position", "App. D, Table 10", "GRPO drifts further “and increasingly so deeper in the chain”, "
          "while EDIT-RL “is flat across chain position” (Private-Biology)", "06_rl", "table10_divergence",
          "Late-minus-early tercile JSD of both arms on the dataset standing for Private-Biology only: " + _NOINT,
          rule.table10(True)),
    Claim("audit-separates", "App. E, Table 11", "“Answer Grounding separates the two classes with a large effect "
          "(r=0.71) ... and Prefix Grounding likewise (r=0.58), and both survive collapsing to per-rollout means”",
          "03_audit_validation", "table11", "G^a and raw G^p at the suite's NLL reduction, per step and per "
          "rollout mean, by the one-sided Mann-Whitney test (its 95% one-sided interval of the shift): supported "
          "when every p < 0.05 with rank-biserial r >= 0.3; contradicted when any p > 0.95 (separated the other "
          "way); inconclusive otherwise.", rule.table11(("G_a", "G_p"), ("step", "rollout mean"))),
    Claim("rubric-negligible", "App. E, Table 11", "“Rubric Grounding ... is statistically significant but "
          "practically negligible” (r=0.08)", "03_audit_validation", "table11", "G^rho per step: supported "
          "when the one-sided p < 0.05 with r < 0.1; contradicted when p > 0.95 (separated the other way); "
          "inconclusive otherwise (r has no interval).",
          rule.table11(("G_rho",), ("step",), negligible=True)),
    Claim("most-rule-responsive", "Abstract; Sec. 3.4, Table 7", "“[EDIT-SFT] is the most rule-responsive of "
          "all evaluated systems”", "08_rsr_interventions", "table7", "Overall AE-RSR on the Biology-like "
          "dataset, EDIT-SFT against its runner-up: " + _NOINT, rule.table7),
    Claim("zero-credit", "Sec. 3.2, App. H, Table 13", "“InT-SFT never withholds full credit on zero-score "
          "Physics responses, whereas EDIT-SFT correctly does so on 64% of them”", "07_evaluation", "table13",
          "Zero recall on the SAS-like data's zero-score Physics responses only, EDIT-SFT minus InT-SFT with "
          "Newcombe's 95% interval: above 0 supported, at or below 0 contradicted, else inconclusive. Magnitude: "
          "each system's recall with its Wilson 95% interval against the sentence's number (InT-SFT: never, 0%; "
          "EDIT-SFT: 64%).", rule.table13),
):
    CLAIMS.add(_claim.id, _claim)


def evaluate(results: dict) -> list[Verdict]:
    """Every claim's verdict on one run's results ({stage: results JSON dict}); 'not run' where the table the
    claim is checked against is absent or empty; 'not meaningful on this data' for every claim that ran when
    01's results record caveats (``caveats.run_caveats``)."""
    caveats, out = run_caveats(results.get("01_base_policy")), []
    for c in CLAIMS.values():
        t = rows(results, c.stage, c.table)
        v, found, (size, sized) = (*c.check(results, t), ("", ""))[:3] if t else \
            (NOT_RUN, f"{c.stage} has no `{c.table}` table", ("", ""))
        if caveats and v != NOT_RUN:
            v, found = NOT_MEANINGFUL, f"01_base_policy records caveats ({'; '.join(caveats)}); the rule found: {found}"
            size = NOT_MEANINGFUL if size else ""
        out.append(Verdict(c, v, found, size, sized))
    return out