"""Vocabulary coverage: how much of a dataset's text the policy's tokenizer maps to the unknown token.

The embedded grader (``policy.kind == "tiny"``) has a word-level vocabulary learned from the synthetic
rubric world. Text outside it - any real data set - becomes ``<unk>``: the grader then reads mostly
placeholders, and its marks (and every signal computed from it: the probe of Eq. 1, the audit of Eq. 3)
carry little information about the answers. Nothing fails, so this module measures it and notebook 01
says so loudly when the share of unknown tokens is above ``UNK_SHARE_WARN``.

The share is counted with the policy's own tokenizer over the grading prompts the policy reads
(``Policy.grading_input``: instructions, question, scheme and answer) and over the answers alone (the
part that differs between responses). A tokenizer without an unknown token (byte-level BPE, as Qwen's)
can represent any text: its share is 0.
"""
from __future__ import annotations

import random
from typing import Any, Iterable

import pandas as pd

from edit_lib.data.schema import Dataset

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
