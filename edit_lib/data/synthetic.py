"""The synthetic rubric world (`data_cards/synthetic_world.md`): a seeded benchmark with structured schemes and exact
gold, and its concept bank. Longer than 400 lines because the bank and the world drawn from it are one design.

Shapes mimic the paper's two benchmarks (App. A, Table 8): ``sas_like`` (many questions, a few answers each)
and ``science_like`` (few questions, hundreds of answers; one world per subject gives Private-Biology and
Private-Physics, each with its own Table 9 row). Every answer sentence about a marking point is VERBATIM,
PARAPHRASE, MARKED_PARAPHRASE (the wording-mismatch class of Fig. 1), MISCONCEPTION or ABSENT; coverage ground
truth and the gold mark are stored per response. A concept is one creditable idea, its point text ``key verb noun
noun``; the KEY word opens every sentence about it and is never paraphrased (a small model can find the sentence
by lookup); paraphrase families pick a synonym slot and optionally a marker word; a misconception swaps the verb
and a noun. The bank is fixed (``BANK_SEED``), so the vocabulary, and a tokenizer trained once, is every world's.

Details: book/departures.md, section "The synthetic rubric world (edit_lib/data/synthetic.py)".
"""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from functools import lru_cache

from edit_lib.config import help_field
from edit_lib.data.schema import Coverage, Dataset, Level, LevelScheme, MarkingPoint, PointsScheme, Question, Response


# ---------------------------------------------------------------- the concept bank

BANK_SEED = 20240607

# verb: (base, synonym 1, synonym 2, wrong counterpart used by misconceptions)
VERBS = [
    ("moves", "shifts", "carries", "blocks"), ("increases", "raises", "boosts", "lowers"),
    ("produces", "makes", "creates", "destroys"), ("requires", "needs", "demands", "ignores"),
    ("releases", "emits", "frees", "absorbs"), ("controls", "regulates", "governs", "disrupts"),
    ("forms", "builds", "shapes", "breaks"), ("reduces", "cuts", "decreases", "expands"),
    ("transfers", "passes", "conveys", "traps"), ("changes", "alters", "modifies", "preserves"),
    ("causes", "triggers", "drives", "prevents"), ("uses", "employs", "consumes", "avoids"),
    ("protects", "shields", "guards", "damages"), ("spreads", "disperses", "scatters", "concentrates"),
    ("limits", "restricts", "curbs", "unleashes"), ("joins", "links", "connects", "separates"),
    ("weakens", "undermines", "softens", "strengthens"), ("stores", "keeps", "holds", "loses"),
    ("converts", "turns", "transforms", "retains"), ("opposes", "resists", "counters", "supports"),
    ("replaces", "substitutes", "supplants", "restores"), ("balances", "equalises", "offsets", "unsettles"),
    ("accelerates", "speeds", "hastens", "slows"), ("divides", "splits", "partitions", "merges"),
]

# per subject: key words (one concept each) and nouns (base, synonym 1, synonym 2)
SUBJECTS = {
    "biology": dict(
        keys="osmosis diffusion photosynthesis respiration mitosis meiosis enzymes insulin chlorophyll "
             "ribosomes mutation antibodies transpiration homeostasis digestion fertilisation "
             "chromosomes evolution".split(),
        nouns=[("water", "fluid", "liquid"), ("membrane", "barrier", "film"), ("glucose", "sugar", "dextrose"),
               ("oxygen", "air", "breath"), ("energy", "stamina", "vigour"), ("proteins", "peptides", "polypeptides"),
               ("nucleus", "core", "kernel"), ("genes", "alleles", "genome"), ("blood", "plasma", "serum"),
               ("leaves", "foliage", "fronds"), ("cells", "tissue", "cytoplasm"), ("light", "sunlight", "illumination"),
               ("organism", "creature", "lifeform"), ("gametes", "germcells", "sexcells"), ("pathogens", "germs", "microbes"),
               ("stomata", "pores", "openings"), ("offspring", "progeny", "young"), ("temperature", "warmth", "heat"),
               ("food", "nutrients", "nourishment"), ("roots", "rootlets", "radicles")]),
    "physics": dict(
        keys="gravity friction momentum inertia refraction reflection resistance voltage magnetism "
             "radiation convection conduction acceleration pressure frequency wavelength entropy buoyancy".split(),
        nouns=[("force", "push", "thrust"), ("mass", "weight", "bulk"), ("velocity", "speed", "pace"),
               ("rays", "beams", "photons"), ("current", "flow", "charge"), ("surface", "boundary", "interface"),
               ("motion", "movement", "travel"), ("field", "region", "zone"), ("wire", "cable", "conductor"),
               ("waves", "oscillations", "vibrations"), ("particles", "molecules", "atoms"), ("density", "compactness", "thickness"),
               ("object", "body", "item"), ("lens", "glass", "optic"), ("circuit", "loop", "network"),
               ("disorder", "randomness", "chaos"), ("fluids", "liquids", "gases"), ("collision", "impact", "crash"),
               ("metal", "alloy", "steel"), ("distance", "length", "span")]),
    "chemistry": dict(
        keys="oxidation reduction electrolysis catalysts isotopes combustion neutralisation distillation "
             "polymers alkalis ionisation titration covalency halogens crystallisation corrosion "
             "equilibrium fermentation".split(),
        nouns=[("electrons", "negatrons", "betas"), ("acid", "proton", "hydronium"), ("ions", "radicals", "cations"),
               ("reaction", "process", "conversion"), ("solution", "mixture", "solvent"), ("bonds", "linkages", "ties"),
               ("fuel", "hydrocarbon", "kerosene"), ("salt", "crystal", "precipitate"), ("yeast", "fungus", "culture"),
               ("monomers", "units", "building"), ("neutrons", "nucleons", "neutral"), ("iron", "ferrum", "rust"),
               ("rate", "swiftness", "tempo"), ("products", "outputs", "yield"), ("vapour", "steam", "fumes"),
               ("electrodes", "terminals", "anodes"), ("indicator", "dye", "marker"), ("chlorine", "fluorine", "bromine"),
               ("carbon", "graphite", "coke"), ("equations", "formulas", "expressions")]),
    "history": dict(
        keys="feudalism industrialisation colonialism revolution parliament monarchy reformation suffrage "
             "nationalism imperialism treaty blockade propaganda rationing abolition enclosure migration "
             "democracy".split(),
        nouns=[("peasants", "serfs", "villagers"), ("land", "estates", "territory"), ("factories", "mills", "works"),
               ("workers", "labourers", "employees"), ("colonies", "dominions", "possessions"), ("king", "sovereign", "ruler"),
               ("church", "clergy", "papacy"), ("votes", "ballots", "franchise"), ("nation", "country", "state"),
               ("empire", "realm", "dominion"), ("trade", "commerce", "exchange"), ("war", "conflict", "fighting"),
               ("newspapers", "press", "posters"), ("supplies", "provisions", "goods"), ("slavery", "bondage", "servitude"),
               ("farmers", "growers", "cultivators"), ("cities", "towns", "boroughs"), ("laws", "statutes", "acts"),
               ("taxes", "levies", "duties"), ("power", "authority", "control")]),
    "geography": dict(
        keys="erosion deposition weathering urbanisation glaciation monsoon tectonics volcanoes earthquakes "
             "deforestation irrigation desertification meanders tsunamis aquifers permafrost hurricanes "
             "population".split(),
        nouns=[("rivers", "streams", "channels"), ("rock", "stone", "bedrock"), ("sediment", "silt", "deposits"),
               ("rainfall", "precipitation", "showers"), ("ice", "glaciers", "icesheets"), ("plates", "crust", "lithosphere"),
               ("magma", "lava", "molten"), ("coast", "shoreline", "seaboard"), ("forests", "woodland", "trees"),
               ("soil", "earth", "topsoil"), ("crops", "harvest", "produce"), ("groundwater", "wells", "springs"),
               ("winds", "gales", "storms"), ("valleys", "gorges", "basins"), ("settlements", "villages", "hamlets"),
               ("climate", "weather", "atmosphere"), ("ocean", "sea", "waters"), ("ground", "terrain", "landscape"),
               ("people", "residents", "inhabitants"), ("drought", "aridity", "dryness")]),
}

# paraphrase family name -> (synonym slot, marker word or None); marked families are Fig. 1's error class
FAMILIES = {"plain_a": (1, None), "plain_b": (2, None), "marked_a": (1, "basically"), "marked_b": (2, "roughly")}
PLAIN_FAMILIES = ("plain_a", "plain_b")
MARKED_FAMILIES = ("marked_a", "marked_b")
QUESTION_VERBS = ("explain", "describe", "discuss", "outline")
LEVEL_DESCRIPTORS = ("limited", "basic", "clear", "detailed", "thorough")


@dataclass(frozen=True)
class Concept:
    """One concept: its key word, the statement words (verb, noun, noun) and a misconception."""

    id: str
    subject: str
    key: str
    verb: tuple[str, str, str, str]
    nouns: tuple[tuple[str, str, str], ...]
    wrong_noun: str  # replaces the first noun in the misconception

    @property
    def point_text(self) -> str:
        """The marking-point statement, also the VERBATIM answer sentence."""
        return " ".join([self.key, self.verb[0], *(n[0] for n in self.nouns)])

    def paraphrase(self, family: str) -> str:
        """The sentence of a paraphrase family: key, optional marker, then slot synonyms."""
        slot, marker = FAMILIES[family]
        words = [self.key] + ([marker] if marker else []) + [self.verb[slot]] + [n[slot] for n in self.nouns]
        return " ".join(words)

    @property
    def misconception(self) -> str:
        """A wrong statement about the concept (not creditworthy): wrong verb and a wrong first noun."""
        return " ".join([self.key, self.verb[3], self.wrong_noun, *(n[0] for n in self.nouns[1:])])

    def words(self) -> set[str]:
        ws = {self.key, *self.verb, self.wrong_noun}
        for n in self.nouns:
            ws.update(n)
        return ws


@lru_cache(maxsize=None)
def concept_bank() -> dict[str, Concept]:
    """All concepts by id (``<subject>:<key>``), built deterministically from ``BANK_SEED``."""
    rng = random.Random(BANK_SEED)
    bank: dict[str, Concept] = {}
    for subject, spec in SUBJECTS.items():
        for key in spec["keys"]:
            n1, n2, wrong = rng.sample(spec["nouns"], 3)
            bank[f"{subject}:{key}"] = Concept(id=f"{subject}:{key}", subject=subject, key=key,
                                               verb=rng.choice(VERBS), nouns=(n1, n2), wrong_noun=wrong[0])
    return bank


def subject_concepts(subject: str) -> list[str]:
    """Concept ids of one subject, in bank order."""
    if subject not in SUBJECTS:
        raise ValueError(f"unknown subject {subject!r}; known: {sorted(SUBJECTS)}")
    return [cid for cid, c in concept_bank().items() if c.subject == subject]


def key_words() -> dict[str, str]:
    """Each concept's key word (the word that opens every answer sentence about it)."""
    return {cid: c.key for cid, c in concept_bank().items()}


def bank_words() -> set[str]:
    """Every word the bank can emit: keys, verbs, nouns, synonyms, markers, question and level words."""
    ws: set[str] = set()
    for verb in VERBS:
        ws.update(verb)
    for spec in SUBJECTS.values():
        ws.update(spec["keys"])
        for n in spec["nouns"]:
            ws.update(n)
    ws.update(m for _, m in FAMILIES.values() if m)
    ws.update(QUESTION_VERBS)
    ws.update(LEVEL_DESCRIPTORS)
    ws.add("and")
    return ws


VERBATIM, PARAPHRASE, MARKED_PARAPHRASE = "verbatim", "paraphrase", "marked_paraphrase"
MISCONCEPTION, ABSENT = "misconception", "absent"
# ---------------------------------------------------------------- the world

STATUSES = (VERBATIM, PARAPHRASE, MARKED_PARAPHRASE, MISCONCEPTION, ABSENT)
COVERED_STATUSES = (VERBATIM, PARAPHRASE, MARKED_PARAPHRASE)
SHAPES = ("sas_like", "science_like")

__all__ = ["WorldConfig", "generate_world", "world_vocabulary", "key_words", "question_concepts",
           "STATUSES", "COVERED_STATUSES", "VERBATIM", "PARAPHRASE", "MARKED_PARAPHRASE",
           "MISCONCEPTION", "ABSENT"]


@dataclass
class WorldConfig:
    """Parameters of one synthetic world (`data_cards/synthetic_world.md`); every field has help text."""

    seed: int = help_field(0, "seed of every random draw in the world")
    shape: str = help_field("science_like", "'sas_like' or 'science_like'")
    n_questions: int = help_field(10, "number of training questions")
    answers_per_question: int = help_field(60, "answers generated per question")
    ood_questions: int = help_field(5, "number of unseen (ood_test) questions")
    ood_answers_per_question: int = help_field(0, "answers generated per OOD question (0: answers_per_question); "
                                                  "more answers per held-out question, the rest of the world "
                                                  "unchanged (every draw is seeded by its question or answer id)")
    id_test_fraction: float = help_field(0.2, "science_like: fraction of each train question's answers held out "
                                              "as id_test")
    subjects: tuple[str, ...] = help_field(tuple(SUBJECTS), "subjects, assigned to questions round-robin (one "
                                                            "subject: a Private-Biology-like world)")
    max_mark_min: int = help_field(2, "smallest maximum mark M_q")
    small_max_mark: int = help_field(12, "largest M_q of ordinary subjects")
    max_mark_max: int = help_field(26, "largest M_q (large-mark subjects)")
    large_mark_subjects: tuple[str, ...] = help_field(("history",), "History-like subjects whose M_q is drawn "
                                                                    "from [small_max_mark, max_mark_max]")
    lor_share: float = help_field(0.4, "share of level-of-response (LoR) questions")
    cap_prob: float = help_field(0.2, "probability that a PTS scheme has a cap")
    p_verbatim: float = help_field(0.25, "status probability: point stated verbatim")
    p_paraphrase: float = help_field(0.15, "status probability: plain paraphrase")
    p_marked_paraphrase: float = help_field(0.15, "status probability: paraphrase with a marker word (Fig. 1 "
                                                  "wording-mismatch class)")
    p_misconception: float = help_field(0.15, "status probability: wrong statement")
    p_absent: float = help_field(0.30, "status probability: point not mentioned")
    ability_spread: float = help_field(0.8, "0..1: per-answer ability tilts the covered rate so gold marks "
                                            "spread over [0, M_q]")
    distractor_rate: float = help_field(0.5, "expected number of sentences about concepts outside the scheme "
                                             "(at most 2)")

    def status_probs(self) -> dict[str, float]:
        p = dict(zip(STATUSES, (self.p_verbatim, self.p_paraphrase, self.p_marked_paraphrase,
                                self.p_misconception, self.p_absent)))
        total = sum(p.values())
        if total <= 0 or any(v < 0 for v in p.values()):
            raise ValueError(f"status probabilities must be >= 0 with a positive sum, got {p}")
        return {k: v / total for k, v in p.items()}

    def check(self) -> None:
        if self.shape not in SHAPES:
            raise ValueError(f"shape {self.shape!r} not in {SHAPES}")
        unknown = set(self.subjects) - set(SUBJECTS)
        if unknown or not self.subjects:
            raise ValueError(f"unknown or empty subjects {sorted(unknown)}; known: {sorted(SUBJECTS)}")
        if not 2 <= self.max_mark_min <= self.small_max_mark <= self.max_mark_max:
            raise ValueError("need 2 <= max_mark_min <= small_max_mark <= max_mark_max")
        if self.n_questions < 1 or self.answers_per_question < 1 or self.ood_questions < 0 or \
                self.ood_answers_per_question < 0:
            raise ValueError("need n_questions >= 1, answers_per_question >= 1, ood_questions >= 0, "
                             "ood_answers_per_question >= 0")
        if not 0 <= self.id_test_fraction < 1:
            raise ValueError("id_test_fraction must lie in [0, 1)")
        self.status_probs()


def _rng(seed: int, *parts: object) -> random.Random:
    # string seeds are hashed with sha512 by `random`, so this is stable across runs and platforms
    return random.Random("|".join(map(str, (seed, *parts))))


# ---------------------------------------------------------------- mark schemes

def _points_scheme(rng: random.Random, k_max: int, large: bool, lo: int, hi: int,
                   cap_prob: float) -> PointsScheme:
    """PTS scheme: K points worth 1-3 marks each, optional cap, M_q in [lo, hi] (`data_cards/synthetic_world.md`)."""
    weights = (1, 2, 3) if large else (1, 1, 1)
    for _ in range(500):
        k = rng.randint(5 if large else 2, 8 if large else 5)
        k = min(k, k_max)
        values = rng.choices((1, 2, 3), weights=weights, k=k)
        total = sum(values)
        cap = None
        if total >= 3 and rng.random() < cap_prob:
            cap = rng.randint((total + 1) // 2, total - 1)
        m = cap if cap is not None else total
        if lo <= m <= hi:
            pts = tuple(MarkingPoint(id=f"p{i + 1}", text="", value=float(v)) for i, v in enumerate(values))
            return PointsScheme(points=pts, cap=None if cap is None else float(cap))
    raise ValueError(f"could not draw a PTS scheme with M_q in [{lo}, {hi}] from {k_max} concepts")


def _level_scheme(rng: random.Random, k_max: int, large: bool, lo: int, hi: int,
                  cap_prob: float = 0.0) -> LevelScheme:
    """LoR scheme: indicative points and 2-4 contiguous bands [low, high] reached by min_points.

    ``cap_prob`` is unused (LoR bands cap themselves); it keeps the signature of ``_points_scheme``.
    """
    for _ in range(500):
        k = min(rng.randint(5 if large else 3, 8 if large else 6), k_max)
        n_levels = rng.randint(2, min(4, k))
        mins = [1] + sorted(rng.sample(range(2, k + 1), n_levels - 1))
        levels, low = [], 1
        for i, m in enumerate(mins):
            n_counts = (mins[i + 1] if i + 1 < n_levels else k + 1) - m
            step = rng.choice((2, 3) if large else (1, 1, 2))
            high = low + step * (n_counts - 1)
            desc = LEVEL_DESCRIPTORS[round(i * (len(LEVEL_DESCRIPTORS) - 1) / (n_levels - 1))]
            levels.append(Level(level=i + 1, descriptor=desc, low=low, high=high, min_points=m, step=step))
            low = high + 1
        if lo <= levels[-1].high <= hi:
            pts = tuple(MarkingPoint(id=f"p{i + 1}", text="", value=1.0) for i in range(k))
            return LevelScheme(points=pts, levels=tuple(levels))
    raise ValueError(f"could not draw a LoR scheme with M_q in [{lo}, {hi}] from {k_max} concepts")


def _make_question(cfg: WorldConfig, qid: str, subject: str, pool: list[str],
                   avoid: set[frozenset[str]]) -> tuple[Question, list[str]]:
    """One question: draw a scheme, then attach one distinct concept from ``pool`` to each point."""
    rng = _rng(cfg.seed, "question", qid)
    large = subject in cfg.large_mark_subjects
    lo, hi = (cfg.small_max_mark, cfg.max_mark_max) if large else (cfg.max_mark_min, cfg.small_max_mark)
    make = _level_scheme if rng.random() < cfg.lor_share else _points_scheme
    scheme = make(rng, len(pool), large, lo, hi, cfg.cap_prob)
    k = len(scheme.points)
    concepts = rng.sample(pool, k)
    for _ in range(20):  # an unseen question should not repeat a training question's concept set
        if frozenset(concepts) not in avoid:
            break
        concepts = rng.sample(pool, k)
    bank = concept_bank()
    pts = tuple(MarkingPoint(id=p.id, text=bank[c].point_text, value=p.value)
                for p, c in zip(scheme.points, concepts))
    scheme = (PointsScheme(points=pts, cap=scheme.cap) if isinstance(scheme, PointsScheme)
              else LevelScheme(points=pts, levels=scheme.levels))
    keys = [bank[c].key for c in concepts]
    text = f"{rng.choice(QUESTION_VERBS)} " + (" ".join(keys[:-1]) + " and " + keys[-1] if k > 1 else keys[0]) + " ."
    reference = " . ".join(p.text for p in pts) + " ."
    return Question(id=qid, subject=subject, text=text, reference_answer=reference, scheme=scheme,
                    max_mark=scheme.max_mark), concepts


# ---------------------------------------------------------------- answers

def _draw_status(rng: random.Random, cfg: WorldConfig, p_cov: float) -> str:
    probs = cfg.status_probs()
    group = COVERED_STATUSES if rng.random() < p_cov else (MISCONCEPTION, ABSENT)
    weights = [probs[s] for s in group]
    if sum(weights) == 0:  # e.g. p_misconception = p_absent = 0 but the draw landed in the uncovered group
        weights = [1.0] * len(group)
    return rng.choices(group, weights=weights)[0]


def _make_response(cfg: WorldConfig, q: Question, concepts: list[str], distractor_pool: list[str],
                   rid: str, split: str) -> Response:
    """One answer with per-point coverage ground truth and the exact gold mark (`data_cards/synthetic_world.md`)."""
    rng = _rng(cfg.seed, "response", rid)
    bank = concept_bank()
    probs = cfg.status_probs()
    p_cov = sum(probs[s] for s in COVERED_STATUSES)
    ability = rng.random()  # E[ability] = 1/2, so the marginal covered rate stays p_cov
    p_cov = min(1.0, max(0.0, p_cov + cfg.ability_spread * (2 * ability - 1) * min(p_cov, 1 - p_cov)))
    sentences, coverage = [], []
    for point, cid in zip(q.scheme.points, concepts):
        c, status = bank[cid], _draw_status(rng, cfg, p_cov)
        family = None
        if status == VERBATIM:
            span = c.point_text
        elif status in (PARAPHRASE, MARKED_PARAPHRASE):
            family = rng.choice(PLAIN_FAMILIES if status == PARAPHRASE else MARKED_FAMILIES)
            span = c.paraphrase(family)
        elif status == MISCONCEPTION:
            span = c.misconception
        else:
            span = None
        if span is not None:
            sentences.append(span)
        coverage.append(Coverage(point_id=point.id, status=status, span=span,
                                 covered=status in COVERED_STATUSES, family=family))
    others = [d for d in distractor_pool if d not in concepts]
    n_distractors = sum(rng.random() < cfg.distractor_rate / 2 for _ in range(2))
    for cid in rng.sample(others, min(n_distractors, len(others))):
        c = bank[cid]
        sentences.append(rng.choice([c.point_text, c.paraphrase(rng.choice(PLAIN_FAMILIES)), c.misconception]))
    rng.shuffle(sentences)  # order carries no signal: a point's sentence is found by its key word
    answer = " . ".join(sentences) + " ." if sentences else ""
    gold = q.scheme.gold([cv.point_id for cv in coverage if cv.covered])
    return Response(id=rid, question_id=q.id, answer=answer, gold=gold, split=split, coverage=tuple(coverage))


# ---------------------------------------------------------------- world

def generate_world(cfg: WorldConfig) -> Dataset:
    """Generate and validate one synthetic world (`data_cards/synthetic_world.md`; shapes of App. A, Table 8)."""
    cfg.check()
    questions: dict[str, Question] = {}
    q_concepts: dict[str, list[str]] = {}
    seen: dict[str, list[str]] = {s: [] for s in cfg.subjects}  # concepts used in training questions
    train_sets: set[frozenset[str]] = set()
    for i in range(cfg.n_questions):
        subject = cfg.subjects[i % len(cfg.subjects)]
        q, cs = _make_question(cfg, f"{subject[:3]}-q{i:03d}", subject, subject_concepts(subject), set())
        questions[q.id], q_concepts[q.id] = q, cs
        seen[subject] += [c for c in cs if c not in seen[subject]]
        train_sets.add(frozenset(cs))
    train_ids = list(questions)
    ood_subjects = [s for s in cfg.subjects if len(seen[s]) >= 2]
    if cfg.ood_questions and not ood_subjects:
        raise ValueError("OOD questions need a subject with >= 2 concepts seen in training; add train questions")
    for j in range(cfg.ood_questions):
        subject = ood_subjects[j % len(ood_subjects)]
        q, cs = _make_question(cfg, f"{subject[:3]}-ood{j:03d}", subject, seen[subject], train_sets)
        questions[q.id], q_concepts[q.id] = q, cs

    responses: list[Response] = []
    for qid, q in questions.items():
        is_train = qid in train_ids
        n_id = round(cfg.answers_per_question * cfg.id_test_fraction) if (
            is_train and cfg.shape == "science_like") else 0
        held = set(_rng(cfg.seed, "split", qid).sample(range(cfg.answers_per_question), n_id))
        pool = subject_concepts(q.subject) if is_train else seen[q.subject]
        n_answers = cfg.answers_per_question if is_train else (cfg.ood_answers_per_question or cfg.answers_per_question)
        for r in range(n_answers):
            split = ("id_test" if r in held else "train") if is_train else "ood_test"
            responses.append(_make_response(cfg, q, q_concepts[qid], pool, f"{qid}-r{r:04d}", split))

    ds = Dataset(name=f"synthetic_{cfg.shape}_seed{cfg.seed}", questions=questions, responses=responses,
                 meta=dict(source="synthetic", config=asdict(cfg), concepts=q_concepts))
    ds.validate()
    return ds


def question_concepts(dataset: Dataset, question_id: str) -> list[str]:
    """Concept ids behind a synthetic question's marking points, in point order."""
    return list(dataset.meta["concepts"][question_id])


def world_vocabulary() -> list[str]:
    """Every word the world's questions, schemes and answers can contain (sorted; no digits, no '.').

    The prompt and teacher formats add their own template words: see ``edit_lib.embedded.recipe.grader_vocabulary``.
    """
    return sorted(bank_words())
