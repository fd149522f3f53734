"""The embedded tiny grader's recipe (see edit_lib/ARCHITECTURE.md): what determines a
built grader, the teacher-text stream it is pre-trained on, the recipe hash that ties shipped weights to it, and
where the graders live (the shipped weights, ``ASSETS_DIR``; built micro graders in the suite's cache).

The paper's Base policy is a pretrained Qwen3-8B (App. B). The embedded default has none, so the suite builds
one: a tiny Qwen3-architecture model pre-trained on the noisy teacher's text (`edit_lib.embedded.teacher`),
which makes the paper's errors (wording mismatch of Fig. 1, credited misconceptions, miscounts, wrong bands) so
EDIT has something to fix. Every batch holds fresh questions and answers drawn from the concept bank of the
synthetic world (all subjects), so unseen (OOD) questions built from the bank are covered by construction.

Texts: grading completions mainly, plus every other role the policy plays in Phase 1 in smaller shares
(`edit_lib/embedded/teacher.py`): rubric checklists (Sec. 2.2), atomic rewrites with checklist and diagnostic hints
(App. J, Figure 6), rewrites without checklist and non-atomic rewrites (Table 6 ablations), and InT's
verification + intervention (Sec. 3 Baselines (4), also the self-audit of Table 6). Prompts are the plain
`tiny_text` form (prompt + separator); the loss is on the completion only, the model sees the full prompt.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from edit_lib.artifacts import cache_dir
from edit_lib.config import Decoding, help_field as _h
from edit_lib.config.checks import decoding
from edit_lib.data.schema import FreeTextScheme, Level, LevelScheme, MarkingPoint, PointsScheme, Question
from edit_lib.data.synthetic import generate_world, world_vocabulary, WorldConfig
from edit_lib.embedded.teacher import (TEMPLATE_TEXT, ErrorModel, teacher_checklist, teacher_grade,
                                       teacher_intervention, teacher_rewrite, training_hints)
from edit_lib.prompts.grading import GRADER_SYSTEM, TINY_SEPARATOR, render_grading_prompt, tiny_text
from edit_lib.prompts.rewrite import (diagnostic_hints, render_checklist_prompt, render_int_output, render_int_prompt,
                                      render_rewrite_prompt)


FORMAT_VERSION = "grader-text-v2"  # bump when the sampler's text mix changes in a way the hash cannot see
ROLES = ("checklist", "rewrite", "rewrite_no_checklist", "rewrite_free", "intervention")


@dataclass
class PretrainConfig:
    """How the tiny grader is pre-trained (``build.pretrain``). Stops at the first budget reached."""
    lr: float = field(default=2e-3, metadata={"help": "Peak AdamW learning rate."})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay (matrices only)."})
    betas: tuple[float, float] = field(default=(0.9, 0.95), metadata={"help": "AdamW betas."})
    batch_size: int = field(default=32, metadata={"help": "(prompt, target) pairs per optimiser step."})
    max_steps: int | None = field(default=1000, metadata={"help": "Step budget (None: no step limit)."})
    max_tokens: int | None = field(default=None, metadata={"help": "Budget in non-pad tokens processed."})
    max_seconds: float | None = field(default=None, metadata={"help": "Wall-clock budget (not deterministic)."})
    warmup_steps: int = field(default=50, metadata={"help": "Linear warm-up steps."})
    min_lr_ratio: float = field(default=0.1, metadata={"help": "Cosine decays to lr * min_lr_ratio at the budget."})
    grad_clip: float = field(default=1.0, metadata={"help": "Max global grad norm (0: off)."})
    max_length: int = field(default=1024, metadata={"help": "Sequences are cut to this many tokens."})
    pool_batches: int = field(default=8, metadata={"help": "Length grouping: sample this many batches at once, "
                                                             "sort by length, cut into batches, shuffle them."})
    seed: int = field(default=0, metadata={"help": "Seeds the sampler generator and torch."})
    log_every: int = field(default=25, metadata={"help": "Steps between log records."})
    threads: int | None = field(default=2, metadata={"help": "torch.set_num_threads (2 cores: 2; None: leave)."})
    checkpoint_path: str | None = field(default=None, metadata={"help": "Resume from / save to this file."})
    save_every: int = field(default=200, metadata={"help": "Steps between checkpoint saves (if checkpoint_path)."})
    progress: bool = field(default=True, metadata={"help": "Show a tqdm bar."})


@dataclass
class StreamConfig:
    """The pretraining stream: each pool of pairs comes from a fresh synthetic world."""

    questions_per_world: int = _h(64, "questions drawn per world (all subjects, round-robin)")
    answers_per_question: int = _h(4, "answers per question (fresh answers, fresh questions every pool)")
    world: dict = _h(None, "WorldConfig overrides (seed, shape, n_questions, answers and OOD are set here)",
                     factory=dict)
    share_checklist: float = _h(0.08, "share of pairs that are checklist-writer texts (§2.2)")
    share_rewrite: float = _h(0.10, "share of atomic rewrites with checklist and hints (App. J, Figure 6)")
    share_rewrite_no_checklist: float = _h(0.04, "share of atomic rewrites without checklist (Table 6)")
    share_rewrite_free: float = _h(0.04, "share of non-atomic rewrites, target to the end (Table 6)")
    share_intervention: float = _h(0.06, "share of InT verification + intervention texts (Sec. 3 Baselines)")

    def shares(self) -> dict[str, float]:
        """Share of each non-grading role (ROLES order); the rest of the pairs are gradings."""
        out = dict(checklist=self.share_checklist, rewrite=self.share_rewrite,
                   rewrite_no_checklist=self.share_rewrite_no_checklist, rewrite_free=self.share_rewrite_free,
                   intervention=self.share_intervention)
        if any(v < 0 for v in out.values()) or sum(out.values()) >= 1:
            raise ValueError(f"role shares must be >= 0 and sum below 1, got {out}")
        return out


@dataclass
class ModelShape:
    """Tiny Qwen3 shape; tied embeddings, head_dim = hidden / heads."""

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
    samples: int = _h(8, "sampled rollouts per train response")
    decoding: Decoding = decoding("how the rollouts are sampled (T = 1.0, as App. B's); the ood_test responses are "
                                  "graded greedily with the same budget", temperature=1.0, max_new_tokens=384)
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
    batch 32, which had not learned to look answers up), a fixed budget of 9M tokens (deterministic; the build
    time is in build_summary.json and the book's Performance page) with a wall-clock safety cap. The budget grew
    from 6.5M when the role texts (long rewrite and InT prompts) joined the stream, to keep most of the grading
    exposure."""
    return GraderRecipe(name="embedded", pretrain=PretrainConfig(
        lr=2e-3, batch_size=16, max_steps=None, max_tokens=9_000_000, max_seconds=45 * 60, warmup_steps=50,
        max_length=1024, pool_batches=8, seed=0, log_every=25, threads=2, progress=True))


def micro_recipe() -> GraderRecipe:
    """Smoke/CI grader: a ~0.2M-param model, 300 steps of batch 16. It learns the output format but not
    reliable lookup; a fixed step budget keeps it deterministic (for a fixed thread count), the time cap is only
    a safety stop."""
    return GraderRecipe(
        name="micro",
        stream=StreamConfig(questions_per_world=16, answers_per_question=2),
        model=ModelShape(hidden=96, layers=2, heads=2, intermediate=256, max_position=1024),
        pretrain=PretrainConfig(lr=3e-3, batch_size=16, max_steps=300, max_seconds=900, warmup_steps=20,
                                max_length=1024, pool_batches=2, seed=0, log_every=25, threads=2, progress=False),
        acceptance=AcceptanceConfig(world=dict(shape="sas_like", n_questions=5, answers_per_question=2,
                                               ood_questions=2, seed=0),
                                    ood_responses=4, train_responses=2, samples=2, decoding=Decoding(max_new_tokens=200),
                                    batch_size=8))


RECIPES = {"embedded": embedded_recipe, "micro": micro_recipe}


def get_recipe(name: str) -> GraderRecipe:
    if name not in RECIPES:
        raise ValueError(f"unknown grader recipe {name!r}; known: {sorted(RECIPES)}")
    return RECIPES[name]()


# ---------------------------------------------------------------- the text stream

def _world_config(stream: StreamConfig, seed: int) -> WorldConfig:
    kw = dict(stream.world)
    kw.update(seed=seed, shape="sas_like", n_questions=stream.questions_per_world,
              answers_per_question=stream.answers_per_question, ood_questions=0)
    return WorldConfig(**kw)


def _attempt(q, r, rng, errors: ErrorModel, tries: int = 4):
    """A teacher rollout to revise: the first incorrect one in ``tries`` draws (Phase 1 revises incorrect
    rollouts), else the last drawn."""
    for _ in range(tries):
        g = teacher_grade(q, r, rng, errors)
        if not g.correct:
            break
    return g


def role_pair(role: str, q, r, rng, errors: ErrorModel) -> tuple[str, str]:
    """(prompt, target) of one non-grading role (``ROLES``; ``edit_lib/embedded/teacher.py``). Rewrites target
    the attempt's first erroneous step when it has one, else a random step."""
    if role == "checklist":
        return render_checklist_prompt(q, r.answer, r.gold), teacher_checklist(q, r)
    g = _attempt(q, r, rng, errors)
    rs = g.reasoning_steps
    texts = [s.text for s in rs]
    if role == "intervention":
        return render_int_prompt(q, r.answer, r.gold, texts), teacher_intervention(q, r, g, rng, errors)[0]
    bad = [i for i, s in enumerate(rs, start=1) if not s.label.correct]
    loc = bad[0] if bad else int(rng.integers(1, len(rs) + 1))
    hints = training_hints(rs[loc - 1], rng)
    if role == "rewrite":
        return (render_rewrite_prompt(q, r.answer, r.gold, texts, loc, hints, teacher_checklist(q, r)),
                teacher_rewrite(q, r, g, loc))
    if role == "rewrite_no_checklist":
        return (render_rewrite_prompt(q, r.answer, r.gold, texts, loc, hints, None),
                teacher_rewrite(q, r, g, loc, rng, errors))
    if role == "rewrite_free":
        return (render_rewrite_prompt(q, r.answer, r.gold, texts, loc, hints, teacher_checklist(q, r), atomic=False),
                teacher_rewrite(q, r, g, loc, atomic=False))
    raise ValueError(f"unknown role {role!r}; known: {ROLES}")


def make_sampler(stream: StreamConfig, errors: ErrorModel):
    """`sample(rng, n) -> [(prompt, target)]` for `pretrain`: a fresh world per call, teacher texts only."""
    shares = stream.shares()
    edges = np.cumsum([shares[k] for k in ROLES])

    def sample(rng: np.random.Generator, n: int) -> list[tuple[str, str]]:
        pairs: list[tuple[str, str]] = []
        while len(pairs) < n:
            world = generate_world(_world_config(stream, int(rng.integers(1_000, 2**31 - 1))))
            order = rng.permutation(len(world.responses))
            for j in order[: n - len(pairs)]:
                r = world.responses[int(j)]
                q = world.question(r)
                i = int(np.searchsorted(edges, rng.random(), side="right"))
                if i < len(ROLES):
                    p, t = role_pair(ROLES[i], q, r, rng, errors)
                else:
                    p, t = render_grading_prompt(q, r.answer), teacher_grade(q, r, rng, errors).completion
                pairs.append((tiny_text(p), t))
        return pairs

    return sample


# ---------------------------------------------------------------- hashing

def format_fingerprint() -> str:
    """sha256 of sample texts of every role (grading and ``ROLES``) at a fixed seed, plus the grader
    vocabulary: changes whenever the world, the teacher or a prompt template changes."""
    s = StreamConfig(questions_per_world=10, answers_per_question=2, share_checklist=0.15, share_rewrite=0.15,
                     share_rewrite_no_checklist=0.15, share_rewrite_free=0.15, share_intervention=0.15)
    pairs = make_sampler(s, ErrorModel())(np.random.default_rng(12345), 40)
    blob = json.dumps([FORMAT_VERSION, pairs, grader_vocabulary()])
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


# ---------------------------------------------------------------- the vocabulary: every word the tokenizer must know

_WORD = re.compile(r"[A-Za-z]+")


def text_words(text: str) -> set[str]:
    """The letter-only words of a text (digits and punctuation are separate tokens)."""
    return set(_WORD.findall(text))


def grader_vocabulary() -> list[str]:
    """Every word the tiny grader can meet: the world's words plus the words of every template here and in
    the teacher (found by rendering each template on a dummy question, so a template edit cannot be missed)."""
    pt = (MarkingPoint("p1", "", 1.0),)
    dummies = [Question("d", "d", "", "", PointsScheme(pt, cap=1.0), 1),
               Question("d", "d", "", "", LevelScheme(pt, (Level(1, "", 1, 1, 1),)), 1),
               Question("d", "d", "", "", FreeTextScheme("", 1), 1)]
    texts = [TEMPLATE_TEXT, TINY_SEPARATOR, GRADER_SYSTEM]
    for q in dummies:
        texts += [render_grading_prompt(q, "", mask) for mask in (None, "rubric", "answer")]
        texts += [render_checklist_prompt(q, "", 0), render_int_prompt(q, "", 0, ["qqq"])]
        texts += [render_rewrite_prompt(q, "", 0, ["qqq"], 1, ["qqq"], c, atomic) for c in ("", None)
                  for atomic in (True, False)]
    texts.append(render_int_output([(True, ""), (False, "qqq")], 2, "qqq", "qqq"))
    sig = {"G_rho": 0.0, "G_a": 0.0, "G_p_tilde": 0.0}
    for delta in (-1.0, 0.0, 1.0):  # every sentence the locator's hints can use (rewrite_hints)
        texts += diagnostic_hints(delta, sig, {k: 1.0 for k in sig}, True, 0.5)
        texts += diagnostic_hints(delta, sig, {k: -1.0 for k in sig}, False, 0.5)
    return sorted(set(world_vocabulary()) | text_words(" ".join(texts)) - {"qqq"})


ASSETS_DIR = Path(__file__).resolve().parent / "assets" / "grader"


def micro_cache_dir(recipe: GraderRecipe | None = None) -> Path:
    """Folder of a built grader in the suite's cache (``artifacts.cache_dir``: $EDIT_SUITE_CACHE, default
    ~/.cache/edit-suite, outside the repository), keyed by the recipe hash."""
    recipe = recipe or micro_recipe()
    return cache_dir() / f"grader-{recipe.name}-{recipe_hash(recipe)}"
