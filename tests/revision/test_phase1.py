"""The Phase-1 data path as the paper has it (Sec. 2.2, App. B, App. F): the Phase-1 sample, every incorrect
rollout probed, pools of one dataset with App. B's golden : revision ratio, Success@N over the rewrites the
policy generated, what a failed checklist does, equal SFT epochs and the continuation budget. Hand-built tables,
hand-computed expectations."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from edit_lib.config import Decoding, ConfigError, RevisionConfig, RolloutConfig, load_profile
from edit_lib.data.synthetic import WorldConfig, generate_world
from edit_lib.revision import generation as G
from edit_lib.revision.checklist import parse_checklist, verified_lines
from edit_lib.revision.pool import bookkeeping, build_pool, cap_pool, golden_order, n_golden, success_at_n
from edit_lib.model.rollouts import phase1_responses
from edit_lib.signals.tables import select_rollouts
from rewrite_outcomes import paired_rewrite_rows

ROOT = Path(__file__).resolve().parents[2]


def _rollouts(ds: str, n_correct: int, n_wrong: int) -> pd.DataFrame:
    rows = [dict(dataset=ds, response_id=f"r{i // 4}", rollout_id=i % 4, mark=2, gold=2, text=f"{ds}-gold-{i}",
                 correct=True, n_steps=2) for i in range(n_correct)]
    rows += [dict(dataset=ds, response_id=f"w{i // 4}", rollout_id=i % 4, mark=1, gold=2, text=f"{ds}-bad-{i}",
                  correct=False, n_steps=2) for i in range(n_wrong)]
    return pd.DataFrame(rows)


def _outcome(ds: str, n_kept: int, n_failed: int = 0) -> pd.DataFrame:
    rows = [dict(dataset=ds, response_id=f"w{i}", rollout_id=0, revision_id=f"edit:{ds}/{i}", rule="edit", k=1,
                 kept=True, first_success=0, revised_prefix=f"P{i} ", status="ok") for i in range(n_kept)]
    rows += [dict(dataset=ds, response_id=f"w{i}", rollout_id=1, revision_id=f"edit:{ds}/x{i}", rule="edit", k=1,
                  kept=False, first_success=-1, revised_prefix="", status="ok") for i in range(n_failed)]
    return pd.DataFrame(rows)


def _conts(outcome: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame([dict(revision_id=r, continuation=0, text="C") for r in outcome["revision_id"]])


# ---------------------------------------------------------------- pool composition (App. B)

def test_pool_draws_golden_at_the_papers_ratio_and_shares_the_golden_prefix():
    roll, out = _rollouts("a", 40, 10), _outcome("a", 6, 3)
    pool = build_pool(roll, out, _conts(out), "edit", golden_per_revision=1.5, seed=3)
    assert (pool["source"] == "revision").sum() == 6 and (pool["source"] == "golden").sum() == 9  # 1.5 x 6
    assert set(pool.loc[pool.source == "golden", "completion"]) <= set(roll.loc[roll.correct, "text"])
    smaller = build_pool(roll, out.head(2), _conts(out), "edit", golden_per_revision=1.5, seed=3)
    golden = pool.loc[pool.source == "golden", "completion"].tolist()
    assert smaller.loc[smaller.source == "golden", "completion"].tolist() == golden[:3]  # round(1.5 x 2) = 3
    # 0 = every correct rollout; too few correct rollouts: all of them
    assert (build_pool(roll, out, _conts(out), "edit", 0.0).source == "golden").sum() == 40
    assert n_golden(100, 40, 1.5) == 40 and n_golden(3, 40, 1.5) == 5 and n_golden(0, 40, 1.5) == 0
    with pytest.raises(ValueError, match="golden_per_revision"):
        n_golden(1, 1, -1.0)
    # the order is seeded: another seed draws other golden rollouts
    other = build_pool(roll, out, _conts(out), "edit", golden_per_revision=1.5, seed=4)
    assert other.loc[other.source == "golden", "completion"].tolist() != golden
    assert golden_order(roll, 3)["text"].tolist()[:9] == golden


def test_a_pool_never_mixes_datasets():
    roll = pd.concat([_rollouts("a", 8, 4), _rollouts("b", 8, 4)], ignore_index=True)
    out = pd.concat([_outcome("a", 2), _outcome("b", 3)], ignore_index=True)
    with pytest.raises(ValueError, match="one pool is one dataset"):
        build_pool(roll[roll.dataset == "a"], out, _conts(out), "edit", 1.5)
    pool = build_pool(roll[roll.dataset == "a"], out[out.dataset == "a"], _conts(out), "edit", 1.5)
    assert set(pool["dataset"]) == {"a"} and (pool.source == "revision").sum() == 2


def test_bookkeeping_reports_drawn_golden_and_ratio():
    roll, out = _rollouts("a", 40, 10), _outcome("a", 6, 3)
    b = bookkeeping(roll, out, "edit", golden_per_revision=1.5).iloc[0]
    assert (b.kept, b.correct_rollouts, b.golden_rollouts, b.pool_size) == (6, 40, 9, 15)
    assert b.golden_per_kept == pytest.approx(1.5)


def test_cap_pool_keeps_the_ratio_and_is_seeded():
    roll, out = _rollouts("a", 40, 10), _outcome("a", 10)
    pool = build_pool(roll, out, _conts(out), "edit", golden_per_revision=1.5, seed=0)  # 15 golden + 10 revisions
    capped = cap_pool(pool, 10, seed=1)
    assert len(capped) == 10 and (capped.source == "revision").sum() == 4  # 10 x 10/25
    assert capped.equals(cap_pool(pool, 10, seed=1)) and cap_pool(pool, 0).equals(pool)
    assert cap_pool(pool, 100).equals(pool)


# ---------------------------------------------------------------- Success@N's denominator (App. F)

def test_success_at_n_counts_rewrites_generated_and_reports_blocked_targets_beside():
    o = pd.DataFrame(dict(dataset="d", rule="edit",
                          status=["ok", "ok", "rewrite_parse", "role_changed", "checklist_evidence_not_in_answer",
                                  "checklist_evidence_not_in_answer", "checklist_missing_points"],
                          kept=[True, False, False, False, False, False, False]))
    t = success_at_n(o).iloc[0]
    # 4 rewrites generated (2 accepted, 2 rejected: failed repairs), 3 targets never rewritten
    assert (t.revisions, t.rewrites, t.accepted, t.successes, t.not_rewritten) == (7, 4, 2, 1, 3)
    assert t.success_at_n == pytest.approx(1 / 4) and t.success_at_n_accepted == pytest.approx(1 / 2)
    assert (t.not_rewritten_evidence_not_in_answer, t.not_rewritten_missing_points) == (2, 1)


# ---------------------------------------------------------------- a failed checklist (Sec. 2.2)

def test_checklist_context_under_each_policy():
    row = lambda status, text="T", vt="V": pd.Series(dict(status=status, text=text, detail="", verified_text=vt))
    assert G.checklist_context(row("ok"), "block") == ("T", None)
    assert G.checklist_context(row("missing_points"), "block") == (None, "checklist_missing_points")
    assert G.checklist_context(row("missing_points"), "keep") == ("T", None)
    assert G.checklist_context(row("missing_points"), "drop_lines") == ("V", None)
    assert G.checklist_context(row("missing_points", vt=""), "drop_lines") == (None, None)
    assert G.checklist_context(row("no_points", text=""), "keep") == (None, None)
    with pytest.raises(ValueError, match="checklist_failure"):
        G.checklist_context(row("missing_points"), "repair")


def test_verified_lines_drops_the_lines_that_fail():
    points = ["the cell wall", "osmosis"]
    answer = "water moves by osmosis through the membrane"
    good = "point 1 the cell wall ; not covered ; evidence none\npoint 2 osmosis ; covered ; evidence by osmosis\n" \
           "covered 1 of 2 points"
    assert verified_lines(good, points, answer) == good  # a verified checklist is kept whole
    bad = ("point 1 the cell wal ; not covered ; evidence none\n"  # not verbatim
           "point 2 osmosis ; covered ; evidence by diffusion\n"  # evidence not in the answer
           "point 2 osmosis ; covered ; evidence by osmosis\n"
           "covered 2 of 2 points")
    assert not hasattr(parse_checklist(bad, points, answer), "items")
    assert verified_lines(bad, points, answer) == "point 2 osmosis ; covered ; evidence by osmosis"


def test_checklist_failure_is_a_checked_profile_value():
    assert RevisionConfig().checklist_failure == "keep"
    with pytest.raises(ConfigError, match="checklist_failure"):
        RevisionConfig(checklist_failure="repair")


# ---------------------------------------------------------------- continuation budget

def test_continuations_get_the_rollout_budget(monkeypatch):
    cfg = RevisionConfig(rewrite_decoding=Decoding(greedy=True, max_new_tokens=256))
    s = cfg.resolved(RolloutConfig(decoding=Decoding(max_new_tokens=1024)))
    assert (s.rewrite_decoding.max_new_tokens, s.continuation_decoding.max_new_tokens) == (256, 1024)  # App. B / Table 9: 1,024
    own = RevisionConfig(continuation_decoding=Decoding(max_new_tokens=300)).resolved(RolloutConfig())
    assert own.continuation_decoding.max_new_tokens == 300
    with pytest.raises(ValueError, match="resolved"):  # the unresolved section (0 = the rollouts' budget)
        G.continue_revisions(None, {}, pd.DataFrame(dict(status=["ok"])), cfg, seed=0)
    seen = {}

    def fake(policy, datasets, rows, id_col, sampling, progress=True):
        seen["budget"] = sampling.max_new_tokens
        return pd.DataFrame()
    monkeypatch.setattr(G, "continue_prefixes", fake)
    G.continue_revisions(None, {}, pd.DataFrame(dict(status=["ok"])), s, seed=0)
    assert seen["budget"] == 1024
    c = pd.DataFrame(dict(n_tokens=[1024, 1024, 10], mark=[np.nan, 3.0, np.nan]))
    assert G.truncated(c, 1024).tolist() == [True, False, False]


# ---------------------------------------------------------------- the Phase-1 sample (App. B)

def test_phase1_sample_is_seeded_and_probed_whole():
    ds = generate_world(WorldConfig(shape="science_like", n_questions=2, answers_per_question=20, ood_questions=0,
                                    seed=1))
    train = ds.split("train")
    a, b = phase1_responses(ds, 5, seed=0), phase1_responses(ds, 5, seed=0)
    assert [r.id for r in a] == [r.id for r in b] and len(a) == 5 and {r.split for r in a} == {"train"}
    assert [r.id for r in a] != [r.id for r in phase1_responses(ds, 5, seed=1)]
    assert len(phase1_responses(ds, 0, seed=0)) == len(train) == len(phase1_responses(ds, 10_000, seed=0))
    # 02/03: every incorrect rollout is probed whatever the cap; correct ones fill the rest
    roll = pd.concat([_rollouts("a", 30, 12)], ignore_index=True)
    sel = select_rollouts(roll, 20, seed=0)
    assert (~sel.correct).sum() == 12 and sel.correct.sum() == 8
    assert (~select_rollouts(roll, 5, seed=0).correct).sum() == 12


# ---------------------------------------------------------------- equal SFT budgets (App. B)

@pytest.mark.parametrize("name", ["smoke", "demo", "paper", "paper-sas"])
def test_results_profiles_train_every_arm_the_full_epochs(name):
    p = load_profile(name)
    assert p.sft.max_steps == 0  # no step cap: each arm trains sft.epochs over its own pool
    assert p.sft.golden_per_revision == pytest.approx(1.5)


# ---------------------------------------------------------------- Table 12's paired contrast and its MDE

def test_paired_success_contrast_against_a_naive_bootstrap():
    from edit_lib.power import normal_mde
    from edit_lib.revision.pool import paired_success_contrast

    rows = paired_rewrite_rows(seed=0)
    rows.append(dict(dataset="d", response_id="solo", rollout_id=0, rule="edit", status="ok", kept=True))  # unpaired
    rows.append(dict(dataset="d", response_id="r0", rollout_id=0, rule="random", status="checklist_empty",
                     kept=False))  # never rewritten: not in Success@N
    o = pd.DataFrame(rows)
    t = paired_success_contrast(o, "edit", "random", n_boot=300, seed=5).iloc[0]
    paired = o[(o.response_id != "solo") & (o.status == "ok")]
    rate = lambda df, r: df[df.rule == r].kept.sum() / (df.rule == r).sum()
    assert t.rollouts == 30 and t.delta == pytest.approx(rate(paired, "edit") - rate(paired, "random"))
    # the same bootstrap written naively: resample rollouts, recompute both ratios
    ids = sorted(paired.response_id.unique())  # the rollouts in id order, as the function keys them
    by = {i: paired[paired.response_id == i] for i in ids}
    idx = np.random.default_rng(5).integers(0, len(ids), size=(300, len(ids)))
    boot = []
    for row in idx:
        df = pd.concat([by[ids[j]] for j in row])
        boot.append(rate(df, "edit") - rate(df, "random"))
    assert t.delta_se == pytest.approx(np.std(boot, ddof=1))
    assert (t.delta_ci_low, t.delta_ci_high) == pytest.approx(tuple(np.percentile(boot, [2.5, 97.5])))
    assert t.mde == pytest.approx(normal_mde(t.delta_se))
