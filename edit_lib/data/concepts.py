"""The concept bank of the synthetic rubric world: subjects, key words, statements, synonyms.

A concept is one creditable idea. Its marking-point text is ``key verb noun noun`` (e.g. "osmosis moves
water membrane"). The KEY word opens every answer sentence about the concept and is never paraphrased, so
a small model can find the sentence for a marking point by lookup. Each verb and noun has two synonyms
(synonym slots 1 and 2); a paraphrase family picks one slot and optionally a visible marker word, which
makes the "marked" families the error-prone wording-mismatch class of the paper's Fig. 1. A misconception
swaps the verb for its wrong counterpart and the first noun for another noun of the subject.

The bank is fixed (built from ``BANK_SEED``, independent of any world seed) so the vocabulary, and with it
a tokenizer trained once, is the same for every world.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

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
