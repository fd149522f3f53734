"""Every RL run of 06 (Sec. 2.3, Sec. 3 Baselines, App. B; Tables 1-5) on the datasets and seeds the tables that read
it need (``run_seeds``), resumable, with adapters saved during training for the post hoc curves of Figure 3.

Which system starts from which initialisation with which reward arm and trainer is one row of ``systems.SYSTEMS``
(``init``, ``arm``, ``trainer``), a profile's RL baselines included: GRPO, DGPO and Base+EDIT-RL from Base;
EDIT-SFT+GRPO and EDIT-RL from the merged EDIT-SFT adapter of the same dataset (Tables 4, 5); InT-RL from the merged
InT-SFT adapter, outcome reward only (Table 9).

What 06 measures beyond the logs (App. B, App. D): ``checkpoint_curves`` (Figure 3: ID and OOD macro-QWK of each
saved checkpoint, greedy, post hoc, step 0 the initialisation, never used for selection) and ``belief_divergence``
(Table 10: the mark posterior p_k of Eq. 1 at every boundary of the policy's own greedy rollouts under the policy and
the FROZEN reference, KL(p_policy || p_reference) and JSD in nats, overall and per tercile of u = k/T).
Longer than 400 lines because the runs and what 06 reads of them are one.

Departures from the paper and from public code: book/departures.md, section "RL runs (edit_lib/train/rl_runs.py)".
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from edit_lib import engine
from edit_lib.data.schema import Dataset
from edit_lib.model.generate import SamplingConfig
from edit_lib.model.policy import Policy, load_policy_from_profile
from edit_lib.model.rollouts import grade_responses, greedy_metrics
from edit_lib.random_streams import CALIBRATION_ROLLOUTS, seeded_subset, stream_seed
from edit_lib.registry import Lazy
from edit_lib.systems import BASE, NOT_RUN, TRAINERS, main_systems, names, not_run, of_source
from edit_lib.train import calibration as cal
from edit_lib.train import launched_run
from edit_lib.train.sft import clear as clear_resume
from edit_lib.train.rewards import probe_completions
from edit_lib.train.rl import SUMMARY_FILE, rl_dataset, train_rl_arm

SEEDED = names("Table 4")  # Table 4: every seed of rl.seeds on rl.seed_datasets
GRID = tuple(s for s in names("Table 5") if s != BASE)  # Table 5, Figure 3: rl.grid_datasets
PLAN_COLUMNS = ["system", "init", "arm", "trainer", "dataset", "seed", "init_adapter", "out_dir", "skip"]


def rl_datasets(profile, names) -> list[str]:
    """The datasets RL runs on: ``rl.datasets`` (each must exist) or every dataset."""
    return profile.rl.datasets_in(names)


def grid_datasets(profile, names) -> list[str]:
    """The datasets of Table 5's SFT x RL grid, Figure 3 and Table 10: ``rl.grid_datasets`` or every RL dataset."""
    return profile.rl.subset_in("grid_datasets", names)


def seed_datasets(profile, names) -> list[str]:
    """The datasets of Table 4's seeds: ``rl.seed_datasets`` or every RL dataset."""
    return profile.rl.subset_in("seed_datasets", names)


def run_seeds(profile, names, system: str, dataset: str) -> list[int]:
    """The seeds ``system`` trains with on ``dataset``: every seed for Table 4's pair on a seed dataset, the first
    seed for Tables 1-3's systems and for the grid on a grid dataset, none otherwise (a run no table reads)."""
    seeds = [int(x) for x in profile.rl.seeds]
    if system in SEEDED and dataset in seed_datasets(profile, names):
        return seeds
    main = {s.name for s in of_source("rl")} & set(main_systems())  # Tables 1-3: every RL dataset
    if system in main or (system in GRID and dataset in grid_datasets(profile, names)):
        return seeds[:1]
    return []


def plan_runs(profile, names, sft_adapters: dict[str, dict[str, str]], root: str | Path) -> pd.DataFrame:
    """One row per run (``run_seeds``: Tables 1-3's systems on every RL dataset, Table 4's seeds and Table 5's grid
    where the profile asks): system, init, arm, trainer, dataset, seed, init_adapter ('' for Base), out_dir and
    skip (the reason a run cannot start, '' otherwise). ``sft_adapters`` is 05's ``adapters`` map."""
    rows = []
    skipped = set(not_run(profile))
    for ds in rl_datasets(profile, names):
        for system, init, arm, trainer in ((s.name, s.init, s.arm, s.trainer) for s in of_source("rl")):
            for seed in run_seeds(profile, names, system, ds):
                adapter = "" if init == BASE else sft_adapters.get(init, {}).get(ds, "")
                skip = "" if init == BASE or adapter else f"no {init} adapter for {ds} (empty SFT pool in 05)"
                skip = NOT_RUN if system in skipped else skip
                rows.append(dict(system=system, init=init, arm=arm, trainer=trainer, dataset=ds, seed=int(seed),
                                 init_adapter=adapter, out_dir=str(Path(root) / system / ds / f"seed{seed}"),
                                 skip=skip))
    return pd.DataFrame(rows, columns=PLAN_COLUMNS)


def load_init(profile, init_adapter: str | None, frozen: bool = False) -> Policy:
    """The initialisation of a run: Base, or Base with the SFT adapter merged (App. B). ``frozen``: every
    parameter with requires_grad off (the shaping probe's copy, Sec. 2.3)."""
    policy = load_policy_from_profile(profile, init_adapter=init_adapter) if init_adapter else \
        load_policy_from_profile(profile)
    if frozen:
        policy.model.requires_grad_(False)
        policy.model.eval()
    return policy


def checkpoint_callback(out_dir: str | Path, every: int):
    """A transformers callback saving the (LoRA) model every ``every`` optimiser steps to
    ``out_dir/checkpoints/step-<n>`` (Figure 3's post hoc curves; App. B: never used for selection)."""
    from transformers import TrainerCallback

    class SaveEvery(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kw):
            if every and state.global_step % every == 0 and model is not None:
                model.save_pretrained(str(Path(out_dir) / "checkpoints" / f"step-{state.global_step:05d}"))

    return SaveEvery()


@dataclass
class RunOutcome:
    status: str  # trained | reused | skipped
    summary: dict


def run_one(profile, row: dict, datasets: dict, shaping: dict | None, progress: bool = True,
            log_root: str | Path | None = None) -> RunOutcome:
    """Train (or reuse) one planned run: GRPO / EDIT-RL / DGPO from its initialisation, the Table 9 recipe
    (``rl.build_grpo_config``) with the profile's horizon, checkpoints every ``rl.checkpoint_every``.
    ``shaping`` maps the dataset to (beta_drift, gamma) for EDIT-RL (06's calibration, or the profile's values).
    The ``ops`` section: TensorBoard events (``ops.report_to``) under ``log_root/<system>/<dataset>/seed<n>``
    (06 passes ``runs/<profile>/tensorboard/06_rl``), a resumable state every ``ops.resume_every`` steps in
    ``out_dir/resume`` (a killed run resumes from it, ``train.sft``)."""
    out = Path(row["out_dir"])
    if row["skip"]:
        return RunOutcome("skipped", {"reason": row["skip"]})
    if _done(row):
        clear_resume(out)  # left over if the run was killed between its summary and the state's deletion
        return RunOutcome("reused", json.loads((out / SUMMARY_FILE).read_text()))
    policy = load_init(profile, row["init_adapter"])
    frozen = load_init(profile, row["init_adapter"], frozen=True) if row["arm"] == "edit_rl" else None
    if frozen is not None and profile.probe.dtype == "float32":  # cast once: every shaping read is then float32
        frozen.model.float()  # as probe.dtype's per-read upcast (signals/probe.py), not once per GRPO step
    trainer_cls = TRAINERS[row["trainer"]] if row["trainer"] in TRAINERS else Lazy(row["trainer"]).resolve()
    callbacks = [checkpoint_callback(out, profile.rl.checkpoint_every)] if profile.rl.checkpoint_every else []
    rows = rl_dataset(policy, datasets[row["dataset"]])
    train_rl_arm(policy, rows, profile.rl, profile.sft.lora, out, row["dataset"], row["seed"], row["arm"],
                 frozen_probe_policy=frozen, probe_cfg=profile.probe, shaping=shaping, step_rule=profile.steps.rule,
                 callbacks=callbacks, trainer_cls=trainer_cls,
                 per_device_batch_size=profile.rl.per_device_batch_size or None, progress=progress,
                 ops=profile.ops, log_dir=Path(log_root) / row["system"] / row["dataset"] / f"seed{row['seed']}"
                 if log_root else None)
    return RunOutcome("trained", json.loads((out / SUMMARY_FILE).read_text()))


def checkpoints(out_dir: str | Path) -> list[tuple[int, Path]]:
    """(step, folder) of the checkpoints a run saved, in step order, the final adapter last (its step from
    ``rl_summary.json``) unless a checkpoint already has that step."""
    out = Path(out_dir)
    found = sorted((int(p.name.split("-")[1]), p) for p in (out / "checkpoints").glob("step-*") if p.is_dir())
    summary = json.loads((out / SUMMARY_FILE).read_text())
    if not found or found[-1][0] != summary["steps"]:
        found.append((int(summary["steps"]), out))
    return found


def saved_adapters(root: str | Path) -> dict[str, dict[str, str]]:
    """05's adapters on disk: system -> dataset -> folder (those holding adapter_config.json)."""
    out: dict[str, dict[str, str]] = {}
    for cfg in sorted(Path(root).glob("*/*/adapter_config.json")):
        out.setdefault(cfg.parent.parent.name, {})[cfg.parent.name] = str(cfg.parent)
    return out


def adapter_map(plan: pd.DataFrame, outcomes: dict) -> dict:
    """system -> dataset -> seed -> {adapter, init_adapter} of every run that has an adapter (07 reads it)."""
    out: dict = {}
    for r in plan.to_dict("records"):
        if outcomes[(r["system"], r["dataset"], r["seed"])].status != "skipped":
            out.setdefault(r["system"], {}).setdefault(r["dataset"], {})[str(r["seed"])] = dict(
                adapter=r["out_dir"], init_adapter=r["init_adapter"] or None)
    return out


@dataclass
class Calibration:
    """06's Table 9 (lower block): one row per (initialisation, dataset) EDIT-RL trains from, the sweep behind each
    beta_drift, the (beta_drift, gamma) each run uses, and the warnings to show."""
    table9: pd.DataFrame
    sweep: pd.DataFrame
    shaping: dict
    warnings: list


def calibrate_plan(profile, plan: pd.DataFrame, datasets: dict, sft_adapters: dict, cached=None) -> Calibration:
    """Calibrate beta_drift and gamma (App. B, Table 9; ``calibration.table9_row``) for every
    (initialisation, dataset) of the plan's EDIT-RL runs, on fresh rollouts of a drawn ``calibration_fraction`` of
    the training responses from the frozen initialisation (01 samples only the Phase-1 sample); ``cached(name,
    make)`` keeps those rollouts."""
    cached = cached or (lambda name, make: make())
    P, rows, sweeps, shaping, warnings = profile, [], [], {}, []
    for ds in rl_datasets(P, datasets):
        groups = cal.drawn_responses(datasets[ds], P.rl.shaping.calibration_fraction, P.run.seed)
        for init in sorted({r.init for r in plan.itertuples() if r.arm == "edit_rl" and r.dataset == ds and not r.skip}):
            frozen = load_init(P, None if init == BASE else sft_adapters[init][ds], frozen=True)  # never trained
            roll = cached(f"calibration_rollouts_{init}_{ds}", lambda: cal.sample_rollouts(
                frozen, datasets[ds], groups, P.rl.rollouts_per_prompt, P.rl.decoding,
                P.eval.batch_size, seed=stream_seed(P.run.seed, CALIBRATION_ROLLOUTS),
                rule=P.steps.rule))
            calib, dropped = cal.calibration_rows(frozen, datasets[ds], roll, P.probe, P.steps.rule)
            res = cal.table9_row(P, init, ds, calib, len(roll), dropped)
            warnings += res.warnings
            shaping[(init, ds)], sweeps = res.used, sweeps + res.sweep
            rows.append(res.row)
    return Calibration(pd.DataFrame(rows), pd.DataFrame(sweeps), shaping, warnings)


def run_plan(profile, plan: pd.DataFrame, datasets: dict, shaping: dict, log_root: str | Path | None = None) -> dict:
    """Every run of the plan (``run_one``, TensorBoard under ``log_root``; resumable), EDIT-RL with its calibrated
    (beta_drift, gamma): {(system, dataset, seed): RunOutcome}. The runs still to train go, with ``rl.workers``
    other than 1, to the engine, each whole as one unit (``train_on_engine``), or, with ``rl.processes`` > 1, each
    over that many processes (``launched_run.launch``); the rest are reused or skipped here."""
    rl = profile.rl
    jobs = []
    for r in plan.to_dict("records"):
        sh = {r["dataset"]: shaping[(r["init"], r["dataset"])]} if r["arm"] == "edit_rl" and not r["skip"] else None
        jobs.append((r, sh))
    todo = [(r, sh) for r, sh in jobs if not r["skip"] and not _done(r)]
    trained = train_on_engine(profile, todo, datasets, log_root) if rl.workers != 1 and todo else {}
    outcomes = {}
    for r, sh in jobs:
        key = (r["system"], r["dataset"], r["seed"])
        if key in trained:
            outcomes[key] = trained[key]
            continue
        print(f"{r['system']} / {r['dataset']} / seed {r['seed']}", flush=True)
        if rl.processes > 1 and not r["skip"] and not _done(r):  # each process calls run_in
            outcomes[key] = RunOutcome("trained", launched_run.launch(
                f"{__name__}:run_in", (r, {r["dataset"]: datasets[r["dataset"]]}, sh, log_root), profile,
                rl.processes, r["out_dir"], SUMMARY_FILE))
        else:
            outcomes[key] = run_one(profile, r, datasets, sh, log_root=log_root)
    return outcomes


def _done(row: dict) -> bool:
    """A run is done when its final adapter and ``rl_summary.json`` are both written (a resumable state in
    ``resume/`` or the Figure 3 adapters in ``checkpoints/`` never count)."""
    out = Path(row["out_dir"])
    return (out / SUMMARY_FILE).is_file() and (out / "adapter_config.json").is_file()


def worker_profile(profile):
    """The profile a run trains under as an engine unit (``launched_run.process_profile``): the unit's thread count
    (``engine.UNITS['rl_run']``), a named Base replaced by its weights folder, and on a GPU the one Ray gave it."""
    return launched_run.process_profile(profile, threads=engine.UNITS["rl_run"].threads)


def run_in(profile, row: dict, datasets: dict, shaping, log_root, out: str | Path, progress: bool = True):
    """``run_one`` into ``out``: one process of a run spread over ``rl.processes`` (``launched_run``)."""
    return run_one(profile, {**row, "out_dir": str(out)}, datasets, shaping, progress, log_root)


def _unit(profile, row: dict, datasets: dict, shaping, log_root) -> RunOutcome:
    """In an engine unit: ``run_one`` on the device Ray gave the unit (a GPU unit sees only its GPU, as cuda:0)."""
    return run_one(launched_run.unit_profile(profile), row, datasets, shaping, False, log_root)


def train_on_engine(profile, todo: list, datasets: dict, log_root: str | Path | None = None) -> dict:
    """Train ``todo`` ([(plan row, shaping)]) on the engine, each run whole as one ``rl_run`` unit
    (``engine.UNITS``: one torch thread, a GPU each where the cluster has GPUs and ``model.device`` allows), as
    many at once as the engine has room for (at most ``rl.workers`` when > 1), longest run first
    (``launched_run.run_cost``, a stable order): {(system, dataset, seed): RunOutcome}. A run's numbers depend on its
    thread count, so they equal a one-process run of the same threads, whatever the number of units at once."""
    engine.connect()
    gpus = profile.model.device != "cpu"
    width = engine.capacity("rl_run", profile.rl.workers, gpus=gpus)
    wprof, task, hooks = worker_profile(profile), engine.remote("rl_run", gpus=gpus), tuple(engine.run_hooks)
    order = launched_run.longest_first(todo, lambda j: launched_run.run_cost(profile.rl, j[0]["dataset"], j[0]["arm"]))
    print(f"06: {len(order)} RL run(s) on the engine, {width} at once", flush=True)
    out = {}
    for (r, sh), outcome in engine.bounded(lambda job: task.remote("rl_run", hooks, _unit, wprof, job[0], datasets,
                                                                 job[1], log_root), order, width):
        out[label := (r["system"], r["dataset"], r["seed"])] = outcome
        print(f"{' / '.join(map(str, label))}: {outcome.status} on the engine ({len(out)}/{len(order)})", flush=True)
    return out


# ---------------------------------------------------------------- what 06 reads of its runs

EPS = 1e-12


def checkpoint_curves(points: list[tuple[int, Policy]], ds: Dataset, splits: dict[str, list], profile,
                      progress: bool = True) -> pd.DataFrame:
    """Figure 3 rows (step, split, qwk, acc, n) for (step, policy) points on the sampled ``splits``."""
    rows = []
    for step, policy in points:
        for split, responses in splits.items():
            if responses:
                m = greedy_metrics(policy, ds, responses, profile.eval, profile.steps.rule, progress)
                rows.append(dict(step=int(step), split=split, qwk=m["qwk"], acc=m["acc"], n=m["n"]))
    return pd.DataFrame(rows, columns=["step", "split", "qwk", "acc", "n"])


def kl_jsd(p: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise KL(p || q) and Jensen-Shannon divergence (natural log, at most ln 2) of two (K, M+1) distribution
    arrays; Table 10 reads KL(p_policy || p_reference), the direction App. D's "drift from the reference" suggests."""
    p, q = np.clip(p, EPS, None), np.clip(q, EPS, None)
    p, q = p / p.sum(1, keepdims=True), q / q.sum(1, keepdims=True)
    m = 0.5 * (p + q)
    kl = (p * np.log(p / q)).sum(1)
    jsd = 0.5 * (p * np.log(p / m)).sum(1) + 0.5 * (q * np.log(q / m)).sum(1)
    return kl, jsd


def belief_divergence(policy: Policy, reference: Policy, ds: Dataset, responses: list, profile,
                      progress: bool = True) -> pd.DataFrame:
    """Per-boundary KL(p_policy || p_reference) and JSD (Table 10) on ``policy``'s own greedy rollouts of
    ``responses``: columns response_id, k, n_steps, u, tercile, kl, jsd. Rollouts with no step are left out."""
    cfg = SamplingConfig.of(profile.eval.decoding, greedy=True, batch_size=profile.eval.batch_size)
    gen = grade_responses(policy, ds, responses, cfg, progress=progress, rule=profile.steps.rule)
    index = {r.id: r for r in responses}
    prompts = [policy.grading_input(ds.question(index[rid]), index[rid].answer) for rid in gen["response_id"]]
    texts, mms = gen["text"].tolist(), gen["max_mark"].astype(int).tolist()
    mine = probe_completions(policy, profile.probe, prompts, texts, mms, step_rule=profile.steps.rule)
    ref = probe_completions(reference, profile.probe, prompts, texts, mms, step_rule=profile.steps.rule)
    rows = []
    for rid, ra, rb in zip(gen["response_id"], mine, ref):
        if ra is None:
            continue
        a, b = ra.probs, rb.probs
        kl, jsd = kl_jsd(a, b)
        T = a.shape[0] - 1
        for k in range(T + 1):
            u = k / T
            rows.append(dict(response_id=rid, k=k, n_steps=T, u=u,
                             tercile="early" if u <= 1 / 3 else "mid" if u <= 2 / 3 else "late",
                             kl=float(kl[k]), jsd=float(jsd[k])))
    return pd.DataFrame(rows, columns=["response_id", "k", "n_steps", "u", "tercile", "kl", "jsd"])


def divergence_summary(per_boundary: pd.DataFrame) -> dict:
    """Table 10 row: mean KL and JSD over boundaries, JSD within early / mid / late terciles of u = k/T (u <= 1/3,
    <= 2/3, above), counts."""
    t = per_boundary.groupby("tercile")["jsd"].mean()
    return dict(kl=float(per_boundary["kl"].mean()), jsd=float(per_boundary["jsd"].mean()),
                jsd_early=float(t.get("early", np.nan)), jsd_mid=float(t.get("mid", np.nan)),
                jsd_late=float(t.get("late", np.nan)), boundaries=len(per_boundary),
                rollouts=int(per_boundary["response_id"].nunique()))


def calibration_figure(sweeps: pd.DataFrame):
    """The beta_drift sweep (App. B): the penalty's firing rate on incorrect and on correct rollouts per
    initialisation and dataset, the chosen value marked. ``sweeps`` has columns init, dataset, beta_drift,
    fire_rate_incorrect, fire_rate_correct, chosen."""
    import matplotlib.pyplot as plt
    panels = list(dict.fromkeys(zip(sweeps["init"], sweeps["dataset"])))
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(4.2 * max(1, len(panels)), 3.2), squeeze=False)
    for ax, (init, ds) in zip(axes[0], panels):
        g = sweeps[(sweeps["init"] == init) & (sweeps["dataset"] == ds)].sort_values("beta_drift")
        ax.plot(g["beta_drift"], g["fire_rate_incorrect"], "o-", label="incorrect rollouts")
        ax.plot(g["beta_drift"], g["fire_rate_correct"], "s-", label="correct rollouts")
        ax.axvline(float(g.loc[g["chosen"], "beta_drift"].iloc[0]), color="grey", ls="--", label="chosen")
        ax.set(title=f"{init} / {ds}", xlabel="beta_drift (marks)", ylabel="penalty firing rate", ylim=(0, 1.02))
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def curves_figure(curves: pd.DataFrame):
    """Figure 3 analogue: macro-QWK against RL step per system, one panel per (dataset, split)."""
    import matplotlib.pyplot as plt
    panels = list(dict.fromkeys(zip(curves["dataset"], curves["split"])))
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(4.2 * max(1, len(panels)), 3.2), squeeze=False)
    for ax, (ds, split) in zip(axes[0], panels):
        g = curves[(curves["dataset"] == ds) & (curves["split"] == split)]
        for system, h in g.groupby("system", sort=True):
            h = h.sort_values("step")
            ax.plot(h["step"], h["qwk"], "o-", label=system)
        ax.set(title=f"{ds} / {split}", xlabel="RL step", ylabel="macro-QWK")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------ 06's tables over the planned runs

def _logged(log: list[dict], key: str, at: int):
    """The ``at``-th logged value of ``key`` (0 the first, -1 the last), NaN when none was logged."""
    vals = [e[key] for e in log if key in e]
    return vals[at] if vals else np.nan


# Table 9 / App. B: RL horizons fixed in advance per benchmark.
PAPER_STEPS = {"Private-Science": 500, "SAS": 200}


def paper_horizon(ds: Dataset) -> int:
    """The paper's RL horizon for the benchmark a dataset stands for (Table 9; App. B): 500 on Private-Science
    (a dataset with an ID test split), 200 on SAS (OOD questions only)."""
    return PAPER_STEPS["Private-Science" if ds.split("id_test") else "SAS"]


def run_table(plan: pd.DataFrame, outcomes: dict, datasets: dict | None = None) -> pd.DataFrame:
    """One row per planned run: status, steps run, the paper's horizon (``paper_horizon``, Table 9; needs
    ``datasets``) and the profile's (``rl.steps_for``, as the run recorded it), seconds, seconds per step, the last
    logged mean reward, KL and parse-failure rate, EDIT-RL's firing rate, DGPO's distance at the first and last
    step (``baselines.dgpo`` logs ``dgpo/distance_mean``) and the spread of its token weights
    (``dgpo_weight_spread``)."""
    rows = []
    for r in plan.to_dict("records"):
        o = outcomes[(r["system"], r["dataset"], r["seed"])]
        s, log = o.summary, o.summary.get("log_history", [])
        paper = paper_horizon(datasets[r["dataset"]]) if datasets is not None else None
        # train_rl_arm records the profile's horizon under "paper_steps"
        rows.append(dict(system=r["system"], dataset=r["dataset"], seed=r["seed"], status=o.status,
                         reason=s.get("reason", ""), steps=s.get("steps"), paper_steps=paper,
                         profile_steps=s.get("paper_steps"),
                         seconds=s.get("seconds"), seconds_per_step=s.get("seconds_per_step"),
                         reward_last=_logged(log, "reward", -1), kl_last=_logged(log, "kl", -1),
                         parse_failure_last=_logged(log, "parse_failure_rate", -1),
                         shaping_fire_rate_last=_logged(log, "shaping_fire_rate", -1),
                         dgpo_distance_first=_logged(log, "dgpo/distance_mean", 0),
                         dgpo_distance_last=_logged(log, "dgpo/distance_mean", -1), **dgpo_weight_spread(log)))
    return pd.DataFrame(rows)


def dgpo_weight_spread(log: list[dict], within: float = 0.05) -> dict:
    """DGPO's token weights over a run (the DGPO baseline of Sec. 3.1; its per-step ``dgpo/weight_max``, ``dgpo/weight_min``,
    ``dgpo/weight_absdev_mean``): the extremes over every step, the largest mean |w - 1|, and whether every weight
    stayed within ``within`` of uniform (w = 1), in which case DGPO reduces to GRPO. NaN / None for other arms."""
    hi = [h["dgpo/weight_max"] for h in log if "dgpo/weight_max" in h]
    lo = [h["dgpo/weight_min"] for h in log if "dgpo/weight_min" in h]
    dev = [h["dgpo/weight_absdev_mean"] for h in log if "dgpo/weight_absdev_mean" in h]
    if not hi or not lo:
        return dict(dgpo_weight_max=float("nan"), dgpo_weight_min=float("nan"), dgpo_weight_absdev_max=float("nan"),
                    dgpo_near_uniform=None)
    return dict(dgpo_weight_max=max(hi), dgpo_weight_min=min(lo), dgpo_weight_absdev_max=max(dev) if dev else
                float("nan"), dgpo_near_uniform=bool(max(hi) - 1 <= within and 1 - min(lo) <= within))


def log_table(plan: pd.DataFrame, outcomes: dict) -> pd.DataFrame:
    """Per-step training log of every run that trained: system, dataset, seed, step, reward, loss, kl (TRL's
    ``log_history``; ``kl`` is NaN where TRL logged none, i.e. ``rl.beta_kl`` = 0)."""
    rows = []
    for r in plan.to_dict("records"):
        o = outcomes[(r["system"], r["dataset"], r["seed"])]
        for e in o.summary.get("log_history", []):
            if "reward" in e and "step" in e:
                rows.append(dict(system=r["system"], dataset=r["dataset"], seed=r["seed"], step=int(e["step"]),
                                 reward=float(e["reward"]), loss=float(e.get("loss", np.nan)),
                                 kl=float(e.get("kl", np.nan))))
    return pd.DataFrame(rows, columns=LOG_COLUMNS)


LOG_COLUMNS = ["system", "dataset", "seed", "step", "reward", "loss", "kl"]
#: (column, y label) of ``reward_figure``'s rows
CURVES = (("reward", "mean reward (r_out + shaping)"), ("loss", "loss"), ("kl", "KL to the reference"))


def reward_figure(logs: pd.DataFrame):
    """TRL's per-step log of every run, one column of panels per dataset: the mean total reward (Eq. 7), the
    loss and the KL to the reference (App. B, Table 9: beta_KL 0.02 towards the initialisation). TRL logs the
    KL only when beta > 0; a dataset whose runs logged none says so in its panel (or a loss, likewise)."""
    import matplotlib.pyplot as plt
    names = list(dict.fromkeys(logs["dataset"]))
    fig, axes = plt.subplots(len(CURVES), len(names), figsize=(5.0 * len(names), 2.6 * len(CURVES)),
                             squeeze=False, sharex="col")
    for j, ds in enumerate(names):
        g = logs[logs["dataset"] == ds]
        for i, (col, label) in enumerate(CURVES):
            ax = axes[i][j]
            ax.set(title=ds if i == 0 else "", xlabel="RL step" if i == len(CURVES) - 1 else "", ylabel=label)
            values = g[col] if col in g else pd.Series(np.nan, index=g.index)
            if values.isna().all():
                why = "TRL logs it only when rl.beta_kl > 0" if col == "kl" else "not in TRL's log"
                ax.text(0.5, 0.5, f"no {col} logged\n({why})", ha="center", va="center", transform=ax.transAxes)
                continue
            for (system, seed), h in g.assign(_y=values).groupby(["system", "seed"], sort=True):
                ax.plot(h["step"], h["_y"], "-", label=f"{system} s{seed}")
            if i == 0:
                ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


def grid_curves(profile, plan: pd.DataFrame, datasets: dict, seed: int = 0, progress: bool = True) -> pd.DataFrame:
    """Figure 3 rows for the Table 5 grid (first seed, ``rl_runs.grid_datasets``): system, dataset, step, split,
    qwk, acc, n."""
    first = plan[(plan["system"].isin(GRID)) & (plan["seed"] == plan["seed"].iloc[0]) & (plan["skip"] == "")
                 & plan["dataset"].isin(grid_datasets(profile, datasets))]
    out = []
    for r in first.to_dict("records"):
        ds = datasets[r["dataset"]]
        splits = {s: seeded_subset(ds.split(s), profile.rl.curve_responses, seed) for s in ("id_test", "ood_test")}
        points = [(0, load_init(profile, r["init_adapter"]))]
        points += [(step, load_policy_from_profile(profile, adapter=str(path), init_adapter=r["init_adapter"] or None))
                   for step, path in checkpoints(r["out_dir"])]
        c = checkpoint_curves(points, ds, splits, profile, progress)
        out.append(c.assign(system=r["system"], dataset=r["dataset"]))
    cols = ["system", "dataset", "step", "split", "qwk", "acc", "n"]
    return pd.concat(out, ignore_index=True)[cols] if out else pd.DataFrame(columns=cols)


def divergence_table(profile, plan: pd.DataFrame, datasets: dict, seed: int = 0,
                     systems=names("Table 10"), progress: bool = True) -> pd.DataFrame:
    """Table 10 rows (first seed): per grid dataset (``rl_runs.grid_datasets``; App. D: Private-Biology) and
    SFT-initialised RL system, KL and JSD from the frozen EDIT-SFT (``belief_divergence``, ``divergence_summary``)."""
    rows = []
    first = plan[plan["system"].isin(systems) & (plan["seed"] == plan["seed"].iloc[0]) & (plan["skip"] == "")
                 & plan["dataset"].isin(grid_datasets(profile, datasets))]
    for ds_name, g in first.groupby("dataset", sort=True):
        ds = datasets[ds_name]
        tests = [r for s in ("id_test", "ood_test") for r in ds.split(s)]
        idx = np.random.default_rng(seed).permutation(len(tests))[:profile.rl.divergence_responses or len(tests)]
        sample = [tests[i] for i in sorted(idx)]
        reference = load_init(profile, g["init_adapter"].iloc[0], frozen=True)
        for r in g.to_dict("records"):
            policy = load_policy_from_profile(profile, adapter=r["out_dir"], init_adapter=r["init_adapter"] or None)
            per = belief_divergence(policy, reference, ds, sample, profile, progress)
            rows.append(dict(dataset=ds_name, system=r["system"], **divergence_summary(per)))
    return pd.DataFrame(rows)
