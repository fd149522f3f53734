"""Grading a dataset with a policy: sampled rollouts (App. B pool) and greedy evaluation (App. B decoding).

A rollout table has one row per (response, rollout) with stable ids: ``response_id``, ``rollout_id``,
``question_id``, ``split``, ``text`` (the completion), ``steps`` (reasoning steps s_1..s_T cut by
``steps.rule``, final line excluded), ``n_steps``, ``step_rule`` (the rule applied, 'auto' resolved), ``mark``
(None on a parse failure), ``parse_status`` (ok | no_mark | out_of_range), ``gold``, ``max_mark``, ``correct``
(mark == gold; False on a parse failure), plus generation columns.
"""
from __future__ import annotations

from collections import Counter

import pandas as pd

from edit_lib.data.schema import Dataset, Response
from edit_lib.model.generate import SamplingConfig, policy_generate
from edit_lib.metrics import frame_metrics
from edit_lib.model.policy import Policy
from edit_lib.prompts.grading import read_final_mark
from edit_lib.random_streams import seeded_subset
from edit_lib.segment import check_rule, segment


def grade_responses(policy: Policy, ds: Dataset, responses: list[Response], cfg: SamplingConfig,
                    progress: bool = True, rule: str = "auto") -> pd.DataFrame:
    """Generate ``cfg.n`` completions per response (greedy or sampled) and parse each: the final mark and the
    reasoning steps s_1..s_T cut by ``rule`` (``steps.rule``, Sec. 2.1). A failed parse leaves ``mark`` missing;
    ``forced_read.add_forced_marks`` adds the forced read beside it where ``eval.forced_read`` is on."""
    check_rule(rule)  # fail before generating, not after
    prompts = [policy.grading_input(ds.question(r), r.answer) for r in responses]

    def parse(text: str, i: int) -> dict:
        r = responses[i]
        q = ds.question(r)
        mp = read_final_mark(text, q.max_mark)
        seg = segment(text, rule)
        return dict(question_id=r.question_id, split=r.split, gold=r.gold, max_mark=q.max_mark,
                    mark=mp.mark, parse_status=mp.status, correct=mp.mark == r.gold,
                    steps=list(seg.steps), n_steps=seg.n_steps, step_rule=seg.rule)

    df = policy_generate(policy, prompts, cfg, ids=[r.id for r in responses],
                  progress=progress, parse=parse)
    df.insert(0, "dataset", ds.name)
    df["mark"] = df["mark"].astype("Int64")  # nullable: a parse failure stays missing, never 0
    return df.drop(columns=["prompt_index"])


def phase1_responses(ds: Dataset, n: int, seed: int) -> list[Response]:
    """The Phase-1 sample of one dataset (App. B: rollouts are sampled per training response; the suite's
    ``rollouts.responses_per_dataset``): ``n`` training responses drawn with ``numpy.random.default_rng(seed)``
    from the split in id order, returned in id order; every training response when ``n`` is 0 or covers them."""
    if n < 0:
        raise ValueError(f"rollouts.responses_per_dataset must be >= 0, got {n}")
    return seeded_subset(sorted(ds.split("train"), key=lambda r: r.id), n, seed)


def sample_phase1(policy: Policy, datasets: dict[str, Dataset], cfg, rollouts_cfg, seed: int,
                  rule: str = "auto") -> pd.DataFrame:
    """01's sampled rollouts: ``rollouts_cfg.n_per_response`` per response of each dataset's Phase-1 sample
    (``phase1_responses`` of ``rollouts_cfg.responses_for(name)``), sampled with ``cfg`` (App. B: 20 per training
    response)."""
    return pd.concat([grade_responses(policy, ds, phase1_responses(ds, rollouts_cfg.responses_for(name), seed), cfg,
                                      rule=rule) for name, ds in datasets.items()], ignore_index=True)


def greedy_grades(policy: Policy, ds: Dataset, responses: list[Response], eval_cfg, rule: str = "auto",
                  progress: bool = True) -> tuple[pd.DataFrame, dict]:
    """Greedy grading (App. B: one greedy completion per marking, ``eval_cfg`` the profile's ``eval`` section)
    of ``responses``: (the graded rows, the Table 1-2 metrics: ``metrics.grading_metrics``, parse failures scored
    by ``eval.invalid_as``)."""
    cfg = SamplingConfig.of(eval_cfg.decoding, greedy=True, batch_size=eval_cfg.batch_size)
    df = grade_responses(policy, ds, responses, cfg, progress=progress, rule=rule)
    return df, frame_metrics(df, eval_cfg.invalid_as)


def greedy_metrics(policy: Policy, ds: Dataset, responses: list[Response], eval_cfg, rule: str = "auto",
                   progress: bool = True) -> dict:
    """The metrics of `greedy_grades` (App. B's greedy grading, Tables 1-2)."""
    return greedy_grades(policy, ds, responses, eval_cfg, rule, progress)[1]


def parse_failures(df: pd.DataFrame) -> dict:
    """Counts of parse statuses: failures are reported, never silently scored."""
    return dict(Counter(df["parse_status"]))


def metrics_by_split(preds: pd.DataFrame, system: str = "Base", invalid_as: str = "wrong") -> pd.DataFrame:
    """QWK (macro), ACC, within-1, MAE, pooled QWK per dataset and split (App. B; Tables 1-2 layout).
    ``invalid_as`` scores parse failures (``eval.invalid_as``: see ``edit_lib.metrics``)."""
    rows = []
    for (name, split), g in preds.groupby(["dataset", "split"], sort=False):
        m = frame_metrics(g, invalid_as)
        rows.append(dict(system=system, dataset=name, split=split, **m))
    return pd.DataFrame(rows)


def rollout_summary(rollouts: pd.DataFrame) -> pd.DataFrame:
    """Per dataset: share of incorrect rollouts and of responses with both correct and incorrect ones
    (EDIT-SFT needs both: incorrect rollouts to revise, correct ones as golden anchors, Sec. 2.2)."""
    rows = []
    for name, g in rollouts.groupby("dataset", sort=False):
        per = g.groupby("response_id")["correct"].agg(["any", "all"])
        rows.append(dict(dataset=name, rollouts=len(g), responses=len(per),
                         incorrect_share=float(1 - g["correct"].mean()),
                         mixed_response_share=float((per["any"] & ~per["all"]).mean()),
                         all_correct_share=float(per["all"].mean()),
                         all_incorrect_share=float((~per["any"]).mean()),
                         parse_failure_share=float((g["parse_status"] != "ok").mean()),
                         mean_steps=float(g["n_steps"].mean())))
    return pd.DataFrame(rows)


def mark_error_counts(rollouts: pd.DataFrame) -> pd.DataFrame:
    """Per dataset, how often a sampled mark lies ``error`` = mark - gold marks from gold (one row per observed
    error), with its share of the dataset's parsed rollouts. Parse failures have no error and are left out
    here; `parse_failures` counts them."""
    d = rollouts.dropna(subset=["mark"])
    d = d.assign(error=d["mark"].astype(int) - d["gold"].astype(int))
    out = d.groupby(["dataset", "error"], sort=True).size().rename("count").reset_index()
    out["share"] = out["count"] / out.groupby("dataset")["count"].transform("sum")
    return out.astype({"error": int, "count": int})
