"""Tables the Phase-1 notebooks (04, 05) record from the revision tables of ``revision.generation`` and
``revision.pool``: where the rules pick (Figure 4 analogue), rejections by reason, before/after examples, and how
many rubric checklists 04 wrote, verified and lost per dataset and rubric kind (``checklist_counts``: ``rubric``
'points' or 'free_text', absent on an older cache and read as points), and the Phase-1 compute both methods spend
(``phase1_cost``, App. B)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from edit_lib.data.schema import Dataset
from edit_lib.model.policy import Policy
from edit_lib.power import paired_summary
from edit_lib.prompts.grading import SCAFFOLD
from edit_lib.revision.checklist import FAILURE_REASONS
from edit_lib.revision.pool import OK, rewritten
from edit_lib.systems import EDIT_SFT


def position_histogram(selected: pd.DataFrame, n_bins: int = 5) -> pd.DataFrame:
    """Relative positions u = k/T of the selected steps per dataset and rule (Figure 4 analogue): the share of
    a rule's picks in each of ``n_bins`` equal bins of (0, 1] (u = 1 falls in the last bin)."""
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    rows = []
    for (ds, rule), g in selected.groupby(["dataset", "rule"], sort=True):
        b = np.clip(np.ceil(g["u"].to_numpy(float) * n_bins).astype(int) - 1, 0, n_bins - 1)
        counts = np.bincount(b, minlength=n_bins)
        rows += [dict(dataset=ds, rule=rule, lo=edges[i], hi=edges[i + 1], picks=int(counts[i]),
                      share=counts[i] / len(g)) for i in range(n_bins)]
    return pd.DataFrame(rows, columns=["dataset", "rule", "lo", "hi", "picks", "share"])


def status_counts(revisions: pd.DataFrame) -> pd.DataFrame:
    """Revisions per dataset, rule and status ("ok" or the first rejection reason), with the share of the
    rule's revisions in that dataset."""
    t = revisions.groupby(["dataset", "rule", "status"], sort=True).size().rename("revisions").reset_index()
    t["share"] = t["revisions"] / t.groupby(["dataset", "rule"])["revisions"].transform("sum")
    return t


def examples(outcome: pd.DataFrame, n: int = 4) -> pd.DataFrame:
    """A few before/after pairs of revised steps: kept revisions first, then accepted, then rejected, one per
    distinct unit, in a stable order."""
    o = outcome.drop_duplicates("unit_id").copy()
    o["_order"] = np.where(o["kept"], 0, np.where(o["status"] == OK, 1, 2))
    o = o.sort_values(["_order", "dataset", "unit_id"]).groupby("_order").head(max(1, n // 2)).head(n)
    return pd.DataFrame(dict(dataset=o["dataset"], unit=o["unit_id"], rule=o["rule"], k=o["k"], gold=o["gold"],
                             before=o["target"], after=[" | ".join(s) for s in o["sub_steps"]],
                             status=o["status"], successes=o["n_success"])).reset_index(drop=True)


def continuations_by_step(rewrites: pd.DataFrame, continuations: pd.DataFrame) -> pd.DataFrame:
    """The outcome filter's continuations (App. F) by the step k their revised prefix ends at, per dataset:
    accepted rewrites, continuations, those with a parsed final mark and those reaching the gold mark. Beyond the
    paper: it shows whether the policy can go on from a revision at every depth of its chain (a rule that picks
    early steps fails where continuations after an early revision do not end)."""
    cols = ["dataset", "k", "rewrites", "continuations", "parsed", "reach_gold"]
    ok = rewrites[rewrites["status"] == OK][["unit_id", "dataset", "k", "gold"]]
    c = continuations.merge(ok, on="unit_id", how="inner")
    if not len(c):
        return pd.DataFrame(columns=cols)
    c = c.assign(_parsed=c["mark"].notna(), _hit=c["mark"].to_numpy(float) == c["gold"].to_numpy(float))
    g = c.groupby(["dataset", "k"], sort=True)
    t = pd.DataFrame({"rewrites": g["unit_id"].nunique(), "continuations": g.size(),
                      "parsed": g["_parsed"].sum().astype(int), "reach_gold": g["_hit"].sum().astype(int)})
    return t.reset_index()[cols]


def kept_by_rule_and_step(outcome: pd.DataFrame) -> pd.DataFrame:
    """The outcome filter's result (``pool.outcome_filter``; Sec. 2.2, App. F) per dataset, selection rule and the
    step k each revision rewrote: revisions written (``pool.rewritten``), accepted and kept (a continuation
    reaches the gold mark). Beyond the paper: whether a rule's pool is thin because of the depths it picks."""
    cols = ["dataset", "rule", "k", "rewritten", "accepted", "kept"]
    o = outcome[rewritten(outcome["status"])]
    if not len(o):
        return pd.DataFrame(columns=cols)
    g = o.assign(_ok=o["status"] == OK, _kept=o["kept"].astype(bool)).groupby(["dataset", "rule", "k"], sort=True)
    t = pd.DataFrame({"rewritten": g.size(), "accepted": g["_ok"].sum().astype(int),
                      "kept": g["_kept"].sum().astype(int)})
    return t.reset_index()[cols]


def pool_beside_paper(book: pd.DataFrame) -> pd.DataFrame:
    """EDIT's pool per dataset (``pool.bookkeeping`` rows) beside the paper's Private-Biology pool (App. B:
    revisions, golden rollouts, their ratio, incorrect rollouts), the paper's row labelled as reference data."""
    from edit_lib.paper_reference import value

    cite = dict(table="App. B", dataset="Private-Science", subject="Biology", system=EDIT_SFT)
    paper_rev = value(metric="revisions", **cite)
    paper_gold = value(metric="golden_rollouts", **cite)
    ours = pd.DataFrame(dict(dataset=book["dataset"], source="this run", incorrect_rollouts=book["incorrect_rollouts"],
                             kept_revisions=book["kept"], golden_rollouts=book["golden_rollouts"],
                             correct_available=book["correct_rollouts"], pool_size=book["pool_size"],
                             golden_per_revision=book["golden_per_kept"]))
    paper = pd.DataFrame([dict(dataset="Private-Biology", source="paper (App. B)",
                               incorrect_rollouts=value("App. B", "incorrect_rollouts", ""),
                               kept_revisions=paper_rev, golden_rollouts=paper_gold, correct_available=np.nan,
                               pool_size=paper_rev + paper_gold, golden_per_revision=paper_gold / paper_rev)])
    return pd.concat([ours, paper], ignore_index=True)


def paired_success_contrast(outcome: pd.DataFrame, rule: str = "edit", rival: str = "random", n_boot: int = 2000,
                            ci: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Success@N of ``rule`` minus ``rival`` per dataset (App. F, Table 12), paired by incorrect rollout: the
    rollouts both rules rewrote are resampled whole (``numpy.random.default_rng(seed)``, ``n_boot`` times) and
    the ratio Success@N = successes / rewrites is recomputed for each rule. Columns: dataset, rule, rival,
    rollouts, delta and ``power.paired_summary``'s delta_ci_low/high (percentile, level ``ci``), delta_se
    (bootstrap SD) and mde (80% power, two-sided 1 - ``ci``)."""
    from edit_lib.revision.pool import ROLLOUT, rewritten

    o = outcome[rewritten(outcome["status"]) & outcome["rule"].isin([rule, rival])]
    rows = []
    for ds, g in o.groupby("dataset", sort=True):
        per = g.groupby([*ROLLOUT, "rule"])["kept"].agg(["size", "sum"]).unstack("rule").dropna()
        if rule not in per["size"].columns or rival not in per["size"].columns or per.empty:
            rows.append(dict(dataset=ds, rule=rule, rival=rival, rollouts=0))
            continue
        n_a, s_a = per["size"][rule].to_numpy(float), per["sum"][rule].to_numpy(float)
        n_b, s_b = per["size"][rival].to_numpy(float), per["sum"][rival].to_numpy(float)
        idx = np.random.default_rng(seed).integers(0, len(per), size=(n_boot, len(per)))
        boot = s_a[idx].sum(1) / n_a[idx].sum(1) - s_b[idx].sum(1) / n_b[idx].sum(1)
        s = paired_summary(s_a.sum() / n_a.sum() - s_b.sum() / n_b.sum(), boot, ci)
        rows.append(dict(dataset=ds, rule=rule, rival=rival, rollouts=len(per), delta=s.delta,
                         delta_ci_low=s.ci_low, delta_ci_high=s.ci_high, delta_se=s.se, mde=s.mde))
    return pd.DataFrame(rows, columns=["dataset", "rule", "rival", "rollouts", "delta", "delta_ci_low",
                                       "delta_ci_high", "delta_se", "mde"])


# ------------------------------------------------------------------ checklists (Sec. 2.2): written, verified, lost

NO_POINTS = "no_points"  # the checklists table's status when nothing was written (``generation.write_checklists``)


def checklist_counts(checklists: pd.DataFrame, budget: int) -> pd.DataFrame:
    """Per (dataset, rubric), the Sec. 2.2 checklists: ``responses``, ``written`` (generated: not no_points),
    ``verified`` (status ok), ``failed`` (written, not ok), ``truncated`` (not ok and ``n_tokens`` >= ``budget``,
    the checklist role's token budget), one column per failure status present (``FAILURE_REASONS`` order, then
    any other, e.g. no_points) and ``clause_share`` (mean; NaN for points rubrics)."""
    c = checklists.copy()
    if "rubric" not in c:
        c["rubric"] = "points"
    if "clause_share" not in c:
        c["clause_share"] = np.nan
    c["rubric"] = c["rubric"].fillna("points")
    present = set(c["status"]) - {OK}
    reasons = [r for r in FAILURE_REASONS if r in present] + sorted(present - set(FAILURE_REASONS))
    cut = (pd.to_numeric(c["n_tokens"], errors="coerce") >= budget) & (c["status"] != OK)
    rows = []
    for (ds, rubric), g in c.groupby(["dataset", "rubric"], sort=True):
        written = int((g["status"] != NO_POINTS).sum())
        verified = int((g["status"] == OK).sum())
        rows.append(dict(dataset=ds, rubric=rubric, responses=len(g), written=written, verified=verified,
                         failed=written - verified, truncated=int(cut[g.index].sum()),
                         **{r: int((g["status"] == r).sum()) for r in reasons},
                         clause_share=float(pd.to_numeric(g["clause_share"], errors="coerce").mean())))
    return pd.DataFrame(rows, columns=["dataset", "rubric", "responses", "written", "verified", "failed", "truncated",
                                       *reasons, "clause_share"])


# ------------------------------------------------------------------ Phase-1 compute (App. B, "Compute budget")
# What EDIT and InT spend on the same incorrect rollouts, in tokens the policy processes (a proxy for FLOPs at a
# fixed model size). EDIT: the probe (Eq. 1-2; one packed forward per rollout, prompt + completion plus one scaffold
# block per boundary, App. B), the audit (Eq. 3-4; four context variants, ``signals.grounding``, counted at full
# length: an upper bound), the checklist, the rewrites and the outcome filter's continuations (prompt + generated
# tokens). InT: the proposals and their continuations. The audit of correct rollouts behind Alg. 1's percentiles
# is shared by every rule and not counted (the paper's budget counts the incorrect rollouts).

AUDIT_VARIANTS = 4  # full, rubric-masked, answer-masked, no-prefix (signals.grounding.VARIANTS)
COLUMNS = ["method", "component", "calls", "prompt_tokens", "generated_tokens", "tokens"]


def _forward_rows(policy: Policy, datasets: dict[str, Dataset], rollouts: pd.DataFrame) -> pd.DataFrame:
    index = {(name, r.id): (ds.question(r), r) for name, ds in datasets.items() for r in ds.responses}
    scaffold = len(policy.tokenizer(SCAFFOLD, add_special_tokens=False)["input_ids"])
    rows = []
    for r in rollouts.itertuples():
        q, resp = index[(r.dataset, r.response_id)]
        seq = len(policy.tokenizer(policy.grading_input(q, resp.answer) + r.text)["input_ids"])
        rows.append(dict(seq=seq, blocks=(int(r.n_steps) + 1) * scaffold))
    return pd.DataFrame(rows, columns=["seq", "blocks"])


def _generation(method: str, component: str, table: pd.DataFrame) -> dict:
    p, g = int(table["n_prompt_tokens"].sum()), int(table["n_tokens"].sum())
    calls = int((table["n_prompt_tokens"] > 0).sum())  # a row rejected before generation cost nothing
    return dict(method=method, component=component, calls=calls, prompt_tokens=p, generated_tokens=g, tokens=p + g)


def phase1_cost(policy: Policy, datasets: dict[str, Dataset], rollouts: pd.DataFrame,
                edit_generation: dict[str, pd.DataFrame], int_generation: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The App. B cost table for the incorrect rollouts ``rollouts`` (01's rows: text, n_steps) that both
    methods repair. ``edit_generation`` / ``int_generation`` map a component name (e.g. 'checklist',
    'rewrite', 'continuations'; 'proposals', 'continuations') to its generation table (``n_prompt_tokens``,
    ``n_tokens`` per call). Rows in ``COLUMNS``; a 'total' row per method."""
    fw = _forward_rows(policy, datasets, rollouts)
    rows = [dict(method="EDIT", component="probe (packed, Eq. 1-2)", calls=len(fw), prompt_tokens=0,
                 generated_tokens=0, tokens=int((fw["seq"] + fw["blocks"]).sum())),
            dict(method="EDIT", component="audit (4 variants, Eq. 3-4)", calls=AUDIT_VARIANTS * len(fw),
                 prompt_tokens=0, generated_tokens=0, tokens=int(AUDIT_VARIANTS * fw["seq"].sum()))]
    rows += [_generation("EDIT", name, t) for name, t in edit_generation.items()]
    rows += [_generation("InT", name, t) for name, t in int_generation.items()]
    out = pd.DataFrame(rows, columns=COLUMNS)
    totals = out.groupby("method", sort=False)[COLUMNS[2:]].sum().reset_index().assign(component="total")
    return pd.concat([out, totals[COLUMNS]], ignore_index=True)
