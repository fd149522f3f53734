"""Vocabulary coverage (issue 7): the share of <unk> tokens the embedded grader's tokenizer makes of a text."""
import pytest
from transformers import AutoTokenizer

from edit_lib.data.schema import Dataset, FreeTextScheme, Question, Response
from edit_lib.embedded.recipe import ASSETS_DIR
from edit_lib.embedded.tokenizer import words
from edit_lib.evaluation.caveats import (UNK_SHARE_WARN, coverage_warnings, dataset_coverage, unk_counts,
                                         vocab_coverage)
from edit_lib.model.policy import Policy


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(ASSETS_DIR, local_files_only=True)


def test_unk_share_of_a_hand_made_text(tok):
    vocab = tok.get_vocab()
    assert {"the", "makes", "."} <= vocab.keys() and not {"liver", "bile", "qzxv"} & vocab.keys()
    # 7 pieces: the | liver | makes | bile | qzxv | 1 | .  -> liver, bile, qzxv are unknown
    assert unk_counts(tok, ["the liver makes bile qzxv 1."]) == (7, 3)
    text = "The photosynthesis makes glucose; Versailles zebra 12 marks!"
    pieces = words(text)  # independent count: the tokenizer's pre-tokenised pieces missing from its vocabulary
    assert unk_counts(tok, [text]) == (len(pieces), sum(p not in vocab for p in pieces))
    n_unk = sum(p not in vocab for p in pieces)
    assert unk_counts(tok, [text, "the liver makes bile qzxv 1."], batch_size=1) == (len(pieces) + 7, n_unk + 3)


class _NoUnk:  # a byte-level tokenizer: every text is representable, no unknown token
    unk_token_id = None

    def __call__(self, texts, add_special_tokens=False, verbose=True):
        return {"input_ids": [list(t.encode()) for t in texts]}


def test_tokenizer_without_unk_has_share_zero():
    assert unk_counts(_NoUnk(), ["zzz qqq"]) == (7, 0)


def _dataset(answers):
    q = Question("q1", "Biology", "explain photosynthesis .", "", FreeTextScheme("1 mark: glucose", 1), 1)
    rs = [Response(f"r{i}", "q1", a, 0, "train") for i, a in enumerate(answers)]
    return Dataset("toy", {"q1": q}, rs)


def test_dataset_coverage_counts_prompts_and_answers_and_warns(tok):
    policy = Policy(model=None, tokenizer=tok, kind="tiny", name="embedded")
    ds = _dataset(["the liver makes bile qzxv 1.", "the makes ."])
    row = dataset_coverage(policy, ds)
    assert (row["answer_tokens"], row["answer_unk"]) == (10, 3) and row["answer_unk_share"] == 0.3
    prompts = [policy.grading_input(ds.questions["q1"], r.answer) for r in ds.responses]
    assert (row["prompt_tokens"], row["prompt_unk"]) == unk_counts(tok, prompts)
    assert row["prompt_unk"] >= 3 and row["prompt_tokens"] > row["answer_tokens"]
    table = vocab_coverage(policy, {"toy": ds})
    assert bool(table.loc[0, "over_threshold"]) and 0.3 > UNK_SHARE_WARN
    (msg,) = coverage_warnings(table, policy.name, policy.kind)
    assert "toy" in msg and "30.0% of the answers" in msg and "model.name_or_path" in msg
    clean = vocab_coverage(policy, {"toy": _dataset(["the makes ."])})
    assert not clean.loc[0, "over_threshold"] and coverage_warnings(clean, policy.name, policy.kind) == []


def test_large_datasets_are_sampled_deterministically(tok):
    policy = Policy(model=None, tokenizer=tok, kind="tiny", name="embedded")
    ds = _dataset(["the makes ."] * 30 + ["qzxv"] * 30)
    a, b = dataset_coverage(policy, ds, max_responses=10), dataset_coverage(policy, ds, max_responses=10)
    assert a == b and a["responses"] == 10 and a["of_responses"] == 60
