"""The model card (``README.md`` with the Hub's YAML metadata) and ``load.py`` of an ``edit-suite export`` folder
(``tools.export``): the Base and its commit, the adapters in stacking order, the recipe values the run used
(05's ``sft``, 06's ``rl`` and the EDIT-RL shaping values; each adapter's own LoRA config), 07's greedy metrics
(App. B) with the intervals 07 (Table 4) and 09 (App. G) hold, the profile, the suite's commit, the citation.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from edit_lib.systems import names

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
    if t4 and s in names("Table 4"):
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
