"""Before a run: its preflight checks (``preflight``, shared by `edit-suite run` and `--dry-run`, which stop on the
first failure before any notebook starts) and ``edit-suite run --dry-run``, what a run would do without executing or
downloading anything. The dry run prints the stage plan (``run.decide``), where each dataset's rubric checklist comes
from (listed points or free text, ``checklist_plan``), the policy's parameter counts with the paper's LoRA attached
(App. B: r = 64, alpha = 128 on q, k, v, o, gate, up, down; Table 9's fresh RL adapter alike), an ESTIMATE of GPU
memory per stage and one of GPU-hours per stage on ``--gpu`` beside App. B's figures (``time_estimate``).
Longer than 400 lines because both read one profile into one report before anything runs.

Qwen3-8B (App. B) is built on torch's meta device from ``configs/models/qwen3-8b.json`` (its model card's
config.json, copied by hand): shapes only, no memory, no download. The named graders (``embedded``, ``micro``) and a
local folder are counted from their config.json when built, skipped when not; other hub names: the plan only.

Memory terms (bytes; w = bytes per element of ``model.dtype``: 2 for bfloat16; L layers, H hidden size, I MLP
intermediate size, V vocabulary, P the assumed prompt length ``PROMPT_TOKENS``; every completion at its token
budget, so an upper estimate; CUDA context and allocator fragmentation are not counted; the table is ``FORMULAS``).
"""
from __future__ import annotations

import dataclasses
import json
import typing
from collections import Counter
from pathlib import Path

from edit_lib import providers
from edit_lib.config import CONFIG_DIR, PAPER_LORA_TARGETS, ConfigError, LoraConfig, Profile, load_profile
from edit_lib.config.loading import moved
from edit_lib.revision.checklist import checklist_rubric
from edit_lib.runner.keys import register_all, STAGES
from edit_lib.runner.run import decide
from edit_lib.runner.stage import parse_overrides, selected_stages
from edit_lib.runner.variants import resolve
from edit_lib.signals.step_labels import is_labels_file


GIB = 2 ** 30
PROMPT_TOKENS = 1024  # assumption: chat prompt (instructions, question, rubric, reference, student answer) tokens
SCAFFOLD_TOKENS = 64  # assumption: the probe's appended answer scaffolds, 8 boundaries x 8 tokens (App. B: 5.2 avg)
MODEL_CONFIGS = {"qwen3-8b": CONFIG_DIR / "models" / "qwen3-8b.json"}  # hub name (lower case) -> config file
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
FORMULAS = {
    "weights": "params x w (bf16: 2 bytes/param)",
    "lora": "training: trainable x (4 param + 4 grad + 8 AdamW m, v), fp32; inference: trainable x 4 (unmerged fp32 "
            "adapter)",
    "probe_copy": "EDIT-RL only: params x w, a second frozen copy of the initialisation (rl_runs.load_init("
                  "frozen=True) loads its own model: Base, or Base with the SFT adapter merged)",
    "kl_ref": "0: TRL's GRPOTrainer trains a peft model, sets ref_model = None and reads the KL reference with the "
              "adapter disabled (the merged initialisation, App. B)",
    "kv_cache": "2 (K, V) x L x kv_heads x head_dim x w x batch x (P + completion tokens)",
    "activations": "training, gradient checkpointing: L x b x S x H x w (layer inputs) + b x S x (10 H + 4 I) x w "
                   "(one layer recomputed); without it L x the latter; forward only: b x S x (2 H + 3 I) x w, plus "
                   "the packed float 4D mask b x S x S x w for the probe / audit",
    "logits": "training: b x T x V x (w + 4 + 4) (logits, fp32 upcast, fp32 grad; T = S for SFT, completion tokens "
              "for RL); probe: b x 8 x V x w; audit: 4b x C x V x w; generation: batch x V x 4",
}
__doc__ += "\n".join(f"* {k}: {v}" for k, v in FORMULAS.items())
TERMS = tuple(FORMULAS)


def config_path_for(name_or_path: str) -> Path | None:
    """The config.json that describes the profile's model without downloading it, or None."""
    low = name_or_path.lower()
    for key, path in MODEL_CONFIGS.items():
        if key in low:
            return path
    local = Path(name_or_path).expanduser() / "config.json"
    return local if local.is_file() else None


def meta_model(config: str | Path | dict, device: str = "meta"):
    """The causal LM of ``config`` (a config.json or its dict) built on torch's meta device: every parameter has
    its shape and dtype but no storage, so Qwen3-8B (8.19B parameters with its untied lm_head) takes seconds and
    no memory (on another ``device``: random weights there). A ``_source`` key is documentation and is dropped."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    raw = dict(config) if isinstance(config, dict) else json.loads(Path(config).read_text())
    raw.pop("_source", None)
    dtype = raw.get("dtype") or raw.get("torch_dtype") or "bfloat16"
    cfg = AutoConfig.for_model(**raw)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(cfg, dtype=getattr(torch, dtype))


def parameter_counts(model, lora: LoraConfig) -> dict:
    """Total parameters (tied weights once) and trainable parameters after attaching ``lora`` (App. B recipe,
    via ``model.hf.attach_lora``, which wraps ``model`` in place), with the shape numbers the estimate needs."""
    from edit_lib.model.hf import attach_lora, count_parameters

    c = model.config
    heads = c.num_attention_heads
    out = dict(total=count_parameters(model), layers=c.num_hidden_layers, hidden=c.hidden_size,
               intermediate=c.intermediate_size, heads=heads, kv_heads=getattr(c, "num_key_value_heads", heads),
               head_dim=getattr(c, "head_dim", None) or c.hidden_size // heads, vocab=c.vocab_size,
               tied=bool(getattr(c, "tie_word_embeddings", False)), architecture=(c.architectures or ["?"])[0])
    out["trainable"] = count_parameters(attach_lora(model, lora), trainable_only=True)
    return out


def model_counts(profile: Profile) -> tuple[dict | None, str]:
    """(counts or None, how the model was built) for the profile's policy; never downloads."""
    name = profile.model.name_or_path
    register_all()
    named = providers.find("base", name)
    if named is not None:  # a named Base: counted from its folder if it is built, never built here
        folder = named.obj.built()
        if folder is None:
            return None, f"{name}: not built yet (the run builds it on first use); counts skipped"
        return parameter_counts(meta_model(folder / "config.json"), profile.sft.lora), \
            f"{name}: architecture from its folder {folder}, built on the meta device"
    path = config_path_for(name)
    if path is None:
        return None, f"{name}: no local config (configs/models/ or a folder with config.json); counts skipped"
    return parameter_counts(meta_model(path), profile.sft.lora), \
        f"{name}: architecture from {_rel(path)}, built on the meta device (nothing downloaded)"


def lora_warnings(lora: LoraConfig) -> list[str]:
    """Differences of the profile's adapter from App. B's recipe; reported, never changed."""
    out = []
    if (lora.r, lora.alpha) != (64, 128):
        out.append(f"sft.lora r={lora.r}, alpha={lora.alpha}: App. B uses r=64, alpha=128")
    if sorted(lora.target_modules) != sorted(PAPER_LORA_TARGETS):
        out.append(f"sft.lora.target_modules {list(lora.target_modules)}: App. B adapts {list(PAPER_LORA_TARGETS)}")
    return out


def memory_estimate(profile: Profile, counts: dict, prompt_tokens: int = PROMPT_TOKENS) -> list[dict]:
    """One row per stage that loads the policy (01-08): the ESTIMATED peak in GiB, its phase and its terms
    (``FORMULAS``). Profile values used: rollouts.batch_size / max_new_tokens, eval.batch_size / max_new_tokens,
    probe.batch_size, audit.batch_size, revision.batch_size / max_new_tokens, sft.per_device_batch_size /
    max_length / gradient_checkpointing, rl.rollouts_per_prompt x prompts_per_step (the generation batch, Table 9:
    32), rl.per_device_batch_size (0: one group), rl.decoding.max_new_tokens (Table 9: 1,024)."""
    a, p = counts, profile
    w = DTYPE_BYTES.get(p.model.dtype, 2)
    L, H, I, V, P = a["layers"], a["hidden"], a["intermediate"], a["vocab"], prompt_tokens
    gpu = p.model.device != "cpu"
    weights, adapter, train_state = a["total"] * w, a["trainable"] * 4, a["trainable"] * 16

    def kv(b, t): return 2 * L * a["kv_heads"] * a["head_dim"] * w * b * t
    def fwd(b, t): return b * t * (2 * H + 3 * I) * w
    def layer(b, t): return b * t * (10 * H + 4 * I) * w

    def train_acts(b, t, ckpt): return L * b * t * H * w + layer(b, t) if ckpt and gpu else L * layer(b, t)

    def gen(b, t, lora=0): return dict(weights=weights, lora=lora, kv_cache=kv(b, t), activations=fwd(b, P),
                                       logits=b * V * 4)
    C, Ce = p.rollouts.decoding.max_new_tokens, p.eval.decoding.max_new_tokens
    bp, ba = p.probe.batch_size, 4 * p.audit.batch_size  # the audit packs 4 rows per rollout (grounding.py)
    tp, ta = P + C + SCAFFOLD_TOKENS, P + C
    probe = dict(weights=weights, activations=fwd(bp, tp) + bp * tp * tp * w, logits=bp * 8 * V * w)
    audit = dict(weights=weights, activations=fwd(ba, ta) + ba * ta * ta * w, logits=ba * C * V * w)
    bs, S = p.sft.per_device_batch_size, p.sft.max_length or P + C
    sft = dict(weights=weights, lora=train_state, activations=train_acts(bs, S, p.sft.gradient_checkpointing),
               logits=bs * S * V * (w + 8))
    g, bd = p.rl.rollouts_per_prompt * p.rl.prompts_per_step, p.rl.per_device_batch_size or p.rl.rollouts_per_prompt
    Cr = p.rl.decoding.max_new_tokens
    rl_base = dict(weights=weights, lora=train_state, probe_copy=weights, kl_ref=0)
    phases = {
        "01_base_policy": {"sampled rollouts": gen(p.rollouts.batch_size, P + C),
                           "greedy Base eval": gen(p.eval.batch_size, P + Ce)},
        "02_probing": {"packed probe forward": probe},
        "03_audit_validation": {"packed audit forward": audit},
        "04_counterfactual_selection": {"packed probe forward": probe, "revisions + continuations": gen(
            p.revision.batch_size, P + C + p.revision.rewrite_decoding.max_new_tokens)},
        "05_edit_sft": {"LoRA SFT step": sft, "greedy check": gen(p.eval.batch_size, P + Ce, adapter)},
        "06_rl": {"group generation": {**rl_base, "kv_cache": kv(g, P + Cr), "activations": fwd(g, P)},
                  "frozen-probe read": {**rl_base, "activations": fwd(bp, P + Cr + SCAFFOLD_TOKENS)},
                  "policy update": {**rl_base, "activations": train_acts(bd, P + Cr, True),
                                    "logits": bd * Cr * V * (w + 8)}},
        "07_evaluation": {"greedy eval": gen(p.eval.batch_size, P + Ce, adapter)},
        "08_rsr_interventions": {"greedy eval": gen(p.eval.batch_size, P + Ce, adapter)},
    }
    rows = []
    for stage, options in phases.items():
        phase, terms = max(options.items(), key=lambda kv_: sum(kv_[1].values()))
        gib = {t: terms.get(t, 0) / GIB for t in TERMS}
        rows.append(dict(stage=stage, phase=phase, **gib, total=sum(gib.values())))
    return rows


def dry_run(profile_name: str, overrides=(), only: list[str] | None = None, run_root: str | None = None,
            force: bool = False, reuse_stale: bool = False, prompt_tokens: int = PROMPT_TOKENS,
            gpu: str = "h100", gpus: int | None = None) -> dict:
    """Everything ``edit-suite run --dry-run`` prints, as data; executes no notebook and writes nothing. ``gpu``:
    the GPU of the time estimate (``time_estimate.GPUS``); ``gpus``: add wall-clock on so many (``wall_clock``)."""
    from edit_lib.runner.time_estimate import gpu_named, estimate, wall_clock
    from edit_lib.train.calibration import shaping_plan
    gpu_named(gpu)  # an unknown name fails before anything is built
    if gpus is not None and gpus < 1:
        raise ValueError(f"--gpus must be at least 1, got {gpus}")
    prof, paths, _ = resolve(profile_name, parse_overrides(overrides), run_root)  # a variant's folder, if one
    names = selected_stages(only)
    plan = [dict(stage=d.stage, action=d.action, why=d.why or "unchanged", key=d.key, loads_model=STAGES[d.stage]
                 .loads_model) for d in decide(prof, paths, names, force=force, reuse_stale=reuse_stale)]
    counts, how = model_counts(prof)
    lora = prof.sft.lora
    time = estimate(prof, counts, gpu, prompt_tokens) if counts else None
    if time and gpus:
        time.update(gpus=gpus, wall=wall_clock(prof, time["stages"], gpus))
    return dict(profile=prof.name, run_dir=str(paths.root), plan=plan, model=prof.model.name_or_path,
                dtype=prof.model.dtype, device=prof.model.device, built=how, counts=counts,
                lora=dict(r=lora.r, alpha=lora.alpha, target_modules=list(lora.target_modules)),
                warnings=lora_warnings(lora), prompt_tokens=prompt_tokens, checklists=checklist_plan(prof),
                shaping=shaping_plan(prof), memory=memory_estimate(prof, counts, prompt_tokens) if counts else [],
                time=time)


def format_dry_run(res: dict) -> str:
    """The report ``edit-suite run --dry-run`` prints."""
    act = {"run": "would run", "cached": "up to date", "reuse": "would reuse (stale)", "main": "main run's"}
    out = [f"DRY RUN of profile {res['profile']!r}: nothing is executed, nothing is downloaded.",
           f"stage plan ({res['run_dir']}):"]
    for i, s in enumerate(res["plan"], 1):
        n = f"[{i}/{len(res['plan'])}]"
        out.append(f"  {n:>7s} {s['stage']:28s} {act[s['action']]:11s} ({s['why']})")
    out += format_checklist_plan(res.get("checklists", []))
    out.append(f"model: {res['built']}")
    c = res["counts"]
    if c:
        lo = res["lora"]
        out += [f"  {c['architecture']}: {c['layers']} layers, hidden {c['hidden']}, MLP {c['intermediate']}, "
                f"{c['heads']} heads / {c['kv_heads']} KV heads x {c['head_dim']}, vocab {c['vocab']}, "
                f"{'tied' if c['tied'] else 'untied'} lm_head",
                f"  total parameters:     {c['total']:>15,} ({_short(c['total'])})",
                f"  LoRA r={lo['r']}, alpha={lo['alpha']} on {','.join(lo['target_modules'])}:",
                f"  trainable parameters: {c['trainable']:>15,} ({100 * c['trainable'] / c['total']:.2f}% of "
                f"the base)"]
    out += [f"  WARNING: {w}" for w in res["warnings"]]
    out += ["EDIT-RL shaping (Eq. 6-7; Table 9, lower block):"] + [f"  {x}" for x in res.get("shaping", [])]
    if res["memory"]:
        where = "GPU memory" if res["device"] != "cpu" else "memory (model.device = cpu: host RAM)"
        out.append(f"{where} per stage, ESTIMATE in GiB ({res['dtype']}; assumed prompt "
                   f"{res['prompt_tokens']} tokens; completions at their budget; peak phase shown):")
        out.append(f"  {'stage':28s} {'peak phase':26s}" + "".join(f"{t:>12s}" for t in TERMS) + f"{'total':>9s}")
        for r in res["memory"]:
            out.append(f"  {r['stage']:28s} {r['phase']:26s}" + "".join(f"{r[t]:12.2f}" for t in TERMS)
                       + f"{r['total']:9.1f}")
        out.append("  00_data and 09_significance load no model. Terms:")
        out += [f"    {k}: {v}" for k, v in FORMULAS.items()]
    if res.get("time"):
        out += format_time(res["time"], {r["stage"]: r["total"] for r in res["memory"]})
    return "\n".join(out)


def format_time(t: dict, peak_gib: dict) -> list[str]:
    """The dry run's GPU-hours lines: per stage beside its peak memory, then App. B's figures with the ratio."""
    from edit_lib.runner.time_estimate import BANDWIDTH_EFFICIENCY, GPUS, MFU
    gpu = GPUS[t["gpu"]]
    bw = BANDWIDTH_EFFICIENCY
    out = [f"GPU time per stage, ESTIMATE in GPU-hours on one {t['label']} ({gpu.bf16_tflops:g} dense bf16 TFLOP/s, "
           f"{gpu.hbm_tb_s:g} TB/s; MFU {MFU['train']} training, {MFU['forward']} forward; decoding bandwidth-bound, "
           f"at {bw['hf']} of it with transformers generate, {bw['vllm']} with vLLM):",
           f"  {'stage':28s} {'peak GiB':>9s} {'GPU-hours':>10s}  largest part"]
    for s in t["stages"]:
        top = max(s["items"], key=lambda i: i[1]) if s["items"] else ("no model", 0.0)
        peak = peak_gib.get(s["stage"])
        fits = "" if peak is None or peak <= gpu.memory_gb * 1e9 / 2 ** 30 else " (over the GPU's memory)"
        out.append(f"  {s['stage']:28s} {'-' if peak is None else f'{peak:.1f}':>9s} {_hours(s['hours']):>10s}  "
                   f"{top[0]} ({_hours(top[1])} h){fits}")
    out.append(f"  {'all stages':28s} {'':9s} {_hours(sum(s['hours'] for s in t['stages'])):>10s}")
    if t.get("wall"):
        out.append(f"wall-clock per stage on {t['gpus']} x {t['label']}, ESTIMATE in hours (one GPU per engine "
                   f"unit: generation, 05's SFT and 06's RL runs with model.generation_workers, sft.workers, "
                   f"rl.workers other than 1; else over sft / rl.processes; the rest on one GPU):")
        out.append(f"  {'stage':28s} {'GPU-hours':>10s} {'wall-clock':>11s} {'mean GPUs busy':>15s}")
        for w in t["wall"]:
            out.append(f"  {w['stage']:28s} {_hours(w['gpu_hours']):>10s} {_hours(w['wall']):>11s} "
                       f"{w['width']:15.1f}")
        out.append(f"  {'all stages':28s} {_hours(sum(w['gpu_hours'] for w in t['wall'])):>10s} "
                   f"{_hours(sum(w['wall'] for w in t['wall'])):>11s}")
    out += [f"  sizes: {d['dataset']:16s} {d['train']:>6d} / {d['id_test']:>5d} / {d['ood_test']:>5d} responses "
            f"train / id / ood, {d['source']}" for d in t["sizes"]]
    out += [f"  assumed: {a}" for a in t["assumptions"]]
    out.append(f"beside App. B (Private-Biology, App. B's counts and GPU: {t['paper_gpu']}; ESTIMATE with each "
               "generation engine; ratio = estimate / App. B):")
    out.append(f"  {'stage':28s} {'work':62s} {'hf':>7s} {'vllm':>7s} {'App. B':>7s} {'ratio hf':>9s} "
               f"{'ratio vllm':>10s}")
    for r in t["paper"]:
        u = r["unit"]
        out.append(f"  {r['stage']:28s} {r['work'][:62]:62s} {r['estimate']:6.1f}{u} {r['estimate_vllm']:6.1f}{u} "
                   f"{r['paper']:6.1f}{u} {r['ratio']:9.2f} {r['ratio_vllm']:10.2f}")
    return out


def _hours(h: float) -> str:
    """Hours to one decimal; two significant digits below 0.1 h (a CPU profile's seconds still show)."""
    return f"{h:.1f}" if h >= 0.1 or h == 0 else f"{h:.2g}"


def _short(n: int) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e8 else f"{n / 1e6:.2f}M"


def _rel(path: Path) -> str:
    return str(path.relative_to(CONFIG_DIR.parent) if path.is_relative_to(CONFIG_DIR.parent) else path)


# ------------------------------------------------------------------ where each dataset's checklist comes from
# A scheme that lists its marking points (PTS, LoR) is checked point by point (``revision.checklist``, Sec. 2.2); a
# free-text rubric (SAS-Bench's reference answer and marking explanation, ASAP's scoring guide) by the span rule of
# ``revision.checklist``. Real data on disk is read to count questions of each kind; data that is not
# there is described from its source (the dry run builds nothing else).

KIND_TEXT = {"points": "listed points", "free_text": "free text", "none": "no rubric text (no checklist)"}
BY_SOURCE = {  # what a source gives when its data is not read
    "synthetic": "listed points (PTS / LoR schemes)",
    "sasbench": "free text (reference answer + analysis)",
    "asap": "free text (scoring guide)",
    "jsonl": "each question's scheme kind (known once the file is read)",
}


def _from_source(spec) -> str:
    if spec.source == "asap" and spec.options.get("key_elements"):
        return "listed points where the guide lists key elements, else free text (scoring guide)"
    return BY_SOURCE.get(spec.source, "each question's scheme kind")


def checklist_plan(profile: Profile) -> list[dict]:
    """One row per dataset of the profile: ``dataset``, ``source``, ``checklist`` (where its checklist comes from,
    with question counts when the data was read), ``read`` (whether it was) and the profile's failure policy."""
    from edit_lib.runner.time_estimate import try_build
    out = []
    for spec in profile.data.datasets:
        row = dict(dataset=spec.name, source=spec.source, policy=profile.revision.checklist_failure)
        if spec.source == "synthetic":
            out.append(dict(row, checklist=_from_source(spec), read=False))
            continue
        ds, why = try_build(spec, profile)
        if ds is None:
            out.append(dict(row, checklist=f"{_from_source(spec)} ({why})", read=False))
            continue
        kinds = Counter(checklist_rubric(q) for q in ds.questions.values())
        text = ", ".join(f"{KIND_TEXT[k]}: {n} question{'s' * (n != 1)}" for k, n in sorted(kinds.items()))
        out.append(dict(row, checklist=text, read=True))
    return out


def format_checklist_plan(rows: list[dict]) -> list[str]:
    """The dry run's lines for ``checklist_plan``."""
    if not rows:
        return []
    out = [f"rubric checklist per dataset (Sec. 2.2; a failed checklist: revision.checklist_failure = "
           f"{rows[0]['policy']!r}):"]
    out += [f"  {r['dataset']:24s} {r['source']:10s} {r['checklist']}" for r in rows]
    return out


# ---------------------------------------------------------------- the preflight

def check_override_keys(overrides) -> None:
    """Each ``section.key=value`` override must name a field of the profile schema; list elements (datasets) and
    free mappings (``options``, ``*_by_dataset``) are not looked into. ConfigError names the override."""
    for ov in overrides or ():
        path = ov.split("=", 1)[0].strip()
        cls, seen = Profile, []
        for part in path.split("."):
            if cls is None:
                break
            fields = {f.name: f for f in dataclasses.fields(cls)}
            if part not in fields:
                where = ".".join(seen) or "the profile"
                message = moved(cls, [part], where)
                if message:
                    raise ConfigError(f"override {ov!r}: {message}")
                raise ConfigError(f"override {ov!r}: {where} has no key {part!r}; valid keys: {sorted(fields)}")
            seen.append(part)
            tp = typing.get_type_hints(cls)[part]
            cls = tp if dataclasses.is_dataclass(tp) else None


def check_sources(prof) -> None:
    """Every dataset names a data source of ``data.registry.SOURCES``; ConfigError names the dataset and lists the
    known sources (else the run stops inside 00_data, after its kernel started)."""
    from edit_lib.data.registry import SOURCES

    for spec in prof.data.datasets:
        if spec.source not in SOURCES:
            raise ConfigError(f"{prof.name}: {SOURCES.unknown(spec.source, f'data.datasets.{spec.name}.source')}")


def check_cross_references(prof) -> None:
    """Every dataset or system a section names exists in the profile; ConfigError names the key and the valid
    names (today a typo surfaces only when the stage that reads it runs, minutes in)."""
    from edit_lib.systems import SYSTEMS, check_baselines, not_run

    names = [d.name for d in prof.data.datasets]
    refs = [("sft.ablation_dataset", [prof.sft.ablation_dataset] if prof.sft.ablation_dataset else []),
            ("rl.datasets", list(prof.rl.datasets)), ("rl.seed_datasets", list(prof.rl.seed_datasets)),
            ("rl.grid_datasets", list(prof.rl.grid_datasets)), ("rsr.datasets", list(prof.rsr.datasets))]
    for key, used in refs:
        unknown = [n for n in used if n not in names]
        if unknown:
            raise ConfigError(f"{prof.name}: {key} names {unknown}, not a dataset of this profile; its datasets "
                              f"are {names}")
    try:
        known = check_baselines(prof.run.baselines)
        systems = [s.name for s in SYSTEMS] + known
        unknown = [n for n in prof.rsr.systems if n not in systems]
        if unknown:
            raise ValueError(f"rsr.systems names {unknown}, not a system of edit_lib/systems.py or of run.baselines; "
                             f"known: {systems}")
        not_run(dataclasses.replace(prof, run=dataclasses.replace(
            prof.run, skip_systems=[n for n in prof.run.skip_systems if n not in known])))
        prof.rl.subset_in("seed_datasets", names), prof.rl.subset_in("grid_datasets", names)
    except (ValueError, OSError) as e:
        raise ConfigError(f"{prof.name}: {e}") from None
    check_providers(prof)


def check_providers(prof) -> None:
    """``analysis.step_annotator``, ``analysis.behaviour`` and ``analysis.error_analysis`` name ``none``, a
    registered provider (``runner.keys``) or, for the annotator, an existing labels file."""
    register_all()
    for kind, key in providers.KINDS.items():
        if kind == "base":
            continue
        section, field = key.split(".")
        value = getattr(getattr(prof, section), field)
        if kind == "annotator" and is_labels_file(value):
            if not Path(value).expanduser().is_file():
                raise ConfigError(f"{prof.name}: {key} = {value!r}: no such labels file")
            continue
        try:
            providers.lookup(kind, value)
        except providers.ProviderError as e:
            raise ConfigError(f"{prof.name}: {e}") from None


def check_model(prof, on_this_machine: bool = True) -> None:
    """``model.name_or_path`` names a registered Base, an existing folder or a hub id transformers accepts
    ('org/name'): a path to a folder that does not exist is refused here, not by transformers inside a notebook;
    ``on_this_machine`` (a run, not a dry run): a ``cuda`` ``model.device`` needs CUDA on this machine, where
    the stage's own process loads its policy."""
    register_all()
    name = prof.model.name_or_path
    if providers.find("base", name) is None and not Path(name).expanduser().exists():
        from huggingface_hub.utils import HFValidationError, validate_repo_id
        try:
            validate_repo_id(name)
        except HFValidationError:
            raise ConfigError(f"{prof.name}: model.name_or_path = {name!r}: no such folder, and not a hub model id "
                              f"('org/name'); named Bases: {sorted(providers.names('base'))}") from None
    if on_this_machine and prof.model.device.startswith("cuda"):
        import torch
        if not torch.cuda.is_available():
            raise ConfigError(f"{prof.name}: model.device = {prof.model.device!r}, but this machine has no CUDA "
                              f"device; set model.device to 'cpu' or 'auto'")


def check_sft_batch(prof) -> None:
    """Each dataset's SFT effective batch (App. B: ``sft.effective_batch_size`` or its ``_by_dataset`` value) splits
    into whole ``sft.per_device_batch_size`` batches on the devices one of 05's runs trains on
    (``train.sft.batch_split``): ``sft.processes``, or the GPUs the stage's process sees, else one."""
    import torch

    from edit_lib.train.sft import batch_split
    sft, gpus = prof.sft, (torch.cuda.device_count() if torch.cuda.is_available() else 0)
    devices = sft.processes if sft.processes > 1 else 1 if prof.model.device == "cpu" or sft.workers != 1 \
        else max(1, gpus)
    for spec in prof.data.datasets:
        try:
            batch_split(sft.effective_batch_for(spec.name), sft.per_device_batch_size, devices)
        except ValueError as e:
            raise ConfigError(f"{prof.name}: dataset {spec.name}: {e} (sft.effective_batch_size, "
                              f"sft.per_device_batch_size, sft.processes)") from None


def missing_inputs(prof) -> list[str]:
    """One line per dataset input (file or folder) that does not exist, naming the dataset and the path."""
    from edit_lib.data.registry import input_paths

    return [f"data.datasets.{spec.name} ({spec.source}): {p} does not exist" for spec in prof.data.datasets
            for p in input_paths(spec) if not Path(p).exists()]


def preflight(profile: str, overrides=(), *, need_data: bool = True, dry_run: bool = False):
    """The checks a run passes before any notebook starts (`edit-suite run` and `--dry-run` share them), in order:
    ``check_override_keys``, the profile loads and names a dataset, ``check_sources``, ``check_cross_references``,
    ``check_model``, ``check_sft_batch``, ``missing_inputs``. Returns (profile, missing inputs); ConfigError (exit 2
    in the CLI) on the first failure. With ``need_data`` a missing input is an error, else it is returned as a note;
    a ``dry_run`` plans a GPU profile on any machine (no device check)."""
    check_override_keys(overrides)
    prof = load_profile(profile, overrides)
    if not prof.data.datasets:
        raise ConfigError(f"{prof.name}: the profile names no dataset (data.datasets); begin it with `extends: "
                          f"demo` to set only what differs, or list its datasets (`edit-suite profile --keys`)")
    check_sources(prof)
    check_cross_references(prof)
    check_model(prof, on_this_machine=not dry_run)
    check_sft_batch(prof)
    missing = missing_inputs(prof)
    if missing and need_data:
        raise ConfigError("input data missing, nothing was run:\n  " + "\n  ".join(missing))
    return prof, missing
