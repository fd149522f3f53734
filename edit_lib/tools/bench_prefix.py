"""``edit-suite bench prefix``: greedy grading with each batch's common prompt prefix encoded once
(``model.prefix_cache``, ``model/prefix_cache.py``) against the plain batched call, on the same grading prompts,
with the outputs compared row for row. Run on the embedded grader and, where ``make real-model`` installed it, on
SmolLM2-135M-Instruct through its chat template (the cpu-real model, where the prompt prefix is long)."""
from __future__ import annotations

import time

from edit_lib.config import load_profile
from edit_lib.data.registry import build_dataset
from edit_lib.data.schema import Dataset
from edit_lib.model.generate import SamplingConfig, generate
from edit_lib.model.policy import Policy, load_policy
from edit_lib.runner.register import register_all

KEY = ["prompt_index", "rollout_id", "text", "n_tokens"]


def _grading_prompts(policy: Policy, ds: Dataset, split: str, n_per_question: int, n_questions: int) -> list[str]:
    """Grading prompts of ``ds``: ``n_per_question`` answers of ``split`` for each of its first ``n_questions``
    questions (one question's prompts share everything but the answer)."""
    out = []
    for qid in list(ds.questions)[:n_questions]:
        rs = [r for r in ds.responses if r.split == split and r.question_id == qid][:n_per_question]
        out += [policy.grading_input(ds.question(r), r.answer) for r in rs]
    return out


def _first_dataset(profile: str) -> Dataset:
    prof = load_profile(profile)
    return build_dataset(prof.data.datasets[0], seed=prof.run.seed)


def _one(model, tok, kind: str, name: str, cfg: SamplingConfig, data: tuple[str, Dataset, str],
         n_per_question: int, n_questions: int) -> dict:
    policy = Policy(model=model, tokenizer=tok, kind=kind, name=name)
    label, ds, split = data
    prompts = _grading_prompts(policy, ds, split, n_per_question, n_questions)
    lengths = [len(tok(p)["input_ids"]) for p in prompts]
    t0 = time.perf_counter()
    plain = generate(model, tok, prompts, cfg, progress=False)
    t_plain = time.perf_counter() - t0
    t0 = time.perf_counter()
    shared = generate(model, tok, prompts, cfg, progress=False, share_prefix=True)
    t_shared = time.perf_counter() - t0
    differing = int((plain[KEY] != shared[KEY]).any(axis=1).sum())
    return dict(model=name, data=f"{label}:{split}", prompts=len(prompts), questions=n_questions,
                mean_prompt_tokens=sum(lengths) / len(lengths), mean_new_tokens=float(plain.n_tokens.mean()),
                plain_s=round(t_plain, 2), shared_s=round(t_shared, 2), speedup=round(t_plain / t_shared, 3),
                rows_differing=differing)


def bench_prefix(n_per_question: int = 16, n_questions: int = 2, max_new_tokens: int = 64,
                 batch_size: int = 8) -> dict:
    """Greedy grading (App. B: one greedy completion per marking) of ``n_questions`` x ``n_per_question`` prompts,
    batches of ``batch_size``, plain against shared-prefix: the embedded grader on the demo's SAS-like world, and
    SmolLM2-135M-Instruct (zero-shot) on cpu-real's ASAP answers (the demo world where ASAP is absent).
    ``speedup``: plain seconds over shared seconds; ``rows_differing``: rows whose text or token count differ (0
    expected; floating-point differences may flip a near-tie)."""
    from edit_lib.data.errors import DataError
    from edit_lib.model.gguf_model import NAME, available
    register_all()
    cfg = SamplingConfig.evaluation(max_new_tokens=max_new_tokens, batch_size=batch_size)
    name = load_profile("demo").model.name_or_path
    demo = ("demo", _first_dataset("demo"), "train")
    out = dict(max_new_tokens=max_new_tokens, batch_size=batch_size,
               embedded=_one(*load_policy(name), name, cfg, demo, n_per_question, n_questions))
    ok, why = available()
    if not ok:
        out[NAME] = dict(skipped=why)
        return out
    try:  # the cpu-real data where it is on this machine
        data = ("cpu-real", _first_dataset("cpu-real"), "id_test")
    except (DataError, FileNotFoundError):
        data = demo
    out[NAME] = _one(*load_policy(NAME), NAME, cfg, data, n_per_question, n_questions)
    return out
