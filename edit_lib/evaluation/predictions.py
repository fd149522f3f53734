"""Greedy evaluation of every system (App. B "Decoding and evaluation"): one greedy completion per response of
the evaluation splits, parsed; the tables built from them are in ``evaluation.tables``.

Predictions are cached per graded policy and set of responses, in ``<run>/artifacts/predictions_cache/<key>.parquet``,
keyed by what they are computed from (``prediction_key``): the base weights, the ``model`` settings, the contents
of the policy's own adapter folders, the graded questions and responses, the evaluation settings, the step rule
and the grading code. A new or retrained system therefore grades only itself; 08 reuses 07's predictions for the
unedited schemes the same way, and 07 reuses the Base's, which 01 grades through the same cache (``base_greedy``).

The forced read (``eval.forced_read``; the suite's way for a small model that reasons without writing ``Final
mark: m/M``, never mixed with a real parse): after the steps s_1..s_T, the probe's scaffold and argmax_m p_T(m),
as the probe reads the last boundary (Eq. 1), kept in its own columns (``forced_mark``, ``mark_source``);
``forced_view`` puts it in ``mark`` for metrics reported *beside* the parse-only ones, never in place of them.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from edit_lib.artifacts import folder_digest
from edit_lib.config import WarmupConfig
from edit_lib.data.schema import Dataset, question_to_dict, Response, response_to_dict
from edit_lib.fingerprints import code_fingerprint
from edit_lib.model.generate import eval_sampling, SamplingConfig
from edit_lib.model.policy import load_policy_from_profile, Policy
from edit_lib.model.rollouts import grade_responses
from edit_lib.systems import BASE, Graded, resolve


FORCED = "forced"


def forced_marks(policy: Policy, ds: Dataset, rows: pd.DataFrame, probe_cfg, rule: str = "auto",
                 progress: bool = True, batch_size: int = 8) -> list[int]:
    """argmax_m p_T(m) (Eq. 1 at the last step boundary, with ``probe_cfg``'s scaffold and read) for each row of
    ``rows`` (columns ``response_id``, ``text``): the mark the model puts most mass on after its own reasoning,
    read at temperature 1 (the model's own distribution; the probe's 0.7 of App. B is a choice for the shaping
    signal, not for an argmax)."""
    from edit_lib.signals.probe import probe_input, probe_rollouts
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
            toks, ro = probe_input(policy, probe_cfg, readouts, policy.grading_input(q, r.answer), rec["text"],
                                   q.max_mark, rule)
            prompts.append(toks.prompt_ids)
            steps.append(toks.steps_ids)
            scs.append(ro.scaffold)
            mks.append(ro.marks)
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


# ---------------------------------------------------------------- greedy predictions and their cache

EVAL_SPLITS = ("id_test", "ood_test")
PRED_COLUMNS = ["dataset", "response_id", "question_id", "split", "gold", "max_mark", "mark", "parse_status",
                "n_steps", "steps", "text", "n_tokens", "finished"]
#: Added with ``eval.forced_read`` (``forced_read.add_forced_marks``): its own columns, never merged into ``mark``.
FORCED_COLUMNS = ["forced_mark", "mark_source"]
# What a cached prediction was computed by: this module and everything it imports (generation, parsing, the
# forced read, the per-split batching here).
GRADING_CODE = ("edit_lib.evaluation.predictions",)


def greedy_splits(policy, datasets: dict[str, Dataset], eval_cfg, seed: int, rule: str, probe_cfg=None,
                  splits=None) -> pd.DataFrame:
    """01's greedy grading of every dataset (App. B: one greedy completion per marking, ``eval_cfg`` the profile's
    ``eval`` section) on ``splits`` (None: every split), with the forced read beside failed parses where
    ``eval.forced_read`` asks for it (``probe_cfg``: its scaffold)."""
    out = []
    for ds in datasets.values():
        rs = ds.responses if splits is None else [r for s in splits for r in ds.split(s)]
        out.append(_grade_eval(policy, ds, rs, eval_cfg, seed, rule, probe_cfg))
    return pd.concat(out, ignore_index=True)


def _grade_eval(policy, ds: Dataset, responses: list[Response], eval_cfg, seed: int, rule: str, probe_cfg):
    """``greedy_splits`` on one dataset's ``responses`` (the profile's ``eval`` decoding, forced read included)."""
    g = grade_responses(policy, ds, responses, eval_sampling(eval_cfg, seed), rule=rule)
    return add_forced_marks(policy, ds, g, probe_cfg, rule) if eval_cfg.forced_read else g


def base_greedy(cache: "PredictionCache", policy, datasets: dict[str, Dataset], seed: int) -> pd.DataFrame:
    """01's greedy grading of the Base on every split (App. B: one greedy completion per marking), the table
    ``greedy_splits`` gives, with each evaluation split graded as 07 grades it: through ``cache.graded``, one call
    per split, so 07 finds the Base's entries and grades the Base no more. The other splits are graded together
    as ``greedy_splits`` grades them; the rows come back in the dataset's response order. A sampled evaluation
    (``eval.decoding.greedy`` off) is not what 07 computes: it is graded as ``greedy_splits`` alone, with nothing
    cached."""
    prof = cache.profile
    e, rule = prof.eval, prof.steps.rule
    if not e.decoding.greedy:
        return greedy_splits(policy, datasets, e, seed, rule, prof.probe)
    out = []
    for g in resolve(BASE, list(datasets), {}, {}):
        ds = datasets[g.dataset]
        parts = [cache.graded(g, ds, ds.split(s), policy=lambda: policy) for s in EVAL_SPLITS if ds.split(s)]
        rest = [r for r in ds.responses if r.split not in EVAL_SPLITS]
        if rest or not parts:  # (a dataset without responses gives greedy_splits' empty table)
            parts.append(_grade_eval(policy, ds, rest, e, seed, rule, prof.probe))
        order = {r.id: i for i, r in enumerate(ds.responses)}
        df = pd.concat(parts, ignore_index=True)
        out.append(df.sort_values("response_id", key=lambda ids: ids.map(order), kind="stable"))
    return pd.concat(out, ignore_index=True)


def data_digest(ds: Dataset, responses: list[Response]) -> str:
    """Hash of the graded responses and their questions (scheme included): what the prompts are made of."""
    qids = sorted({r.question_id for r in responses})
    payload = dict(questions=[question_to_dict(ds.questions[q]) for q in qids],
                   responses=[response_to_dict(r) for r in responses])
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


def prediction_key(weights: str, adapters: tuple[str, ...], data: str, eval_cfg, rule: str, code: str,
                   model_cfg, warmup: str = "") -> str:
    """What a cached prediction table is computed from (module docstring); ``eval_cfg`` and ``model_cfg`` are the
    profile's ``eval`` and ``model`` sections (dtype, device, threads: all can move a greedy token). A warm-up
    Base is named by ``warmup``, its warm-up key (``model.warmup.warmup_key``: code, data and the values that
    train it), in place of ``model.warmup``, so a separate reviser's or the guard's values grade nothing."""
    payload = dict(weights=weights, adapters=list(adapters), data=data, eval=asdict(eval_cfg), rule=rule,
                   code=code, columns=PRED_COLUMNS, model=asdict(replace(model_cfg, warmup=WarmupConfig())),
                   stored="graded")
    if warmup:  # left out without a warm-up, so those keys stay as they were
        payload["warmup"] = warmup
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


class PredictionCache:
    """Greedy predictions of graded policies, computed once per ``prediction_key``.

    ``weights`` identifies the base model's weights (the stage's recorded ``weights`` input); ``code`` the
    grading code (default: ``fingerprints.code_fingerprint`` of ``GRADING_CODE``); ``digest`` hashes an adapter
    folder.
    """

    def __init__(self, folder: Path, profile, weights: str, code: str | None = None,
                 digest: Callable[[Path], str] = folder_digest):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        code = code if code is not None else code_fingerprint(*GRADING_CODE)
        self.warmup = ""
        if profile.model.warmup.steps > 0:
            from edit_lib.model.warmup import warmup_key
            self.warmup = warmup_key(profile)
        self.profile, self.weights, self.code, self.digest = profile, weights, code, digest
        self.hits = self.misses = 0

    def key(self, g: Graded, ds: Dataset, responses: list[Response]) -> str:
        adapters = tuple(self.digest(Path(a)) for a in (g.init_adapter, g.adapter) if a)
        code = self.code
        if self.profile.eval.forced_read:  # the forced read also depends on the probe's scaffold and read
            pr = self.profile.probe
            code += f"|forced:{pr.scaffold!r}:{pr.terminator!r}:{pr.read}"
        if self.profile.model.prefix_cache:  # batched differently (token order, shared prefix): its own entries
            code += "|prefix_cache"
        return prediction_key(self.weights, adapters, data_digest(ds, responses), self.profile.eval,
                              self.profile.steps.rule, code, self.profile.model, self.warmup)

    def graded(self, g: Graded, ds: Dataset, responses: list[Response], progress: bool = True,
               policy: Callable | None = None) -> pd.DataFrame:
        """``grade_responses``' whole table of ``g`` on ``responses`` (one greedy completion each, App. B; the
        forced read beside failed parses where ``eval.forced_read``): from the cache when its key is there, else
        graded now and stored. ``policy`` is a function returning ``g``'s policy (loaded on a miss only)."""
        path = self.folder / f"{self.key(g, ds, responses)}.parquet"
        if path.exists():
            self.hits += 1
            return pd.read_parquet(path)
        self.misses += 1
        policy = policy() if policy is not None else load_graded(self.profile, g)
        e = self.profile.eval
        cfg = SamplingConfig.of(e.decoding, greedy=True, batch_size=e.batch_size)
        df = grade_responses(policy, ds, responses, cfg, progress=progress, rule=self.profile.steps.rule)
        if e.forced_read:  # a failed parse also gets the forced read, in its own columns (forced_read.py)
            df = add_forced_marks(policy, ds, df, self.profile.probe, self.profile.steps.rule, progress,
                                  batch_size=e.batch_size)
        tmp = path.with_suffix(".tmp")
        df.to_parquet(tmp, index=False)
        tmp.replace(path)
        return df

    def predict(self, g: Graded, ds: Dataset, responses: list[Response], progress: bool = True,
                policy: Callable | None = None) -> pd.DataFrame:
        """One greedy completion per response (App. B), parsed (``graded``), in 07's columns with the system and
        seed. ``policy`` is a function returning ``g``'s policy (e.g. a ``LazyPolicy``, loaded on the first miss)."""
        cols = PRED_COLUMNS + (FORCED_COLUMNS if self.profile.eval.forced_read else [])
        df = self.graded(g, ds, responses, progress, policy)[cols]
        df = df.copy()
        df["mark"] = df["mark"].astype("Int64")
        df.insert(0, "seed", pd.array([g.seed] * len(df), dtype="Int64"))
        df.insert(0, "system", g.system)
        return df


    def predict_splits(self, g: Graded, ds: Dataset, splits=EVAL_SPLITS, progress: bool = True) -> pd.DataFrame:
        """``predict`` on each evaluation split of ``ds`` (one cache entry per split), loading the policy at
        most once."""
        lazy = LazyPolicy(self.profile, g)
        parts = [self.predict(g, ds, ds.split(s), progress, lazy) for s in splits if ds.split(s)]
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["system", "seed", *PRED_COLUMNS])

    def predict_all(self, graded: list[Graded], datasets: dict[str, Dataset]) -> pd.DataFrame:
        """``predict_splits`` of every graded policy on its dataset, one after the other (07)."""
        parts = []
        for g in graded:
            print(f"{g.system} / {g.dataset}" + ("" if g.seed is None else f" / seed {g.seed}"), flush=True)
            hits = self.hits
            parts.append(self.predict_splits(g, datasets[g.dataset]))
            if self.hits > hits:  # e.g. the Base's splits, which 01 graded
                print(f"  {self.hits - hits} split table(s) from the cache", flush=True)
        return pd.concat(parts, ignore_index=True)


class LazyPolicy:
    """A graded system's policy, loaded on the first call and kept (systems are graded one at a time)."""

    def __init__(self, profile, g: Graded):
        self.profile, self.g, self.policy = profile, g, None

    def __call__(self):
        if self.policy is None:
            self.policy = load_graded(self.profile, self.g)
        return self.policy


def load_graded(profile, g: Graded):
    """The policy of a graded system: Base with its (merged) initialisation adapter and its own adapter."""
    return load_policy_from_profile(profile, adapter=g.adapter, init_adapter=g.init_adapter)
