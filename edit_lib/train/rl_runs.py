"""Every RL run of 06 (Sec. 2.3, Sec. 3 Baselines, App. B; Tables 4, 5): which arm starts from which
initialisation, one run per dataset, resumable, with adapters saved during training for the post hoc curves of
Figure 3.

Systems (``SYSTEMS``): system -> (initialisation, reward arm, trainer):

* ``base_grpo``, ``base_dgpo``, ``base_edit_rl``: from Base (GRPO; DGPO's token-level advantages,
  ``train.dgpo``; EDIT-RL with the frozen Base as the shaping probe);
* ``edit_sft_grpo``, ``edit_sft_edit_rl``: from the merged EDIT-SFT adapter of the same dataset (Table 4's
  pair, repeated for every seed in ``rl.seeds``; Table 5's grid with the Base rows);
* ``int_sft_int_rl``: from the merged InT-SFT adapter, outcome reward only. InT's own RL stage used PipelineRL
  (REINFORCE-style, no KL, its own recipe); what is kept is InT's initialisation and its outcome-only reward, on
  the Table 9 recipe shared by every RL method (Sec. 3).

A run is skipped, with its reason, when its initialisation has no adapter (an empty SFT pool in 05). Adapters
go to ``<root>/<system>/<dataset>/seed<seed>/``; a folder with ``rl_summary.json`` was trained under the same
stage key and is reused. With ``rl.checkpoint_every`` > 0 the adapter is also saved every that many steps under
``checkpoints/step-<n>/`` (never used for selection: App. B takes the final step).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from edit_lib.model.policy import Policy, load_policy_from_profile
from edit_lib.systems import NOT_RUN, not_run
from edit_lib.train.rl import SUMMARY_FILE, rl_dataset, train_rl_arm

SYSTEMS: dict[str, tuple[str, str, str]] = {
    "base_grpo": ("base", "grpo", "grpo"),
    "base_dgpo": ("base", "grpo", "dgpo"),
    "base_edit_rl": ("base", "edit_rl", "grpo"),
    "edit_sft_grpo": ("edit_sft", "grpo", "grpo"),
    "edit_sft_edit_rl": ("edit_sft", "edit_rl", "grpo"),
    "int_sft_int_rl": ("int_sft", "grpo", "grpo"),
}
SEEDED = ("edit_sft_grpo", "edit_sft_edit_rl")  # Table 4: every seed of rl.seeds
GRID = ("base_grpo", "base_edit_rl", "edit_sft_grpo", "edit_sft_edit_rl")  # Table 5 and Figure 3
PLAN_COLUMNS = ["system", "init", "arm", "trainer", "dataset", "seed", "init_adapter", "out_dir", "skip"]


def rl_datasets(profile, names) -> list[str]:
    """The datasets RL runs on: ``rl.datasets`` (each must exist) or every dataset."""
    chosen = list(profile.rl.datasets) or sorted(names)
    unknown = [d for d in chosen if d not in names]
    if unknown:
        raise ValueError(f"rl.datasets names {unknown}, not datasets of this profile: {sorted(names)}")
    return chosen


def plan_runs(profile, names, sft_adapters: dict[str, dict[str, str]], root: str | Path) -> pd.DataFrame:
    """One row per run: system, init, arm, trainer, dataset, seed, init_adapter ('' for Base), out_dir and
    skip (the reason a run cannot start, '' otherwise). ``sft_adapters`` is 05's ``adapters`` map."""
    rows = []
    seeds = list(profile.rl.seeds)
    skipped = set(not_run(profile))
    if not seeds:
        raise ValueError("rl.seeds is empty: every arm needs at least one seed")
    for ds in rl_datasets(profile, names):
        for system, (init, arm, trainer) in SYSTEMS.items():
            for seed in (seeds if system in SEEDED else seeds[:1]):
                adapter = "" if init == "base" else sft_adapters.get(init, {}).get(ds, "")
                skip = "" if init == "base" or adapter else f"no {init} adapter for {ds} (empty SFT pool in 05)"
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


def run_one(profile, row: dict, datasets: dict, shaping: dict | None, progress: bool = True) -> RunOutcome:
    """Train (or reuse) one planned run: GRPO / EDIT-RL / DGPO from its initialisation, the Table 9 recipe
    (``rl_config.build_grpo_config``) with the profile's horizon, checkpoints every ``rl.checkpoint_every``.
    ``shaping`` maps the dataset to (beta_drift, gamma) for EDIT-RL (06's calibration, or the profile's values)."""
    out = Path(row["out_dir"])
    if row["skip"]:
        return RunOutcome("skipped", {"reason": row["skip"]})
    if (out / SUMMARY_FILE).is_file() and (out / "adapter_config.json").is_file():
        return RunOutcome("reused", json.loads((out / SUMMARY_FILE).read_text()))
    policy = load_init(profile, row["init_adapter"])
    frozen = load_init(profile, row["init_adapter"], frozen=True) if row["arm"] == "edit_rl" else None
    trainer_cls = None
    if row["trainer"] == "dgpo":
        from edit_lib.baselines.dgpo import DGPOTrainer
        trainer_cls = DGPOTrainer
    callbacks = [checkpoint_callback(out, profile.rl.checkpoint_every)] if profile.rl.checkpoint_every else []
    rows = rl_dataset(policy, datasets[row["dataset"]])
    train_rl_arm(policy, rows, profile.rl, profile.sft.lora, out, row["dataset"], row["seed"], row["arm"],
                 frozen_probe_policy=frozen, probe_cfg=profile.probe, shaping=shaping, step_rule=profile.steps.rule,
                 callbacks=callbacks, trainer_cls=trainer_cls,
                 per_device_batch_size=profile.rl.per_device_batch_size or None, progress=progress)
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
