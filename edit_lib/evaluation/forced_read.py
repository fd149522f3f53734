"""The forced read: a mark for a completion that never wrote the final line the parser reads.

A small model (SmolLM2-135M on the ``cpu-real`` profile) often reasons without ending in ``Final mark: m/M``. The
paper's Base grades zero-shot and parses the final line (App. B); a completion without one is a parse failure
(``eval.invalid_as``). The forced read is the suite's documented way through, never mixed with a real parse:
after the completion's reasoning steps s_1..s_T (Sec. 2.1), append the probe's scaffold and take the mark the
model puts most mass on, argmax_m p_T(m), exactly as the posterior belief probe reads the last boundary (Eq. 1,
``signals.probe``). Such a mark is kept in its own column with its own status:

* ``forced_mark``: the forced read of every row whose parse failed (NA where the parse succeeded);
* ``mark_source``: ``parsed`` (the model wrote the line), ``forced`` (the forced read supplied the mark).

``forced_view`` gives the table with forced marks in ``mark`` and ``parse_status == 'forced'``, for metrics
reported *beside* the parse-only ones, never in place of them.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from edit_lib.data.schema import Dataset
from edit_lib.model.policy import Policy

FORCED = "forced"


def forced_marks(policy: Policy, ds: Dataset, rows: pd.DataFrame, probe_cfg, rule: str = "auto",
                 progress: bool = True, batch_size: int = 8) -> list[int]:
    """argmax_m p_T(m) (Eq. 1 at the last step boundary, with ``probe_cfg``'s scaffold and read) for each row of
    ``rows`` (columns ``response_id``, ``text``): the mark the model puts most mass on after its own reasoning,
    read at temperature 1 (the model's own distribution; the probe's 0.7 of App. B is a choice for the shaping
    signal, not for an argmax)."""
    from edit_lib.signals.inputs import probe_readout, rollout_tokens
    from edit_lib.signals.probe import probe_rollouts
    index = {r.id: r for r in ds.responses}
    readouts: dict[int, object] = {}
    out: list[int] = []
    recs = rows[["response_id", "text"]].to_dict("records")
    bar = tqdm(total=len(recs), disable=not progress, desc="forced read")
    for i in range(0, len(recs), batch_size):
        chunk = recs[i:i + batch_size]
        prompts, steps, scs, mks = [], [], [], []
        for rec in chunk:
            r = index[rec["response_id"]]
            q = ds.question(r)
            toks = rollout_tokens(policy, policy.grading_input(q, r.answer), rec["text"], rule)
            if q.max_mark not in readouts:
                readouts[q.max_mark] = probe_readout(policy, probe_cfg.scaffold, probe_cfg.terminator, q.max_mark,
                                                     probe_cfg.read)
            prompts.append(toks.prompt_ids)
            steps.append(toks.steps_ids)
            scs.append(readouts[q.max_mark].scaffold)
            mks.append(readouts[q.max_mark].marks)
        res = probe_rollouts(policy.model, prompts, steps, scs, mks, temperature=1.0, batch_size=batch_size)
        out += [int(np.argmax(r.probs[-1])) for r in res]
        bar.update(len(chunk))
    bar.close()
    return out


def add_forced_marks(policy: Policy, ds: Dataset, df: pd.DataFrame, probe_cfg, rule: str = "auto",
                     progress: bool = True, batch_size: int = 8) -> pd.DataFrame:
    """``df`` (a graded table of ``rollouts.grade_responses``) with ``forced_mark`` (the forced read of every row
    whose parse failed, NA elsewhere) and ``mark_source`` (``parsed`` | ``forced``). ``mark`` and
    ``parse_status`` are left as the parser set them."""
    df = df.copy()
    failed = df["parse_status"] != "ok"
    forced = pd.Series(pd.NA, index=df.index, dtype="Int64")
    if failed.any():
        forced[failed] = forced_marks(policy, ds, df[failed], probe_cfg, rule, progress, batch_size)
    df["forced_mark"] = forced
    df["mark_source"] = np.where(failed, FORCED, "parsed")
    return df


def forced_view(df: pd.DataFrame) -> pd.DataFrame:
    """The table scored with the forced read: ``mark`` = the parsed mark, else the forced one; such rows get
    ``parse_status = 'forced'`` and ``correct`` recomputed. For metrics shown beside the parse-only ones."""
    if "forced_mark" not in df.columns:
        raise KeyError("no forced_mark column: grade with the forced read on (eval.forced_read) first")
    out = df.copy()
    use = out["parse_status"].ne("ok") & out["forced_mark"].notna()
    out.loc[use, "mark"] = out.loc[use, "forced_mark"]
    out.loc[use, "parse_status"] = FORCED
    out["correct"] = (out["mark"] == out["gold"]).fillna(False).astype(bool)
    return out


def metrics_both_reads(greedy: pd.DataFrame, system: str, invalid_as: str = "wrong") -> pd.DataFrame:
    """Per dataset and split, the Table 1-2 metrics twice: ``read = 'parsed'`` (the paper's: a failed parse is
    scored by ``eval.invalid_as``) and, where the table has forced marks, ``read = 'parsed+forced'`` (failed
    parses take the forced read); ``n_forced`` counts the rows the forced read supplied."""
    from edit_lib.model.rollouts import metrics_by_split
    parsed = metrics_by_split(greedy, system=system, invalid_as=invalid_as).assign(read="parsed", n_forced=0)
    if "forced_mark" not in greedy.columns:
        return parsed
    view = forced_view(greedy)
    forced = metrics_by_split(view, system=system, invalid_as=invalid_as).assign(read="parsed+forced")
    counts = view.assign(f=view["parse_status"].eq(FORCED)).groupby(["dataset", "split"], sort=False)["f"].sum()
    forced["n_forced"] = [int(counts.get((d, s), 0)) for d, s in zip(forced["dataset"], forced["split"])]
    return pd.concat([parsed, forced], ignore_index=True)


def base_reads(greedy: pd.DataFrame, greedy_zero_shot: pd.DataFrame | None, invalid_as: str,
               warm: bool) -> pd.DataFrame:
    """01's small-model table (cpu-real, departures from the paper): ``metrics_both_reads`` of the Base, and of
    the same model zero-shot before its format warm-up when there is one (``greedy_zero_shot``)."""
    reads = [metrics_both_reads(greedy, "Base (warm-up)" if warm else "Base", invalid_as)]
    if greedy_zero_shot is not None:
        reads.insert(0, metrics_both_reads(greedy_zero_shot, "Base zero-shot", invalid_as))
    return pd.concat(reads, ignore_index=True)
