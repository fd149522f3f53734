"""``edit-suite bench decoding``: lean decoding (``model.lean_decoding``, ``model/lean_decode.py``) against
transformers generate on the embedded grader, at the demo's batch size and token budget (greedy grading as 07
runs it, row-seeded rollouts as 01 samples them), with the rows asserted identical before any ratio is reported.
A third arm runs the lean loop with transformers' forward at every step (``model/lean_forward.py``'s one-token
step switched off), so the loop's share and the step's share of the ratio are reported apart; a fourth keeps every
row in every forward (``lean_decode.COMPACT_EVERY`` 0), so compaction's share is reported too, and a fifth runs
without the shared-prompt attention (``lean_decode.SHARE_PROMPTS`` off, ``model/shared_prompt.py``: the rollouts'
rows of one prompt read its keys once), so its share is reported as well. Compaction computes a live row's logits
in a smaller batch and the shared prompt sums its attention in another order, either of which may round
differently, so their rows are compared (the share equal), not asserted."""
from __future__ import annotations

import contextlib
import time
from unittest import mock

import pandas as pd

from edit_lib.config import load_profile
from edit_lib.data.registry import build_dataset
from edit_lib.model import lean_decode
from edit_lib.model.generate import SamplingConfig, eval_sampling, generate, rollout_sampling
from edit_lib.model.policy import Policy, load_policy
from edit_lib.runner.register import register_all


# transformers generate; the lean loop on transformers' forward; with its step, every row kept; with compaction;
# with compaction and shared prompts (today's lean decoding)
ARMS = ("generate", "loop", "whole", "compact", "lean")


def _timed(model, tok, prompts, cfg: SamplingConfig, arm: str) -> tuple[float, pd.DataFrame]:
    step_off = mock.patch.object(lean_decode, "why_not", lambda hf: "bench: the step is off")
    whole = mock.patch.object(lean_decode, "COMPACT_EVERY", 0)
    unshared = mock.patch.object(lean_decode, "SHARE_PROMPTS", False)
    t0 = time.perf_counter()
    with step_off if arm == "loop" else contextlib.nullcontext(), \
            whole if arm in ("loop", "whole") else contextlib.nullcontext(), \
            unshared if arm != "lean" else contextlib.nullcontext():
        rows = generate(model, tok, prompts, cfg, progress=False, lean=arm != "generate")
    return time.perf_counter() - t0, rows


def demo_grading_prompts() -> tuple:
    """(the demo profile, its grader's model and tokenizer, the grading prompts of its SAS-like world's training
    answers): what the decoding benchmarks decode."""
    register_all()
    prof = load_profile("demo")
    model, tok, kind = load_policy(prof.model.name_or_path)
    policy = Policy(model=model, tokenizer=tok, kind=kind, name=prof.model.name_or_path)
    ds = build_dataset(next(d for d in prof.data.datasets if d.name == "synth_sas"), seed=prof.run.seed)
    return prof, model, tok, [policy.grading_input(ds.question(r), r.answer) for r in ds.responses
                              if r.split == "train"]


def bench_decoding(n_greedy: int = 128, n_sampled: int = 16, repeats: int = 2) -> dict:
    """Greedy grading of ``n_greedy`` prompts (the demo's ``eval`` section: App. B, one greedy completion per
    marking) and row-seeded sampling of ``n_sampled`` prompts x ``rollouts.n_per_response`` (the demo's
    ``rollouts`` section, Table 9's T=1.0) of the demo's SAS-like world, each ``repeats`` times with generate and
    with the lean loop on transformers' forward and with the lean loop and its one-token step, in turn; the fastest
    of each counts. Raises AssertionError when a row of the loop or the whole-batch arm differs from generate's.
    ``ratio``: generate seconds over lean seconds; ``ratio_step``: the loop on transformers' forward over the
    whole-batch arm; ``ratio_compact``: the whole-batch arm over the compacted one, ``same_rows_compact`` the share of
    its rows equal to generate's; ``ratio_shared``: the compacted arm over lean (shared prompts too),
    ``same_rows_shared`` the share of lean's rows equal to generate's; ``ratio_total`` and the other ``*_total``: both
    modes together."""
    prof, model, tok, prompts = demo_grading_prompts()
    out: dict = dict(model=prof.model.name_or_path, repeats=repeats)
    modes = {"greedy": (eval_sampling(prof.eval, prof.run.seed), prompts[:n_greedy]),
             "sampled": (rollout_sampling(prof.rollouts, prof.run.seed), prompts[:n_sampled])}
    for mode, (cfg, chosen) in modes.items():
        best = dict.fromkeys(ARMS, float("inf"))
        rows = {}
        for _ in range(repeats):
            for arm in ARMS:
                seconds, rows[arm] = _timed(model, tok, chosen, cfg, arm)
                best[arm] = min(best[arm], seconds)
        for arm in ("loop", "whole"):
            pd.testing.assert_frame_equal(rows["generate"], rows[arm])  # the same rows, or no ratio at all
        same = {arm: round(float((rows[arm].text == rows["generate"].text).mean()), 4) for arm in ("compact", "lean")}
        out[mode] = dict(prompts=len(chosen), rows=len(rows["lean"]), batch_size=cfg.batch_size,
                         max_new_tokens=cfg.max_new_tokens, mean_new_tokens=round(float(rows["lean"].n_tokens.mean()), 1),
                         max_tokens=int(rows["lean"].n_tokens.max()), **{f"{a}_s": round(best[a], 2) for a in ARMS},
                         ratio=round(best["generate"] / best["lean"], 3),
                         ratio_step=round(best["loop"] / best["whole"], 3),
                         ratio_compact=round(best["whole"] / best["compact"], 3),
                         ratio_shared=round(best["compact"] / best["lean"], 3), identical=True,
                         same_rows_compact=same["compact"], same_rows_shared=same["lean"])
    total = {k: sum(out[m][f"{k}_s"] for m in modes) for k in ARMS}
    out["ratio_total"] = round(total["generate"] / total["lean"], 3)
    out["ratio_step_total"] = round(total["loop"] / total["whole"], 3)
    out["ratio_compact_total"] = round(total["whole"] / total["compact"], 3)
    out["ratio_shared_total"] = round(total["compact"] / total["lean"], 3)
    return out
