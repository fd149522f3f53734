"""Every SFT run of 05 (Sec. 2.2, App. B, Table 6): one LoRA adapter per (system, dataset) pool, resumable, and a
quick greedy check that each saved adapter loads and grades through the same path as Base.

Adapters go to ``<root>/<system>/<dataset>/`` (peft ``save_pretrained`` + ``sft_summary.json``); a folder that
holds both was trained under the same stage key and is reused. A pool with no pair trains nothing: the run is
recorded with status ``empty_pool`` and a warning, never silently dropped.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from edit_lib.data.schema import Dataset
from edit_lib.model.policy import Policy, load_policy_from_profile
from edit_lib.model.rollouts import greedy_metrics
from edit_lib.systems import BASE, EDIT_SFT
from edit_lib import engine
from edit_lib.train import launched_run
from edit_lib.train.sft import clear as clear_resume, SUMMARY_FILE, train_sft

RUN_COLUMNS = ["system", "dataset", "status", "n_pairs", "epochs", "effective_batch", "steps", "final_loss", "trainable_parameters",
               "seconds", "adapter"]


@dataclass
class SFTRuns:
    """Results of ``train_all``: one summary row per run, the loss curves, and the adapter folders
    (system -> dataset -> path, trained runs only)."""

    summary: pd.DataFrame
    curves: pd.DataFrame
    adapters: dict[str, dict[str, str]] = field(default_factory=dict)


def grading_prompts(policy: Policy, datasets: dict[str, Dataset]) -> Callable[[str, str], str]:
    """``prompt_of(dataset, response_id)``: the policy's grading input for a response (Sec. 2.1 prompt), which
    every SFT pair of Phase 1 uses as its prompt."""
    index = {(name, r.id): (ds.question(r), r) for name, ds in datasets.items() for r in ds.responses}

    def prompt_of(dataset: str, response_id: str) -> str:
        q, r = index[(dataset, response_id)]
        return policy.grading_input(q, r.answer)

    return prompt_of


def train_pool(profile, system: str, ds: str, pairs: list, out: str | Path, progress: bool = True,
               log_dir: str | Path | None = None) -> None:
    """LoRA SFT of one (system, dataset) pool into ``out`` (``train.sft.train_sft``, App. B recipe from
    ``profile.sft``) from a fresh Base, seed ``profile.run.seed``; InT-SFT's targets end without EOS (Sec. 3).
    ``profile.ops``: TensorBoard events in ``log_dir``, a resumable state every ``ops.resume_every`` steps in
    ``out/resume`` (a killed run resumes from it, ``train.sft``)."""
    # the result (its policy in memory) is not kept: freed before the next pool's Base loads
    train_sft(load_policy_from_profile(profile), pairs, profile.sft, out, dataset=ds, seed=profile.run.seed,
              progress=progress, eos=not system.startswith("int_"), ops=profile.ops, log_dir=log_dir)


def train_all(pairs: dict[tuple[str, str], list[tuple[str, str]]], profile, root: str | Path,
              warn: Callable[[str], None] = print, progress: bool = True,
              log_root: str | Path | None = None) -> SFTRuns:
    """LoRA SFT (``train_pool``, App. B recipe from ``profile.sft``) of every (system, dataset) -> pairs entry,
    each from a fresh Base, seed ``profile.run.seed``; with ``sft.workers`` other than 1 the runs still to train
    go to the engine, each whole as one unit (``train_on_engine``), or, with ``sft.processes`` > 1, each over that
    many processes. TensorBoard events (``ops.report_to``) go to ``log_root/<system>/<dataset>`` (05 passes
    ``runs/<profile>/tensorboard/05_edit_sft``)."""
    rows, curves, adapters = [], [], {}

    def log_dir(system: str, ds: str) -> Path | None:
        return Path(log_root) / system / ds if log_root else None
    todo = [(system, ds, pr, Path(root) / system / ds, log_dir(system, ds)) for (system, ds), pr in pairs.items()
            if pr and not _done(Path(root) / system / ds)]
    trained = train_on_engine(profile, todo) if profile.sft.workers != 1 and todo else set()
    for (system, ds), pr in pairs.items():
        out = Path(root) / system / ds
        row = dict(system=system, dataset=ds, n_pairs=len(pr), adapter=str(out), epochs=profile.sft.epochs,
                   effective_batch=profile.sft.effective_batch_for(ds))
        if (system, ds) in trained:
            s = json.loads((out / SUMMARY_FILE).read_text())
            row.update(status="trained")
        elif _done(out):
            s = json.loads((out / SUMMARY_FILE).read_text())
            clear_resume(out)  # left over if the run was killed between its summary and the state's deletion
            row.update(status="reused")
        elif not pr:
            warn(f"sft {system}/{ds}: the pool is empty, no adapter is trained (07 leaves this system out)")
            rows.append(dict(row, status="empty_pool", adapter=None))
            continue
        else:
            if profile.sft.processes > 1:  # one run over several processes (launched_run)
                launched_run.launch(f"{__name__}:train_pool", (system, ds, pr), profile, profile.sft.processes, out,
                                    SUMMARY_FILE, {"log_dir": log_dir(system, ds)})
            else:
                train_pool(profile, system, ds, pr, out, progress, log_dir(system, ds))
            s = json.loads((out / SUMMARY_FILE).read_text())
            row.update(status="trained")
        curve = s.get("loss_curve", [])
        row.update(steps=s["steps"], final_loss=curve[-1]["loss"] if curve else float("nan"),
                   trainable_parameters=s["trainable_parameters"], seconds=s["seconds"])
        curves += [dict(system=system, dataset=ds, **c) for c in curve]
        adapters.setdefault(system, {})[ds] = str(out)
        rows.append(row)
    return SFTRuns(pd.DataFrame(rows, columns=RUN_COLUMNS),
                   pd.DataFrame(curves, columns=["system", "dataset", "step", "loss"]), adapters)


def _done(out: Path) -> bool:
    return (out / SUMMARY_FILE).is_file() and (out / "adapter_config.json").is_file()


def _unit(profile, system: str, ds: str, pairs: list, out: Path, log_dir: Path | None) -> None:
    """In an engine unit: ``train_pool`` on the device Ray gave the unit (a GPU unit sees only its GPU)."""
    train_pool(launched_run.unit_profile(profile), system, ds, pairs, out, False, log_dir)


def train_on_engine(profile, todo: list) -> set:
    """Train ``todo`` ([(system, dataset, pairs, out folder, log folder)]) on the engine, each run whole as one
    ``sft_run`` unit (``engine.UNITS``: the profile's ``model.torch_threads`` and as many CPUs, a GPU each where the
    cluster has GPUs and ``model.device`` allows), as many at once as the engine has room for (at most
    ``sft.workers`` when > 1), the largest pool first: the (system, dataset) pairs trained. The threads are the
    notebook's, so each adapter equals the one the notebook's process trains."""
    engine.connect()
    gpus, threads = profile.model.device != "cpu", max(1, profile.model.torch_threads)
    width = engine.capacity("sft_run", profile.sft.workers, gpus=gpus, threads=threads)
    wprof = launched_run.process_profile(profile, threads=threads)
    task, hooks = engine.remote("sft_run", gpus=gpus, threads=threads), tuple(engine.run_hooks)
    order = launched_run.longest_first(todo, lambda j: len(j[2]))
    print(f"05: {len(order)} SFT run(s) on the engine, {width} at once", flush=True)
    done = set()
    for (system, ds, *_), _ in engine.bounded(lambda j: task.remote("sft_run", hooks, _unit, wprof, *j), order,
                                              width):
        done.add((system, ds))
        print(f"sft {system} / {ds}: trained on the engine ({len(done)}/{len(order)})", flush=True)
    return done


def greedy_check(profile, datasets: dict[str, Dataset], runs: SFTRuns, n: int, seed: int = 0,
                 main: str = EDIT_SFT, n_load_check: int = 8, progress: bool = True) -> pd.DataFrame:
    """Greedy grading (App. B decoding, ``profile.eval``) of a seeded sample of ``n`` training responses per
    dataset by Base and by ``main``'s adapter, and of its first ``n_load_check`` responses by every other
    adapter. Columns system, dataset, n, acc, qwk, mae, n_invalid (``rollouts.greedy_metrics``)."""
    rows = []

    def grade(policy: Policy, system: str, name: str, responses) -> None:
        m = greedy_metrics(policy, datasets[name], responses, profile.eval, profile.steps.rule, progress)
        rows.append(dict(system=system, dataset=name, n=m["n"], acc=m["acc"], qwk=m["qwk"], mae=m["mae"],
                         n_invalid=m["n_invalid"]))

    base = load_policy_from_profile(profile)
    rng = np.random.default_rng(seed)
    for name, ds in datasets.items():
        train = ds.split("train")
        sample = [train[i] for i in sorted(rng.choice(len(train), size=min(n, len(train)), replace=False))]
        grade(base, BASE, name, sample)
        for system, by_ds in runs.adapters.items():
            if name in by_ds:
                adapted = load_policy_from_profile(profile, adapter=by_ds[name])
                grade(adapted, system, name, sample if system == main else sample[:n_load_check])
    return pd.DataFrame(rows, columns=["system", "dataset", "n", "acc", "qwk", "mae", "n_invalid"])
