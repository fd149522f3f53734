"""Policy-driven Phase-1 steps (edit_lib/revision/generation.py; Sec. 2.2, App. F, App. J / Figure 6).

The status logic is tested with scripted policy text (``generate`` replaced by a stub), so every rejection
reason is pinned to a hand-written rewrite; one end-to-end pass on the micro grader checks the batched calls."""
import math

import numpy as np
import pandas as pd
import pytest
import torch

from edit_lib.config import Decoding, ModelConfig, RevisionConfig, RolloutConfig
from edit_lib.data.synthetic import WorldConfig, generate_world
from edit_lib.embedded.annotate import synthetic_annotator
from edit_lib.embedded.teacher import teacher_checklist
from edit_lib.model.generate import SamplingConfig
from edit_lib.model.policy import Policy, load_policy
from edit_lib.prompts.grading import read_final_mark
from edit_lib.random_streams import CHECKLISTS, CONTINUATIONS, REWRITES, stream_seed
from edit_lib.revision import generation as G
from edit_lib.revision.checklist import FAILURE_REASONS
from edit_lib.revision.pool import UNPARSED, outcome_filter, success_at_n
from edit_lib.model.rollouts import grade_responses

torch.set_num_threads(1)
ROLLOUT = ["dataset", "response_id", "rollout_id"]
FAKE = Policy(model=None, tokenizer=None, kind="tiny", name="scripted")  # plain-text input, stubbed generate


@pytest.fixture(scope="module")
def world():
    ds = generate_world(WorldConfig(shape="sas_like", n_questions=2, answers_per_question=3, ood_questions=0, seed=5))
    return {ds.name: ds}


def _stub(texts):
    """A stand-in for generate.policy_generate returning scripted texts, one per prompt (n copies)."""
    calls = []

    def fake(policy, prompts, cfg, ids=None, progress=True, parse=None):
        calls.append((list(prompts), cfg))
        ids = list(range(len(prompts))) if ids is None else list(ids)
        out = [dict(prompt_index=i, response_id=ids[i], rollout_id=r, text=texts.pop(0) if texts else "",
                    n_tokens=1, n_prompt_tokens=2, finished=True) for i in range(len(prompts)) for r in range(cfg.n)]
        return pd.DataFrame(out, columns=["prompt_index", "response_id", "rollout_id", "text", "n_tokens",
                                          "n_prompt_tokens", "finished"])
    return fake, calls


def test_step_table_joins_probe_and_audit_of_incorrect_rollouts_only():
    rollouts = pd.DataFrame(dict(dataset="d", response_id=["a", "b", "c"], rollout_id=0, correct=[False, True, False]))
    beliefs = pd.DataFrame(dict(dataset="d", response_id=["a"] * 3 + ["b"] * 2, rollout_id=0, k=[0, 1, 2, 0, 1],
                                delta_eps=[np.nan, -0.5, 0.2, np.nan, 0.1]))
    audit = pd.DataFrame(dict(dataset="d", response_id=["a", "a", "b", "c"], rollout_id=0, k=[1, 2, 1, 1],
                              n_steps=[2, 2, 1, 1], u=[0.5, 1.0, 1.0, 1.0], G_rho=[1.0, 2, 3, 4], G_a=[0.1, 0.2, 0, 0],
                              G_p_tilde=[-1.0, 1, 0, 0]))
    t = G.step_table(rollouts, beliefs, audit)
    # b is correct, c was never probed: only a's two steps, delta_eps of boundary k beside audit step k
    assert t[["response_id", "k", "delta_eps", "G_rho"]].values.tolist() == [["a", 1, -0.5, 1.0], ["a", 2, 0.2, 2.0]]
    with pytest.raises(ValueError, match="d/a/0 step 2: only in the audit"):
        G.step_table(rollouts, beliefs[beliefs.k < 2], audit)


def test_revision_sampling_takes_each_roles_decoding_and_a_seed_stream_per_role():
    s = RevisionConfig()
    assert (s.n_continuations, s.continuation_decoding.temperature) == (4, 1.0)  # App. F: N = 4, T = 1.0
    assert s.checklist_decoding.greedy and s.rewrite_decoding.greedy and not s.continuation_decoding.greedy
    assert s.checklist_failure == "keep"
    def sampling(dec, n=1, stream=CHECKLISTS, budget=0):
        return G.revision_sampling(dec, s, 7, stream, n, budget)
    assert sampling(s.rewrite_decoding).greedy and not sampling(s.continuation_decoding, 4).greedy
    assert sampling(s.continuation_decoding, 4).n == 4 and sampling(s.continuation_decoding).batch_size == s.batch_size
    seeds = {name: sampling(s.continuation_decoding, stream=name).seed for name in (CHECKLISTS, REWRITES, CONTINUATIONS)}
    assert len(set(seeds.values())) == 3  # each role its own named stream of the run's seed
    assert seeds == {name: stream_seed(7, name) for name in seeds}
    assert sampling(s.rewrite_decoding).max_new_tokens == s.rewrite_decoding.max_new_tokens == 256
    assert sampling(s.checklist_decoding, budget=700).max_new_tokens == 700  # a resolved budget wins


def test_each_phase1_role_samples_under_its_own_stream(monkeypatch):
    """Checklists, rewrites and continuations each hand the generator their named stream of the run's seed."""
    seen = []

    def record(policy, prompts, cfg, **kw):
        seen.append(cfg.seed)
        raise StopIteration  # nothing to generate: the call's sampling settings are all this test reads

    monkeypatch.setattr(G, "policy_generate", record)
    s = RevisionConfig().resolved(RolloutConfig())
    empty = pd.DataFrame(columns=["dataset", "response_id", "rollout_id", "k", "status", "unit_id", "revised_prefix"])
    for call in (lambda: G.write_checklists(FAKE, {}, empty, s, seed=7),
                 lambda: G.write_rewrites(FAKE, {}, empty, empty, empty, empty, 0.05, s, seed=7),
                 lambda: G.continue_revisions(FAKE, {}, empty, s, seed=7)):
        with pytest.raises(StopIteration):
            call()
    assert seen == [stream_seed(7, CHECKLISTS), stream_seed(7, REWRITES), stream_seed(7, CONTINUATIONS)]


def _one_rollout(world):
    """A hand-written incorrect rollout of the first response: two grounding steps and a total."""
    ds = next(iter(world.values()))
    r = ds.responses[0]
    q = ds.question(r)
    text = ("step 1: point 1 x ; answer y ; contradicts ; credit 0\nstep 2: point 2 x ; answer y ; matches ; "
            "credit 1\nstep 3: total 0 + 1 = 1\nFinal mark: 1/%d" % q.max_mark)
    roll = pd.DataFrame([dict(dataset=ds.name, response_id=r.id, rollout_id=0, text=text, correct=False,
                              steps=["point 1 x ; answer y ; contradicts ; credit 0",
                                     "point 2 x ; answer y ; matches ; credit 1", "total 0 + 1 = 1"])])
    return ds, r, q, roll


def test_rewrite_statuses_and_revised_prefix(world, monkeypatch):
    ds, r, q, roll = _one_rollout(world)
    ok_cl = pd.DataFrame([dict(dataset=ds.name, response_id=r.id, text=teacher_checklist(q, r), status="ok",
                               detail="", n_covered=0)])
    pct = pd.DataFrame([dict(dataset=ds.name, G_rho=0.0, G_a=0.0, G_p_tilde=0.0)])
    units = pd.DataFrame([dict(dataset=ds.name, response_id=r.id, rollout_id=0, k=k, delta_eps=-0.5, G_rho=-1.0,
                               G_a=1.0, G_p_tilde=-1.0) for k in (1, 2, 3)] * 2)  # duplicates: one rewrite each
    texts = ['<rewrite location="1" span="1">\nstep 1: point 1 x ; answer y ; matches ; credit 1\n</rewrite>',
             'no block at all',
             '<rewrite location="3" span="1">\nstep 1: total 1 + 1 = 2 ; covered\n</rewrite>']
    fake, calls = _stub(texts)
    monkeypatch.setattr(G, "policy_generate", fake)
    out = G.write_rewrites(FAKE, world, units, roll, ok_cl, pct, 0.05, RevisionConfig(), seed=0,
                           role_of=synthetic_annotator, step_rule="auto", progress=False)
    assert len(out) == 3 and len(calls[0][0]) == 3  # one rewrite per distinct (rollout, k)
    assert out["status"].tolist()[:2] == ["ok", "rewrite_parse"]
    assert "verdict_label" in out["reasons"].iloc[2] and out["status"].iloc[2] == "verdict_label"
    assert out["revised_prefix"].iloc[0] == "step 1: point 1 x ; answer y ; matches ; credit 1\n"
    # hints came from the step's measurements: G_a = 1.0 is not below its p25 = 0, so it is not promoted
    prompt = calls[0][0][0]
    assert "moves away at this substep by 0.50" in prompt and "first to check" not in prompt
    # a failed checklist under 'block' rejects the rewrite without calling the policy
    bad_cl = ok_cl.assign(status="missing_points", detail="point(s) [2]", text="CHECKLIST AS WRITTEN",
                          verified_text="ONLY VERIFIED LINES")
    fake2, calls2 = _stub([])
    monkeypatch.setattr(G, "policy_generate", fake2)
    out2 = G.write_rewrites(FAKE, world, units, roll, bad_cl, pct, 0.05, RevisionConfig(checklist_failure="block"), seed=0,
                            progress=False)
    assert set(out2["status"]) == {"checklist_missing_points"} and calls2[0][0] == []
    # 'keep' (the default: Sec. 2.2 uses the checklist as context) and 'drop_lines' rewrite with the checklist text
    for policy, shown, hidden in (("keep", "CHECKLIST AS WRITTEN", "ONLY VERIFIED"),
                                  ("drop_lines", "ONLY VERIFIED LINES", "AS WRITTEN")):
        fake3, calls3 = _stub([])
        monkeypatch.setattr(G, "policy_generate", fake3)
        out3 = G.write_rewrites(FAKE, world, units, roll, bad_cl, pct, 0.05,
                                RevisionConfig(checklist_failure=policy), seed=0, progress=False, tag=f"/{policy}")
        assert len(calls3[0][0]) == 3 and all(shown in p and hidden not in p for p in calls3[0][0])
        assert set(out3["status"]) == {"rewrite_parse"} and out3["unit_id"].str.endswith(f"/{policy}").all()


def test_wrong_location_and_role_change_are_locality_rejections(world, monkeypatch):
    ds, r, q, roll = _one_rollout(world)
    cl = pd.DataFrame([dict(dataset=ds.name, response_id=r.id, text="x", status="ok", detail="", n_covered=0)])
    pct = pd.DataFrame([dict(dataset=ds.name, G_rho=0.0, G_a=0.0, G_p_tilde=0.0)])
    units = pd.DataFrame([dict(dataset=ds.name, response_id=r.id, rollout_id=0, k=k, delta_eps=-0.5, G_rho=1.0,
                               G_a=1.0, G_p_tilde=1.0) for k in (2, 1)])
    fake, _ = _stub(['<rewrite location="2" span="1">\nstep 1: point 1 x ; answer y ; matches ; credit 1\n</rewrite>',
                     '<rewrite location="2" span="1">\nstep 1: total 1 + 1 = 2\n</rewrite>'])
    monkeypatch.setattr(G, "policy_generate", fake)
    out = G.write_rewrites(FAKE, world, units, roll, cl, pct, 0.05, RevisionConfig(), seed=0, role_of=synthetic_annotator,
                           progress=False).set_index("k")
    assert out.loc[1, "status"] == "location_mismatch" and out.loc[2, "status"] == "role_changed"
    assert out.loc[1, "revised_prefix"] == ""


def test_per_rule_shares_units_and_feeds_the_outcome_filter():
    rew = pd.DataFrame([dict(unit_id=f"d/a/0/k{k}", dataset="d", response_id="a", rollout_id=0, k=k, gold=2,
                             status=s, reasons=[] if s == "ok" else [s], target="t", sub_steps=["s"],
                             revised_prefix="p") for k, s in ((1, "ok"), (2, "rewrite_parse"))])
    cont = pd.DataFrame(dict(unit_id="d/a/0/k1", continuation=[0, 1], text=["x", "y"], mark=[1.0, 2.0],
                             parse_status="ok"))
    sel = pd.DataFrame(dict(dataset="d", response_id="a", rollout_id=0, k=[1, 1, 2], rule=["edit", "random",
                                                                                           "random"]))
    rev, c = G.per_rule(sel, rew, cont)
    assert rev["revision_id"].tolist() == ["edit:d/a/0/k1", "random:d/a/0/k1", "random:d/a/0/k2"]
    assert len(c) == 4  # the k1 unit's two continuations, once per rule that picked it
    s = success_at_n(outcome_filter(rev, c, 2)).set_index("rule")
    assert s.loc["edit", "success_at_n"] == 1.0 and s.loc["random", "success_at_n"] == 0.5
    with pytest.raises(KeyError, match="no rewrite for d/a/0 step 3"):
        G.per_rule(sel.assign(k=3), rew, cont)


def test_micro_grader_end_to_end(world):
    model, tok, kind = load_policy("micro", ModelConfig(name_or_path="micro", torch_threads=1, local_files_only=True))
    pol = Policy(model=model, tokenizer=tok, kind=kind, name="micro")
    ds = next(iter(world.values()))
    roll = grade_responses(pol, ds, ds.responses[:3], SamplingConfig(n=2, max_new_tokens=120, seed=0), progress=False)
    roll = roll[roll.n_steps > 0]
    settings = RevisionConfig(n_continuations=2, rewrite_decoding=Decoding(greedy=True, max_new_tokens=120), batch_size=8,
                              continuation_decoding=Decoding(max_new_tokens=256))
    cl = G.write_checklists(pol, world, roll, settings, seed=0, progress=False)
    assert len(cl) == roll.response_id.nunique()
    assert set(cl["status"]) <= {"ok", "no_points", *FAILURE_REASONS}
    assert G.write_checklists(pol, world, roll, settings, seed=0, progress=False)["text"].tolist() == cl["text"].tolist()
    units = roll[ROLLOUT].assign(k=roll["n_steps"], delta_eps=-1.0, G_rho=0.0, G_a=0.0, G_p_tilde=0.0)
    pct = pd.DataFrame([dict(dataset=ds.name, G_rho=1.0, G_a=1.0, G_p_tilde=1.0)])
    rew = G.write_rewrites(pol, world, units, roll, cl, pct, 0.05, settings, seed=0, role_of=synthetic_annotator,
                           progress=False)
    assert len(rew) == len(roll) and rew["status"].notna().all()
    cut = G.write_rewrites(pol, world, units, roll, cl, pct, 0.05,
                           RevisionConfig(rewrite_decoding=Decoding(greedy=True, max_new_tokens=4)), seed=0, role_of=synthetic_annotator, progress=False)  # no block fits in 4 tokens
    assert (cut["n_tokens"] <= 4).all() and (cut["n_tokens"] == 4).any()
    assert set(cut.loc[cut["n_tokens"] == 4, "status"]) == {"rewrite_truncated"}
    if not (rew["status"] == "ok").any():  # force one accepted prefix so the continuation path runs
        rew.loc[rew.index[0], ["status", "revised_prefix"]] = ["ok", "step 1: " + roll["steps"].iloc[0][0] + "\n"]
    cont = G.continue_revisions(pol, world, rew, settings, seed=0, progress=False)
    n_ok = int((rew["status"] == "ok").sum())
    assert len(cont) == 2 * n_ok and sorted(set(cont["continuation"])) == [0, 1]
    max_of = dict(zip(rew["unit_id"], rew["max_mark"]))
    for u, t, m in zip(cont["unit_id"], cont["text"], cont["mark"]):  # the mark column is the text's parse
        p = read_final_mark(t, max_of[u])
        assert math.isnan(m) if p.mark is None else m == p.mark
    again = G.continue_revisions(pol, world, rew, settings, seed=0, progress=False)
    assert again["text"].tolist() == cont["text"].tolist()  # seeded


def test_ablation_variants_change_the_prompt_and_the_checks(world, monkeypatch):
    """Table 6 rewriters: no hints (w/o localiser), no checklist (w/o checklist), free scope (w/o atomic)."""
    ds, r, q, roll = _one_rollout(world)
    cl = pd.DataFrame([dict(dataset=ds.name, response_id=r.id, text=teacher_checklist(q, r), status="ok", detail="",
                            n_covered=0)])
    pct = pd.DataFrame([dict(dataset=ds.name, G_rho=0.0, G_a=0.0, G_p_tilde=0.0)])
    unit = pd.DataFrame([dict(dataset=ds.name, response_id=r.id, rollout_id=0, k=1, delta_eps=-0.5, G_rho=-1.0,
                              G_a=-1.0, G_p_tilde=-1.0)])
    four = ('<rewrite location="1" span="4">\nstep 1: point 1 x ; answer y ; matches ; credit 1\nstep 2: point 2 x ; '
            'answer y ; matches ; credit 1\nstep 3: total 1 + 1 = 2\nstep 4: round 2 to 2\n</rewrite>')
    runs = {}
    for variant in (G.RewriteVariant(hints=False), G.RewriteVariant(checklist=False), G.RewriteVariant(atomic=False),
                    G.RewriteVariant()):
        fake, calls = _stub([four])
        monkeypatch.setattr(G, "policy_generate", fake)
        out = G.write_rewrites(FAKE, world, unit, roll, cl, pct, 0.05, RevisionConfig().resolved(RolloutConfig()),
                               seed=0, role_of=synthetic_annotator, progress=False, variant=variant)
        runs[variant.suffix] = (calls[0][0][0], out.iloc[0])
    prompt, row = runs["/nohints"]
    assert "- none" in prompt and "moves away" not in prompt and "rubric analysis" in prompt
    assert row.unit_id.endswith("/k1/nohints") and row.status == "rewrite_parse"  # span 4 > 3 for an atomic rewriter
    prompt, row = runs["/nochecklist"]
    assert "rubric analysis" not in prompt and "moves away at this substep by 0.50" in prompt
    prompt, row = runs["/free"]
    assert "# Scope" in prompt and "Atomicity" not in prompt
    assert row.status == "ok" and len(row.sub_steps) == 4  # no span limit, no locality constraint
    assert row.revised_prefix.count("step ") == 4
    prompt, row = runs[""]
    assert "Atomicity" in prompt and row.status == "rewrite_parse"


def test_rewrite_of_an_empty_unit_table_has_the_columns(world):
    ds, r, q, roll = _one_rollout(world)
    out = G.write_rewrites(FAKE, world, pd.DataFrame(columns=[*ROLLOUT, "k"]), roll, pd.DataFrame(
        columns=["dataset", "response_id", "status", "text"]), pd.DataFrame(columns=["dataset"]), 0.05,
        RevisionConfig(), seed=0, progress=False)
    assert len(out) == 0 and list(out.columns) == G.REWRITE_COLUMNS


def _counted(outputs):
    """A stand-in for generate.policy_generate: one scripted (text, generated tokens) per prompt."""
    calls = []

    def fake(policy, prompts, cfg, ids=None, progress=True, parse=None):
        calls.append(cfg)
        out = [dict(prompt_index=i, response_id=i, rollout_id=0, text=t, n_tokens=n, n_prompt_tokens=2,
                    finished=n < cfg.max_new_tokens) for i, (t, n) in zip(range(len(prompts)), outputs)]
        return pd.DataFrame(out)
    return fake, calls


def _units(ds, r, ks):
    return pd.DataFrame([dict(dataset=ds.name, response_id=r.id, rollout_id=0, k=k, delta_eps=-0.5, G_rho=1.0,
                              G_a=1.0, G_p_tilde=1.0) for k in ks])


def test_a_rewrite_cut_by_its_budget_is_truncated_not_unparsed(world, monkeypatch):
    """A block that does not parse after the whole budget is ``rewrite_truncated``; below it, ``rewrite_parse``;
    a block that parses is never a truncation, whatever its length."""
    ds, r, q, roll = _one_rollout(world)
    cl = pd.DataFrame([dict(dataset=ds.name, response_id=r.id, text="x", status="ok", detail="", n_covered=0)])
    pct = pd.DataFrame([dict(dataset=ds.name, G_rho=0.0, G_a=0.0, G_p_tilde=0.0)])
    cut = '<rewrite location="1" span="2">\nstep 1: point 1 x ; answer y ; matches ; cre'
    whole = '<rewrite location="3" span="1">\nstep 1: total 1 + 1 = 2\n</rewrite>'
    fake, calls = _counted([(cut, 100), (cut, 99), (whole, 100)])
    monkeypatch.setattr(G, "policy_generate", fake)
    out = G.write_rewrites(FAKE, world, _units(ds, r, (1, 2, 3)), roll, cl, pct, 0.05,
                           RevisionConfig(rewrite_decoding=Decoding(greedy=True, max_new_tokens=100)), seed=0, progress=False).set_index("k")
    assert calls[0].max_new_tokens == 100  # the atomic rewriter's budget
    assert out.loc[1, "status"] == "rewrite_truncated" and out.loc[1, "reasons"] == ["rewrite_truncated"]
    assert "all 100 tokens used" in out.loc[1, "detail"]
    assert out.loc[2, "status"] == "rewrite_parse"
    assert out.loc[3, "status"] not in UNPARSED and out.loc[3, "n_tokens"] == 100


def test_the_free_rewriter_gets_the_rollouts_budget(world, monkeypatch):
    """Table 6's "w/o atomic" rewrites the whole suffix: its budget is the resolved free one (the rollouts'), so
    the same 100 tokens that cut an atomic rewrite do not cut it."""
    ds, r, q, roll = _one_rollout(world)
    cl = pd.DataFrame([dict(dataset=ds.name, response_id=r.id, text="x", status="ok", detail="", n_covered=0)])
    pct = pd.DataFrame([dict(dataset=ds.name, G_rho=0.0, G_a=0.0, G_p_tilde=0.0)])
    free = G.RewriteVariant(atomic=False)
    settings = RevisionConfig(rewrite_decoding=Decoding(greedy=True, max_new_tokens=100)).resolved(RolloutConfig(decoding=Decoding(max_new_tokens=400)))
    fake, calls = _counted([("<rewrite location", 100)])
    monkeypatch.setattr(G, "policy_generate", fake)
    out = G.write_rewrites(FAKE, world, _units(ds, r, (1,)), roll, cl, pct, 0.05, settings, seed=0, progress=False,
                           variant=free)
    assert calls[0].max_new_tokens == 400 and out["status"].tolist() == ["rewrite_parse"]
    fake, calls = _counted([("<rewrite location", 400)])
    monkeypatch.setattr(G, "policy_generate", fake)
    out = G.write_rewrites(FAKE, world, _units(ds, r, (1,)), roll, cl, pct, 0.05, settings, seed=0, progress=False,
                           variant=free)
    assert out["status"].tolist() == ["rewrite_truncated"]
    with pytest.raises(ValueError, match="free_rewrite_max_new_tokens is 0"):
        G.write_rewrites(FAKE, world, _units(ds, r, (1,)), roll, cl, pct, 0.05, RevisionConfig(), seed=0,
                         progress=False, variant=free)


def test_max_span_is_read_from_the_settings(world, monkeypatch):
    """App. J / Figure 6: 1..max_span sub-steps; three pass the default span of 3 and fail a span of 2."""
    ds, r, q, roll = _one_rollout(world)
    cl = pd.DataFrame([dict(dataset=ds.name, response_id=r.id, text="x", status="ok", detail="", n_covered=0)])
    pct = pd.DataFrame([dict(dataset=ds.name, G_rho=0.0, G_a=0.0, G_p_tilde=0.0)])
    three = ('<rewrite location="1" span="3">\nstep 1: point 1 x ; answer y ; matches\nstep 2: point 1 x ; '
             'answer y ; matches\nstep 3: point 1 x ; answer y ; matches ; credit 1\n</rewrite>')
    status = {}
    for span in (3, 2):
        fake, _ = _counted([(three, 50)])
        monkeypatch.setattr(G, "policy_generate", fake)
        out = G.write_rewrites(FAKE, world, _units(ds, r, (1,)), roll, cl, pct, 0.05, RevisionConfig(max_span=span),
                               seed=0, progress=False)
        status[span] = (out["status"].iloc[0], out["detail"].iloc[0])
    assert status[3][0] not in UNPARSED
    assert status[2] == ("rewrite_parse", "span must be 1..2, got 3")


def test_checklists_take_their_own_budget_and_record_their_rubric(world, monkeypatch):
    """Sec. 2.2: the checklist role generates under `revision.checklist_decoding` (budget 0: the rewrite's);
    every row says which rubric rule checked it."""
    fake, calls = _stub([])
    monkeypatch.setattr(G, "policy_generate", fake)
    ds = next(iter(world.values()))
    keys = pd.DataFrame([dict(dataset=ds.name, response_id=r.id) for r in ds.responses[:2]])
    own = RevisionConfig(checklist_decoding=Decoding(greedy=True, max_new_tokens=700))
    cl = G.write_checklists(FAKE, world, keys, own, seed=0, progress=False)
    assert calls[-1][1].max_new_tokens == 700 and set(cl["rubric"]) == {"points"}
    assert set(cl["status"]) == {"empty"}  # the stub writes nothing
    G.write_checklists(FAKE, world, keys, RevisionConfig(rewrite_decoding=Decoding(greedy=True, max_new_tokens=99)),
                       seed=0, progress=False)
    assert calls[-1][1].max_new_tokens == 99
