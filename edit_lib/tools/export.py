"""``edit-suite export``: one graded policy of a finished run as a folder that plain ``transformers`` (+ ``peft``)
load, with a model card and ``load.py``.

The policy is the one 07 graded (its results' ``extra.graded``), checked against the adapters 05 / 06 recorded:
Base, or Base + one adapter (an SFT system; an RL system trained from Base), or Base with the SFT adapter merged
+ the RL adapter (App. B: RL trains a fresh LoRA over the merged SFT model; ``model.policy.load_policy_from_profile``).
``--merge`` writes that policy as one merged model; without it, the Base weights folder (a hub Base is named with
its commit, not copied) and the adapters in the order they stack (``adapters/1_sft``, ``adapters/2_rl``: every one
but the last merged, the last applied as 07 applied it). ``edit_export.json`` says how; ``load.py`` does it. The
model card (``README.md`` with the Hub's YAML metadata): the Base and its commit, the adapters in stacking order,
the recipe values the run used (05's ``sft``, 06's ``rl``, the EDIT-RL shaping values; each adapter's LoRA config),
07's greedy metrics (App. B) with the intervals 07 (Table 4) and 09 (App. G) hold, the profile, the suite's commit.

Longer than 400 lines because the folder and its card are one concern: the card reads the manifest the export
writes, and ``load.py``'s text is the card's usage.
"""
from __future__ import annotations

import dataclasses
import json
import math
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from edit_lib import systems as sy
from edit_lib.artifacts import as_json, MissingArtifactError, read_results, recorded_stage_dir, RunPaths


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
    from edit_lib.providers import resolve_base_path
    from edit_lib.runner.keys import hashed_params, leaf_diff, weights_fingerprint
    m = profile.model
    recorded = res07.get("params", {}).get("model") or {}
    now = as_json(hashed_params(profile, ("model",))["model"])  # as 07's key saw it
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
        (tmp / "load.py").write_text(LOAD_PY)
        (tmp / "README.md").write_text(card(ex, manifest))
        if out.exists():
            shutil.rmtree(out) if out.is_dir() else out.unlink()
        tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return out


def export_cli(a) -> int:
    """``edit-suite export`` (exit 0 written; what cannot be exported raises ExportError, ConfigError or
    FileNotFoundError with the reason: ``cli`` exits 2)."""
    import sys
    ex = locate(a.profile, a.system, a.dataset, a.seed, a.run_root, a.param)
    out = export(ex, a.out, merge=a.merge, force=a.force)
    if ex.base["hub"] and not ex.base["hub_commit"] and not a.merge:
        print(f"note: {ex.base['hub']} is named without a commit (model.hub_commit unset): the hub's current main "
              f"may not be the weights this run used", file=sys.stderr)
    what = "merged model" if a.merge else f"{len(ex.adapters)} adapter(s) over " + (ex.base["hub"] or "base/")
    print(f"{out}: {ex.system.label} on {ex.dataset}" + ("" if ex.seed is None else f" (seed {ex.seed})") +
          f", {what}; load with `python {out / 'load.py'}` or see {out / 'README.md'}")
    return 0


TITLE = "EDIT: Evidence-Diagnosed Intervention Training for Rule-Faithful LLM Grading"
AUTHORS = ("Zhihao Wu", "Linhai Zhang", "Taiyi Wang", "Runcong Zhao", "Peter Andrews", "Cesare Aloisi", "Yulan He")
METRICS = ("n", "qwk", "acc", "within1", "mae", "n_invalid")


def _num(x, count: bool = False) -> str:
    """A table cell: counts as integers, other numbers to 4 decimals, missing as '-', flags as yes / no."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, (int, float)):
        return str(int(x)) if count else f"{x:.4f}"
    return str(x)


def _table(rows: list[dict], cols: list[str]) -> str:
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(_num(r.get(c), c.startswith("n_") or c == "n") for c in cols) + " |" for r in rows]
    return "\n".join(out)


def _flat(d, prefix: str = "") -> dict:
    out = {}
    for k, v in (d or {}).items():
        key = f"{prefix}.{k}" if prefix else str(k)
        out.update(_flat(v, key) if isinstance(v, dict) else {key: v})
    return out


def _same_seed(row_seed, seed) -> bool:
    if row_seed is None or (isinstance(row_seed, float) and math.isnan(row_seed)):
        return seed is None
    return seed is not None and int(row_seed) == int(seed)


def metric_rows(res07: dict, system: str, dataset: str, seed) -> list[dict]:
    """07's ``metrics`` (greedy, App. B: QWK macro-averaged over questions, ACC, within-1, MAE, parse failures)
    of this policy, one row per evaluation split, over every subject."""
    rows = [r for r in res07.get("tables", {}).get("metrics", []) if r["system"] == system
            and r["dataset"] == dataset and r.get("subject") == "all" and _same_seed(r.get("seed"), seed)]
    return sorted(rows, key=lambda r: r["split"])


def first_seed(res07: dict, system: str, dataset: str, seed) -> bool:
    """Whether 09 (which reads each system's first seed, ``evaluation.tables.first_seed``) holds this policy."""
    seeds = [r["seed"] for r in res07.get("tables", {}).get("metrics", []) if r["system"] == system
             and r.get("seed") is not None and not (isinstance(r["seed"], float) and math.isnan(r["seed"]))]
    return seed is None or not seeds or int(seed) == int(min(seeds))


def intervals(ex) -> str:
    """The intervals the run holds for this policy: 09's question-level cluster bootstrap (App. G) and
    response-level bootstrap, and 07's seed-wise Table 4 interval."""
    s, d, seed = ex.system.name, ex.dataset, ex.seed
    r09 = ex.results.get("09_significance")
    parts = []
    if r09 is None:
        parts.append(f"09_significance has not run: no intervals (`edit-suite run --profile {ex.profile.name} "
                     f"--only 09_significance`).")
    elif not first_seed(ex.results["07_evaluation"], s, d, seed):
        parts.append(f"09_significance reads each system's first seed only; seed {seed} has no interval there.")
    else:
        ci = r09.get("extra", {}).get("ci", 0.95)
        q = [r for r in r09.get("tables", {}).get("significance", []) if r["system"] == s and r["dataset"] == d]
        if q:
            parts.append(f"Question-level cluster bootstrap (09, App. G; {ci:.0%} intervals, "
                         f"{r09['extra'].get('n_boot', '?')} resamples; `delta` against Base, Holm-adjusted p):\n\n"
                         + _table(q, ["scope", "n_questions", "qwk", "ci_low", "ci_high", "delta", "delta_ci_low",
                                      "delta_ci_high", "p_holm", "few_questions"]))
        rb = [r for r in r09.get("tables", {}).get("response_bootstrap", []) if r["system"] == s and r["dataset"] == d]
        if rb:
            parts.append("Response-level bootstrap (09):\n\n" + _table(rb, ["split", "n_responses", "qwk", "qwk_lo",
                                                                              "qwk_hi"]))
    t4 = [r for r in ex.results["07_evaluation"].get("tables", {}).get("table4", []) if r["dataset"] == d]
    if t4 and s in sy.names("Table 4"):
        parts.append("Table 4 over seeds (07; EDIT-SFT+EDIT-RL minus EDIT-SFT+GRPO, OOD QWK, paired t-interval):\n\n"
                     + _table(t4, ["n_seeds", "delta", "delta_ci_low", "delta_ci_high", "mde"]))
    return "\n\n".join(parts) or "The run holds no interval for this policy."


def recipe(ex) -> str:
    """The recipe values the run's results record for this system: 05's ``sft`` (and ``int_sft``) for an SFT
    adapter, 06's ``rl``, its plan row and EDIT-RL's shaping values for an RL adapter; each adapter's LoRA as its
    ``adapter_config.json`` holds it."""
    out = []
    roles = [r for r, _ in ex.adapters]
    p05 = ex.results.get("05_edit_sft", {}).get("params", {})
    if "sft" in roles:
        keep = ("sft", "int_sft") if ex.system.name.startswith("int_sft") else ("sft",)
        out.append("**SFT (05, Sec. 2.2 / App. B)**\n\n" + "\n".join(
            f"- `{k}`: {json.dumps(v)}" for sec in keep for k, v in _flat(p05.get(sec), sec).items()))
    if "rl" in roles:
        r06 = ex.results.get("06_rl", {})
        plan = [r for r in r06.get("tables", {}).get("rl_plan", []) if r["system"] == ex.system.name
                and r["dataset"] == ex.dataset and int(r["seed"]) == int(ex.seed)]
        head = f"initialisation {plan[0]['init']}, reward arm {plan[0]['arm']}, trainer {plan[0]['trainer']}; " \
            if plan else ""
        shaping = r06.get("extra", {}).get("shaping", {}).get(f"{plan[0]['init']}/{ex.dataset}") if plan else None
        used = f"shaping (beta_drift, gamma) used: {shaping}; " if shaping and plan[0]["arm"] == "edit_rl" else ""
        out.append(f"**RL (06, Sec. 2.3 / Table 9)**: {head}{used}seed {ex.seed}\n\n" + "\n".join(
            f"- `{k}`: {json.dumps(v)}" for k, v in _flat(r06.get("params", {}).get("rl"), "rl").items()))
    for i, (role, folder) in enumerate(ex.adapters, start=1):
        c = json.loads((Path(folder) / "adapter_config.json").read_text())
        out.append(f"**LoRA of adapter {i} ({role})**: r={c.get('r')}, alpha={c.get('lora_alpha')}, "
                   f"dropout={c.get('lora_dropout')}, targets={sorted(c.get('target_modules') or [])}")
    return "\n\n".join(out) or "Base itself: no training (the reference every table compares with)."


def _yaml(ex, manifest: dict) -> str:
    base = manifest["base"]
    meta = {}
    if base["hub"]:  # the Hub links a base model by its hub id only
        meta["base_model"] = base["hub"]
        if ex.adapters:
            meta["base_model_relation"] = "merge" if manifest["merged"] else "adapter"
    meta["library_name"] = "peft" if ex.adapters and not manifest["merged"] else "transformers"
    meta["license"] = "apache-2.0"
    meta["pipeline_tag"] = "text-generation"
    meta["tags"] = ["edit-suite", "rubric-grading", "short-answer-scoring", ex.system.name] + \
        (["lora"] if ex.adapters else []) + [f"profile-{ex.profile.name}"]
    meta["datasets"] = [ex.dataset]
    lines = ["---"] + [f"{k}: {json.dumps(v)}" for k, v in meta.items()] + ["---"]
    return "\n".join(lines)


def card(ex, manifest: dict) -> str:
    """The README.md of the export folder."""
    base, res07 = manifest["base"], ex.results["07_evaluation"]
    seed = "" if ex.seed is None else f", RL seed {ex.seed}"
    commit = base["hub_commit"] or ("not pinned (model.hub_commit unset): the hub's main when the run loaded it"
                                    if base["hub"] else "none (a local or named Base: its weights id says which)")
    where = "this folder (merged: Base + every adapter)" if manifest["merged"] else (
        "`base/` (copied)" if base["folder"] else
        f"the hub: `{base['hub']}` at commit `{base['hub_commit'] or 'main'}`")
    stack = "\n".join(f"{i}. `{a['path']}` ({a['role']}): " + ("merged into the model below it" if a["merge"] else
                      "applied on top, unmerged, as 07 graded it") for i, a in enumerate(manifest["adapters"], 1))
    commits = {st: r.get("git_commit", "unknown") for st, r in ex.results.items()}
    label = f"{ex.system.label} ({ex.system.name})"
    reads = "plain text: prompt + separator" if manifest["prompt_style"] == "tiny" else \
        "the chat template, system prompt, thinking off"
    warmup = "yes (01's checkpoint is Base)" if base["warmup"] else "no"
    return f"""{_yaml(ex, manifest)}

# {label} on `{ex.dataset}`: an EDIT-suite export

One graded policy of the EDIT reproduction suite (profile `{ex.profile.name}`{seed}): exactly the policy its
notebook 07 graded (paper tables: {", ".join(ex.system.tables)}). Base weights: {where}.
{("Adapters, in the order they stack:" + chr(10) + chr(10) + stack) if stack else ""}

## Load and grade

```python
from load import load, grade          # load.py in this folder: transformers (+ peft) only
model, tokenizer, manifest = load()   # Base, every adapter but the last merged, the last on top
texts = grade(model, tokenizer, manifest, [prompt])   # greedy, {manifest["max_new_tokens"]} new tokens
```

By hand: `AutoModelForCausalLM.from_pretrained(base)`, then for each adapter in order
`PeftModel.from_pretrained(model, adapter)`, with `.merge_and_unload()` after every adapter but the last.
A prompt is the suite's grading prompt (`edit_lib.prompts.grading.render_grading_prompt(question, answer,
style="{manifest["prompt_style"]}")`, Sec. 2.1); `load.input_text` wraps it as the model reads it
({reads}).
Decoding is greedy (App. B); the mark is the last line's `Final mark: m/M`
(`edit_lib.prompts.grading.read_final_mark`).

## Base model

| name | weights id | commit | format warm-up |
|---|---|---|---|
| `{base["name_or_path"]}` | `{base["weights_id"]}` | {commit} | {warmup} |

## Recipe

{recipe(ex)}

## Metrics (07: greedy grading, App. B)

{_table(metric_rows(res07, ex.system.name, ex.dataset, ex.seed), ["split", *METRICS])}

{intervals(ex)}

## Provenance

Profile `{ex.profile.name}`; suite commit (`git_commit` of each stage's results):
{", ".join(f"{k} `{v}`" for k, v in sorted(commits.items()))}; 07 ran {res07.get("run_date", "?")}.

## Citation

```bibtex
@misc{{edit_grading,
  title  = {{{TITLE}}},
  author = {{{" and ".join(AUTHORS)}}}
}}
```
"""


LOAD_PY = '''"""Load this EDIT-suite export with transformers (+ peft) alone and grade greedily as the suite's
notebook 07 did; README.md says what the policy is. Every setting comes from edit_export.json."""
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def load(folder=HERE, device="cpu", dtype=None):
    """(model, tokenizer, manifest): Base, then each adapter in order, every one but the last merged."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    folder = Path(folder)
    m = json.loads((folder / "edit_export.json").read_text())
    base, kw = m["base"], {"trust_remote_code": m["base"]["trust_remote_code"]}
    if m["merged"] or not (base["folder"] or base["hub"]):
        src = folder
    elif base["folder"]:
        src = folder / base["folder"]
    else:
        src = base["hub"]
        kw.update({"revision": base["hub_commit"]} if base["hub_commit"] else {})
    dtype = dtype or base["dtype"]
    extra = {"attn_implementation": base["attn_implementation"]} if base["attn_implementation"] else {}
    tok = AutoTokenizer.from_pretrained(src, **kw)
    model = AutoModelForCausalLM.from_pretrained(src, dtype=dtype if dtype == "auto" else getattr(torch, dtype),
                                                 **extra, **kw).to(device)
    for i, a in enumerate([] if m["merged"] else m["adapters"]):
        from peft import PeftModel
        model = PeftModel.from_pretrained(model, str(folder / a["path"]), is_trainable=False)
        if a["merge"]:  # an RL adapter was trained over its SFT start merged into Base
            model = model.merge_and_unload()
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return model.eval(), tok, m


def input_text(tok, m, prompt):
    """The text the model reads for a grading prompt."""
    if m["prompt_style"] == "tiny":
        return prompt + m["tiny_separator"]
    msgs = [{"role": "system", "content": m["grader_system"]}, {"role": "user", "content": prompt}]
    return tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, enable_thinking=False)


def grade(model, tok, m, prompts):
    """One greedy completion per grading prompt (the prompt and special tokens removed)."""
    import torch
    from transformers import GenerationConfig
    eos = model.generation_config.eos_token_id
    eos = tok.eos_token_id if eos is None else eos
    eos = sorted({int(i) for i in (eos if isinstance(eos, (list, tuple)) else [eos]) if i is not None})
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos[0]
    cfg = GenerationConfig(do_sample=False, num_beams=1, max_new_tokens=m["max_new_tokens"], repetition_penalty=1.0,
                           pad_token_id=pad, eos_token_id=eos)
    device = next(model.parameters()).device
    texts = []
    for p in prompts:
        ids = torch.tensor([tok(input_text(tok, m, p), add_special_tokens=True)["input_ids"]], device=device)
        with torch.inference_mode():
            row = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=cfg)[0]
        new = row[ids.shape[1]:].tolist()
        cut = next((j for j, t in enumerate(new) if t in eos), len(new))
        texts.append(tok.decode(new[:cut], skip_special_tokens=True))
    return texts


if __name__ == "__main__":
    model, tok, m = load()
    print(f"loaded {m['label']} on {m['dataset']} (profile {m['profile']}): {type(model).__name__}")
'''
