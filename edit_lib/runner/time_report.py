"""The time part of ``edit-suite run --dry-run``: GPU-hours per stage on the named GPU (``time_stages``) and App. B's
"Compute budget" figures (Private-Biology; paper_reference.csv) beside an ESTIMATE of the same work on App. B's
GPU (H200), under both generation engines, with the ratio estimate / App. B.

App. B's counts, not the run's data, size the comparison: 10,159 training responses (Table 8) x 20 rollouts,
55,278 incorrect rollouts; the profile gives the recipe (budgets, N, Alg. 1's n, Table 9's RL step).
"""
from __future__ import annotations

from edit_lib import paper_reference as ref
from edit_lib.systems import EDIT_RL, EDIT_SFT, EDIT_SFT_GRPO, INT_SFT
from edit_lib.runner.time_estimate import PAPER_GPU, gpu_named
from edit_lib.runner.time_stages import (AUDIT_ROWS, GENERATE, RL_RUNS, SFT, Estimator, app_b, assumptions,
                                        dataset_sizes, stage_work)


def paper_comparison(est: Estimator) -> list[dict]:
    """The estimate of the work App. B times, on App. B's own counts (Private-Biology: 10,159 training responses,
    20 rollouts each, 55,278 incorrect; the profile's recipe), beside App. B's figure: unit 'h' (GPU-hours) or
    's' (seconds); ratio = estimate / paper. ``est`` should be on App. B's GPU (``time_estimate.PAPER_GPU``)."""
    p, P, e = est.p, est.P, est
    wrong, responses = app_b("incorrect_rollouts"), ref.value("Table 8", "responses", "", subject="Biology",
                                                               split="train", dataset="Private-Science")
    rb, s = p.revision.batch_size, p.revision
    cont, units = s.continuation_budget(p.rollouts), wrong * p.selection.budget_n  # EDIT's own picks only
    probe = e.fwd(wrong, e.seq + e.scaffold)
    audit = e.fwd(AUDIT_ROWS * wrong, e.seq)
    revise = (e.gen(responses, rb, P, s.checklist_budget) + e.gen(units, rb, e.seq, s.max_new_tokens)
              + e.gen(units * s.n_continuations, rb, e.prefix, cont))
    int_p = (e.gen(wrong * p.int_sft.n_proposals, rb, e.seq, p.int_sft.max_new_tokens)
             + e.gen(wrong * p.int_sft.n_continuations, rb, e.prefix, cont))
    grpo, edit_rl = e.rl_step("grpo"), e.rl_step("edit_rl")
    steps = 500  # App. B: "for the 500-step run" (Table 9: 500 steps on Private-Science)
    rows = [("02_probing", "posterior-belief probing, 55,278 incorrect rollouts, one read", probe,
             "gpu_hours_probe", EDIT_SFT, "h"),
            ("03_audit_validation", "grounding audit (4 rows) + candidate selection", audit,
             "gpu_hours_audit_selection", EDIT_SFT, "h"),
            ("04_counterfactual_selection", "EDIT's atomic revisions: checklists, rewrites, N continuations", revise,
             "gpu_hours_revisions", EDIT_SFT, "h"),
            ("02-04", "EDIT Phase 1 in all", probe + audit + revise, "gpu_hours_phase1", EDIT_SFT, "h"),
            ("04-05", "InT Phase 1: proposals and guided continuations", int_p, "gpu_hours_phase1", INT_SFT, "h"),
            ("06_rl", "EDIT-SFT+GRPO, 500 steps", steps * sum(grpo.values()), "gpu_hours_rl", EDIT_SFT_GRPO, "h"),
            ("06_rl", "EDIT-SFT+EDIT-RL, 500 steps", steps * sum(edit_rl.values()), "gpu_hours_rl",
             EDIT_RL, "h"),
            ("06_rl", "one GRPO optimiser step", sum(grpo.values()), "step_seconds", EDIT_SFT_GRPO, "s"),
            ("06_rl", "EDIT-RL's frozen-probe read per step", edit_rl["probe_read"], "probe_read_seconds",
             EDIT_RL, "s")]
    out = []
    for stage, what, seconds, metric, system, unit in rows:
        est_v = seconds / 3600 if unit == "h" else seconds
        paper = app_b(metric, system)
        out.append(dict(stage=stage, work=what, unit=unit, estimate=est_v, paper=paper, ratio=est_v / paper,
                        backend=est.backend))
    return out


def estimate(profile, counts: dict, gpu_name: str, prompt_tokens: int) -> dict:
    """Everything the dry run prints of time: per stage GPU-hours on ``gpu_name`` (its work items too), the sizes
    and assumptions, and App. B's figures beside the same work on App. B's GPU."""
    gpu = gpu_named(gpu_name)
    est = Estimator(profile, counts, gpu, prompt_tokens)
    sizes = dataset_sizes(profile)
    work = stage_work(est, sizes)
    stages = [dict(stage=k, hours=sum(w.time for w in v) / 3600, items=[w._replace(time=w.time / 3600) for w in v])
              for k, v in sorted(work.items())]
    on_paper_gpu = [paper_comparison(Estimator(profile, counts, gpu_named(PAPER_GPU), prompt_tokens, est.r, b))
                    for b in ("hf", "vllm")]  # both engines: App. B's rollout engine is co-located (vLLM-like)
    paper = [dict(a, estimate_vllm=b["estimate"], ratio_vllm=b["ratio"]) for a, b in zip(*on_paper_gpu)]
    return dict(gpu=gpu_name.lower(), label=gpu.label, sizes=sizes, stages=stages, assumptions=assumptions(est),
                paper=paper, paper_gpu=gpu_named(PAPER_GPU).label)


def wall_clock(profile, stages: list[dict], gpus: int) -> list[dict]:
    """Each stage's wall-clock hours on ``gpus`` GPUs, from its GPU-hours (``estimate``: ``time_stages.Work``
    items in hours) and how the suite spreads each item (``Work.spread``): 06's RL runs are engine units of one GPU
    each, as many at once as GPUs (at most ``rl.workers`` when > 1; longest first), or, with ``rl.workers`` 1, one
    after another, each over ``rl.processes`` GPUs; generation and 02's and 03's probe and audit passes go over
    the engine's generation units, one GPU each (at most ``model.generation_workers`` when > 1), or in the stage's
    process with ``generation_workers`` 1; 05's SFT runs are engine units of one GPU each with ``sft.workers``
    other than 1 (at most ``sft.workers`` when > 1), else one after another over ``sft.processes`` GPUs; the rest
    (06's calibration and Table 10) runs in the stage's process on one GPU. ``width``: the mean GPUs busy (GPU-hours /
    wall-clock)."""
    if gpus < 1:
        raise ValueError(f"--gpus must be at least 1, got {gpus}")
    rl, sft, gen = profile.rl, profile.sft, profile.model.generation_workers
    width = {RL_RUNS: min(gpus, rl.workers) if rl.workers > 1 else gpus,
             SFT: min(gpus, sft.workers) if sft.workers > 1 else gpus}
    on_engine = {RL_RUNS: rl.workers != 1, SFT: sft.workers != 1}
    over = {RL_RUNS: rl.processes, SFT: sft.processes}  # GPUs one run spreads over, off the engine
    generators = min(gpus, gen) if gen > 1 else gpus if gen == 0 else 1
    out = []
    for s in stages:
        serial, units = 0.0, {RL_RUNS: [], SFT: []}
        for w in s["items"]:
            if w.spread in units and on_engine[w.spread]:
                units[w.spread] += [w.time / w.runs] * w.runs
            elif w.spread in units:
                serial += w.time / min(gpus, over[w.spread])
            elif w.spread == GENERATE:
                serial += w.time / generators
            else:
                serial += w.time
        wall = serial
        for kind, runs in units.items():  # 05's SFT runs and 06's RL runs: each kind a phase of its stage
            busy = [0.0] * width[kind]
            for h in sorted(runs, reverse=True):  # longest first onto the GPU free soonest (engine.bounded's order)
                busy[busy.index(min(busy))] += h
            wall += max(busy, default=0.0)
        out.append(dict(stage=s["stage"], gpu_hours=s["hours"], wall=wall,
                        width=s["hours"] / wall if wall else 0.0))
    return out
