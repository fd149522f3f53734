"""Probe and audit inputs cut from real rollouts of the shipped grader; packed == naive on the embedded model."""
import random

import numpy as np
import pytest
import torch

from edit_lib.config import AuditConfig, ProbeConfig
from edit_lib.data.synthetic import WorldConfig, generate_world
from edit_lib.policy import load_policy
from edit_lib.policy import Policy
from edit_lib.prompts import split_steps
from edit_lib.signals.grounding import audit_rollouts, audit_rollouts_naive
from edit_lib.signals.inputs import audit_contexts, probe_scaffold, rollout_tokens, segment_ids
from edit_lib.signals.probe import probe_rollouts, probe_rollouts_naive
from edit_lib.embedded.teacher import teacher_grade

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def setup():
    model, tok, kind = load_policy("embedded")
    pol = Policy(model, tok, kind, "embedded")
    ds = generate_world(WorldConfig(shape="sas_like", n_questions=4, answers_per_question=2, ood_questions=0,
                                    seed=3, subjects=("history",)))
    rng = random.Random(0)
    items = []
    for r in ds.responses[:4]:
        q = ds.question(r)
        items.append((q, r, teacher_grade(q, r, rng).completion))
    return pol, ds, items


def test_segments_partition_the_tokenisation(setup):
    pol, _, items = setup
    for q, r, completion in items:
        inp = pol.grading_input(q, r.answer)
        toks = rollout_tokens(pol, inp, completion)
        steps = split_steps(completion)
        assert len(toks.steps_ids) == len(steps) > 0
        joined = toks.prompt_ids + [t for s in toks.steps_ids for t in s]
        cut = completion[: completion.index("Final mark")]
        assert joined == pol.tokenizer(inp + cut, add_special_tokens=True)["input_ids"]
        for ids, text in zip(toks.steps_ids, steps):
            assert text.split(":")[-1].strip().split()[-1] in pol.tokenizer.decode(ids)


def test_segment_ids_assigns_tokens_by_start_offset(setup):
    pol, _, _ = setup
    segs = segment_ids(pol.tokenizer, "point 1 ; credit 1\nstep 2 : total 3", [19])
    assert pol.tokenizer.decode(segs[0]).startswith("point") and pol.tokenizer.decode(segs[1]).startswith("step")


def test_probe_packed_equals_naive_on_embedded_grader(setup):
    pol, _, items = setup
    cfg = ProbeConfig()
    prompts, steps, scs, mks, golds = [], [], [], [], []
    for q, r, completion in items:
        toks = rollout_tokens(pol, pol.grading_input(q, r.answer), completion)
        sc, mk = probe_scaffold(pol, cfg.scaffold, cfg.terminator, q.max_mark)
        prompts.append(toks.prompt_ids), steps.append(toks.steps_ids), scs.append(sc), mks.append(mk)
        golds.append(r.gold)
    packed = probe_rollouts(pol.model, prompts, steps, scs, mks, gold=golds, temperature=0.7, batch_size=4)
    naive = probe_rollouts_naive(pol.model, prompts, steps, scs, mks, gold=golds, temperature=0.7)
    for a, b in zip(packed, naive):
        assert np.abs(a.probs - b.probs).max() < 1e-4
    assert max(q.max_mark for q, _, _ in items) >= 10  # two-digit marks are in play


def test_audit_packed_equals_naive_on_embedded_grader(setup):
    pol, _, items = setup
    args = [[], [], [], []]
    for q, r, completion in items[:2]:
        full, rho, ans = audit_contexts(pol, q, r.answer)
        toks = rollout_tokens(pol, pol.grading_input(q, r.answer), completion)
        assert toks.prompt_ids == full
        for acc, x in zip(args, (full, rho, ans, toks.steps_ids)):
            acc.append(x)
    packed = audit_rollouts(pol.model, *args, batch_size=2)
    naive = audit_rollouts_naive(pol.model, *args)
    for a, b in zip(packed, naive):
        for v in a.nll:
            assert np.abs(a.nll[v] - b.nll[v]).max() < 1e-4  # summed NLL of a step, fp32
        assert a.G_a.shape == a.G_rho.shape == a.G_p.shape
    assert AuditConfig().nll_reduction == "sum"


def test_select_rollouts_balances_and_is_seeded():
    import pandas as pd

    from edit_lib.signals.tables import select_rollouts

    df = pd.DataFrame(dict(dataset="d", response_id=[f"r{i}" for i in range(50)], rollout_id=0,
                           n_steps=[0 if i % 10 == 0 else 4 for i in range(50)],
                           correct=[i < 8 for i in range(50)]))
    s = select_rollouts(df, 20, seed=1)
    assert len(s) == 20 and (s.n_steps > 0).all()
    assert s.correct.sum() == 7  # only 7 correct rollouts have steps: the rest are incorrect
    assert s.equals(select_rollouts(df, 20, seed=1)) and not s.equals(select_rollouts(df, 20, seed=2))
    assert len(select_rollouts(df, 0)) == 45
