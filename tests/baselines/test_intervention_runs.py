"""InT driven by the policy (edit_lib/baselines/intervention_runs.py): the self-audit pick, the first usable
intervention, its revised prefix, the pool; hand-built proposal tables."""
import pandas as pd

from edit_lib.baselines import intervention_runs as int_run
from edit_lib.baselines.intervention_sft import InterventionParse, sft_completion, split_substeps
from edit_lib.config import IntConfig
from edit_lib.revision.pool import outcome_filter

K = dict(dataset="d", rollout_id=0)


def _proposals():
    rows = [  # rollout a: first proposal leaks (names step 2), second usable at step 1
        dict(response_id="a", proposal=0, n_steps=3, status="leak", location=2, first_error=2, intervention="x 2"),
        dict(response_id="a", proposal=1, n_steps=3, status="ok", location=1, first_error=2, intervention="fixed"),
        # rollout b: nothing parses a first error
        dict(response_id="b", proposal=0, n_steps=2, status="no_first_error_block", location=None, first_error=None,
             intervention=None),
        dict(response_id="b", proposal=1, n_steps=2, status="empty_intervention", location=1, first_error=1,
             intervention=None),
    ]
    return pd.DataFrame([dict(K, **r) for r in rows]).astype({"location": "Int64", "first_error": "Int64"})


def test_self_audit_takes_the_first_named_error():
    sel = int_run.self_audit_selection(_proposals())
    assert sel[["response_id", "k", "n_steps", "rule"]].values.tolist() == [["a", 2, 3, "self_audit"]]
    assert sel["u"].tolist() == [2 / 3]


def test_interventions_keep_the_first_usable_proposal_and_build_the_sft_target():
    text = "step 1: s1\nstep 2: s2\nstep 3: s3\nFinal mark: 1/3"
    roll = pd.DataFrame([dict(K, response_id="a", text=text, gold=2), dict(K, response_id="b", text="step 1: t\n"
                                                                                               "step 2: u\nFinal mark: 0/2", gold=1)])
    rev = int_run.interventions(_proposals(), roll, IntConfig())
    a, b = rev.set_index("response_id").loc["a"], rev.set_index("response_id").loc["b"]
    assert a.status == "ok" and a.k == 1 and a.intervention == "fixed"
    assert a.revised_prefix == sft_completion(split_substeps(text), InterventionParse("ok", 1, 2, "fixed")) \
        == "step 1: fixed\n"
    assert b.status == "no_usable_no_first_error_block" and b.revised_prefix == ""
    plain = roll.assign(text=["s1\ns2\ns3\nFinal mark: 1/3", "t\nu\nFinal mark: 0/2"])  # one step per line
    assert int_run.interventions(_proposals(), plain, IntConfig()).set_index("response_id").loc["a"].revised_prefix \
        == "fixed\n"  # the chain's own format, as EDIT's revised prefix
    cont = pd.DataFrame(dict(revision_id=a.revision_id, continuation=[0, 1], mark=[1.0, 2.0]))
    out = outcome_filter(rev, cont, 2)
    pool = int_run.int_pool(out)
    assert pool[["response_id", "source", "completion"]].values.tolist() == [["a", "intervention", "step 1: fixed\n"]]
