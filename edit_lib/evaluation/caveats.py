"""Caveats that travel: a run-level warning found by 01 (the Base cannot read the data, or its marks are
degenerate) shown at the top of every later notebook and read by the claims ledger.

01 records them in its results as ``extra["caveats"]`` (a list of strings, each starting ``"<dataset>: "``, or
``"warm-up Base: "`` for the warm-up guard's verdict, ``model.warmup``); its ``vocab_coverage`` entries over the
unknown-token threshold count as caveats too (:func:`run_caveats`). A suite check, not the paper's: a Base that gives
one mark to nearly every answer has a QWK near 0 and every comparison against it (Tables 1-3, App. G) says nothing.

Vocabulary coverage (``coverage_check``): the share of a dataset's text the policy's own tokenizer maps to the
unknown token, over the grading prompts it reads and over the answers alone. The embedded grader's word-level
vocabulary is the synthetic world's, so any real data set reads mostly as ``<unk>``: its marks, and the probe
(Eq. 1) and audit (Eq. 3) computed from it, then say little, and nothing fails; 01 warns above
``UNK_SHARE_WARN``. A tokenizer without an unknown token (byte-level BPE, as Qwen's) has a share of 0.
"""
from __future__ import annotations

import random
from typing import Any, Iterable

import pandas as pd

from edit_lib.data.schema import Dataset

DEGENERATE_SHARE = 0.9  # one mark on >= 90% of a dataset's predictions: the marks are degenerate


def mark_distribution(preds: pd.DataFrame, by: tuple[str, ...] = ("dataset",)) -> pd.DataFrame:
    """Predicted-mark counts per group of ``by``: columns ``*by, mark, n, share`` (a failed parse, a missing
    mark, counts as the mark "unparsed"); ``preds`` needs ``by`` and ``mark``."""
    missing = [c for c in (*by, "mark") if c not in preds.columns]
    if missing:
        raise ValueError(f"predictions lack columns {missing} (need {[*by, 'mark']})")
    mark = preds["mark"].astype(object).where(preds["mark"].notna(), "unparsed")
    d = preds[list(by)].assign(mark=mark.map(lambda m: m if m == "unparsed" else str(int(m))))
    out = d.groupby([*by, "mark"], sort=True).size().rename("n").reset_index()
    out["share"] = out["n"] / out.groupby(list(by))["n"].transform("sum")
    return out


def mark_caveats(preds: pd.DataFrame, system: str = "Base", threshold: float = DEGENERATE_SHARE,
                 by: tuple[str, ...] = ("dataset",)) -> tuple[pd.DataFrame, list[str]]:
    """(distribution, warnings): :func:`mark_distribution` and one text per dataset where a single mark (or
    "unparsed") takes ``>= threshold`` of ``system``'s predictions (e.g. 622 of 630 answers marked 10)."""
    dist = mark_distribution(preds, by)
    msgs = []
    for key, g in dist.groupby(list(by), sort=True):
        top = g.loc[g["share"].idxmax()]
        if top["share"] >= threshold:
            name = "/".join(map(str, key if isinstance(key, tuple) else (key,)))
            msgs.append(f"{name}: {system} gave mark {top['mark']} to {int(top['n'])} of {int(g['n'].sum())} "
                        f"answers ({top['share']:.0%} >= {threshold:.0%}): its marks are degenerate, so QWK and every "
                        f"comparison against {system} on this data are not meaningful")
    return dist, msgs


def run_caveats(base_results: dict | None) -> list[str]:
    """The caveats 01's results record: ``extra["caveats"]`` plus a line per ``extra["vocab_coverage"]``
    dataset over the unknown-token threshold; [] without 01's results."""
    extra = (base_results or {}).get("extra") or {}
    out = [str(c) for c in extra.get("caveats") or []]
    for d, v in (extra.get("vocab_coverage") or {}).items():
        if isinstance(v, dict) and v.get("over_threshold") and not any(c.startswith(f"{d}: ") and "unknown" in c
                                                                       for c in out):
            out.append(f"{d}: {v.get('prompt_unk_share', float('nan')):.1%} of the grading prompts' tokens are "
                       "unknown to the policy's tokenizer: its marks and signals on this data are not meaningful")
    return out


def caveats_markdown(caveats: list[str], source: str = "01_base_policy") -> str:
    """The bold notice every later notebook shows first (``runner.stage.stage``)."""
    return "\n".join([f"**Caveats recorded by {source} for this run: the numbers below may not be meaningful.**",
                      ""] + [f"* **{c}**" for c in caveats])


# ---------------------------------------------------------------- vocabulary coverage (01)

UNK_SHARE_WARN = 0.05  # above 5% unknown tokens the embedded grader's marks on the data are not meaningful
MAX_RESPONSES = 2000  # per dataset: a seeded sample bounds the cost on large real data sets


def unk_counts(tokenizer: Any, texts: Iterable[str], batch_size: int = 256) -> tuple[int, int]:
    """(tokens, unknown tokens) of ``texts`` under ``tokenizer`` (no special tokens added)."""
    unk = getattr(tokenizer, "unk_token_id", None)
    texts = list(texts)
    n_tok = n_unk = 0
    for i in range(0, len(texts), batch_size):
        for ids in tokenizer(texts[i:i + batch_size], add_special_tokens=False, verbose=False)["input_ids"]:
            n_tok += len(ids)
            if unk is not None:
                n_unk += sum(1 for t in ids if t == unk)
    return n_tok, n_unk


def dataset_coverage(policy: Any, ds: Dataset, max_responses: int | None = MAX_RESPONSES,
                     seed: int = 0) -> dict[str, Any]:
    """Unknown-token counts and shares of one dataset's grading prompts and answers (module docstring);
    at most ``max_responses`` responses, a seeded sample when there are more."""
    responses = ds.responses
    if max_responses is not None and len(responses) > max_responses:
        keep = sorted(random.Random(f"{seed}:{ds.name}").sample(range(len(responses)), max_responses))
        responses = [responses[i] for i in keep]
    prompts = [policy.grading_input(ds.question(r), r.answer) for r in responses]
    p_tok, p_unk = unk_counts(policy.tokenizer, prompts)
    a_tok, a_unk = unk_counts(policy.tokenizer, [r.answer for r in responses])
    return dict(dataset=ds.name, responses=len(responses), of_responses=len(ds.responses),
                prompt_tokens=p_tok, prompt_unk=p_unk, prompt_unk_share=p_unk / p_tok if p_tok else 0.0,
                answer_tokens=a_tok, answer_unk=a_unk, answer_unk_share=a_unk / a_tok if a_tok else 0.0)


def vocab_coverage(policy: Any, datasets: dict[str, Dataset], max_responses: int | None = MAX_RESPONSES,
                   seed: int = 0) -> pd.DataFrame:
    """One row per dataset: ``dataset_coverage`` plus ``over_threshold`` (either share > ``UNK_SHARE_WARN``)."""
    rows = [dataset_coverage(policy, ds, max_responses, seed) for ds in datasets.values()]
    df = pd.DataFrame(rows, columns=["dataset", "responses", "of_responses", "prompt_tokens", "prompt_unk",
                                     "prompt_unk_share", "answer_tokens", "answer_unk", "answer_unk_share"])
    df["over_threshold"] = (df["prompt_unk_share"] > UNK_SHARE_WARN) | (df["answer_unk_share"] > UNK_SHARE_WARN)
    return df


def coverage_warnings(table: pd.DataFrame, policy_name: str, policy_kind: str) -> list[str]:
    """One message per dataset over the threshold, pointing to ``model.name_or_path``."""
    out = []
    for r in table[table["over_threshold"]].itertuples():
        what = "the embedded word-level grader" if policy_kind == "tiny" else f"the tokenizer of {policy_name!r}"
        out.append(f"{r.dataset}: {r.prompt_unk_share:.1%} of the grading prompts' tokens and "
                   f"{r.answer_unk_share:.1%} of the answers' tokens are unknown (<unk>) to {what} "
                   f"(threshold {UNK_SHARE_WARN:.0%}): its marks and signals on this data are not meaningful. "
                   "Load a real model: set model.name_or_path to a Hugging Face causal LM "
                   "(e.g. -p model.name_or_path=Qwen/Qwen3-8B, as configs/paper.yaml does).")
    return out


def coverage_check(policy: Any, datasets: dict[str, Dataset], seed: int) -> tuple[pd.DataFrame, dict, list[str], str]:
    """01's check that the policy can read the data: (the ``vocab_coverage`` table, its summary for the results
    JSON, one warning per dataset over ``UNK_SHARE_WARN``, a sentence for the reader)."""
    table = vocab_coverage(policy, datasets, seed=seed)
    extra = dict(vocab_coverage={r.dataset: dict(prompt_unk_share=r.prompt_unk_share, answer_unk_share=r.answer_unk_share,
                                                 over_threshold=bool(r.over_threshold)) for r in table.itertuples()},
                 vocab_unk_share_threshold=UNK_SHARE_WARN)
    warnings = coverage_warnings(table, policy.name, policy.kind)
    if warnings:
        note = ("**The results of this notebook on " + ", ".join(table.dataset[table.over_threshold])
                + " are not meaningful**: the policy cannot read most of the text. "
                + "Set `model.name_or_path` to a real model (e.g. `-p model.name_or_path=Qwen/Qwen3-8B`).")
    else:
        note = f"vocabulary coverage: every dataset has at most {UNK_SHARE_WARN:.0%} unknown tokens"
    return table, extra, warnings, note
