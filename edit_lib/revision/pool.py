"""Outcome filter, Success@N / Retention and the SFT pool with its bookkeeping (Sec. 2.2, App. F, App. B), and
the tables 04 and 05 record from them. Longer than 400 lines because the pool and its bookkeeping are one.

For each accepted revision the policy samples N continuations from the revised prefix (N = 4 in the paper); the
revision is kept when any continuation reaches the gold mark m = m*. Success@N (App. F, Table 12) is the share of
generated rewrites with a success; Retention is the share of incorrect rollouts that yield at least one kept revision.
The SFT pool is the kept revised rollouts (revised prefix + the first successful continuation) plus golden rollouts
drawn from the originally correct ones (Sec. 2.2 "Pool composition"; ``sft.golden_per_revision`` per kept revision,
App. B's ratio); ``table6_pools`` gives Table 6's arms, ``build_pools`` every pool of 05. Tables (``ROLLOUT`` =
dataset, response_id, rollout_id): ``rollouts``, ``revisions``, ``continuations``; only "ok" revisions continue.
Recorded: where the rules pick (Figure 4 analogue), rejections by reason, before/after examples, the checklists 04
wrote, verified and lost (``checklist_counts``) and the Phase-1 compute both methods spend (``phase1_cost``, App. B).

Table columns and departures from the paper and from public code:
book/departures.md, section "Outcome filter and SFT pool (edit_lib/revision/pool.py)".
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

import numpy as np
import pandas as pd

from edit_lib.data.schema import Dataset
from edit_lib.power import paired_summary
from edit_lib.prompts.grading import SCAFFOLD
from edit_lib.revision.checklist import FAILURE_REASONS
from edit_lib.systems import EDIT_SFT, INT_SFT, WO_ATOMIC, WO_CHECKLIST, WO_LOCALISER, baseline_pools

if TYPE_CHECKING:  # the policy is only passed through here: the book reads this module without the model layer
    from edit_lib.model.policy import Policy


ROLLOUT = ["dataset", "response_id", "rollout_id"]
OK = "ok"
TRUNCATED = "rewrite_truncated"  # a rewrite block cut by its token budget (``generation.write_rewrites``)
UNPARSED = ("rewrite_parse", TRUNCATED)  # statuses of a rewrite whose block did not parse


def _require(df: pd.DataFrame, cols: list[str], name: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise KeyError(f"table {name!r} lacks column(s) {missing}; has {list(df.columns)}")


def outcome_filter(revisions: pd.DataFrame, continuations: pd.DataFrame, n_continuations: int) -> pd.DataFrame:
    """Outcome filter (Sec. 2.2, App. F): ``revisions`` plus ``n_continuations`` (0 for rejected ones),
    ``n_success`` (continuations with mark == gold), ``first_success`` (index of the first such continuation,
    -1 if none) and ``kept`` (any continuation reaches the gold mark). Every accepted revision must have
    exactly ``n_continuations`` continuations numbered 0..N-1; continuations of unknown or rejected revisions
    are an error."""
    _require(revisions, [*ROLLOUT, "revision_id", "rule", "k", "gold", "status"], "revisions")
    _require(continuations, ["revision_id", "continuation", "mark"], "continuations")
    if n_continuations < 1:
        raise ValueError(f"n_continuations must be >= 1, got {n_continuations}")
    if revisions["revision_id"].duplicated().any():
        dup = revisions.loc[revisions["revision_id"].duplicated(), "revision_id"].iloc[0]
        raise ValueError(f"revisions: revision_id {dup!r} appears twice")
    status = dict(zip(revisions["revision_id"], revisions["status"]))
    gold = dict(zip(revisions["revision_id"], revisions["gold"]))
    stats = {}
    for rid, g in continuations.groupby("revision_id", sort=False):
        if rid not in status:
            raise KeyError(f"continuations: revision_id {rid!r} is not in the revisions table")
        if status[rid] != OK:
            raise ValueError(f"continuations: revision {rid!r} was rejected ({status[rid]}) but has continuations")
        idx = sorted(g["continuation"].astype(int))
        if idx != list(range(n_continuations)):
            raise ValueError(f"continuations: revision {rid!r} has continuations {idx}, expected 0..{n_continuations - 1}")
        g = g.sort_values("continuation")
        hit = (g["mark"].to_numpy(dtype=float) == float(gold[rid]))  # NaN (unparsed) never equals gold
        stats[rid] = (int(hit.sum()), int(np.argmax(hit)) if hit.any() else -1)
    out = revisions.copy()
    accepted = out["status"] == OK
    lacking = out.loc[accepted & ~out["revision_id"].isin(list(stats)), "revision_id"].tolist()
    if lacking:
        raise ValueError(f"accepted revision(s) {lacking[:5]} have no continuations")
    out["n_continuations"] = np.where(accepted, n_continuations, 0)
    out["n_success"] = [stats.get(r, (0, -1))[0] for r in out["revision_id"]]
    out["first_success"] = [stats.get(r, (0, -1))[1] for r in out["revision_id"]]
    out["kept"] = out["n_success"] > 0
    return out


NOT_REWRITTEN = "checklist_"  # status prefix of a target the policy never rewrote (revision.checklist_failure)


def rewritten(status: pd.Series) -> pd.Series:
    """True where the policy generated a rewrite (any status but a ``checklist_*`` block)."""
    return ~status.astype(str).str.startswith(NOT_REWRITTEN)


def success_at_n(outcome: pd.DataFrame) -> pd.DataFrame:
    """Success@N per dataset and selection rule (App. F, Table 12: "the fraction of rewrites in which at least one
    continuation reaches the gold mark"): ``revisions`` selected, ``rewrites`` the policy generated (the
    denominator; a rewrite rejected by its parse, locality or mimicry is a failed repair), ``accepted``,
    ``successes``, ``success_at_n`` = successes / rewrites, ``success_at_n_accepted`` = successes / accepted,
    ``truncated`` (rewrites cut by their token budget: in the denominator, as App. F counts every rewrite, and
    counted here so a cut is not read as a failed repair) and ``not_rewritten`` (targets blocked before any
    rewrite, outside the denominator) with one ``not_rewritten_<reason>`` column per reason met."""
    _require(outcome, ["dataset", "rule", "status", "kept"], "outcome")
    o = outcome.assign(_rw=rewritten(outcome["status"]), _ok=outcome["status"] == OK,
                       _cut=outcome["status"] == TRUNCATED)
    g = o.groupby(["dataset", "rule"], sort=True)
    t = pd.DataFrame({"revisions": g.size(), "rewrites": g["_rw"].sum().astype(int),
                      "accepted": g["_ok"].sum().astype(int), "successes": g["kept"].sum().astype(int),
                      "truncated": g["_cut"].sum().astype(int)}).reset_index()
    t["success_at_n"] = t["successes"] / t["rewrites"].where(t["rewrites"] > 0)
    t["success_at_n_accepted"] = t["successes"] / t["accepted"].where(t["accepted"] > 0)
    t["not_rewritten"] = t["revisions"] - t["rewrites"]
    blocked = o[~o["_rw"]]
    for reason in sorted(blocked["status"].unique()):
        n = blocked[blocked["status"] == reason].groupby(["dataset", "rule"]).size()
        t[f"not_rewritten_{reason[len(NOT_REWRITTEN):]}"] = [int(n.get((d, r), 0)) for d, r in
                                                             zip(t["dataset"], t["rule"])]
    return t


def incorrect(rollouts: pd.DataFrame) -> pd.DataFrame:
    """Rollouts whose final mark is not the gold mark (an unparsed mark counts as incorrect)."""
    _require(rollouts, [*ROLLOUT, "mark", "gold"], "rollouts")
    return rollouts[~(rollouts["mark"].astype(float) == rollouts["gold"].astype(float))]


def retention(rollouts: pd.DataFrame, outcome: pd.DataFrame) -> pd.DataFrame:
    """Retention per dataset and rule (App. F, Table 12): ``incorrect_rollouts``, ``retained`` (incorrect
    rollouts with at least one kept revision under the rule) and ``retention`` = retained / incorrect. Every
    rule is measured on the same incorrect rollouts, including those it selected nothing in."""
    _require(outcome, [*ROLLOUT, "rule", "kept"], "outcome")
    bad = incorrect(rollouts)
    rows = []
    for rule in sorted(outcome["rule"].unique()):
        kept = outcome[(outcome["rule"] == rule) & outcome["kept"]]
        kept_keys = set(map(tuple, kept[ROLLOUT].to_numpy()))
        for ds, g in bad.groupby("dataset", sort=True):
            n_ret = sum(tuple(k) in kept_keys for k in g[ROLLOUT].to_numpy())
            rows.append(dict(dataset=ds, rule=rule, incorrect_rollouts=len(g), retained=n_ret,
                             retention=n_ret / len(g)))
    return pd.DataFrame(rows, columns=["dataset", "rule", "incorrect_rollouts", "retained", "retention"])


def _correct(rollouts: pd.DataFrame) -> pd.DataFrame:
    return rollouts[rollouts["mark"].astype(float) == rollouts["gold"].astype(float)]


def golden_order(rollouts: pd.DataFrame, seed: int) -> pd.DataFrame:
    """The correct rollouts of ``rollouts`` in a seeded order per dataset (sorted by id, then permuted with
    ``numpy.random.default_rng(seed)``): the first n of a dataset are its n golden rollouts, so pools that draw
    different numbers share their golden prefix (Sec. 2.2 "Pool composition")."""
    _require(rollouts, [*ROLLOUT, "mark", "gold"], "rollouts")
    parts = []
    for _, g in _correct(rollouts).sort_values(ROLLOUT).groupby("dataset", sort=True):
        parts.append(g.iloc[np.random.default_rng(seed).permutation(len(g))])
    return pd.concat(parts, ignore_index=True) if parts else rollouts.iloc[:0]


def n_golden(n_kept: int, n_correct: int, golden_per_revision: float) -> int:
    """Golden rollouts a pool of ``n_kept`` revisions draws: round(golden_per_revision x n_kept) (App. B's ratio,
    ``sft.golden_per_revision``), at most the ``n_correct`` available; 0 = every correct rollout."""
    if golden_per_revision < 0:
        raise ValueError(f"sft.golden_per_revision must be >= 0, got {golden_per_revision}")
    if golden_per_revision == 0:
        return n_correct
    return min(n_correct, int(np.floor(golden_per_revision * n_kept + 0.5)))


def build_pool(rollouts: pd.DataFrame, outcome: pd.DataFrame, continuations: pd.DataFrame,
               rule: str = "edit", golden_per_revision: float = 0.0, seed: int = 0) -> pd.DataFrame:
    """The SFT pool of one dataset (Sec. 2.2, App. B): for every kept revision of ``rule``, revised_prefix + the
    text of its first successful continuation, and golden rollouts (mark == gold, completion as sampled):
    ``n_golden(kept, correct, golden_per_revision)`` of them in ``golden_order(seed)``. ``rollouts`` and
    ``outcome`` must hold one and the same dataset (a pool never mixes worlds). Columns: ROLLOUT, ``source``
    ('golden' | 'revision'), ``revision_id`` (None for golden), ``k``, ``completion``."""
    _require(rollouts, [*ROLLOUT, "mark", "gold", "text"], "rollouts")
    _require(outcome, ["dataset", "revision_id", "rule", "kept", "first_success", "revised_prefix"], "outcome")
    _require(continuations, ["revision_id", "continuation", "text"], "continuations")
    kept = outcome[(outcome["rule"] == rule) & outcome["kept"]]
    names = set(rollouts["dataset"]) | set(kept["dataset"])
    if len(names) > 1:
        raise ValueError(f"build_pool: one pool is one dataset's, got rows of {sorted(names)} (filter the rollouts "
                         f"and the outcome table by dataset first)")
    text = {(r, int(c)): t for r, c, t in continuations[["revision_id", "continuation", "text"]].to_numpy()}
    comp = [p + text[(r, int(f))] for r, f, p in kept[["revision_id", "first_success", "revised_prefix"]].to_numpy()]
    revised = kept[[*ROLLOUT, "revision_id", "k"]].assign(source="revision", completion=comp)
    order = golden_order(rollouts, seed)
    gold_rows = order.head(n_golden(len(kept), len(order), golden_per_revision))
    golden = gold_rows[ROLLOUT].assign(source="golden", revision_id=None, k=np.nan,
                                      completion=gold_rows["text"].to_numpy())
    cols = [*ROLLOUT, "source", "revision_id", "k", "completion"]
    return pd.concat([golden[cols], revised[cols]], ignore_index=True)


def cap_pool(pool: pd.DataFrame, max_pool: int, seed: int = 0) -> pd.DataFrame:
    """A seeded subsample of at most ``max_pool`` rows keeping the pool's golden : revision ratio (``sft.max_pool``,
    the suite's CPU cap; every arm gets the same cap and trains App. B's full epochs over what it keeps). The
    revisions keep round(max_pool x share of revisions) rows, the golden the rest; 0 = no cap."""
    _require(pool, ["source"], "pool")
    if max_pool < 0:
        raise ValueError(f"sft.max_pool must be >= 0, got {max_pool}")
    if not max_pool or len(pool) <= max_pool:
        return pool
    n_rev = int((pool["source"] == "revision").sum())
    want_rev = int(np.floor(max_pool * n_rev / len(pool) + 0.5))
    parts = []
    for source, n in (("golden", max_pool - want_rev), ("revision", want_rev)):
        g = pool[pool["source"] == source]
        parts.append(g.iloc[np.sort(np.random.default_rng(seed).permutation(len(g))[:n])])
    return pd.concat(parts).sort_index()


def bookkeeping(rollouts: pd.DataFrame, outcome: pd.DataFrame, rule: str = "edit",
                golden_per_revision: float = 0.0) -> pd.DataFrame:
    """App. B pool bookkeeping per dataset for one rule: ``incorrect_rollouts``, ``revisions_tried``,
    ``rejected_<reason>`` (one column per rejection reason met), ``accepted``, ``kept``, ``correct_rollouts``
    (available as golden), ``golden_rollouts`` (drawn, ``n_golden``), ``pool_size`` = golden + kept,
    ``golden_per_kept`` and ``retention``."""
    _require(rollouts, [*ROLLOUT, "mark", "gold"], "rollouts")
    out = outcome[outcome["rule"] == rule]
    reasons = sorted(set(out["status"]) - {OK})
    kept_keys = set(map(tuple, out.loc[out["kept"], ROLLOUT].to_numpy()))
    rows = []
    for ds in sorted(rollouts["dataset"].unique()):
        r, o = rollouts[rollouts["dataset"] == ds], out[out["dataset"] == ds]
        n_correct = len(_correct(r))
        bad = incorrect(r)
        n_ret = sum(tuple(k) in kept_keys for k in bad[ROLLOUT].to_numpy())
        n_kept = int(o["kept"].sum())
        n_gold = n_golden(n_kept, n_correct, golden_per_revision)
        row = dict(dataset=ds, rule=rule, incorrect_rollouts=len(r) - n_correct, revisions_tried=len(o))
        row.update({f"rejected_{x}": int((o["status"] == x).sum()) for x in reasons})
        row.update(accepted=int((o["status"] == OK).sum()), kept=n_kept, correct_rollouts=n_correct,
                   golden_rollouts=n_gold, pool_size=n_gold + n_kept,
                   golden_per_kept=n_gold / n_kept if n_kept else float("nan"),
                   retention=n_ret / len(bad) if len(bad) else float("nan"))
        rows.append(row)
    return pd.DataFrame(rows)


# Table 6's arms: (system, the rule its outcome rows carry, atomic rewriter); ``revision.phase1.ABLATIONS``
TABLE6_ARMS = ((EDIT_SFT, "edit", True), (WO_LOCALISER, WO_LOCALISER, True), (WO_CHECKLIST, WO_CHECKLIST, True),
               (WO_ATOMIC, WO_ATOMIC, False))
TABLE6_POOL_COLUMNS = ["system", "dataset", "rule", "revisions", "rewrites", "rewrite_budget", "truncated",
                       "unparsed", "accepted", "kept", "golden_rollouts", "pool_size", "pool_trained", "sft_status",
                       "sft_pairs", "sft_steps"]


def table6_pools(book: pd.DataFrame, runs: pd.DataFrame, settings, dataset: str,
                 arms=TABLE6_ARMS) -> pd.DataFrame:
    """Table 6's arms shown whole on ``dataset``: per arm present in ``book`` (05's ``pool_bookkeeping``, App. B),
    its ``revisions`` (picks), ``rewrites`` generated, ``rewrite_budget`` (``settings.rewrite_budget``, resolved),
    ``truncated`` (rewrites cut by it), ``unparsed`` (other parse failures), ``accepted``, ``kept``,
    ``golden_rollouts``, ``pool_size``, ``pool_trained`` and its SFT run (``runs``: 05's ``sft_runs``) status,
    pairs and optimiser steps (0 when nothing was trained)."""
    _require(book, ["system", "dataset", "revisions_tried", "accepted", "kept", "golden_rollouts", "pool_size",
                    "pool_trained"], "book")
    _require(runs, ["system", "dataset", "status", "n_pairs", "steps"], "runs")
    b = book[book["dataset"] == dataset].set_index("system")
    r = runs[runs["dataset"] == dataset].set_index("system")
    rows = []
    for system, rule, atomic in arms:
        if system not in b.index:
            continue
        x = b.loc[system]
        blocked = sum(_count(x, c) for c in b.columns if c.startswith(f"rejected_{NOT_REWRITTEN}"))  # never rewritten
        run = r.loc[system] if system in r.index else pd.Series(dict(status="not_run", n_pairs=0, steps=0))
        rows.append(dict(system=system, dataset=dataset, rule=rule, revisions=int(x["revisions_tried"]),
                         rewrites=int(x["revisions_tried"]) - blocked, rewrite_budget=settings.rewrite_budget(atomic),
                         truncated=_count(x, f"rejected_{TRUNCATED}"), unparsed=_count(x, "rejected_rewrite_parse"),
                         accepted=int(x["accepted"]), kept=int(x["kept"]), golden_rollouts=int(x["golden_rollouts"]),
                         pool_size=int(x["pool_size"]), pool_trained=int(x["pool_trained"]), sft_status=run["status"],
                         sft_pairs=int(run["n_pairs"]), sft_steps=0 if pd.isna(run["steps"]) else int(run["steps"])))
    return pd.DataFrame(rows, columns=TABLE6_POOL_COLUMNS)


def _count(row: pd.Series, col: str) -> int:
    return int(row[col]) if col in row.index and pd.notna(row[col]) else 0


def pool_pairs(pool: pd.DataFrame, prompt_of) -> list[tuple[str, str]]:
    """SFT pairs of a pool (``build_pool`` or ``baselines.intervention_runs.int_pool`` rows): (``prompt_of(dataset,
    response_id)``, completion), in the pool's order. ``prompt_of`` gives the policy's grading input
    (``Policy.grading_input``), so the pairs train the grading role only (Sec. 2.2 "Pool composition")."""
    _require(pool, ["dataset", "response_id", "completion"], "pool")
    return [(prompt_of(d, r), c) for d, r, c in pool[["dataset", "response_id", "completion"]].to_numpy()]


# ------------------------------------------------------------------ every SFT pool of 05 (Sec. 2.2, App. B, Table 6)
# Each pool holds only its own dataset's rows. EDIT's pool and its Table 6 ablations: the rule's kept revisions plus
# ``sft.golden_per_revision`` golden rollouts per kept revision, drawn from the correct rollouts of the same Phase-1
# responses in one seeded order per dataset (the arms share their golden prefix). InT's pool: its kept
# interventions, no golden rollouts (App. B: "the difference is the golden anchor set"). A profile's SFT baselines
# (``run.baselines``): the pool each draws (``systems.baseline_pools``). ``sft.max_pool`` caps every pool alike
# (``cap_pool``); every arm then trains App. B's full epochs over what it holds.

def _own(df: pd.DataFrame, ds: str) -> pd.DataFrame:
    return df[df["dataset"] == ds]


def build_pools(pool_source: pd.DataFrame, datasets, edit: tuple[pd.DataFrame, pd.DataFrame],
                int_outcome: pd.DataFrame, int_pools: Mapping[str, pd.DataFrame], ablations: Mapping[str, object],
                ablation_dataset: str, sft, seed: int) -> tuple[dict, pd.DataFrame]:
    """(pools keyed by (system, dataset), bookkeeping table). ``edit`` = (EDIT's outcome table, its
    continuations); ``int_pools`` = InT's pool per dataset (``baselines.intervention_runs.int_pool``);
    ``ablations`` = name -> repair pass (``phase1.RepairPass``) on ``ablation_dataset``; ``sft`` the profile's SFT
    section."""
    g = sft.golden_per_revision
    full, books = {}, []
    for ds in datasets:
        full[(EDIT_SFT, ds)] = build_pool(_own(pool_source, ds), _own(edit[0], ds), edit[1], "edit", g, seed)
        full[(INT_SFT, ds)] = int_pools[ds]
    books += [bookkeeping(pool_source, edit[0], "edit", g).assign(system=EDIT_SFT),
              bookkeeping(pool_source, int_outcome, "int").assign(system=INT_SFT, golden_rollouts=0,
                                                                  golden_per_kept=0.0)]
    abl_source = _own(pool_source, ablation_dataset)
    for name, p in ablations.items():
        full[(name, ablation_dataset)] = build_pool(abl_source, _own(p.outcome, ablation_dataset),
                                                    p.rule_continuations, name, g, seed)
        books.append(bookkeeping(abl_source, p.outcome, name, g).assign(system=name))
    for (name, ds), pool in baseline_pools(pool_source, datasets, sft, seed).items():
        full[(name, ds)] = pool
        books.append(pd.DataFrame([dict(system=name, dataset=ds, rule=name)]))
    pools = {k: cap_pool(v, sft.max_pool, seed) for k, v in full.items()}
    book = pd.concat(books, ignore_index=True)
    key = list(zip(book["system"], book["dataset"]))
    book["pool_size"] = [len(full.get(k, [])) for k in key]
    book["pool_trained"] = [len(pools.get(k, [])) for k in key]
    book["revisions_trained"] = [int((pools[k]["source"] != "golden").sum()) if k in pools else 0 for k in key]
    book["golden_trained"] = [int((pools[k]["source"] == "golden").sum()) if k in pools else 0 for k in key]
    rejected = [c for c in book.columns if c.startswith("rejected_")]
    book[rejected] = book[rejected].fillna(0).astype(int)  # a reason one system never met is 0 for it
    return pools, book[["system", *[c for c in book.columns if c != "system"]]]


# ---------------------------------------------------------------- the tables 04 and 05 record

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
    any other, e.g. no_points) and ``clause_share`` (mean; NaN for points rubrics). ``rubric`` is 'points' or
    'free_text'; an older cache without the column is read as points."""
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
