"""What 06 measures on its trained RL policies, beyond their training logs (App. B, App. D; Figure 3, Table 10).

* ``checkpoint_curves`` (Figure 3): ID and OOD macro-QWK of each saved checkpoint, computed post hoc after every
  run has finished, with the library's evaluation path (greedy decoding, App. B; ``metrics.grading_metrics``).
  Step 0 is the initialisation. Never used for selection (App. B: the final step is the result).
* ``belief_divergence`` (Table 10, App. D): the mark posterior p_k (Eq. 1) at every step boundary k = 0..T of a
  policy's own greedy rollouts on test responses, read under the policy and under the FROZEN reference
  (EDIT-SFT): KL(p_policy || p_reference) (natural log; the direction App. D's "drift from the reference"
  suggests) and Jensen-Shannon divergence (natural log, at most ln 2), per boundary, then averaged overall and
  within early / mid / late terciles of the relative position u = k/T (u <= 1/3, <= 2/3, above).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from edit_lib.data.schema import Dataset
from edit_lib.model.generate import SamplingConfig
from edit_lib.model.policy import Policy
from edit_lib.model.rollouts import grade_responses, greedy_metrics
from edit_lib.systems import names
from edit_lib.train.rewards import probe_completions

EPS = 1e-12


def sample_split(ds: Dataset, split: str, n: int, seed: int) -> list:
    """A seeded sample of ``n`` responses of ``split`` (all of them when n is 0 or at least the split size),
    in the split's order."""
    rs = ds.split(split)
    if not n or n >= len(rs):
        return rs
    idx = np.random.default_rng(seed).choice(len(rs), size=n, replace=False)
    return [rs[i] for i in sorted(idx)]


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
    """Row-wise KL(p || q) and Jensen-Shannon divergence (natural log) of two (K, M+1) distribution arrays."""
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
    """Table 10 row: mean KL and JSD over boundaries, JSD within early / mid / late terciles, counts."""
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

def _last(log: list[dict], key: str):
    vals = [e[key] for e in log if key in e]
    return vals[-1] if vals else np.nan


def _first(log: list[dict], key: str):
    vals = [e[key] for e in log if key in e]
    return vals[0] if vals else np.nan


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
                         reward_last=_last(log, "reward"), kl_last=_last(log, "kl"),
                         parse_failure_last=_last(log, "parse_failure_rate"),
                         shaping_fire_rate_last=_last(log, "shaping_fire_rate"),
                         dgpo_distance_first=_first(log, "dgpo/distance_mean"),
                         dgpo_distance_last=_last(log, "dgpo/distance_mean"), **dgpo_weight_spread(log)))
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
    from edit_lib.train.rl_runs import GRID, checkpoints, grid_datasets, load_init
    from edit_lib.model.policy import load_policy_from_profile
    first = plan[(plan["system"].isin(GRID)) & (plan["seed"] == plan["seed"].iloc[0]) & (plan["skip"] == "")
                 & plan["dataset"].isin(grid_datasets(profile, datasets))]
    out = []
    for r in first.to_dict("records"):
        ds = datasets[r["dataset"]]
        splits = {s: sample_split(ds, s, profile.rl.curve_responses, seed) for s in ("id_test", "ood_test")}
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
    from edit_lib.train.rl_runs import grid_datasets, load_init
    from edit_lib.model.policy import load_policy_from_profile
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
