"""Outcome filter, Success@N / Retention and the SFT pool with its bookkeeping (Sec. 2.2, App. F, App. B).

For each accepted revision the policy samples N continuations from the revised prefix (N = 4 in the paper); the
revision is kept when any continuation reaches the gold mark m = m*. Success@N (App. F, Table 12) is the share of
generated rewrites with a success; Retention is the share of incorrect rollouts that yield at least one kept revision.
The SFT pool is the kept revised rollouts (revised prefix + the first successful continuation) plus golden rollouts
drawn from the originally correct ones (Sec. 2.2 "Pool composition"; ``sft.golden_per_revision`` per kept revision,
App. B's ratio); App. B reports its sizes, ``table6_pools`` those of Table 6's arms; ``build_pools`` makes every
pool of 05.

Tables (pandas DataFrames; ``ROLLOUT`` = dataset, response_id, rollout_id): ``rollouts``, ``revisions``,
``continuations``; only revisions with status "ok" are continued.

Table columns and departures from the paper and from public code:
book/departures.md, section "Outcome filter and SFT pool (edit_lib/revision/pool.py)".
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from edit_lib.systems import EDIT_SFT, INT_SFT, WO_ATOMIC, WO_CHECKLIST, WO_LOCALISER, baseline_pools


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
