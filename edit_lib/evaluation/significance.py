"""Question-level significance (App. G "Question-Level Significance Protocol"; Table 3, tab:sas-sig) and Table 1's
SAS-Avg with an interval. Longer than 400 lines because the bootstrap, Holm's family, Table 3's layout and the
subject average must share one set of conventions.

The question is the unit of independence: per-question QWK pooled with equal weight (:func:`pooled_qwk`), a
cluster bootstrap over whole questions (:func:`cluster_bootstrap`; p-value: :func:`bootstrap_p`), comparisons
paired against ``Base``, and Holm correction (:func:`holm`) across the paper's six comparisons against ``Base``
(``systems.PAPER_FAMILY``, m = 6). Table 3's layout: :func:`format_table3`. ``subject_average``: the plain mean
over the subjects of each subject's metrics (``tables.main_table``) under a bootstrap stratified by subject, on which
the ledger judges "EDIT-RL achieves the best results on average across all metrics" (Sec. 3.2) against its runner-up
(the question-pooled QWK above weights questions, not subjects); ``response_bootstrap`` and ``versus_runner_up`` for
runs with too few held-out questions.

Details: book/departures.md, section "Question-level significance (edit_lib/evaluation/significance.py)".
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from edit_lib import metrics
from edit_lib.evaluation.tables import TABLE_METRICS, first_seed
from edit_lib.power import paired_summary, percentile_interval
from edit_lib.systems import (ABLATIONS, BASE, BASE_GRPO, BASELINES, EDIT_RL, EDIT_SFT, INT_SFT, MAIN,
                              PAPER_FAMILY)

KEYS = ("system", "dataset", "split", "question_id")
MAIN_RIVALS = tuple(s for s in MAIN if s != EDIT_RL)  # the main tables' other systems (Tables 1-2), for the runner-up
TOO_FEW, NOT_RUN = "too few questions", "not run"


def question_table(preds: pd.DataFrame, invalid: str = "wrong") -> pd.DataFrame:
    """Per-question QWK table (the unit of App. G's bootstrap; saved by 07 for 09).

    ``preds``: one greedy prediction per response, columns ``system, dataset, split, question_id,
    response_id, gold, mark, max_mark``; a missing ``mark`` is a parse failure, scored as
    ``metrics.grading_metrics`` does (``"wrong"``: ``metrics.farthest_mark``; ``"zero"``: 0; ``"exclude"``:
    row dropped). Returns one row per (system, dataset, split, question_id) with ``qwk`` (NaN where undefined,
    as ``metrics.quadratic_weighted_kappa``), ``n`` (responses scored) and ``n_invalid``. A question whose
    every response is excluded keeps its row, with ``n = 0`` and ``qwk`` NaN.
    """
    if invalid not in metrics.INVALID_MODES:
        raise ValueError(f"invalid must be one of {metrics.INVALID_MODES}, got {invalid!r}")
    missing = [c for c in (*KEYS, "response_id", "gold", "mark", "max_mark") if c not in preds.columns]
    if missing:
        raise ValueError(f"preds lacks columns {missing}")
    rows = []
    for key, g in preds.groupby(list(KEYS), sort=True, dropna=False):
        mm = pd.unique(g["max_mark"])
        if len(mm) != 1:
            raise ValueError(f"question {key} has inconsistent max marks {sorted(mm)}")
        m = int(mm[0])
        gold = g["gold"].astype(int).to_numpy()
        fail = g["mark"].isna().to_numpy()
        mark = g["mark"].to_numpy(dtype=float, na_value=np.nan).copy()
        if invalid == "wrong":
            mark[fail] = [metrics.farthest_mark(int(x), m) for x in gold[fail]]
        elif invalid == "zero":
            mark[fail] = 0
        else:
            gold, mark = gold[~fail], mark[~fail]
        qwk = metrics.quadratic_weighted_kappa(gold, mark.astype(int), m) if gold.size else float("nan")
        rows.append((*key, qwk, int(gold.size), int(fail.sum())))
    return pd.DataFrame(rows, columns=[*KEYS, "qwk", "n", "n_invalid"])


def pooled_qwk(q: np.ndarray) -> float:
    """Question-level pooled QWK (App. G: "all held-out questions pooled with equal weight").

    The mean over questions of per-question QWK, ignoring undefined (NaN) questions; NaN if none is defined.
    This is *not* ``metrics``' ``qwk_pooled``, which pools responses into one confusion matrix.
    """
    q = np.asarray(q, dtype=float)
    ok = ~np.isnan(q)
    return float(q[ok].mean()) if ok.any() else float("nan")


def resample_indices(n_questions: int, n_boot: int, seed: int) -> np.ndarray:
    """The cluster bootstrap's (n_boot x n_questions) matrix of question indices (App. G), drawn with
    replacement from a seeded ``numpy.random.Generator``; each entry selects a whole question."""
    return np.random.default_rng(seed).integers(0, n_questions, size=(n_boot, n_questions))


def _boot_means(x: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Mean over each resample's defined questions: ``x`` (S x Q, NaN = undefined), ``counts`` (B x Q draws
    per question) -> (S x B); NaN where a resample draws no defined question."""
    ok = ~np.isnan(x)
    num = counts @ np.where(ok, x, 0.0).T
    den = counts @ ok.T.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan).T


def bootstrap_p(delta_boot: np.ndarray) -> float:
    """Two-sided bootstrap p of a paired difference (App. G; the paper does not define its p):
    ``min(1, 2 * min(1 + #{D* <= 0}, 1 + #{D* >= 0}) / (B_valid + 1))`` over the non-NaN resamples."""
    d = delta_boot[~np.isnan(delta_boot)]
    if not d.size:
        return float("nan")
    return float(min(1.0, 2 * min(1 + (d <= 0).sum(), 1 + (d >= 0).sum()) / (d.size + 1)))


def _paired(d: np.ndarray, counts: np.ndarray, ci: float, db: np.ndarray | None = None) -> tuple[dict, np.ndarray]:
    """Paired-difference statistics of per-question differences ``d`` (Q, NaN = unpaired) over the resamples
    ``counts`` (B x Q; ``db``: their means if computed): point, bootstrap p and ``power.paired_summary``'s
    percentile CI, SE and MDE (80% power, two-sided 1 - ci)."""
    db = _boot_means(d[None, :], counts)[0] if db is None else db
    s = paired_summary(pooled_qwk(d), db, ci)
    return dict(delta=s.delta, delta_ci_low=s.ci_low, delta_ci_high=s.ci_high, p=bootstrap_p(db),
                n_paired=int((~np.isnan(d)).sum()), n_boot_nan_delta=int(np.isnan(db).sum()), delta_se=s.se,
                mde=s.mde), db


def _counts(n_q: int, n_boot: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    idx = resample_indices(n_q, n_boot, seed)
    flat = (idx + n_q * np.arange(n_boot)[:, None]).ravel()
    return idx, np.bincount(flat, minlength=n_boot * n_q).reshape(n_boot, n_q).astype(float)


def _matrix(per_question: pd.DataFrame, systems: list[str]) -> tuple[np.ndarray, list]:
    pq = per_question[per_question["system"].isin(systems)]
    if pq.duplicated(["system", "question_id"]).any():
        raise ValueError("per_question has duplicate (system, question_id) rows: pass one scope at a time")
    qids = sorted(pd.unique(pq["question_id"]))
    return (pq.pivot(index="system", columns="question_id", values="qwk")
            .reindex(index=systems, columns=qids).to_numpy(dtype=float)), qids


def cluster_bootstrap(per_question: pd.DataFrame, systems: Sequence[str], base: str = BASE,
                      n_boot: int = 10000, ci: float = 0.95, seed: int = 0) -> dict:
    """Cluster bootstrap over questions with paired differences against ``base`` (App. G, Table 3).

    ``per_question``: columns ``system, question_id, qwk`` for one scope. One index matrix
    (:func:`resample_indices`, ``n_boot`` draws of Q question ids from the union of ids) is shared by every
    system, so differences are paired on the same resampled questions. Per system: point = :func:`pooled_qwk`
    over all questions; percentile CI from the resampled pooled QWKs (each the mean over the resample's
    questions defined for that system; a resample with none defined is NaN, counted in ``n_boot_nan`` and
    excluded). A question absent for a system counts as undefined for it.

    Paired difference: ``d_q = qwk_sys - qwk_base`` on the questions defined for both (questions undefined for
    either are left out of that comparison; ``n_paired`` counts the rest); point = mean of ``d_q``; bootstrap
    = mean of ``d_q`` over each resample's paired questions. p-value (:func:`bootstrap_p`), two-sided:
    ``p = min(1, 2 * min((1 + #{D* <= 0}) / (B_valid + 1), (1 + #{D* >= 0}) / (B_valid + 1)))``; its floor is
    ``2 / (B_valid + 1)``. The paper does not define its p; its reported 0.0006 is consistent with a floor of
    ``1 / (B + 1)`` times Holm's factor (6 / 10001 for B = 10,000), which this definition would double.

    Returns a dict: ``table`` (one row per system: system, qwk, ci_low, ci_high, n_defined, n_undefined,
    n_boot_nan, delta, delta_ci_low, delta_ci_high, p, n_paired, n_boot_nan_delta, delta_se (bootstrap SE of
    the paired difference), mde (``power.paired_summary``); delta etc. NaN for base),
    ``boot`` and ``delta_boot`` (S x B), ``indices`` (B x Q), ``systems``, ``question_ids``, ``n_questions``,
    ``n_boot``.
    """
    systems = list(dict.fromkeys(systems))
    if base not in systems:
        raise ValueError(f"base system {base!r} not in systems {systems}")
    x, qids = _matrix(per_question, systems)
    n_q = len(qids)
    idx, counts = _counts(n_q, n_boot, seed)
    b = _boot_means(x, counts)
    d = x - x[systems.index(base)]
    db = _boot_means(d, counts)
    rows = []
    for i, s in enumerate(systems):
        lo, hi = percentile_interval(b[i], ci)
        r = dict(system=s, qwk=pooled_qwk(x[i]), ci_low=lo, ci_high=hi, n_defined=int((~np.isnan(x[i])).sum()),
                 n_undefined=int(np.isnan(x[i]).sum()), n_boot_nan=int(np.isnan(b[i]).sum()))
        if s == base:
            r.update({k: np.nan for k in ("delta", "delta_ci_low", "delta_ci_high", "p", "n_paired",
                                          "n_boot_nan_delta", "delta_se", "mde")})
        else:
            stats_, _ = _paired(d[i], counts, ci, db[i])
            r.update(stats_)
        rows.append(r)
    return dict(table=pd.DataFrame(rows), boot=b, delta_boot=db, indices=idx, systems=systems,
                question_ids=qids, n_questions=n_q, n_boot=n_boot)


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm step-down adjusted p-values (App. G: "Holm correction ... across the six comparisons").

    ``p_(k)`` (k-th smallest of m) becomes ``max_{j <= k} min(1, (m - j + 1) p_(j))``: monotone, capped at 1.
    NaN inputs come back NaN and are not counted in the family size m.
    """
    p = np.asarray(pvalues, dtype=float).ravel()
    ok = ~np.isnan(p)
    if ((p[ok] < 0) | (p[ok] > 1)).any():
        raise ValueError("p-values must lie in [0, 1]")
    out = np.full(p.shape, np.nan)
    m = int(ok.sum())
    if m:
        order = np.argsort(p[ok], kind="stable")
        adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[ok][order]))
        vals = np.empty(m)
        vals[order] = adj
        out[ok] = vals
    return out


def significance_table(per_question: pd.DataFrame, n_boot: int = 10000, ci: float = 0.95, seed: int = 0,
                       scope_cols: Sequence[str] = ("dataset",), base: str = BASE,
                       family: Sequence[str] = PAPER_FAMILY, min_questions: int = 0) -> pd.DataFrame:
    """Table 3's numbers per scope (App. G): cluster bootstrap of every system present, Holm within families.

    For each scope (groups of ``scope_cols``, sorted; scope i uses seed ``seed + i``) runs :func:`cluster_bootstrap`,
    then Holm-corrects (:func:`holm`) the paper family with m = len(``family``) always (App. G: "the six comparisons
    against Base"): a member absent from the scope is a row with ``status`` "not run" and no numbers, and it, like a
    member without a p, enters the correction as p = 1. The "other" family (every other non-base system present) is
    corrected separately, and so is the "baseline" family (the profile's own baselines, ``systems.BASELINES``), so
    adding one moves no other p. One row per (scope, system): scope cols, system, family, status, qwk, CI, delta,
    its CI, delta_se, mde, p, p_holm, p_shown (the Holm p as text; "too few questions" when the scope has fewer than
    ``min_questions``, whose p is then descriptive only), n_questions, n_defined, n_paired, n_boot, few_questions.
    """
    scope_cols = list(scope_cols)
    fam = list(family)
    cols = [*scope_cols, "system", "family", "status", "qwk", "ci_low", "ci_high", "delta", "delta_ci_low",
            "delta_ci_high", "delta_se", "mde", "p", "p_holm", "p_shown", "n_questions", "n_defined", "n_paired",
            "n_boot", "few_questions"]
    out = []
    for i, (key, g) in enumerate(per_question.groupby(scope_cols, sort=True, dropna=False)):
        present = list(pd.unique(g["system"]))
        others = sorted(s for s in present if s != base and s not in fam)  # the other and baseline families
        systems = [base] + [s for s in fam if s in present] + others
        res = cluster_bootstrap(g, systems, base=base, n_boot=n_boot, ci=ci, seed=seed + i)
        t = res["table"].set_index("system")
        t = t.reindex([base] + fam + others).reset_index()  # absent paper systems: rows of NaN
        t["family"] = ["reference" if s == base else "paper" if s in fam else "baseline" if s in BASELINES else "other"
                       for s in t["system"]]
        t["status"] = ["reference" if s == base else "run" if s in present else NOT_RUN for s in t["system"]]
        t["p_holm"] = np.nan
        paper = (t["family"] == "paper").to_numpy()
        adj = holm(t.loc[paper, "p"].fillna(1.0).to_numpy())  # m = len(family); missing p counts as 1
        t.loc[paper, "p_holm"] = np.where(t.loc[paper, "p"].isna(), np.nan, adj)
        for apart in ("other", "baseline"):
            rows = t["family"] == apart
            if rows.any():
                t.loc[rows, "p_holm"] = holm(t.loc[rows, "p"].to_numpy())
        for c, v in zip(scope_cols, key if isinstance(key, tuple) else (key,)):
            t[c] = v
        t["n_questions"], t["n_boot"] = res["n_questions"], n_boot
        t["few_questions"] = res["n_questions"] < min_questions
        t["p_shown"] = [p_text(r) for r in t.to_dict("records")]
        out.append(t[cols])
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=cols)


def pairwise_table(per_question: pd.DataFrame, n_boot: int = 10000, ci: float = 0.95, seed: int = 0,
                   scope_cols: Sequence[str] = ("dataset",), target: str = EDIT_RL,
                   rivals: Sequence[str] = MAIN_RIVALS, pairs: Sequence[tuple[str, str]] = tuple(
                       (EDIT_SFT, a) for a in ABLATIONS), min_questions: int = 0) -> pd.DataFrame:
    """Paired cluster-bootstrap comparisons beyond Base (App. G's protocol), for claims that need an interval:
    ``target`` against its runner-up (the best of ``rivals`` present, by pooled QWK: Table 2's "highest OOD
    QWK"; ``kind`` "runner-up") and each pair of ``pairs`` (default EDIT-SFT against each Table 6 ablation;
    ``kind`` "pair"). One row per comparison and scope: system, versus, delta (system minus versus) with CI,
    delta_se, mde, p (unadjusted, two-sided), n_paired, n_questions, few_questions. Scope i uses seed + i."""
    scope_cols = list(scope_cols)
    rows = []
    for i, (key, g) in enumerate(per_question.groupby(scope_cols, sort=True, dropna=False)):
        present = set(g["system"])
        todo = [(a, b, "pair") for a, b in pairs if a in present and b in present]
        if target in present:
            q = {s: pooled_qwk(g.loc[g["system"] == s, "qwk"].to_numpy()) for s in rivals if s in present}
            q = {s: v for s, v in q.items() if not np.isnan(v)}
            if q:
                todo.insert(0, (target, max(q, key=q.get), "runner-up"))
        if not todo:
            continue
        systems = list(dict.fromkeys(s for a, b, _ in todo for s in (a, b)))
        x, qids = _matrix(g, systems)
        _, counts = _counts(len(qids), n_boot, seed + i)
        scope = dict(zip(scope_cols, key if isinstance(key, tuple) else (key,)))
        for a, b, kind in todo:
            st, _ = _paired(x[systems.index(a)] - x[systems.index(b)], counts, ci)
            rows.append(dict(**scope, system=a, versus=b, kind=kind, **st, n_questions=len(qids),
                             few_questions=len(qids) < min_questions))
    return pd.DataFrame(rows)


# Table 3's sentence: "baseline gains near 0.03 do not survive correction, whereas EDIT's gains are two to three
# times larger" (Sec. 3.2): the baselines whose gains are near 0.03 in Table 3 (GRPO +0.034, InT-SFT +0.033)
NEAR_003 = (BASE_GRPO, INT_SFT)


def gain_ratios(per_question: pd.DataFrame, n_boot: int = 10000, ci: float = 0.95, seed: int = 0,
                scope_cols: Sequence[str] = ("dataset",), targets: Sequence[str] = (EDIT_SFT, EDIT_RL),
                baselines: Sequence[str] = NEAR_003, base: str = BASE) -> pd.DataFrame:
    """How many times the baselines' gain each target's gain over Base is (Table 3, Sec. 3.2): ``ratio`` =
    Delta_target / mean(Delta of ``baselines``), each Delta the paired pooled-QWK difference against ``base``
    (App. G), with a percentile interval from the same question resamples (scope i: seed + i, as
    :func:`significance_table`). The ratio has no interval where the baselines' mean gain itself has an interval
    reaching 0 (``denominator_ci_low`` / ``_high``): ``defined`` is False there. One row per scope and target."""
    rows = []
    for i, (key, g) in enumerate(per_question.groupby(list(scope_cols), sort=True, dropna=False)):
        present = set(g["system"])
        if base not in present or not set(baselines) <= present:
            continue
        systems = [base, *baselines, *[t for t in targets if t in present]]
        x, qids = _matrix(g, systems)
        _, counts = _counts(len(qids), n_boot, seed + i)
        d = x - x[0]
        db = _boot_means(d, counts)
        den_b = db[1:1 + len(baselines)].mean(axis=0)
        den = float(np.mean([pooled_qwk(d[1 + j]) for j in range(len(baselines))]))
        den_lo, den_hi = percentile_interval(den_b, ci)
        defined = den_lo > 0 or den_hi < 0
        for j, t in enumerate(systems[1 + len(baselines):]):
            num = pooled_qwk(d[1 + len(baselines) + j])
            with np.errstate(invalid="ignore", divide="ignore"):
                lo, hi = percentile_interval(db[1 + len(baselines) + j] / den_b, ci) if defined else (np.nan, np.nan)
            rows.append(dict(zip(scope_cols, key if isinstance(key, tuple) else (key,)), system=t,
                             baselines="+".join(baselines), delta=num, baseline_delta=den,
                             ratio=num / den if den else np.nan, ratio_ci_low=lo, ratio_ci_high=hi,
                             denominator_ci_low=den_lo, denominator_ci_high=den_hi, defined=defined,
                             n_questions=len(qids)))
    return pd.DataFrame(rows)


def _fmt_p(p: float) -> str:
    return "n/a" if p is None or np.isnan(p) else f"{p:.3f}" if p >= 0.01 else f"{p:.2g}"


def p_text(r: dict) -> str:
    """The Holm p as Table 3 shows it: "--" for Base, "not run", "too few questions" below
    ``significance.min_questions`` (App. G's bootstrap needs enough question clusters), else the number."""
    if r.get("family") == "reference":
        return "--"
    if r.get("status") == NOT_RUN:
        return NOT_RUN
    return TOO_FEW if r.get("few_questions") else _fmt_p(r.get("p_holm"))


def format_table3(sig: pd.DataFrame, labels: dict[str, str],
                  scope_cols: Sequence[str] = ("dataset",)) -> pd.DataFrame:
    """Table 3's layout (tab:sas-sig) from :func:`significance_table`: per scope, ``Method | QWK [95% CI] |
    Δ vs Base (Holm p) | Δ [95% CI] | MDE (80% power)``, e.g. ``0.760 [0.677, 0.830]`` and ``+0.034
    (p=0.391)``; base shows ``--``, a paper system the run lacks "not run", a scope below
    ``min_questions`` "(too few questions)" in place of the p."""
    rows = []
    for r in sig.to_dict("records"):
        qwk = "n/a" if pd.isna(r["qwk"]) else f"{r['qwk']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
        if r.get("few_questions", False):
            qwk += f" (only {int(r['n_questions'])} questions)"
        shown = r.get("p_shown") or p_text(r)
        if r["family"] == "reference" or shown == NOT_RUN:
            delta, ival, mde = shown, "", ""
        elif pd.isna(r["delta"]):
            delta, ival, mde = "n/a", "", ""
        else:
            delta = f"{r['delta']:+.3f} ({shown if shown == TOO_FEW else 'p=' + shown})"
            lo, hi = r.get("delta_ci_low", np.nan), r.get("delta_ci_high", np.nan)
            ival = "" if pd.isna(lo) or pd.isna(hi) else f"[{lo:+.3f}, {hi:+.3f}]"
            mde = "n/a" if pd.isna(r.get("mde", np.nan)) else f"{r['mde']:.3f}"
        rows.append({**{c: r[c] for c in scope_cols if c in sig.columns},
                     "Method": labels.get(r["system"], r["system"]), "QWK [95% CI]": qwk,
                     "Δ vs Base (Holm p)": delta, "Δ [95% CI]": ival, "MDE (80% power)": mde})
    return pd.DataFrame(rows)


def held_out_scopes(pq: pd.DataFrame) -> pd.DataFrame:
    """07's per-question table in every scope 09 tests (App. G): each split alone; a dataset's held-out questions
    together (ID test and OOD); and, where several datasets are OOD-only (Table 1's layout, one per subject as the
    paper profile's SAS files), those pooled as Table 3 pools SAS's 37 questions (question ids prefixed)."""
    scoped = [pq.assign(scope=pq["split"])]
    scoped += [g.assign(scope="all held-out") for _, g in pq.groupby("dataset") if g["split"].nunique() > 1]
    ood_only = [n for n, g in pq.groupby("dataset") if set(g["split"]) == {"ood_test"}]
    if len(ood_only) > 1:
        g = pq[pq["dataset"].isin(ood_only)]
        scoped.append(g.assign(question_id=g["dataset"] + "/" + g["question_id"].astype(str),
                               dataset="+".join(ood_only), scope="all held-out"))
    return pd.concat(scoped, ignore_index=True)


def few_questions_warning(sig: pd.DataFrame, min_questions: int) -> list[str]:
    """A warning naming every scope with fewer than ``significance.min_questions`` held-out questions ([] when
    none): a cluster bootstrap over so few clusters understates the uncertainty."""
    few = sig[sig["few_questions"]].drop_duplicates(["dataset", "scope"])
    if not len(few):
        return []
    return ["fewer than significance.min_questions = " + str(min_questions) + " held-out questions in "
            + ", ".join(f"{r.dataset}/{r.scope} ({r.n_questions})" for r in few.itertuples())
            + ": a cluster bootstrap over so few questions understates the uncertainty; read those intervals and "
              "p-values as descriptive only"]


# ---------------------------------------------------------------- Table 1's subject average, response level

LOWER_IS_BETTER = {"mae"}


def table1_rows(preds: pd.DataFrame) -> pd.DataFrame:
    """07's predictions Table 1 is built from: each system's first seed (``tables.first_seed``), the OOD answers of
    the datasets evaluated on OOD questions only (no ID test split), one ``block`` per (dataset, subject)."""
    p = first_seed(preds[preds["system"].isin(MAIN)])
    ood_only = [d for d, g in p.groupby("dataset") if set(g["split"]) == {"ood_test"}]
    p = p[p["dataset"].isin(ood_only)]
    return p.assign(block=p["dataset"].astype(str) + "/" + p["subject"].astype(str))


def _per_question(rows: pd.DataFrame, invalid: str) -> pd.DataFrame:
    """One row per (system, block, question): its QWK (``significance.question_table``) and the sums of its
    responses' exact, within-1 and absolute errors, with parse failures scored as ``metrics.grading_metrics``
    scores them (``eval.invalid_as``)."""
    r = rows if invalid != "exclude" else rows[rows["mark"].notna()]
    marks = r["mark"].astype(int) if invalid == "exclude" else scored_marks(r, invalid)
    err = (marks - r["gold"].astype(int)).abs()
    sums = r.assign(n=1, acc=(err == 0).astype(float), within1=(err <= 1).astype(float), mae=err.astype(float))
    sums = sums.groupby(["system", "block", "question_id"], sort=True)[["n", "acc", "within1", "mae"]].sum()
    qwk = question_table(rows.assign(dataset=rows["block"]), invalid)  # the block stands in for the dataset
    qwk = qwk.rename(columns={"dataset": "block"}).set_index(["system", "block", "question_id"])["qwk"]
    return sums.join(qwk).reset_index()


def subject_average(preds: pd.DataFrame, n_boot: int = 10000, ci: float = 0.95, seed: int = 0,
                    invalid: str = "wrong", target: str = EDIT_RL, rivals=MAIN_RIVALS,
                    min_questions: int = 0) -> pd.DataFrame:
    """Table 1's SAS-Avg (Sec. 3.2) of ``target`` against its runner-up on each metric, with a paired interval:
    one row per metric with ``value`` (the target's average, as Table 1 prints it), ``versus`` (the best of
    ``rivals`` on that same average: the highest, or the lowest MAE) and its ``versus_value``, ``delta`` (the
    target's advantage: target minus runner-up, runner-up minus target for MAE) with its percentile interval,
    ``delta_se``, ``mde`` (80% power) and ``p`` (two-sided, as App. G's), ``subjects`` and ``n_questions``;
    ``few_questions`` below ``min_questions`` questions in all. The average is over the subjects the target was
    graded on (``subjects_missing`` names Table 1's others), and only a rival graded on each of them can be the
    runner-up. Questions are resampled within each subject (seed ``seed + k`` for the k-th subject), shared by every
    system and metric. Empty where the target or every such rival is absent."""
    rows = table1_rows(preds)
    every = sorted(rows["block"].unique())
    blocks = sorted(rows.loc[rows["system"] == target, "block"].unique())  # the subjects the target was graded on
    graded = rows.groupby("system")["block"].agg(set)
    systems = [s for s in [target, *rivals] if s in graded and set(blocks) <= graded[s]]
    if target not in systems or len(systems) < 2:
        return pd.DataFrame()
    pq = _per_question(rows[rows["system"].isin(systems) & rows["block"].isin(blocks)], invalid)
    point, boot = {}, {}  # metric -> (S,) and (S x B): the average over subjects
    per_block = []
    for k, b in enumerate(blocks):
        g = pq[pq["block"] == b]
        qids = sorted(g["question_id"].unique())
        _, counts = _counts(len(qids), n_boot, seed + k)
        ones = np.ones((1, len(qids)))

        def mat(col):
            return g.pivot(index="system", columns="question_id", values=col).reindex(index=systems,
                                                                                    columns=qids).to_numpy(float)
        n = mat("n")
        stats = {}
        for metric in TABLE_METRICS:
            if metric == "qwk":
                x = mat("qwk")
                stats[metric] = (_boot_means(x, ones)[:, 0], _boot_means(x, counts))
            else:
                s = np.nan_to_num(mat(metric))
                nn = np.nan_to_num(n)
                with np.errstate(invalid="ignore", divide="ignore"):
                    stats[metric] = ((ones @ s.T / (ones @ nn.T))[0], (counts @ s.T / (counts @ nn.T)).T)
        per_block.append(stats)
    for metric in TABLE_METRICS:
        point[metric] = np.mean([st[metric][0] for st in per_block], axis=0)
        boot[metric] = np.mean([st[metric][1] for st in per_block], axis=0)
    out = []
    for metric in TABLE_METRICS:
        sign = -1.0 if metric in LOWER_IS_BETTER else 1.0
        vals = {s: point[metric][i] for i, s in enumerate(systems) if s != target and not np.isnan(point[metric][i])}
        if not vals:
            continue
        versus = (min if metric in LOWER_IS_BETTER else max)(vals, key=vals.get)
        t, v = systems.index(target), systems.index(versus)
        db = sign * (boot[metric][t] - boot[metric][v])
        s = paired_summary(sign * (point[metric][t] - point[metric][v]), db, ci)
        out.append(dict(metric=metric, system=target, versus=versus, value=point[metric][t],
                        versus_value=point[metric][v], delta=s.delta, delta_ci_low=s.ci_low, delta_ci_high=s.ci_high,
                        delta_se=s.se, mde=s.mde, p=bootstrap_p(db), subjects=len(blocks),
                        subjects_missing=", ".join(b for b in every if b not in blocks),
                        n_questions=int(pq.drop_duplicates(["block", "question_id"]).shape[0]),
                        few_questions=pq.drop_duplicates(["block", "question_id"]).shape[0] < min_questions))
    return pd.DataFrame(out)


# ------------------------------------------------------------------ a response-level bootstrap for few questions
# A suite's choice, shown beside App. G's question-level bootstrap in 09, never in its place: with 3 held-out
# questions (``cpu-real``) a question-level interval says little, so this resamples responses within each question
# (the questions fixed): each system's QWK (macro over questions, as Table 1) gets a percentile interval, its paired
# difference from Base (same responses in every resample) an interval, SE and MDE (``power.paired_summary``).
# The intervals speak for these questions only. QWK per resample comes from counts (checked against
# ``metrics.quadratic_weighted_kappa``). ``versus_runner_up`` pairs EDIT-RL with its runner-up the same way on OOD
# splits (Table 2's "highest OOD QWK", read by the claims ledger where App. G's bootstrap has too few questions).

def scored_marks(preds: pd.DataFrame, invalid: str = "wrong") -> pd.Series:
    """The mark each prediction is scored with: its parsed mark, or for a parse failure ``metrics.farthest_mark``
    (``invalid='wrong'``) or 0 (``'zero'``), as ``metrics.grading_metrics`` scores it."""
    if invalid not in ("wrong", "zero"):
        raise ValueError(f"the response bootstrap scores parse failures as 'wrong' or 'zero', got {invalid!r}")
    fill = [metrics.farthest_mark(int(g), int(m)) if invalid == "wrong" else 0
            for g, m in zip(preds["gold"], preds["max_mark"])]
    return pd.Series(np.where(preds["mark"].isna(), fill, preds["mark"].fillna(0)).astype(int), index=preds.index)


def weighted_qwk(gold: np.ndarray, pred: np.ndarray, max_mark: int, counts: np.ndarray) -> np.ndarray:
    """QWK of one question under each row of ``counts`` (B x n: how often each response is drawn); NaN where
    undefined. Equals ``metrics.quadratic_weighted_kappa`` on the responses repeated as counted."""
    k = max_mark + 1
    idx = np.arange(k)
    w = (idx[:, None] - idx[None, :]) ** 2
    observed = counts @ w[gold, pred].astype(float)
    cg, cp = counts @ np.eye(k)[gold], counts @ np.eye(k)[pred]
    expected = np.einsum("ba,ac,bc->b", cg, w, cp) / counts.sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(expected > 0, 1 - observed / expected, np.nan)


def response_bootstrap(preds: pd.DataFrame, systems: list[str] | None = None, base: str = BASE, n_boot: int = 1000,
                       ci: float = 0.95, seed: int = 0, invalid: str = "wrong",
                       scope_cols: tuple[str, ...] = ("dataset", "split"),
                       below_questions: int | None = None) -> pd.DataFrame:
    """Per scope and system: macro QWK with its response-level interval, and the paired difference from ``base``
    with its interval, bootstrap SE and MDE (module docstring). ``preds``: 07's predictions (one greedy mark per
    system and response; only the first seed of a system counts); ``systems`` None: every system in it.
    Responses are paired on ``response_id``. ``below_questions``: only scopes with fewer held-out questions
    (``significance.min_questions``, where App. G's question-level bootstrap says little)."""
    preds = preds.assign(scored=scored_marks(preds, invalid))
    if systems is None:
        systems = [s for s in dict.fromkeys(preds["system"]) if s != base]
    if "seed" in preds:
        first = preds.groupby("system")["seed"].transform(lambda s: s.dropna().min() if s.notna().any() else np.nan)
        preds = preds[preds["seed"].isna() | (preds["seed"] == first)]
    rng = np.random.default_rng(seed)
    rows = []
    for scope, g in preds.groupby(list(scope_cols), sort=True):
        have = [s for s in [base, *systems] if s in set(g["system"])]
        if base not in have or (below_questions is not None and g["question_id"].nunique() >= below_questions):
            continue
        wide = g.pivot_table(index=["question_id", "response_id"], columns="system", values="scored",
                             aggfunc="first")[have].dropna()
        gold = g.drop_duplicates("response_id").set_index("response_id")["gold"]
        mm = g.drop_duplicates("question_id").set_index("question_id")["max_mark"]
        boot = {s: [] for s in have}
        point = {s: [] for s in have}
        for qid, part in wide.groupby(level="question_id"):
            n = len(part)
            counts = rng.multinomial(n, np.full(n, 1 / n), size=n_boot).astype(float)
            gq = gold.loc[part.index.get_level_values("response_id")].to_numpy(int)
            for s in have:
                p = part[s].to_numpy(int)
                boot[s].append(weighted_qwk(gq, p, int(mm[qid]), counts))
                point[s].append(metrics.quadratic_weighted_kappa(gq, p, int(mm[qid])))
        bq = {s: np.nanmean(np.vstack(v), axis=0) for s, v in boot.items()}
        nan = float("nan")
        for s in have:
            est, est_base = float(np.nanmean(point[s])), float(np.nanmean(point[base]))
            qwk_lo, qwk_hi = percentile_interval(bq[s], ci)
            pair = paired_summary(est - est_base, bq[s] - bq[base], ci) if s != base else None
            rows.append(dict(zip(scope_cols, scope if isinstance(scope, tuple) else (scope,)), system=s,
                             n_questions=len(point[s]), n_responses=len(wide), qwk=est, qwk_lo=qwk_lo, qwk_hi=qwk_hi,
                             delta=pair.delta if pair else nan, delta_lo=pair.ci_low if pair else nan,
                             delta_hi=pair.ci_high if pair else nan, delta_se=pair.se if pair else nan,
                             mde=pair.mde if pair else nan))
    return pd.DataFrame(rows)


def versus_runner_up(preds: pd.DataFrame, pairwise: pd.DataFrame, splits: tuple[str, ...] = ("ood_test",),
                     **kw) -> pd.DataFrame:
    """Table 2's "highest OOD QWK" at the response level: for each runner-up row of 09's ``pairwise`` (App. G's
    question-level bootstrap; ``kind`` 'runner-up') on a split of ``splits``, ``system`` minus ``versus`` on that
    dataset's split by :func:`response_bootstrap` (``kw``: its options, e.g. ``below_questions``). One row per
    comparison: dataset, split, system, versus, versus_qwk and the system's row (delta, its interval, SE, MDE)."""
    if pairwise.empty:
        return pd.DataFrame()
    out = []
    for r in pairwise[(pairwise["kind"] == "runner-up") & pairwise["scope"].isin(splits)].itertuples():
        g = preds[(preds["dataset"] == r.dataset) & (preds["split"] == r.scope)]
        t = response_bootstrap(g, [r.system], base=r.versus, **kw)
        t = t.set_index("system") if len(t) else t  # empty: the split is not below ``below_questions``
        if r.system in t.index:
            out.append(dict(system=r.system, versus=r.versus, versus_qwk=t.loc[r.versus, "qwk"], **t.loc[r.system]))
    return pd.DataFrame(out)
