"""A small bring-your-own dataset with half marks, written by the project (never real student data): four
questions with points-total schemes worth 0.5 and 1 mark, answers built from each point's correct or wrong
sentence plus filler, gold = the scheme's sum of covered points (halves included, so ``mark_scale: 2`` is needed).

``python tests/half_mark_data.py OUT [N]`` writes OUT/questions.jsonl and OUT/responses.jsonl with N answers per
question (default 150, about 600 in all); the "Your own data" numbers of book/records/real_model-cpu-real.md come from that file, and
``tests/data/test_key_elements.py`` checks that it loads with ``mark_scale: 2`` and not without.
"""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

# (id, subject, question, [(point text, value, a sentence that states it, a sentence that gets it wrong)])
QUESTIONS = [
    ("heart", "Biology", "Describe how blood moves through the heart.", [
        ("blood enters the right atrium from the body", 0.5, "Blood from the body comes into the right atrium.",
         "Blood from the body goes straight into the left ventricle."),
        ("the right ventricle pumps blood to the lungs", 1, "The right ventricle pumps the blood to the lungs.",
         "The right ventricle pumps blood to the brain."),
        ("oxygenated blood returns to the left atrium", 0.5, "Oxygen-rich blood returns to the left atrium.",
         "Blood from the lungs returns to the right atrium."),
        ("the left ventricle pumps blood to the body", 1, "The left ventricle pumps blood out to the whole body.",
         "The left ventricle pumps blood back into the lungs.")]),
    ("enzyme", "Biology", "Explain how temperature affects an enzyme.", [
        ("rate rises with temperature up to an optimum", 1, "The rate goes up as it gets warmer until the optimum.",
         "The rate always falls as it gets warmer."),
        ("above the optimum the active site changes shape", 1, "Too hot and the active site changes shape.",
         "Too hot and the enzyme grows a bigger active site."),
        ("the enzyme is denatured", 0.5, "Then the enzyme is denatured.", "Then the enzyme is killed and dies."),
        ("the substrate no longer fits", 0.5, "The substrate can no longer fit.", "The substrate fits even better.")]),
    ("circuit", "Physics", "Explain what happens to the current when a second bulb is added in series.", [
        ("total resistance increases", 1, "The total resistance goes up.", "The resistance goes down."),
        ("current decreases", 1, "So the current gets smaller.", "So the current gets bigger."),
        ("each bulb is dimmer", 0.5, "Each bulb is dimmer than before.", "Each bulb is brighter than before."),
        ("the current is the same everywhere in the series circuit", 0.5,
         "The current is the same at every point of the loop.", "Most of the current goes through the first bulb.")]),
    ("erosion", "Geography", "Describe two ways a river erodes its bed and banks.", [
        ("hydraulic action", 1, "Hydraulic action forces water into cracks.", "Hydraulic action is when rocks melt."),
        ("abrasion", 1, "Abrasion is when stones carried by the river scrape the bed.",
         "Abrasion is when the river freezes."),
        ("attrition", 0.5, "Attrition knocks stones together so they get smaller.",
         "Attrition makes the stones bigger."),
        ("solution", 0.5, "Solution dissolves rocks such as limestone.", "Solution means the river stops flowing.")]),
]
FILLER = ["I think this is right.", "We learned this in class.", "This is what happens.", "That is my answer."]


def _fmt(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x


def build(n_per_question: int = 150, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """(questions, responses) records in the suite's JSONL format; splits about 60/20/20 train/id_test/ood_test
    with the last question held out as OOD."""
    rng = random.Random(seed)
    questions, responses = [], []
    for qi, (qid, subject, text, points) in enumerate(QUESTIONS):
        questions.append({"id": qid, "subject": subject, "text": text,
                          "reference_answer": " ".join(p[2] for p in points),
                          "scheme": {"kind": "pts", "points": [{"id": f"p{i}", "text": p[0], "value": _fmt(p[1])}
                                                               for i, p in enumerate(points, start=1)]},
                          "max_mark": _fmt(sum(p[1] for p in points))})
        for j in range(n_per_question):
            k = rng.randint(0, len(points))  # how many points this answer covers
            covered = set(rng.sample(range(len(points)), k))
            sentences = [p[2] if i in covered else p[3] for i, p in enumerate(points) if i in covered or rng.random() < 0.4]
            rng.shuffle(sentences)
            answer = " ".join(sentences + rng.sample(FILLER, 1)) if sentences else rng.choice(FILLER)
            split = "ood_test" if qi == len(QUESTIONS) - 1 else ("train" if j % 5 < 3 else "id_test")
            responses.append({"id": f"{qid}-{j}", "question_id": qid, "answer": answer,
                              "gold": _fmt(sum(points[i][1] for i in covered)), "split": split})
    return questions, responses


def write(folder: str | Path, n_per_question: int = 150, seed: int = 0) -> tuple[Path, Path]:
    """Write the dataset as OUT/questions.jsonl and OUT/responses.jsonl; returns both paths."""
    return write_records(folder, *build(n_per_question, seed))


def write_records(folder: str | Path, questions: list[dict], responses: list[dict]) -> tuple[Path, Path]:
    """Write question and response records as OUT/questions.jsonl and OUT/responses.jsonl; returns both paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = folder / "questions.jsonl", folder / "responses.jsonl"
    for path, rows in zip(paths, (questions, responses)):
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return paths


if __name__ == "__main__":
    q, r = write(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 150)
    print(f"wrote {q} and {r}")
