"""EDIT-RL against its runner-up at the response level on OOD splits (significance.versus_runner_up, read by
the claims ledger's `ood-best` where App. G's question-level bootstrap has too few questions): the runner-up
taken from 09's `pairwise`, OOD answers only, the difference checked against scikit-learn's QWK per question."""
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from edit_lib.evaluation.significance import versus_runner_up
from edit_lib.power import normal_mde


def _preds():
    """Dataset 'bio': ID questions a-c, OOD questions x, y; EDIT-RL right 80% of the time, GRPO 50%, Base random."""
    rng = np.random.default_rng(2)
    rows = []
    for split, qids in (("id_test", "abc"), ("ood_test", "xy")):
        for q in qids:
            for i in range(60):
                g = int(rng.integers(0, 5))
                for s, p in (("base", 0.0), ("base_grpo", 0.5), ("edit_sft_edit_rl", 0.8)):
                    m = g if rng.random() < p else int(rng.integers(0, 5))
                    rows.append(dict(system=s, seed=np.nan, dataset="bio", split=split, question_id=q,
                                     response_id=f"{q}{i}", gold=g, max_mark=4, mark=m))
    df = pd.DataFrame(rows)
    df["mark"] = df["mark"].astype("Int64")
    return df


def _pairwise():
    row = dict(dataset="bio", system="edit_sft_edit_rl", versus="base_grpo", kind="runner-up")
    return pd.DataFrame([row | dict(scope=s) for s in ("ood_test", "id_test", "all held-out")]
                        + [row | dict(scope="ood_test", kind="pair", versus="base")])


def _macro(df, system):
    g = df[(df["system"] == system) & (df["split"] == "ood_test")]
    return np.mean([cohen_kappa_score(x["gold"], x["mark"].astype(int), weights="quadratic", labels=range(5))
                    for _, x in g.groupby("question_id")])


def test_edit_rl_minus_runner_up_on_ood_answers_only():
    df = _preds()
    t = versus_runner_up(df, _pairwise(), n_boot=300, seed=1)
    assert len(t) == 1  # the OOD runner-up row only: not ID, not all held-out, not a plain pair
    r = t.iloc[0]
    assert (r["dataset"], r["split"], r["system"], r["versus"]) == ("bio", "ood_test", "edit_sft_edit_rl", "base_grpo")
    assert r["n_questions"] == 2 and r["n_responses"] == 120
    want = _macro(df, "edit_sft_edit_rl") - _macro(df, "base_grpo")
    assert r["delta"] == pytest.approx(want) and r["versus_qwk"] == pytest.approx(_macro(df, "base_grpo"))
    assert 0 < r["delta_lo"] < r["delta"] < r["delta_hi"]
    assert r["mde"] == pytest.approx(normal_mde(r["delta_se"]))
    flipped = df.assign(system=df["system"].replace({"edit_sft_edit_rl": "base_grpo", "base_grpo": "edit_sft_edit_rl"}))
    assert versus_runner_up(flipped, _pairwise(), n_boot=300, seed=1).iloc[0]["delta_hi"] < 0


def test_only_below_min_questions_and_nothing_without_pairwise():
    df = _preds()
    assert versus_runner_up(df, _pairwise(), n_boot=50, below_questions=2).empty  # 2 OOD questions: not below 2
    assert len(versus_runner_up(df, _pairwise(), n_boot=50, below_questions=10)) == 1
    assert versus_runner_up(df, pd.DataFrame(), n_boot=50).empty
