"""Phase-1 cost bookkeeping (edit_lib/revision/pool.py, App. B): token counts recomputed by hand."""
import pandas as pd

from edit_lib.data.synthetic import WorldConfig, generate_world
from edit_lib.model.policy import Policy
from edit_lib.prompts.grading import SCAFFOLD
from edit_lib.revision.pool import AUDIT_VARIANTS, phase1_cost


class WordTok:
    """Whitespace tokenizer: one token per word, so counts can be checked by hand."""

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": list(range(len(text.split())))}


def test_cost_rows_and_totals():
    ds = generate_world(WorldConfig(shape="sas_like", n_questions=1, answers_per_question=1, ood_questions=0, seed=1))
    pol = Policy(model=None, tokenizer=WordTok(), kind="tiny")
    r = ds.responses[0]
    roll = pd.DataFrame([dict(dataset=ds.name, response_id=r.id, rollout_id=0, text="a b c", n_steps=2)])
    gen = pd.DataFrame(dict(n_prompt_tokens=[10, 20], n_tokens=[3, 4]))
    t = phase1_cost(pol, {ds.name: ds}, roll, {"rewrite": gen}, {"proposals": gen.iloc[:1]}).set_index(
        ["method", "component"])
    seq = len((pol.grading_input(ds.question(r), r.answer) + "a b c").split())
    assert t.loc[("EDIT", "probe (packed, Eq. 1-2)"), "tokens"] == seq + 3 * len(SCAFFOLD.split())
    assert t.loc[("EDIT", "audit (4 variants, Eq. 3-4)"), "tokens"] == AUDIT_VARIANTS * seq
    assert t.loc[("EDIT", "rewrite"), "tokens"] == 37 and t.loc[("InT", "proposals"), "tokens"] == 13
    assert t.loc[("EDIT", "total"), "tokens"] == seq + 3 * len(SCAFFOLD.split()) + AUDIT_VARIANTS * seq + 37
    assert t.loc[("InT", "total"), "calls"] == 1
