"""``edit-suite pilot rl-seeds``: a GRPO-only seed pilot that chooses an RL regime and Table 4's seed count before
any EDIT-RL run (Table 4; the study's rule: choose the regime from GRPO-only seeds, never from the comparison).

One RL arm (default Base+GRPO, Sec. 3 Baselines) trains on one dataset under the profile's ``rl`` recipe (with any
overrides) for each seed; each final policy and the initialisation are graded greedily on the OOD test split. The
report gives the per-seed OOD QWK and last logged KL, the move from the initialisation with its t-interval over
seeds (a regime must move the policy), the seed SD, and Table 4's MDE at 3-8 seeds (``power.seed_mde``) under the
stated assumption that the two arms' seed noise is independent (SD of a paired difference = SD x sqrt 2)."""
from __future__ import annotations

import hashlib
import json
import math
import operator
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from edit_lib.artifacts import DEFAULT_RUN_ROOT
from edit_lib.power import seed_mde, seed_mde_multiple
from edit_lib.systems import BASE, BY_NAME, of_source
from edit_lib.train import rl_runs

# The arms a pilot may train: outcome reward (GRPO) from Base.
PILOT_SYSTEMS = tuple(s.name for s in of_source("rl") if (s.init, s.arm) == (BASE, "grpo"))

RL_KEYS = ("learning_rate", "steps", "prompts_per_step", "rollouts_per_prompt", "decoding.max_new_tokens", "beta_kl",
           "decoding.temperature", "workers")


def regime(profile) -> dict:
    """The RL recipe values a pilot varies (the rest of ``rl`` is the profile's)."""
    return {k: operator.attrgetter(k)(profile.rl) for k in RL_KEYS}


def regime_key(profile, dataset: str, system: str) -> str:
    """A folder key of everything a pilot run is computed from: the whole ``rl`` and ``model`` sections, the
    dataset's spec, the run seed, the arm and the code that trains it (``fingerprints.code_fingerprint``); a
    changed value or module trains afresh (nothing stale is reused)."""
    from edit_lib.config import to_dict
    from edit_lib.fingerprints import code_fingerprint
    d = to_dict(profile)
    spec = next(s for s in d["data"]["datasets"] if s["name"] == dataset)
    blob = json.dumps(dict(rl=d["rl"], model=d["model"], steps=d["steps"], spec=spec, seed=d["run"]["seed"],
                           system=system, code=code_fingerprint("edit_lib.train.rl_runs", "edit_lib.model.rollouts")),
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def summarise(init_qwk: float, per_seed: list[dict], target: float, ci: float = 0.95) -> dict:
    """The pilot's verdict from per-seed OOD QWK (``per_seed``: dicts with ``ood_qwk``): mean, SD (ddof 1), the
    move from the initialisation with its t-interval (n - 1 df), and Table 4's MDE at n = 3..8 seeds with the SD of
    a paired difference taken as SD x sqrt 2; ``seeds_for_target``: the smallest n whose MDE is <= ``target``
    (None if even 8 is not enough), ``sd_needed_at_8``: the seed SD at which 8 seeds would reach ``target``."""
    q = np.array([r["ood_qwk"] for r in per_seed], dtype=float)
    n = len(q)
    sd = float(q.std(ddof=1)) if n > 1 else float("nan")
    half = float(stats.t.ppf(0.5 + ci / 2, n - 1) * sd / math.sqrt(n)) if n > 1 else float("nan")
    move = float(q.mean() - init_qwk)
    diff_sd = sd * math.sqrt(2)
    mde = {str(k): seed_mde(diff_sd, k) for k in range(3, 9)}
    enough = [k for k in range(3, 9) if mde[str(k)] <= target]
    return dict(n_seeds=n, init_ood_qwk=init_qwk, mean_ood_qwk=float(q.mean()), sd_ood_qwk=sd, move=move,
                move_ci_low=move - half, move_ci_high=move + half, moves=bool(n > 1 and abs(move) > half),
                paired_diff_sd_assumed=diff_sd, mde_by_seeds=mde, target=target,
                seeds_for_target=enough[0] if enough else None,
                sd_needed_at_8=target / seed_mde_multiple(8) / math.sqrt(2))


def pilot_rl_seeds(profile_name: str, overrides: list[str], dataset: str, seeds: list[int],
                   system: str = PILOT_SYSTEMS[0], run_root: str | Path | None = None, target: float = 0.05,
                   progress: bool = True) -> dict:
    """Train ``system`` (an arm from Base: ``base_grpo`` or ``base_dgpo``) on ``dataset`` for each of ``seeds``
    (resumable: a finished seed is reused), grade every final policy and Base on the OOD test split, and
    ``summarise``. Written to ``<run root>/<profile>/pilot/rl_seeds_<key>.json``."""
    from edit_lib.config import load_profile
    from edit_lib.data.registry import build_dataset
    from edit_lib.model.policy import load_policy_from_profile
    from edit_lib.model.rollouts import greedy_metrics
    from edit_lib.runner.keys import register_all

    if system not in PILOT_SYSTEMS:
        raise ValueError(f"a pilot trains an outcome-reward arm from Base ({', '.join(PILOT_SYSTEMS)}), got {system!r}")
    register_all()
    P = load_profile(profile_name, overrides)
    specs = {d.name: d for d in P.data.datasets}
    if dataset not in specs:
        raise ValueError(f"--dataset {dataset!r} is not a dataset of profile {P.name}: {sorted(specs)}")
    ds = build_dataset(specs[dataset], seed=P.run.seed)
    ood = ds.split("ood_test")
    if not ood:
        raise ValueError(f"dataset {dataset} has no OOD test responses to grade the pilot on")
    key = regime_key(P, dataset, system)
    root = Path(run_root or DEFAULT_RUN_ROOT) / P.name / "pilot"
    init, arm, trainer = (getattr(BY_NAME[system], k) for k in ("init", "arm", "trainer"))
    rows = [dict(system=system, init=init, arm=arm, trainer=trainer, dataset=dataset, seed=int(s), init_adapter="",
                 out_dir=str(root / key / system / dataset / f"seed{s}"), skip="") for s in seeds]
    outcomes = rl_runs.run_plan(P, pd.DataFrame(rows, columns=rl_runs.PLAN_COLUMNS), {dataset: ds}, {})
    init_qwk = greedy_metrics(load_policy_from_profile(P), ds, ood, P.eval, P.steps.rule, progress)["qwk"]
    per_seed = []
    for r in rows:
        s = outcomes[(system, dataset, r["seed"])].summary
        m = greedy_metrics(load_policy_from_profile(P, adapter=r["out_dir"]), ds, ood, P.eval, P.steps.rule, progress)
        kls = [h["kl"] for h in s.get("log_history", []) if "kl" in h]
        per_seed.append(dict(seed=r["seed"], ood_qwk=m["qwk"], ood_acc=m["acc"], last_kl=kls[-1] if kls else None,
                             seconds=s.get("seconds")))
    out = dict(profile=P.name, overrides=list(overrides), dataset=dataset, system=system, key=key,
               regime=regime(P), n_ood=len(ood), per_seed=per_seed, **summarise(init_qwk, per_seed, target))
    root.mkdir(parents=True, exist_ok=True)
    (root / f"rl_seeds_{key}.json").write_text(json.dumps(out, indent=2))
    return out


def format_pilot(r: dict) -> str:
    """The pilot report as text: the regime, one line per seed, the move and Table 4's MDE by seed count."""
    kl = lambda p: "n/a" if p["last_kl"] is None else f"{p['last_kl']:.4f}"  # noqa: E731
    verdict = "moves" if r["moves"] else "no move beyond its interval"
    lines = [f"pilot {r['system']} on {r['dataset']} (profile {r['profile']}, {r['n_ood']} OOD responses): "
             + ", ".join(f"{k}={v}" for k, v in r["regime"].items())]
    lines += [f"  seed {p['seed']}: OOD QWK {p['ood_qwk']:.3f}, last KL {kl(p)}" for p in r["per_seed"]]
    lines += [f"Base {r['init_ood_qwk']:.3f}; mean {r['mean_ood_qwk']:.3f}, seed SD {r['sd_ood_qwk']:.3f}; move "
              f"{r['move']:+.3f} [{r['move_ci_low']:+.3f}, {r['move_ci_high']:+.3f}] ({verdict})",
              "Table 4 MDE (paired SD = seed SD x sqrt 2): "
              + ", ".join(f"{k} seeds {v:.3f}" for k, v in r["mde_by_seeds"].items()),
              f"seeds for MDE <= {r['target']}: {r['seeds_for_target'] or 'more than 8'}; seed SD needed at 8 "
              f"seeds: {r['sd_needed_at_8']:.4f}"]
    return "\n".join(lines)
