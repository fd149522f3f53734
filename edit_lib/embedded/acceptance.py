"""Acceptance check of a built embedded grader: is it the imperfect grader the demo needs (it grades, quotes,
and makes the paper's wording-mismatch error)? Never tuned on any EDIT result."""
from __future__ import annotations

import math

import numpy as np

from edit_lib.data.synthetic import WorldConfig, generate_world
from edit_lib.prompts.grading import render_grading_prompt, tiny_text
from edit_lib.embedded.recipe import AcceptanceConfig

def finite(x):
    """JSON-safe copy: NaN/inf -> None, numpy scalars -> Python numbers."""
    if isinstance(x, dict):
        return {str(k): finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite(v) for v in x]
    if isinstance(x, (np.floating, float)):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def acceptance_metrics(model, tokenizer, acc: AcceptanceConfig) -> dict:
    """Greedy macro-QWK on unseen questions, share of wrong sampled rollouts on train responses, and the
    behaviour targets (absent credit, verbatim quotes, wording-mismatch gap) of `edit_lib.embedded.behaviour`."""
    from edit_lib.embedded.behaviour import analyse_behaviour
    from edit_lib.model.generate import SamplingConfig, generate
    from edit_lib.metrics import grading_metrics
    from edit_lib.prompts.grading import read_final_mark

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
    """The demo grader's targets (imperfect, makes the paper's errors, yet grades and quotes)."""
    g, s = acc["ood_greedy"], acc["train_sampled"]
    b = s["behaviour"]
    gap = b["wording_gap"]
    return {"ood_qwk_in_[0.3,0.9]": bool(0.3 <= (g["qwk"] or 0) <= 0.9),
            "sampled_incorrect_in_[0.15,0.85]": bool(0.15 <= s["share_incorrect"] <= 0.85),
            "responses_with_mixed_rollouts": bool(s["share_responses_mixed"] > 0),
            "absent_credit_<=0.2": bool((b["credit_absent"] if b["credit_absent"] is not None else 1) <= 0.2),
            "quotes_verbatim_>=0.8": bool((b["quote_verbatim"] or 0) >= 0.8),
            "marked_gap_>=0.3": bool(gap is not None and math.isfinite(gap) and gap >= 0.3)}


