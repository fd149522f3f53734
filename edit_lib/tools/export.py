"""``edit-suite export``: one graded policy of a finished run as a folder that plain ``transformers`` (+ ``peft``)
load, with a model card (``model_card``).

The policy is the one 07 graded (its results' ``extra.graded``), checked against the adapters 05 / 06 recorded:
Base, or Base + one adapter (an SFT system; an RL system trained from Base), or Base with the SFT adapter merged
+ the RL adapter (App. B: RL trains a fresh LoRA over the merged SFT model; ``model.policy.load_policy_from_profile``).
``--merge`` writes that policy as one merged model; without it, the Base weights folder (a hub Base is named with
its commit, not copied) and the adapters in the order they stack (``adapters/1_sft``, ``adapters/2_rl``: every one
but the last merged, the last applied as 07 applied it). ``edit_export.json`` says how; ``load.py`` does it.
"""
from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from edit_lib import systems as sy
from edit_lib.artifacts import MissingArtifactError, RunPaths, read_results, recorded_stage_dir

MANIFEST = "edit_export.json"
# model values that change the policy's weights or numbers (device, threads and the generation engine do not)
WEIGHTS_KEYS = ("name_or_path", "dtype", "attn_implementation", "trust_remote_code", "warmup")
MAKES = {"05_edit_sft": "SFT adapters", "06_rl": "RL adapters", "07_evaluation": "the graded policies and metrics"}


class ExportError(ValueError):
    """What cannot be exported, and why (the message names the run, system, dataset or file)."""


@dataclass
class Exported:
    """One graded policy of a run: its system, dataset and seed, its adapters in stacking order (role, folder),
    the Base it stacks on and the results JSON files the card quotes."""

    profile: object
    paths: RunPaths
    system: sy.System
    dataset: str
    seed: int | None
    adapters: list[tuple[str, Path]]
    base: dict
    results: dict = field(default_factory=dict)


def _results(paths: RunPaths, stage: str, system: str | None = None) -> dict:
    try:
        return read_results(paths, stage)
    except MissingArtifactError as e:
        why = f" ({system} needs {MAKES[stage]})" if system else ""
        raise ExportError(f"{e}{why}") from None


def _local(path: str | None, paths: RunPaths) -> Path | None:
    """A recorded adapter folder, re-rooted under this run's artifacts when the run folder was moved."""
    if not path:
        return None
    p = Path(path)
    if not p.is_dir() and "artifacts" in p.parts:
        i = len(p.parts) - 1 - p.parts[::-1].index("artifacts")
        p = paths.artifacts.joinpath(*p.parts[i + 1:])
    if not (p / "adapter_config.json").is_file():
        raise ExportError(f"adapter folder {path} (recorded by the run at {paths.root}) has no adapter_config.json")
    return p


def _graded(res07: dict, paths: RunPaths, system: str, dataset: str, seed: int | None) -> dict:
    """07's entry for (system, dataset, seed): the policy it graded. Errors list what the run has."""
    graded = res07.get("extra", {}).get("graded", [])
    have = sorted({g["system"] for g in graded})
    if system not in sy.BY_NAME or system not in have:
        known = "unknown system" if system not in sy.BY_NAME else "no policy of system"
        raise ExportError(f"{known} {system!r} in the run at {paths.root}; 07 graded: {', '.join(have) or 'none'}")
    mine = [g for g in graded if g["system"] == system]
    sets = sorted({g["dataset"] for g in mine})
    if dataset not in sets:
        raise ExportError(f"system {system!r} was not trained on dataset {dataset!r} in the run at {paths.root}; "
                          f"07 graded it on: {', '.join(sets)}")
    mine = [g for g in mine if g["dataset"] == dataset]
    seeds = sorted(int(g["seed"]) for g in mine if g["seed"] is not None)
    if seed is None:  # the first seed: the one Tables 1-3 and 09 report (evaluation.tables.first_seed)
        seed = seeds[0] if seeds else None
    hit = [g for g in mine if (None if g["seed"] is None else int(g["seed"])) == seed]
    if not hit:
        raise ExportError(f"system {system!r} on {dataset!r} has no seed {seed} in the run at {paths.root}; "
                          f"its seeds: {seeds or 'none (not an RL system)'}")
    return hit[0]


def _recorded_by_05_06(paths: RunPaths, s: sy.System, dataset: str, seed: int | None) -> tuple:
    """(init_adapter, adapter) as 05 / 06 recorded them, read as 07 reads them (``systems.resolve``)."""
    if s.source == "base":
        return None, None
    from edit_lib.train.rl_runs import saved_adapters
    sft = saved_adapters(recorded_stage_dir(paths, "05_edit_sft") / "adapters")
    rl = read_results(paths, "06_rl").get("extra", {}).get("rl_adapters", {}) if s.source == "rl" else {}
    hits = [g for g in sy.resolve(s.name, [dataset], sft, rl) if g.seed == seed]
    return (hits[0].init_adapter, hits[0].adapter) if hits else (None, None)


def locate(profile_name: str, system: str, dataset: str, seed: int | None = None, run_root=None,
           overrides=()) -> Exported:
    """The policy 07 graded for ``system`` on ``dataset`` (RL: ``seed``, default the first), its Base and the
    results the card quotes; an ``ExportError`` when the run lacks it or records it inconsistently."""
    from edit_lib.config import load_profile
    from edit_lib.runner.keys import register_all
    register_all()  # named Bases ('embedded', 'micro') resolve to their folders
    profile = load_profile(profile_name, list(overrides))
    paths = RunPaths.for_profile(profile.name, run_root)
    if not paths.results.is_dir():
        raise ExportError(f"no run at {paths.root}: run `edit-suite run --profile {profile_name}` first (or pass "
                          f"the --run-root that holds {profile.name}/)")
    if system in sy.BY_NAME and sy.BY_NAME[system].source in ("sft", "rl"):  # the stage that makes it ran
        _results(paths, "05_edit_sft", system)
        if sy.BY_NAME[system].source == "rl":
            _results(paths, "06_rl", system)
    res07 = _results(paths, "07_evaluation", system)
    g = _graded(res07, paths, system, dataset, seed)
    s = sy.system(system)
    init, own = _local(g.get("init_adapter"), paths), _local(g.get("adapter"), paths)
    rec = tuple(_local(a, paths) for a in _recorded_by_05_06(paths, s, dataset, g["seed"]))
    if s.source != "base" and rec != (init, own):
        raise ExportError(f"07 graded {system}/{dataset} with adapters {init}, {own} but 05 / 06 now record "
                          f"{rec[0]}, {rec[1]}: re-run 07_evaluation (edit-suite run --profile {profile_name})")
    adapters = ([("sft", init)] if init else []) + ([("rl" if s.source == "rl" else "sft", own)] if own else [])
    results = {"07_evaluation": res07}
    for stage in ("05_edit_sft", "06_rl", "09_significance"):
        if paths.results_file(stage).exists():
            results[stage] = read_results(paths, stage)
    return Exported(profile, paths, s, dataset, None if g["seed"] is None else int(g["seed"]), adapters,
                    _base(profile, res07, paths), results)


def _base(profile, res07: dict, paths: RunPaths) -> dict:
    """The Base 07 loaded: where its weights are (a local folder to copy, or a hub name and commit to name),
    checked against 07's recorded weights and model values."""
    from edit_lib.model.bases import resolve_base_path
    from edit_lib.runner.keys import hashed_params, leaf_diff, weights_fingerprint
    m = profile.model
    recorded = res07.get("params", {}).get("model") or {}
    now = json.loads(json.dumps(hashed_params(profile, ("model",))["model"], default=str))  # as 07's key saw it
    same = [k for k in WEIGHTS_KEYS if k in recorded and k in now]
    diff = leaf_diff({k: recorded[k] for k in same}, {k: now[k] for k in same})
    if diff:
        raise ExportError(f"the run at {paths.root} was graded with other model values than the profile gives: "
                          f"{', '.join('model.' + d for d in diff)}; pass the run's -p overrides")
    weights = weights_fingerprint(m.name_or_path, m.hub_commit)
    if res07.get("inputs", {}).get("weights") not in (None, weights):
        raise ExportError(f"07 graded Base weights {res07['inputs']['weights']}, the profile's Base is {weights} "
                          f"now (model.name_or_path / model.hub_commit, or a rebuilt named Base)")
    warmup = m.warmup.steps > 0
    if warmup:  # the format warm-up's merged checkpoint is this profile's Base (model.warmup)
        from edit_lib.model.warmup import find_warmup_base
        folder = find_warmup_base(profile)
    else:
        resolved = Path(resolve_base_path(m.name_or_path)).expanduser()
        folder = resolved if resolved.is_dir() else None
    hub = None if folder is not None else m.name_or_path
    return dict(name_or_path=m.name_or_path, weights_id=weights, hub=hub, hub_commit=m.hub_commit if hub else "",
                local_folder=str(folder) if folder else None, warmup=warmup, dtype=m.dtype,
                # sdpa_blocks is the suite's own SDPA (the same attention): an export loads without the suite
                attn_implementation="sdpa" if m.attn_implementation == "sdpa_blocks" else m.attn_implementation,
                trust_remote_code=m.trust_remote_code)


def prompt_style(ex: Exported, tokenizer=None) -> str:
    """'tiny' (prompt + separator, the embedded grader's plain text) or 'chat' (the chat template), by the rule
    ``model.policy.load_policy`` applies to the same Base."""
    from edit_lib import providers
    named = providers.find("base", ex.base["name_or_path"])
    folder = ex.base["local_folder"]
    if not ex.base["warmup"] and ((named is not None and named.obj.plain_text)
                                  or (folder and (Path(folder) / "recipe.json").exists())):
        return "tiny"
    if tokenizer is None:
        from transformers import AutoTokenizer
        kw = {"revision": ex.base["hub_commit"]} if ex.base["hub_commit"] else {}
        tokenizer = AutoTokenizer.from_pretrained(folder or ex.base["hub"], **kw)
    return "chat" if getattr(tokenizer, "chat_template", None) else "tiny"


def _write_merged(ex: Exported, out: Path) -> str:
    """Base + every adapter merged (in stacking order), saved with the tokenizer; returns the prompt style."""
    from edit_lib.model.policy import load_policy_from_profile
    prof = dataclasses.replace(ex.profile, model=dataclasses.replace(ex.profile.model, generation_backend="hf"))
    paths = [p for _, p in ex.adapters]
    init, own = (paths[0], paths[1]) if len(paths) == 2 else (None, paths[0] if paths else None)
    policy = load_policy_from_profile(prof, adapter=own, init_adapter=init, merge=True)
    policy.model.save_pretrained(out)
    policy.tokenizer.save_pretrained(out)
    return "tiny" if policy.kind == "tiny" else "chat"


def _write_stack(ex: Exported, out: Path) -> list[dict]:
    """The Base folder (unless a hub Base, named instead) and the adapters in stacking order."""
    if ex.base["local_folder"]:
        (out / "base").mkdir()
        for f in sorted(Path(ex.base["local_folder"]).iterdir()):  # the weights, config and tokenizer files
            if f.is_file():
                shutil.copy2(f, out / "base" / f.name)
    rows = []
    for i, (role, src) in enumerate(ex.adapters, start=1):
        dst = out / "adapters" / f"{i}_{role}"
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("checkpoints", "resume*", "*.pt", "optimizer*",
                                                                "tensorboard", "launch.log", ".rank*"))
        cfg = json.loads((dst / "adapter_config.json").read_text())
        cfg["base_model_name_or_path"] = ex.base["hub"] or "base"  # not the training machine's cache path
        if ex.base["hub_commit"]:
            cfg["revision"] = ex.base["hub_commit"]
        (dst / "adapter_config.json").write_text(json.dumps(cfg, indent=2))
        rows.append(dict(role=role, path=f"adapters/{i}_{role}", merge=i < len(ex.adapters), source=str(src)))
    return rows


def export(ex: Exported, out: str | Path, merge: bool = False, force: bool = False) -> Path:
    """Write the export folder (module docstring) to ``out``; an existing non-empty ``out`` is refused unless
    ``force`` (then replaced whole). Written into a sibling temporary folder first, so a failure leaves nothing."""
    from edit_lib.prompts.grading import GRADER_SYSTEM, TINY_SEPARATOR
    from edit_lib.tools import model_card
    out = Path(out).expanduser().resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise ExportError(f"--out {out} exists and is not empty: pick another folder or pass --force to replace it")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        if merge:
            style, stack = _write_merged(ex, tmp), []
        else:
            stack = _write_stack(ex, tmp)
            style = prompt_style(ex)
        ev = ex.results["07_evaluation"].get("params", {}).get("eval", {})
        manifest = dict(
            profile=ex.profile.name, system=ex.system.name, label=ex.system.label, dataset=ex.dataset, seed=ex.seed,
            merged=merge, base=dict(ex.base, folder=None if merge or not ex.base["local_folder"] else "base"),
            adapters=stack, prompt_style=style, tiny_separator=TINY_SEPARATOR, grader_system=GRADER_SYSTEM,
            max_new_tokens=int(ev.get("max_new_tokens", ex.profile.eval.decoding.max_new_tokens)),
            git_commit=ex.results["07_evaluation"].get("git_commit", "unknown"))
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, default=str))
        (tmp / "load.py").write_text(model_card.LOAD_PY)
        (tmp / "README.md").write_text(model_card.card(ex, manifest))
        if out.exists():
            shutil.rmtree(out) if out.is_dir() else out.unlink()
        tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return out


def export_cli(a) -> int:
    """``edit-suite export`` (exit 0 written, 2 what cannot be exported, with the reason)."""
    import sys
    from edit_lib.config import ConfigError
    try:
        ex = locate(a.profile, a.system, a.dataset, a.seed, a.run_root, a.param)
        out = export(ex, a.out, merge=a.merge, force=a.force)
    except (ExportError, ConfigError, FileNotFoundError) as e:
        print(f"edit-suite export: {e}", file=sys.stderr)
        return 2
    if ex.base["hub"] and not ex.base["hub_commit"] and not a.merge:
        print(f"note: {ex.base['hub']} is named without a commit (model.hub_commit unset): the hub's current main "
              f"may not be the weights this run used", file=sys.stderr)
    what = "merged model" if a.merge else f"{len(ex.adapters)} adapter(s) over " + (ex.base["hub"] or "base/")
    print(f"{out}: {ex.system.label} on {ex.dataset}" + ("" if ex.seed is None else f" (seed {ex.seed})") +
          f", {what}; load with `python {out / 'load.py'}` or see {out / 'README.md'}")
    return 0
