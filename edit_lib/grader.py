"""The embedded tiny grader (DESIGN §5): recipe, build, shipped weights and loading.

The paper's Base policy is a pretrained Qwen3-8B (App. B). The embedded default has none, so the suite builds
one: a tiny Qwen3-architecture model pre-trained on the noisy teacher's text (`edit_lib.teacher`), which makes
the paper's errors (wording mismatch of Fig. 1, credited misconceptions, miscounts, wrong bands) so EDIT has
something to fix. Every batch holds fresh questions and answers drawn from the concept bank of the synthetic
world (all subjects), so unseen (OOD) questions built from the bank are covered by construction.

Texts: grading completions mainly, plus rubric checklists (§2.2) and atomic rewrites (App. prompt figure) in a
smaller share, so the same policy can later play checklist-writer and reviser. Prompts are the plain
`tiny_text` form (prompt + separator); the loss is on the completion only, the model sees the full prompt.

`embedded` is shipped in `edit_lib/assets/grader/` with its recipe hash; `micro` (smoke/CI) is built from
scratch in seconds into a cache keyed by its hash.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import random
import shutil
import string
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .data.synthetic import WorldConfig, generate_world, world_vocabulary
from .pretrain import PretrainConfig
from .teacher import ErrorModel, teacher_checklist, teacher_grade, teacher_rewrite
from .prompts import (grader_vocabulary, render_checklist_prompt, render_grading_prompt, render_rewrite_prompt,
                      tiny_text)

ASSETS_DIR = Path(__file__).resolve().parent / "assets" / "grader"
CACHE_ENV = "EDIT_SUITE_CACHE"
FORMAT_VERSION = "grader-text-v1"  # bump when the sampler's text mix changes in a way the hash cannot see

# Diagnostic hint bullets used in the training rewrite prompts (the paper fills them from the C1 locator, App.
# prompt figure). Their words are added to the tokenizer so any locator phrasing built from them stays known.
HINTS = {
    "grounding": "the judgement of point {p} may be wrong ; check the answer sentence that starts with its key word",
    "synthesis": "the expected mark moves away at this substep ; recompute it from the credits written above",
}


def _h(default, text: str, factory=None):
    if factory is not None:
        return field(default_factory=factory, metadata={"help": text})
    return field(default=default, metadata={"help": text})


@dataclass
class StreamConfig:
    """The pretraining stream: each pool of pairs comes from a fresh synthetic world (DESIGN §5)."""

    questions_per_world: int = _h(64, "questions drawn per world (all subjects, round-robin)")
    answers_per_question: int = _h(4, "answers per question (fresh answers, fresh questions every pool)")
    world: dict = _h(None, "WorldConfig overrides (seed, shape, n_questions, answers and OOD are set here)",
                     factory=dict)
    share_checklist: float = _h(0.08, "share of pairs that are checklist-writer texts (§2.2)")
    share_rewrite: float = _h(0.03, "share of pairs that are atomic-rewrite texts (App. prompt figure)")


@dataclass
class ModelShape:
    """Tiny Qwen3 shape (DESIGN §5); tied embeddings, head_dim = hidden / heads."""

    hidden: int = _h(128, "hidden size")
    layers: int = _h(4, "decoder layers")
    heads: int = _h(4, "attention heads (= kv heads)")
    intermediate: int = _h(512, "MLP intermediate size")
    max_position: int = _h(1024, "maximum positions (RoPE)")


@dataclass
class AcceptanceConfig:
    """Held-out check of the build (SAS-like world, unseen questions from the bank); never tuned on EDIT."""

    world: dict = _h(None, "WorldConfig of the acceptance world", factory=lambda: dict(
        shape="sas_like", n_questions=60, answers_per_question=5, ood_questions=20, seed=0))
    ood_responses: int | None = _h(None, "greedy-graded ood_test responses (None: all)")
    train_responses: int = _h(64, "train responses with sampled rollouts")
    samples: int = _h(8, "sampled rollouts per train response (T=1.0)")
    temperature: float = _h(1.0, "sampling temperature of the rollouts")
    max_new_tokens: int = _h(384, "completion budget")
    batch_size: int = _h(64, "generation batch size")
    seed: int = _h(0, "sampling seed")


@dataclass
class GraderRecipe:
    """Everything that determines a built grader (hashed by `recipe_hash`)."""

    name: str = _h("embedded", "recipe name")
    seed: int = _h(0, "model init, tokenizer sample and stream seed")
    stream: StreamConfig = _h(None, "pretraining text stream", factory=StreamConfig)
    errors: ErrorModel = _h(None, "noisy-teacher error rates (Fig. 1 failure types)", factory=ErrorModel)
    model: ModelShape = _h(None, "model shape", factory=ModelShape)
    pretrain: PretrainConfig = _h(None, "optimiser and budget (stops at the first budget reached)",
                                  factory=PretrainConfig)
    acceptance: AcceptanceConfig = _h(None, "acceptance evaluation after the build", factory=AcceptanceConfig)


def embedded_recipe() -> GraderRecipe:
    """The demo's Base policy: ~1.1M params, lr 2e-3 AdamW, batch 16 length-grouped (twice the updates of
    batch 32; batch 32 had not learned to look answers up after 4.5M tokens), 6.5M tokens (~23 min here), a fixed
    token budget (deterministic) with a wall-clock safety cap."""
    return GraderRecipe(name="embedded", pretrain=PretrainConfig(
        lr=2e-3, batch_size=16, max_steps=None, max_tokens=6_500_000, max_seconds=27 * 60, warmup_steps=50,
        max_length=1024, pool_batches=8, seed=0, log_every=25, threads=2, progress=True))


def micro_recipe() -> GraderRecipe:
    """Smoke/CI grader: a ~0.2M-param model, 300 steps of batch 16 (about a minute on two cores). It learns
    the output format (about 90% of greedy gradings parse) but not reliable lookup; a fixed step budget keeps
    it deterministic, the time cap is only a safety stop."""
    return GraderRecipe(
        name="micro",
        stream=StreamConfig(questions_per_world=16, answers_per_question=2),
        model=ModelShape(hidden=96, layers=2, heads=2, intermediate=256, max_position=1024),
        pretrain=PretrainConfig(lr=3e-3, batch_size=16, max_steps=300, max_seconds=900, warmup_steps=20,
                                max_length=1024, pool_batches=2, seed=0, log_every=25, threads=2, progress=False),
        acceptance=AcceptanceConfig(world=dict(shape="sas_like", n_questions=5, answers_per_question=2,
                                               ood_questions=2, seed=0),
                                    ood_responses=4, train_responses=2, samples=2, max_new_tokens=200,
                                    batch_size=8))


RECIPES = {"embedded": embedded_recipe, "micro": micro_recipe}


def get_recipe(name: str) -> GraderRecipe:
    if name not in RECIPES:
        raise ValueError(f"unknown grader recipe {name!r}; known: {sorted(RECIPES)}")
    return RECIPES[name]()


def recipe_from_dict(d: dict) -> GraderRecipe:
    """Inverse of `asdict` for a recipe (recipe.json)."""
    p = dict(d["pretrain"])
    p["betas"] = tuple(p["betas"])
    return GraderRecipe(name=d["name"], seed=d["seed"], stream=StreamConfig(**d["stream"]),
                        errors=ErrorModel(**d["errors"]), model=ModelShape(**d["model"]),
                        pretrain=PretrainConfig(**p), acceptance=AcceptanceConfig(**d["acceptance"]))


# ---------------------------------------------------------------- the text stream

def _world_config(stream: StreamConfig, seed: int) -> WorldConfig:
    kw = dict(stream.world)
    kw.update(seed=seed, shape="sas_like", n_questions=stream.questions_per_world,
              answers_per_question=stream.answers_per_question, ood_questions=0)
    return WorldConfig(**kw)


def _rewrite_pair(q, r, rng, errors: ErrorModel) -> tuple[str, str]:
    """A rewrite-prompt / rewrite-block pair; the target step is the first erroneous one when there is one."""
    g = teacher_grade(q, r, rng, errors)
    rs = g.reasoning_steps
    bad = [i for i, s in enumerate(rs, start=1) if not s.label.correct]
    loc = bad[0] if bad else int(rng.integers(1, len(rs) + 1))
    step = rs[loc - 1]
    if step.label.kind == "grounding":
        hints = [HINTS["grounding"].format(p=step.label.point_id[1:])]
    else:
        hints = [HINTS["synthesis"]]
    prompt = render_rewrite_prompt(q, r.answer, r.gold, [s.text for s in rs], loc, hints,
                                   teacher_checklist(q, r))
    return prompt, teacher_rewrite(q, r, g, loc)


def make_sampler(stream: StreamConfig, errors: ErrorModel):
    """`sample(rng, n) -> [(prompt, target)]` for `pretrain`: a fresh world per call, teacher texts only."""

    def sample(rng: np.random.Generator, n: int) -> list[tuple[str, str]]:
        pairs: list[tuple[str, str]] = []
        while len(pairs) < n:
            world = generate_world(_world_config(stream, int(rng.integers(1_000, 2**31 - 1))))
            order = rng.permutation(len(world.responses))
            for j in order[: n - len(pairs)]:
                r = world.responses[int(j)]
                q = world.question(r)
                u = rng.random()
                if u < stream.share_checklist:
                    p, t = render_checklist_prompt(q, r.answer, r.gold), teacher_checklist(q, r)
                elif u < stream.share_checklist + stream.share_rewrite:
                    p, t = _rewrite_pair(q, r, rng, errors)
                else:
                    p, t = render_grading_prompt(q, r.answer), teacher_grade(q, r, rng, errors).completion
                pairs.append((tiny_text(p), t))
        return pairs

    return sample


# ---------------------------------------------------------------- hashing

def format_fingerprint() -> str:
    """sha256 of sample texts of every kind (grading, checklist, rewrite) at a fixed seed, plus the grader
    vocabulary: changes whenever the world, the teacher or a prompt template changes."""
    s = StreamConfig(questions_per_world=10, answers_per_question=2, share_checklist=0.3, share_rewrite=0.3)
    pairs = make_sampler(s, ErrorModel())(np.random.default_rng(12345), 24)
    blob = json.dumps([FORMAT_VERSION, pairs, grader_vocabulary(), sorted(HINTS.items())])
    return hashlib.sha256(blob.encode()).hexdigest()


def recipe_hash(recipe: GraderRecipe) -> str:
    """sha256 of the recipe's canonical JSON and the text-format fingerprint (first 16 hex digits).

    Run-time knobs that do not change the weights (progress bar, log interval, thread count, acceptance
    settings) are left out.
    """
    d = asdict(recipe)
    for k in ("progress", "log_every", "threads", "checkpoint_path", "save_every"):
        d["pretrain"].pop(k, None)
    d.pop("acceptance")
    blob = json.dumps({"recipe": d, "format": format_fingerprint()}, sort_keys=True, default=list)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# ---------------------------------------------------------------- build

def build_tokenizer(recipe: GraderRecipe):
    """Word-level tokenizer on the grader vocabulary + world vocabulary + hint words + punctuation (digits
    split, DESIGN §5), plus whatever else a stream sample contains."""
    from .tokenizer import train_word_tokenizer
    extra = [*grader_vocabulary(), *world_vocabulary(), *" ".join(HINTS.values()).split(),
             *string.punctuation]
    sample = make_sampler(recipe.stream, recipe.errors)(np.random.default_rng(recipe.seed), 64)
    texts = [p + t for p, t in sample]
    return train_word_tokenizer(texts, extra_words=extra, model_max_length=recipe.model.max_position)


def _apply_minutes(recipe: GraderRecipe, minutes: float | None) -> GraderRecipe:
    if minutes is None:
        return recipe
    pre = dataclasses.replace(recipe.pretrain, max_seconds=60.0 * minutes, max_tokens=None, max_steps=None)
    return dataclasses.replace(recipe, pretrain=pre)


def build_grader(recipe: GraderRecipe | str = "embedded", out_dir: str | Path | None = None,
                 accept: bool = True, progress: bool | None = None, threads: int | None = None,
                 echo=None) -> Path:
    """Train tokenizer and model from nothing on the teacher's text (DESIGN §5), save, evaluate, write the
    recipe, its hash, the training log and `build_summary.json`. Returns the output folder.

    `progress` and `threads` override run-time knobs only (not hashed): use threads=1 while another process
    shares the two cores (DESIGN §8: oversubscription is 10-50x slower)."""
    import torch
    from .models import count_parameters, init_tiny_model, save_model_and_tokenizer
    from .pretrain import pretrain

    recipe = get_recipe(recipe) if isinstance(recipe, str) else recipe
    out = Path(out_dir) if out_dir is not None else ASSETS_DIR
    echo = echo or (lambda *_: None)
    t0 = time.perf_counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".build-{recipe.name}-", dir=out.parent))
    try:
        tok = build_tokenizer(recipe)
        m = recipe.model
        model = init_tiny_model(tok, seed=recipe.seed, hidden=m.hidden, layers=m.layers, heads=m.heads,
                                intermediate=m.intermediate, max_position=m.max_position)
        n_params = count_parameters(model)
        echo(f"[build-grader] recipe {recipe.name} ({recipe_hash(recipe)}): vocab {len(tok)}, {n_params:,} params")
        cfg = recipe.pretrain
        if progress is not None:
            cfg = dataclasses.replace(cfg, progress=progress)
        if threads is not None:
            cfg = dataclasses.replace(cfg, threads=threads)
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        res = pretrain(model, tok, make_sampler(recipe.stream, recipe.errors), cfg, log_path=work / "train_log.jsonl")
        hist = res["history"]
        echo(f"[build-grader] trained {res['steps']} steps, {res['tokens']:,} tokens in {res['seconds'] / 60:.1f} min "
             f"({res['tokens_per_s']:.0f} tokens/s), final loss {hist[-1]['loss'] if hist else float('nan'):.4f}")
        save_model_and_tokenizer(model, tok, work)
        (work / "recipe.json").write_text(json.dumps(asdict(recipe), indent=2, default=list) + "\n")
        (work / "recipe_hash.txt").write_text(recipe_hash(recipe) + "\n")
        summary = dict(recipe=recipe.name, recipe_hash=recipe_hash(recipe), n_params=n_params, vocab_size=len(tok),
                       train_minutes=res["seconds"] / 60, steps=res["steps"], tokens=res["tokens"],
                       target_tokens=res["target_tokens"], tokens_per_s=res["tokens_per_s"],
                       final_loss=hist[-1]["loss"] if hist else None, torch=torch.__version__,
                       python=sys.version.split()[0])
        if accept:
            echo("[build-grader] acceptance evaluation ...")
            t1 = time.perf_counter()
            try:
                summary["acceptance"] = acceptance_metrics(model, tok, recipe.acceptance)
                summary["acceptance_checks"] = acceptance_checks(summary["acceptance"])
            except Exception as e:  # the weights are still worth keeping; the error is recorded
                summary["acceptance_error"] = f"{type(e).__name__}: {e}"
                echo(f"[build-grader] acceptance failed: {summary['acceptance_error']}")
            summary["acceptance_minutes"] = (time.perf_counter() - t1) / 60
        summary["build_minutes"] = (time.perf_counter() - t0) / 60
        (work / "build_summary.json").write_text(json.dumps(_finite(summary), indent=2) + "\n")
        for f in work.iterdir():  # mkdtemp makes private files; the folder is shipped and shared
            f.chmod(0o644)
        work.chmod(0o755)
        if out.exists():
            shutil.rmtree(out)
        work.rename(out)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return out


# ---------------------------------------------------------------- acceptance

def _finite(x):
    """JSON-safe copy: NaN/inf -> None, numpy scalars -> Python numbers."""
    if isinstance(x, dict):
        return {str(k): _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    if isinstance(x, (np.floating, float)):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def acceptance_metrics(model, tokenizer, acc: AcceptanceConfig) -> dict:
    """Greedy macro-QWK on unseen questions, share of wrong sampled rollouts on train responses, and the
    behaviour targets (absent credit, verbatim quotes, wording-mismatch gap) of `edit_lib.behaviour`."""
    from .behaviour import analyse_behaviour
    from .generate import SamplingConfig, generate
    from .metrics import grading_metrics
    from .prompts import read_final_mark

    ds = generate_world(WorldConfig(**acc.world))
    ood = ds.split("ood_test")[: acc.ood_responses]
    rng = np.random.default_rng(acc.seed)
    train = ds.split("train")
    train = [train[int(i)] for i in sorted(rng.choice(len(train), min(acc.train_responses, len(train)), replace=False))]

    def run(responses, cfg):
        prompts = [tiny_text(render_grading_prompt(ds.question(r), r.answer)) for r in responses]
        return generate(model, tokenizer, prompts, cfg, ids=[r.id for r in responses], progress=False)

    greedy = run(ood, SamplingConfig.evaluation(acc.max_new_tokens, acc.batch_size))
    sampled = run(train, SamplingConfig.rollouts(acc.samples, acc.temperature, acc.max_new_tokens, acc.seed,
                                                  acc.batch_size))
    by_id = {r.id: r for r in ds.responses}
    marks = [read_final_mark(t, ds.question(by_id[i]).max_mark).mark for t, i in zip(greedy.text, greedy.response_id)]
    gm = grading_metrics([by_id[i].question_id for i in greedy.response_id], [by_id[i].gold for i in greedy.response_id],
                         marks, {q.id: q.max_mark for q in ds.questions.values()})
    beh_g = analyse_behaviour(ds, greedy)
    beh_s = analyse_behaviour(ds, sampled)
    ro = beh_s.rollouts
    per = ro.groupby("response_id")["correct"].agg(["min", "max"])
    distinct = sampled.groupby("response_id")["text"].nunique().mean()
    return dict(world=acc.world, ood_greedy=dict(qwk=gm["qwk"], acc=gm["acc"], within1=gm["within1"], mae=gm["mae"],
                                                 n=gm["n"], n_invalid=gm["n_invalid"], behaviour=beh_g.summary),
                train_sampled=dict(share_incorrect=float(1 - ro["correct"].mean()),
                                   share_responses_mixed=float(((per["min"] == 0) & (per["max"] == 1)).mean()),
                                   distinct_texts_per_response=float(distinct), n_rollouts=len(ro),
                                   behaviour=beh_s.summary))


def acceptance_checks(acc: dict) -> dict[str, bool]:
    """The demo grader's targets (DESIGN §5: imperfect, makes the paper's errors, yet grades and quotes)."""
    g, s = acc["ood_greedy"], acc["train_sampled"]
    b = s["behaviour"]
    gap = b["wording_gap"]
    return {"ood_qwk_in_[0.3,0.9]": bool(0.3 <= (g["qwk"] or 0) <= 0.9),
            "sampled_incorrect_in_[0.15,0.85]": bool(0.15 <= s["share_incorrect"] <= 0.85),
            "responses_with_mixed_rollouts": bool(s["share_responses_mixed"] > 0),
            "absent_credit_<=0.2": bool((b["credit_absent"] if b["credit_absent"] is not None else 1) <= 0.2),
            "quotes_verbatim_>=0.8": bool((b["quote_verbatim"] or 0) >= 0.8),
            "marked_gap_>=0.3": bool(gap is not None and math.isfinite(gap) and gap >= 0.3)}


# ---------------------------------------------------------------- loading

def micro_cache_dir(recipe: GraderRecipe | None = None) -> Path:
    """Cache folder of the micro grader: $EDIT_SUITE_CACHE or <repo>/runs/_cache, keyed by the recipe hash."""
    recipe = recipe or micro_recipe()
    root = Path(os.environ.get(CACHE_ENV) or Path(__file__).resolve().parents[1] / "runs" / "_cache")
    return root / f"grader-{recipe.name}-{recipe_hash(recipe)}"


def ensure_micro_grader() -> Path:
    """Build the micro grader into its cache folder unless it is there already."""
    path = micro_cache_dir()
    if not (path / "recipe_hash.txt").exists():
        build_grader(micro_recipe(), path, accept=False, progress=False)
    return path


def load_policy(name_or_path: str = "embedded", model_cfg=None):
    """Load the Base policy: 'embedded' (shipped tiny grader), 'micro' (built into the cache if absent) or any
    HF causal LM name/path (Qwen3-8B in the paper profile, App. B). Returns (model, tokenizer, kind) with kind
    'tiny' (plain `tiny_text` prompts) or 'chat' (the tokenizer's chat template).

    `model_cfg` is a `models.ModelConfig` or any object with dtype / device / attn_implementation (its
    name_or_path is ignored in favour of `name_or_path`)."""
    from .models import ModelConfig, load_model_and_tokenizer
    local = False
    if name_or_path == "embedded":
        path, local = ASSETS_DIR, True
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"no shipped grader in {path}; run `edit-suite build-grader`")
    elif name_or_path == "micro":
        path, local = ensure_micro_grader(), True
    else:
        path = name_or_path
        local = (Path(path) / "recipe.json").exists()
    kw = {}
    for k in ("dtype", "device", "attn_implementation", "trust_remote_code", "local_files_only"):
        v = getattr(model_cfg, k, None)
        if v is not None:
            kw[k] = v
    if local:
        kw["local_files_only"] = True
    threads = getattr(model_cfg, "torch_threads", None)
    if threads:
        import torch
        torch.set_num_threads(threads)
    model, tok = load_model_and_tokenizer(ModelConfig(name_or_path=str(path), **kw))
    kind = "tiny" if local or not getattr(tok, "chat_template", None) else "chat"
    return model, tok, kind


def shipped_grader_is_current(path: str | Path | None = None) -> tuple[bool, str, str | None]:
    """(current?, expected hash of the `embedded` recipe, hash written next to the shipped weights)."""
    path = Path(path) if path is not None else ASSETS_DIR
    expected = recipe_hash(embedded_recipe())
    f = path / "recipe_hash.txt"
    shipped = f.read_text().strip() if f.exists() else None
    ok = shipped == expected and (path / "model.safetensors").exists()
    return ok, expected, shipped


def build_grader_cli(recipe: str = "embedded", out: str | None = None, minutes: float | None = None) -> int:
    """`edit-suite build-grader`: build from nothing, print progress and the summary; 0 on success."""
    r = _apply_minutes(get_recipe(recipe), minutes)
    if out is None and recipe != "embedded":
        out = str(micro_cache_dir(r))
    t0 = time.perf_counter()
    threads = int(os.environ["EDIT_SUITE_THREADS"]) if os.environ.get("EDIT_SUITE_THREADS") else None
    path = build_grader(r, out, accept=True, threads=threads, echo=lambda s: print(s, flush=True))
    summary = json.loads((path / "build_summary.json").read_text())
    print(json.dumps(summary, indent=2))
    print(f"[build-grader] wrote {path} in {(time.perf_counter() - t0) / 60:.1f} min")
    return 0
