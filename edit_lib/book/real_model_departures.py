"""The departures from the paper that the real-model chapter lists first (``real_model.real_model_page``): the
warm-up as Base and its roles (``model.warmup``), a separate reviser, ASAP's key elements, the forced read. Each
names the profile value and the section of book/departures.md that explains it."""
from __future__ import annotations

from edit_lib.config import REVISER_ROLES


def departures(profile) -> list[str]:
    """The profile's departures from the paper, one markdown paragraph each (App. B: the paper's Base, Qwen3-8B,
    grades and plays every Phase-1 role zero-shot; Sec. 2.2)."""
    w, fr = profile.model.warmup, profile.eval.forced_read
    dep = []
    if w.steps > 0:
        how = ("a templated judgement" if w.judgement == "template" else "a judgement naming the rubric points "
               f"the lexical matcher finds ({w.judgement}) where they reach the gold mark, else a templated one")
        layers = f", last {w.lora_layers} layers" if w.lora_layers else ""
        dep.append(f"**Warm-up as Base** (`model.warmup`): {w.steps} LoRA steps of {w.batch_size} answers of one "
                   f"question, their shared prompt prefix laid out once (lr {w.learning_rate:g}, r {w.lora_r}"
                   f"{layers}) on grading prompts of the training answers "
                   f"({'mark-balanced' if w.balanced else 'a seeded sample'}, never the test answers) with {how}, "
                   "ending in the gold mark, merged into the weights. The paper's Base grades zero-shot (App. B).")
        extra = [r for r in w.roles if r != "grading"]
        if extra:
            dep.append(f"**Phase-1 roles in the warm-up** (`model.warmup.roles`): {', '.join(extra)}, "
                       f"{w.role_responses_per_question} training answers per question each, in batches of "
                       f"{w.role_batch_size}, written from answers whose matched rubric points reach the gold mark "
                       "(the matcher's content, never the model's; book/departures.md, \"The warm-up's roles\"). "
                       "The paper's Base writes every role zero-shot (App. B, J)." + (
                           f" **A separate reviser** (`role_model: separate`) learns {', '.join(REVISER_ROLES)} in a "
                           f"second warm-up of the same weights ({w.role_steps} steps) and writes them in 04-05; the "
                           "Base grades and continues (the paper's policy plays every role, Sec. 2.2)."
                           if w.role_model == "separate" else ""))
    if any(d.source == "asap" and d.options.get("key_elements") for d in profile.data.datasets):
        dep.append("**Key elements as a count-to-band scheme** (ASAP's `key_elements`): sets whose scoring guide "
                   "lists key elements are scored by their count in the guide's own words, so the checklist has "
                   "points to list; gold stays the human score (book/departures.md, section \"ASAP key elements "
                   "(edit_lib/data/key_elements.py)\").")
    if fr:
        dep.append("**Forced read** (`eval.forced_read`): a completion without a parsable final line also gets "
                   "argmax p_T (Eq. 1 at its last boundary), reported as `parsed+forced` beside the paper's "
                   "parse-only reading, never in its place.")
    return dep
