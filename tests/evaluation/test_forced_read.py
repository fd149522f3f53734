"""The forced read (edit_lib/evaluation/predictions.py): argmax of the probe's p_T after a completion's own steps, only
for rows whose parse failed, in its own column and status, checked against separate naive forward passes."""
import numpy as np
import pandas as pd
import pytest

from edit_lib.config import ProbeConfig
from edit_lib.data.synthetic import WorldConfig, generate_world
from edit_lib.evaluation.predictions import FORCED, add_forced_marks, forced_view
from edit_lib.model.policy import Policy, load_policy
from edit_lib.prompts.grading import read_final_mark
from edit_lib.signals import probe_rollouts_naive
from edit_lib.signals.probe import probe_readout, rollout_tokens


@pytest.fixture(scope="module")
def setup():
    ds = generate_world(WorldConfig(shape="sas_like", n_questions=3, answers_per_question=2, ood_questions=0, seed=3))
    model, tok, kind = load_policy("embedded")
    return ds, Policy(model=model, tokenizer=tok, kind=kind)


def _table(ds):
    rs = ds.responses[:3]
    texts = ["step 1 : point 1 covered\nstep 2 : total 1\nFinal mark: 1/2",  # parsed
             "step 1 : point 1 covered\nstep 2 : point 2 missing",               # no final line
             "step 1 : point 1 covered\nFinal mark: 99/2"]                        # out of range
    rows = []
    for r, t in zip(rs, texts):
        q = ds.question(r)
        mp = read_final_mark(t, q.max_mark)
        rows.append(dict(dataset=ds.name, response_id=r.id, rollout_id=0, text=t, gold=r.gold, max_mark=q.max_mark,
                         mark=mp.mark, parse_status=mp.status, correct=mp.mark == r.gold))
    df = pd.DataFrame(rows)
    df["mark"] = df["mark"].astype("Int64")
    return df


def test_forced_marks_only_where_the_parse_failed(setup):
    ds, pol = setup
    df = _table(ds)
    assert df["parse_status"].tolist() == ["ok", "no_mark", "out_of_range"]
    cfg = ProbeConfig()
    out = add_forced_marks(pol, ds, df, cfg, rule="auto", progress=False, batch_size=1)  # one row per packed pass
    assert out["mark_source"].tolist() == ["parsed", FORCED, FORCED]
    assert pd.isna(out["forced_mark"].iloc[0]) and out["forced_mark"].iloc[1:].notna().all()
    assert out["mark"].tolist()[0] == 1 and out["mark"].iloc[1:].isna().all()  # the parser's marks untouched
    assert out["parse_status"].tolist() == df["parse_status"].tolist()
    # independent computation: separate forward passes per mark at the last boundary (Eq. 1)
    for i in (1, 2):
        r = next(x for x in ds.responses if x.id == df["response_id"].iloc[i])
        q = ds.question(r)
        toks = rollout_tokens(pol, pol.grading_input(q, r.answer), df["text"].iloc[i], "auto")
        ro = probe_readout(pol, cfg.scaffold, cfg.terminator, q.max_mark, cfg.read)
        naive = probe_rollouts_naive(pol.model, [toks.prompt_ids], [toks.steps_ids], ro.scaffold, ro.marks,
                                     temperature=1.0)[0]
        assert out["forced_mark"].iloc[i] == int(np.argmax(naive.probs[-1]))
        assert 0 <= out["forced_mark"].iloc[i] <= q.max_mark


def test_forced_view_keeps_the_status_apart(setup):
    ds, pol = setup
    out = add_forced_marks(pol, ds, _table(ds), ProbeConfig(), progress=False)
    view = forced_view(out)
    assert view["parse_status"].tolist() == ["ok", FORCED, FORCED]
    assert view["mark"].notna().all() and view["mark"].iloc[1] == out["forced_mark"].iloc[1]
    assert view["correct"].tolist() == (view["mark"] == view["gold"]).tolist()
    assert out["mark"].iloc[1:].isna().all()  # the input is not modified
    with pytest.raises(KeyError, match="forced_read"):
        forced_view(_table(ds))


def test_metrics_both_reads_counts_the_forced_rows(setup):
    from edit_lib.evaluation.predictions import metrics_both_reads
    ds, pol = setup
    df = add_forced_marks(pol, ds, _table(ds), ProbeConfig(), progress=False)
    df["question_id"] = [next(x for x in ds.responses if x.id == i).question_id for i in df["response_id"]]
    df["split"] = "train"
    m = metrics_both_reads(df, "Base")
    assert m["read"].tolist() == ["parsed", "parsed+forced"]
    assert m["n_forced"].tolist() == [0, 2] and m["n_invalid"].tolist() == [2, 0]
    only = metrics_both_reads(_table(ds).assign(question_id=df["question_id"], split="train"), "Base")
    assert only["read"].tolist() == ["parsed"]
