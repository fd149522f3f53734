"""Phase-1 compute bookkeeping (App. B, "Compute budget"): what EDIT and InT spend on the same incorrect
rollouts, in tokens the policy processes (a proxy for FLOPs at a fixed model size: forward cost grows with the
tokens in the sequence).

EDIT: the posterior probe (Eq. 1-2; one packed forward pass per rollout over prompt + completion plus one
scaffold block per boundary k = 0..T, App. B), the grounding audit (Eq. 3-4; four context variants of the
rollout, ``signals.grounding``; counted at full length, an upper bound since masks shorten the context), the
rubric checklist, the rewrites and the outcome filter's continuations (generation: prompt + generated tokens).
InT: the proposals and their continuations. The dataset-wide percentiles of Alg. 1 also need the audit of
correct rollouts; that is not counted here (it is shared by every rule and the paper's budget counts the
incorrect rollouts).
"""
from __future__ import annotations

import pandas as pd

from edit_lib.data.schema import Dataset
from edit_lib.model.policy import Policy
from edit_lib.prompts.grading import SCAFFOLD

AUDIT_VARIANTS = 4  # full, rubric-masked, answer-masked, no-prefix (signals.grounding.VARIANTS)
COLUMNS = ["method", "component", "calls", "prompt_tokens", "generated_tokens", "tokens"]


def _forward_rows(policy: Policy, datasets: dict[str, Dataset], rollouts: pd.DataFrame) -> pd.DataFrame:
    index = {(name, r.id): (ds.question(r), r) for name, ds in datasets.items() for r in ds.responses}
    scaffold = len(policy.tokenizer(SCAFFOLD, add_special_tokens=False)["input_ids"])
    rows = []
    for r in rollouts.itertuples():
        q, resp = index[(r.dataset, r.response_id)]
        seq = len(policy.tokenizer(policy.grading_input(q, resp.answer) + r.text)["input_ids"])
        rows.append(dict(seq=seq, blocks=(int(r.n_steps) + 1) * scaffold))
    return pd.DataFrame(rows, columns=["seq", "blocks"])


def _generation(method: str, component: str, table: pd.DataFrame) -> dict:
    p, g = int(table["n_prompt_tokens"].sum()), int(table["n_tokens"].sum())
    calls = int((table["n_prompt_tokens"] > 0).sum())  # a row rejected before generation cost nothing
    return dict(method=method, component=component, calls=calls, prompt_tokens=p, generated_tokens=g, tokens=p + g)


def phase1_cost(policy: Policy, datasets: dict[str, Dataset], rollouts: pd.DataFrame,
                edit_generation: dict[str, pd.DataFrame], int_generation: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The App. B cost table for the incorrect rollouts ``rollouts`` (01's rows: text, n_steps) that both
    methods repair. ``edit_generation`` / ``int_generation`` map a component name (e.g. 'checklist',
    'rewrite', 'continuations'; 'proposals', 'continuations') to its generation table (``n_prompt_tokens``,
    ``n_tokens`` per call). Rows in ``COLUMNS``; a 'total' row per method."""
    fw = _forward_rows(policy, datasets, rollouts)
    rows = [dict(method="EDIT", component="probe (packed, Eq. 1-2)", calls=len(fw), prompt_tokens=0,
                 generated_tokens=0, tokens=int((fw["seq"] + fw["blocks"]).sum())),
            dict(method="EDIT", component="audit (4 variants, Eq. 3-4)", calls=AUDIT_VARIANTS * len(fw),
                 prompt_tokens=0, generated_tokens=0, tokens=int(AUDIT_VARIANTS * fw["seq"].sum()))]
    rows += [_generation("EDIT", name, t) for name, t in edit_generation.items()]
    rows += [_generation("InT", name, t) for name, t in int_generation.items()]
    out = pd.DataFrame(rows, columns=COLUMNS)
    totals = out.groupby("method", sort=False)[COLUMNS[2:]].sum().reset_index().assign(component="total")
    return pd.concat([out, totals[COLUMNS]], ignore_index=True)
