"""Notebooks 01-03 executed by papermill on the smoke profile (the session's `smoke_run` fixture, tests/conftest.py)."""
import json

import pytest

from edit_lib.config import load_profile
from edit_lib.runner.stage import available_stages

pytestmark = pytest.mark.notebook
SMOKE_DATASETS = [d.name for d in load_profile("smoke").data.datasets]


def _results(run_dir, name):
    return json.loads((run_dir / "results" / f"{name}.json").read_text())


def test_every_available_notebook_ran(smoke_run):
    run_dir, status = smoke_run
    assert [s["stage"] for s in status] == available_stages()
    for s in status:
        res = _results(run_dir, s["stage"])
        assert res["key"] == s["key"]
        for fig in res["figures"].values():
            assert (run_dir / fig).exists()


def test_01_base_policy_tables(smoke_run):
    run_dir, _ = smoke_run
    res = _results(run_dir, "01_base_policy")
    base = res["tables"]["base_metrics"]
    splits = {(r["dataset"], r["split"]) for r in base}
    assert {("synth_sas", "ood_test"), ("synth_bio", "id_test"), ("synth_phys", "ood_test")} <= splits
    for r in base:
        assert r["n"] >= 1
        assert r["qwk"] is None or -1.0 <= r["qwk"] <= 1.0
        assert 0.0 <= r["acc"] <= r["within1"] <= 1.0
    summ = {r["dataset"]: r for r in res["tables"]["rollout_summary"]}
    assert set(summ) == set(SMOKE_DATASETS)
    for r in summ.values():
        assert 0.0 <= r["incorrect_share"] <= 1.0
        assert r["rollouts"] == r["responses"] * 2  # smoke: rollouts.n_per_response = 2
    # parse failures are counted, not hidden: the statuses add up to the number of rollouts
    parse = res["extra"]["rollout_parse"]
    assert sum(parse.values()) == sum(r["rollouts"] for r in summ.values())


def test_02_probing_tables(smoke_run):
    run_dir, _ = smoke_run
    res = _results(run_dir, "02_probing")
    assert res["extra"]["n_probed"] > 0
    for r in res["tables"]["delta_eps_summary"]:
        assert r["steps"] >= 1 and r["min_delta_eps"] <= r["mean_delta_eps"]
    agree = [r for r in res["tables"]["final_agreement"] if r["argmax_agrees"] is not None]
    assert agree, "some probed rollouts have a parseable mark on smoke"
    for r in agree:
        assert 0.0 <= r["argmax_agrees"] <= 1.0 and 0.0 <= r["mean_p_of_generated"] <= 1.0
    # both Eq. 1 reads on the same boundaries: total variation in [0, 1], counts consistent
    comp = res["tables"]["read_comparison"]
    assert comp and all(0.0 <= r["mean_tv"] <= r["max_tv"] <= 1.0 for r in comp if r["mean_tv"] is not None)
    # T <= 1 rollouts counted per dataset (the segmentation of Sec. 2.1)
    counts = res["tables"]["step_counts"]
    assert counts and all(0 <= r["single_step"] <= r["rollouts"] for r in counts)


def test_03_audit_tables(smoke_run):
    run_dir, _ = smoke_run
    res = _results(run_dir, "03_audit_validation")
    assert res["extra"]["n_steps"] > 0
    labels = {}
    for r in res["tables"]["label_counts"]:  # one row per dataset and label
        labels[r["label"]] = labels.get(r["label"], 0) + r["steps"]
    assert labels.get("grounding", 0) > 0 and labels.get("synthesis", 0) > 0
    # Table 11 under both NLL reductions of Eq. 3, from one audit pass
    signals = {(r["reduction"], r["signal"], r["level"]) for r in res["tables"]["table11"]}
    for red in ("sum", "mean"):
        assert (red, "G_a", "step") in signals and (red, "G_p", "rollout mean") in signals
    for r in res["tables"]["table11"]:
        if r["r"] is not None:
            assert -1.0 <= r["r"] <= 1.0 and 0.0 <= r["p"] <= 1.0
    # mu_p (Eq. 4) per dataset, at every observed u = k/T
    mu = res["tables"]["mu_p"]
    assert {r["dataset"] for r in mu} == {r["dataset"] for r in res["tables"]["label_counts"]}
    assert all(0.0 < r["u"] <= 1.0 and r["n"] >= 1 for r in mu)


def test_04_counterfactual_selection_tables(smoke_run):
    from edit_lib.config import load_profile
    run_dir, _ = smoke_run
    res = _results(run_dir, "04_counterfactual_selection")
    rules = {"edit", "belief_shift_only", "random"}
    used = {r["dataset"]: r for r in res["tables"]["rollouts_used"]}
    # the self-audit rule (Table 6 "w/o localiser") reads InT proposals: K per repaired rollout, every one counted
    k = load_profile("smoke").int_sft.n_proposals
    assert sum(r["proposals"] for r in res["tables"]["int_proposal_status"]) == res["extra"]["n_int_proposals"] \
        == k * sum(r["repaired"] for r in used.values())
    if res["extra"]["self_audit_picks"]:
        rules = rules | {"self_audit"}
    for r in used.values():  # Phase 1 repairs every incorrect rollout of the Phase-1 sample (02 and 03 read each)
        assert 0 < r["repaired"] == r["incorrect_probed_and_audited"] <= r["incorrect_in_01"]
        assert r["phase1_responses"] == load_profile("smoke").rollouts.responses_per_dataset
    t12 = res["tables"]["table12"]  # Table 12 layout: every rule on every dataset with repaired rollouts
    got = {(r["dataset"], r["rule"]) for r in t12}
    assert {(d, x) for d, r in used.items() if r["repaired"] for x in rules - {"self_audit"}} <= got
    assert {x for _, x in got} == rules
    for r in t12:
        assert 0.0 <= r["success_at_n"] <= 1.0 and 0.0 <= r["retention"] <= 1.0
        assert r["successes"] <= r["accepted"] <= r["rewrites"] <= r["revisions"]
        assert r["rewrites"] + r["not_rewritten"] == r["revisions"]  # App. F: S@N over the rewrites generated
        assert r["incorrect_rollouts"] == used[r["dataset"]]["repaired"]
    # rejections counted by reason: the statuses of a rule add up to its revisions
    per = {}
    for r in res["tables"]["revision_status"]:
        per[(r["dataset"], r["rule"])] = per.get((r["dataset"], r["rule"]), 0) + r["revisions"]
    assert per == {(r["dataset"], r["rule"]): r["revisions"] for r in t12}
    assert {r["rule"] for r in res["tables"]["selected_positions"]} == rules
    assert all(0.0 <= r["lo"] < r["hi"] <= 1.0 for r in res["tables"]["selected_positions"])
    # checklist failures are counted by reason and add up to the recorded total
    assert sum(r["responses"] for r in res["tables"]["checklist_status"] if r["status"] != "ok") == \
        res["extra"]["checklist_failures"]
    # Sec. 2.2 on SAS-Bench's schema: the free-text rubric gets a checklist for every response, checked by the
    # span rule; the statuses add up by reason, and no response goes without one
    from edit_lib.revision.checklist import FAILURE_REASONS
    counts = {(r["dataset"], r["rubric"]): r for r in res["tables"]["checklist_counts"]}
    assert {d for d, k in counts if k == "free_text"} == {"sas_synth"} and ("sas_synth", "none") not in counts
    for (d, kind), r in counts.items():
        assert kind == ("free_text" if d == "sas_synth" else "points")
        assert r["written"] == r["responses"] == used[d]["phase1_responses"] and not r.get("no_points")
        assert r["verified"] + sum(r.get(x) or 0 for x in FAILURE_REASONS) == r["written"]
        assert r["failed"] == r["written"] - r["verified"]
    assert 0.0 <= counts[("sas_synth", "free_text")]["clause_share"] <= 1.0
    assert "no_points" not in {r["status"] for r in res["tables"]["checklist_status"]}
    assert {r["rule"] for r in res["tables"]["mimicry_gold_word"]} == {"old", "new"}
    for r in used.values():  # every incorrect rollout counted: with a step boundary (repaired) or without
        assert r["incorrect_in_01"] == r["no_boundary"] + r["incorrect_probed_and_audited"]
    # beyond the paper: the probe against Monte-Carlo continuations (smoke: belief_check.max_rollouts = 2)
    assert res["extra"]["n_belief_checked"] == 2
    for r in res["tables"]["probe_vs_mc"]:
        assert 0 < r["boundaries_used"] <= r["boundaries"]
        assert r["jsd_mean"] is None or 0.0 <= r["jsd_mean"] <= 0.6932  # natural-log JSD is at most ln 2
    assert {r["rule"] for r in res["tables"]["mc_oracle_table12"]} <= {"edit", "mc_oracle"}


def test_05_edit_sft_pools_adapters_and_check(smoke_run):
    from edit_lib.config import load_profile
    from edit_lib.model.policy import load_policy_from_profile
    from edit_lib.systems import SYSTEMS
    run_dir, _ = smoke_run
    res = _results(run_dir, "05_edit_sft")
    t = res["tables"]
    paper = {s.name for s in SYSTEMS}  # the smoke's toy baseline (run.baselines) has no revisions: test_recipes.py
    book = {(r["system"], r["dataset"]): r for r in t["pool_bookkeeping"] if r["system"] in paper}
    for (system, ds), r in book.items():  # App. B bookkeeping adds up
        assert r["kept"] <= r["accepted"] <= r["revisions_tried"]
        assert r["pool_size"] == r["golden_rollouts"] + r["kept"]
        assert system != "int_sft" or r["golden_rollouts"] == 0  # InT's pool has no golden rollouts
        rejected = sum(v for k, v in r.items() if k.startswith("rejected_"))
        assert rejected + r["accepted"] == r["revisions_tried"]
        assert r["pool_trained"] == r["pool_size"]  # smoke sets no sft.max_pool
        if system != "int_sft":  # App. B's ratio: 1.5 golden per kept revision, at most the correct ones available
            assert r["golden_rollouts"] == min(r["correct_rollouts"], int(1.5 * r["kept"] + 0.5))
    assert {s for s, _ in book} == {"edit_sft", "int_sft", "wo_localiser", "wo_checklist", "wo_atomic"}
    assert {d for s, d in book if s.startswith("wo_")} == {res["extra"]["ablation_dataset"]} == {"sas_synth"}
    # Table 6 on the SAS-Bench-schema dataset (free-text rubric, as SAS-History): each arm's pool and truncations
    pools = {r["system"]: r for r in t["table6_pools"]}
    assert set(pools) == {"edit_sft", "wo_localiser", "wo_checklist", "wo_atomic"}
    for system, r in pools.items():
        b = book[(system, "sas_synth")]
        assert (r["kept"], r["golden_rollouts"], r["pool_size"]) == (b["kept"], b["golden_rollouts"], b["pool_size"])
        assert 0 <= r["truncated"] <= r["rewrites"] and r["sft_steps"] >= 0
    assert pools["wo_atomic"]["rewrite_budget"] >= load_profile("smoke").rollouts.decoding.max_new_tokens
    # EDIT's rewriter sees the free-text checklist; "w/o checklist" gets the same prompt without it
    import pandas as pd
    from edit_lib.data.registry import load_built
    from edit_lib.prompts.rewrite import render_rewrite_prompt
    from edit_lib.revision.checklist import checklist_context
    cl = pd.read_parquet(_stage_dir(run_dir, "04_counterfactual_selection") / "checklists.parquet")
    cl = cl[cl["dataset"] == "sas_synth"]
    assert len(cl) and set(cl["rubric"]) == {"free_text"}
    ds = load_built(_stage_dir(run_dir, "00_data"), ["sas_synth"])["sas_synth"]
    policy = load_profile("smoke").revision.checklist_failure
    row = next(cl.itertuples())
    context, blocked = checklist_context(row, policy)
    assert context and not blocked
    r = next(x for x in ds.responses if x.id == row.response_id)
    q, steps = ds.question(r), ["a judgement", "total 1"]
    edit, wo = (render_rewrite_prompt(q, r.answer, r.gold, steps, 1, [], c) for c in (context, None))
    assert edit != wo and "# Per-criterion rubric analysis" in edit and "rubric analysis" not in wo
    runs = {(r["system"], r["dataset"]): r for r in t["sft_runs"] if r["system"] in paper}
    assert set(runs) == set(book)
    for key, r in runs.items():  # an empty pool trains nothing and says so; every other pool has an adapter
        assert (r["status"] == "empty_pool") == (book[key]["pool_size"] == 0)
        assert r["status"] == "empty_pool" or r["n_pairs"] == book[key]["pool_trained"]
        assert r["epochs"] == load_profile("smoke").sft.epochs  # every arm the same epochs over its own pool
    # at least one kept revision goes from rewrite through continuation and pool into a trained adapter
    carried = [k for k, r in book.items() if k[0] == "edit_sft" and r["kept"] >= 1 and runs[k]["status"] == "trained"]
    assert carried, "the smoke run keeps no revision through to an adapter"
    adapters = res["extra"]["adapters"]
    # an adapter for exactly the datasets whose EDIT pool is non-empty (the smoke sample leaves synth_phys's empty)
    assert set(adapters["edit_sft"]) == {d for (s, d), r in book.items() if s == "edit_sft" and r["pool_size"] > 0}
    assert "synth_sas" in adapters["edit_sft"]
    policy = load_policy_from_profile(load_profile("smoke"), adapter=adapters["edit_sft"]["synth_sas"])
    assert policy.name.endswith("+synth_sas")
    check = {(r["system"], r["dataset"]): r for r in t["greedy_check"]}
    assert {("base", d) for d in adapters["edit_sft"]} | {("edit_sft", d) for d in adapters["edit_sft"]} <= set(check)
    assert all(r["n"] >= 1 and 0.0 <= r["acc"] <= 1.0 for r in check.values())
    cost = {(r["method"], r["component"]): r for r in t["phase1_cost"]}
    for m in ("EDIT", "InT"):
        parts = [r for (mm, c), r in cost.items() if mm == m and c != "total"]
        assert cost[(m, "total")]["tokens"] == sum(r["tokens"] for r in parts)


def test_05_06_write_tensorboard_events_and_leave_no_resume_state(smoke_run):
    """The smoke profile sets ops.report_to: tensorboard and ops.resume_every: 1 (configs/smoke.yaml): every trained
    SFT and RL run writes its event file under runs/smoke/tensorboard/<stage>/, and every resumable state it saved
    is gone once the run completed (its final adapter and summary mark it done)."""
    run_dir, _ = smoke_run
    for stage, table in (("05_edit_sft", "sft_runs"), ("06_rl", "rl_runs")):
        rows = _results(run_dir, stage)["tables"][table]
        trained = [r for r in rows if r.get("status", "trained") == "trained" and r.get("steps")]
        assert trained, stage
        folders = {e.parent for e in (run_dir / "tensorboard" / stage).rglob("events.out.tfevents.*")}
        assert len(folders) == len(trained), (stage, sorted(map(str, folders)))
        assert not [p for p in (run_dir / "artifacts" / stage).rglob("resume") if p.is_dir()], stage


def test_06_rl_runs_calibration_curves_and_divergence(smoke_run):
    from edit_lib.config import load_profile
    from edit_lib.model.policy import load_policy_from_profile
    run_dir, _ = smoke_run
    res = _results(run_dir, "06_rl")
    t = res["tables"]
    plan = t["rl_plan"]
    # smoke: one dataset, the Table 4 pair once per seed (2), every other arm once
    assert {r["dataset"] for r in plan} == {"synth_sas"}
    assert sum(r["system"] == "edit_sft_edit_rl" for r in plan) == 2 and len(plan) == 6 + 2
    runs = {(r["system"], r["seed"]): r for r in t["rl_runs"]}
    for r in runs.values():  # a run trains its horizon, or is skipped with the reason (an empty SFT pool)
        assert (r["status"] == "skipped" and r["reason"]) or (r["status"] == "trained" and r["steps"] == 2)
    # every EDIT-RL initialisation is calibrated (or falls back to the profile's values, with a warning)
    inits = {r["init"] for r in plan if r["arm"] == "edit_rl" and not r["skip"]}
    assert {r["init"] for r in t["table9_calibration"]} == inits
    for r in t["table9_calibration"]:
        assert r["used"] in ("calibrated", "profile", "profile (calibration failed)")
        assert r["gamma_used"] >= 0 and r["beta_drift_used"] >= 0
    # adapters load through the same loader as Base (the SFT initialisation merged first)
    adapters = res["extra"]["rl_adapters"]
    a = adapters["edit_sft_edit_rl"]["synth_sas"]["0"]
    pol = load_policy_from_profile(load_profile("smoke"), adapter=a["adapter"], init_adapter=a["init_adapter"])
    assert pol.name.count("+") == 2
    # the systems table resolves both stages' adapter maps (what 07 grades)
    from edit_lib.systems import resolve
    sft = _results(run_dir, "05_edit_sft")["extra"]["adapters"]
    got = resolve("edit_sft_edit_rl", ["synth_sas", "synth_bio"], sft, adapters)
    assert [(g.dataset, g.seed) for g in got] == [("synth_sas", 0), ("synth_sas", 1)]
    assert all(g.init_adapter == sft["edit_sft"]["synth_sas"] for g in got)
    # Figure 3: the initialisation (step 0) and every checkpoint (smoke: every step) on the OOD split
    curves = t["figure3_curves"]
    assert {r["step"] for r in curves} == {0, 1, 2}
    # Table 10: both SFT-initialised arms, divergences are non-negative and JSD at most ln 2
    t10 = {r["system"]: r for r in t["table10_divergence"]}
    assert set(t10) == {"edit_sft_grpo", "edit_sft_edit_rl"}
    assert all(r["kl"] >= 0 and 0 <= r["jsd"] <= 0.6932 and r["boundaries"] > 0 for r in t10.values())


def _stage_dir(run_dir, name):
    res = _results(run_dir, name)
    return run_dir / "artifacts" / name / res["artifact_key"]


def test_07_evaluation_tables_and_predictions(smoke_run):
    import pandas as pd
    from edit_lib.metrics import grading_metrics
    from edit_lib.systems import resolve, SYSTEMS
    run_dir, _ = smoke_run
    res = _results(run_dir, "07_evaluation")
    t = res["tables"]
    for name in ("table1", "table2", "table4", "table5", "table6", "table13", "apph_error_kinds",
                 "apph_disagreements", "table1_beside_paper", "table2_beside_paper"):
        assert name in t, name
    d = _stage_dir(run_dir, "07_evaluation")
    preds = pd.read_parquet(d / "predictions.parquet")
    # every policy 05 and 06 saved is graded, on every response of its dataset's evaluation splits
    sft = _results(run_dir, "05_edit_sft")["extra"]["adapters"]
    rl = _results(run_dir, "06_rl")["extra"]["rl_adapters"]
    want = {(g.system, g.dataset, g.seed) for s in SYSTEMS for g in resolve(s.name, SMOKE_DATASETS, sft, rl)}
    got = {(r.system, r.dataset, None if pd.isna(r.seed) else int(r.seed)) for r in preds.itertuples()}
    assert {g for g in got if g[0] != "toy_rft"} == want  # the smoke's toy baseline: tests/project/test_recipes.py
    assert preds.groupby(["system", "dataset", "seed"], dropna=False)["response_id"].apply(lambda s: s.is_unique).all()
    # Table 2's Base cells are the metrics of Base's own predictions, recomputed here
    for r in [r for r in t["table2"] if r["metric"] == "qwk"]:
        g = preds[(preds["system"] == "base") & (preds["dataset"] == r["dataset"])
                  & (preds["split"] == f"{r['split']}_test")]
        m = grading_metrics(g["question_id"], g["gold"], [None if pd.isna(x) else int(x) for x in g["mark"]],
                            g["max_mark"])
        assert r["base"] == pytest.approx(m["qwk"], nan_ok=True)
    # Table 13: recall within [0, 100] where gold zeros exist; App. H shares add up to 1
    assert all(r["gold_zero"] == 0 or 0 <= r["zero_recall_pct"] <= 100 for r in t["table13"])
    for r in t["apph_error_kinds"]:
        assert r["synthesis_share"] + r["evidence_share"] + r["unreadable_share"] == pytest.approx(1.0)
    pq = pd.read_parquet(d / "per_question.parquet")
    assert set(pq["system"]) == set(preds["system"])


def test_07_reuses_01s_base_gradings(smoke_run):
    """01 grades the Base's evaluation splits through the run's prediction cache; 07 finds every one of them there
    (no other policy's entry exists on a fresh run) and its Base rows are 01's, text and mark."""
    import pandas as pd
    from edit_lib.evaluation.predictions import EVAL_SPLITS
    run_dir, _ = smoke_run
    greedy = pd.read_parquet(_stage_dir(run_dir, "01_base_policy") / "greedy.parquet")
    evals = greedy[greedy["split"].isin(EVAL_SPLITS)]
    assert _results(run_dir, "07_evaluation")["extra"]["cache_hits"] == evals.groupby(["dataset", "split"]).ngroups
    preds = pd.read_parquet(_stage_dir(run_dir, "07_evaluation") / "predictions.parquet")
    base = preds[preds["system"] == "base"]
    cols = ["dataset", "response_id", "split", "text", "n_tokens", "mark", "parse_status"]
    pd.testing.assert_frame_equal(base[cols].reset_index(drop=True), _by_split(evals)[cols])


def _by_split(df):
    """Rows per (dataset, split) as 07 grades them: datasets in order, each split's rows in response order."""
    import pandas as pd
    from edit_lib.evaluation.predictions import EVAL_SPLITS
    parts = [df[(df["dataset"] == d) & (df["split"] == s)] for d in dict.fromkeys(df["dataset"]) for s in EVAL_SPLITS]
    return pd.concat(parts, ignore_index=True)


def test_08_rsr_tables(smoke_run):
    import pandas as pd
    from edit_lib.evaluation import rsr
    run_dir, _ = smoke_run
    res = _results(run_dir, "08_rsr_interventions")
    t = res["tables"]
    assert t["regold"] and all(r["gold_only_agrees"] for r in t["regold"])  # coverage and gold-only agree
    assert {r["edit"] for r in t["table14"]} == set(rsr.CONDITIONS)
    pairs = pd.read_parquet(_stage_dir(run_dir, "08_rsr_interventions") / "rsr_pairs.parquet")
    one = t["table14"][0]
    rows = pairs[(pairs["system"] == one["system"]) & (pairs["dataset"] == one["dataset"])
                 & (pairs["edit"] == one["edit"])]
    ok = rows.dropna(subset=["mark", "mark_edit"])
    num = (ok["mark_edit"] - ok["mark"]).abs().mean()
    den = (ok["gold_edit"] - ok["gold"]).abs().mean()
    assert one["rsr"] == pytest.approx(num / den, nan_ok=True)
    assert {r["system"] for r in t["table7"]} == {r["system"] for r in t["table14"]}


def test_09_significance_holm_within_the_paper_family(smoke_run):
    import numpy as np
    from edit_lib.evaluation.significance import PAPER_FAMILY, holm
    run_dir, _ = smoke_run
    res = _results(run_dir, "09_significance")
    sig = res["tables"]["significance"]
    assert res["extra"]["n_boot"] == 200 and all(r["n_boot"] == 200 for r in sig)
    for scope in {(r["dataset"], r["scope"]) for r in sig}:
        fam = [r for r in sig if (r["dataset"], r["scope"]) == scope and r["family"] == "paper"]
        assert [r["system"] for r in fam] == list(PAPER_FAMILY)  # App. G: always the six, absent ones "not run"
        p = np.array([np.nan if r["p"] is None else r["p"] for r in fam])
        want = np.where(np.isnan(p), np.nan, holm(np.nan_to_num(p, nan=1.0)))  # a missing p counts as 1: m = 6
        got = [np.nan if r["p_holm"] is None else r["p_holm"] for r in fam]
        np.testing.assert_allclose(got, want)
    assert res["tables"]["table3"] and "pairwise" in res["tables"]
