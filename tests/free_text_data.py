"""A small bring-your-own dataset whose rubrics are free text, written by the project (never real student data):
six questions, each rubric an instructor's reference answer of five statements (scheme kind ``text``), marks in
halves of 0-5 (``mark_scale: 2``). An answer states each statement in a student's words (1 mark), vaguely (half a
mark) or wrongly (0), in a shuffled order with filler; gold = the sum, and one answer in ten moved by half a mark
up or down (markers disagree). The matcher never sees the sentences' marks, only the rubric's words.

``python tests/free_text_data.py OUT [N]`` writes OUT/questions.jsonl and OUT/responses.jsonl with N answers per
question (default 105: 630 in all, the size of the issue's own free-text data); splits about 60/20/20
train/id_test/ood_test with the last question held out as OOD.
"""
from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # run as a script too
from half_mark_data import write_records  # noqa: E402

# (id, subject, question, [(reference statement, a student's full statement, a vague one, a wrong one)])
QUESTIONS = [
    ("photosynthesis", "Biology", "Explain how a plant makes its food.", [
        ("Chlorophyll in the leaves absorbs light energy.", "The chlorophyll in a leaf takes in the light energy.",
         "The leaves use the light.", "The roots absorb light energy from the soil."),
        ("Carbon dioxide enters the leaf through the stomata.", "Carbon dioxide gets into the leaf by the stomata.",
         "Gas goes into the leaf.", "Oxygen enters the leaf through the roots."),
        ("Water is taken up by the roots.", "The roots take up the water.", "The plant needs water.",
         "Water is made in the leaves."),
        ("Glucose is produced from carbon dioxide and water.", "The plant produces glucose out of carbon dioxide and water.",
         "It makes some sugar.", "Glucose is taken in from the air."),
        ("Oxygen is released as a waste product.", "Oxygen is released as waste.", "A gas comes out.",
         "Carbon dioxide is released as the product.")]),
    ("volcano", "Geography", "Describe why volcanoes form at plate boundaries.", [
        ("Tectonic plates move apart or collide at boundaries.", "At the boundaries the tectonic plates collide or move apart.",
         "The plates move.", "Tectonic plates stay still at boundaries."),
        ("A subducting plate melts in the mantle.", "One plate is subducted and melts in the mantle.",
         "Something melts underground.", "The crust freezes in the mantle."),
        ("The molten rock forms magma that is less dense.", "Molten rock makes magma which is less dense.",
         "There is hot rock.", "Magma is denser than the rock around it."),
        ("Magma rises through cracks in the crust.", "The magma rises up through cracks in the crust.",
         "It comes up.", "Magma sinks down to the core."),
        ("Eruptions build a cone of lava and ash.", "Each eruption builds a cone from lava and ash.",
         "A mountain appears.", "Eruptions wear away the cone."),
    ]),
    ("diffusion", "Chemistry", "Explain how a smell spreads across a room.", [
        ("Particles of the gas move randomly.", "The gas particles move about randomly.", "Things move around.",
         "The particles stay in one place."),
        ("Particles spread from high concentration to low concentration.",
         "The particles spread from a high concentration to a low concentration.", "It spreads out.",
         "Particles move from low concentration to high concentration."),
        ("This process is called diffusion.", "This is called diffusion.", "It has a name.",
         "This process is called condensation."),
        ("Diffusion is faster at higher temperature.", "Diffusion goes faster when the temperature is higher.",
         "Heat changes it.", "Diffusion is slower at higher temperature."),
        ("Eventually the particles are evenly spread.", "In the end the particles are spread evenly.",
         "It ends up everywhere.", "The particles all gather in one corner."),
    ]),
    ("pendulum", "Physics", "Describe the energy changes of a swinging pendulum.", [
        ("At the top the bob has maximum gravitational potential energy.",
         "The bob has the most gravitational potential energy at the top.", "It has energy at the top.",
         "At the top the bob has maximum kinetic energy."),
        ("As it falls potential energy is converted to kinetic energy.",
         "Falling converts the potential energy into kinetic energy.", "The energy changes.",
         "As it falls kinetic energy is converted to potential energy."),
        ("At the bottom the bob moves fastest.", "The bob moves fastest at the bottom.", "It is quick at some point.",
         "At the bottom the bob stops moving."),
        ("Friction and air resistance transfer energy to heat.", "Air resistance and friction transfer energy as heat.",
         "Some energy is lost.", "Friction adds energy to the swing."),
        ("So the swings get smaller over time.", "Over time the swings get smaller.", "It changes over time.",
         "So the swings get bigger over time."),
    ]),
    ("immunity", "Biology", "Explain how a vaccine protects against a disease.", [
        ("A vaccine contains dead or weakened pathogens.", "The vaccine holds weakened or dead pathogens.",
         "It has germs in it.", "A vaccine contains antibiotics."),
        ("The antigens trigger white blood cells.", "Their antigens trigger the white blood cells.",
         "The body reacts.", "The antigens kill the white blood cells."),
        ("Lymphocytes produce specific antibodies.", "Lymphocytes make antibodies that are specific.",
         "Something fights it.", "Lymphocytes produce more pathogens."),
        ("Memory cells remain in the blood.", "Memory cells stay in the blood.", "The body remembers.",
         "Memory cells leave the body after a day."),
        ("On reinfection antibodies are made faster.", "If infected again antibodies are made much faster.",
         "Next time is better.", "On reinfection no antibodies are made."),
    ]),
    ("circuit", "Physics", "Explain why a bulb is dimmer when a resistor is added in series.", [
        ("The total resistance of the circuit increases.", "The circuit's total resistance goes up.",
         "Something changes in the circuit.", "The total resistance of the circuit decreases."),
        ("The current through the circuit decreases.", "So less current flows through the circuit.",
         "The flow is different.", "The current through the circuit increases."),
        ("The voltage is shared between the bulb and the resistor.",
         "The voltage is split between the resistor and the bulb.", "Voltage goes around.",
         "The bulb gets all of the voltage."),
        ("The bulb transfers less power.", "Less power is transferred by the bulb.", "The bulb does less.",
         "The bulb transfers more power."),
        ("So it gives out less light.", "So it gives less light out.", "It looks different.",
         "So it gives out more light."),
    ]),
]
FILLER = ["I think this is right.", "We learned this in class.", "This is what happens.", "That is my answer."]
CREDIT = {"full": 1.0, "vague": 0.5, "wrong": 0.0}


def _fmt(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x


def build(n_per_question: int = 105, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """(questions, responses) records in the suite's JSONL format (module docstring)."""
    rng = random.Random(seed)
    questions, responses = [], []
    for qi, (qid, subject, text, statements) in enumerate(QUESTIONS):
        reference = " ".join(s[0] for s in statements)
        questions.append({"id": qid, "subject": subject, "text": text, "reference_answer": reference,
                          "scheme": {"kind": "text", "text": reference}, "max_mark": 5})
        for j in range(n_per_question):
            level = rng.choice(["low", "mid", "high"])  # a spread of abilities, so every mark occurs
            p_full = {"low": 0.15, "mid": 0.45, "high": 0.8}[level]
            sentences, total = [], 0.0
            for _, full, vague, wrong in statements:
                u = rng.random()
                kind = "full" if u < p_full else ("vague" if u < p_full + 0.2 else
                                                  ("wrong" if u < p_full + 0.45 else None))
                if kind is None:  # not mentioned
                    continue
                sentences.append({"full": full, "vague": vague, "wrong": wrong}[kind])
                total += CREDIT[kind]
            if rng.random() < 0.1:  # markers disagree now and then
                total = min(5.0, max(0.0, total + rng.choice([-0.5, 0.5])))
            rng.shuffle(sentences)
            answer = " ".join(sentences + rng.sample(FILLER, 1)) if sentences else rng.choice(FILLER)
            split = "ood_test" if qi == len(QUESTIONS) - 1 else ("train" if j % 5 < 3 else "id_test")
            responses.append({"id": f"{qid}-{j}", "question_id": qid, "answer": answer, "gold": _fmt(total),
                              "split": split})
    return questions, responses


def write(folder: str | Path, n_per_question: int = 105, seed: int = 0) -> tuple[Path, Path]:
    """Write the dataset as OUT/questions.jsonl and OUT/responses.jsonl; returns both paths."""
    return write_records(folder, *build(n_per_question, seed))


if __name__ == "__main__":
    q, r = write(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 105)
    print(f"wrote {q} and {r}")
