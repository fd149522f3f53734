"""Benchmarks of App. B's packed forwards and of the signals' cost: packed (one pass, block mask) vs naive probe
and audit, ``packed-sft`` (the warm-up's prefix-shared step against TRL's padded batch), ``shaping`` and ``precision``.

The probe and audit run on a small RANDOM Qwen3 the size of the embedded grader (``model.toy``: no weights needed),
so the numbers measure the packing, not a model. ``bench_precision``: on a finished run's rollouts, the probe read
three ways on the same boundaries (the float32 policy, the reference; a bfloat16 copy read in bfloat16, the paper
profile; the same copy read in float32, ``probe.dtype = 'float32'``), each against the reference: the largest
change of a mark probability and of the expected mark, the share of boundaries whose argmax mark changes, of
repaired rollouts whose Alg. 1 picks change (the audit held at 03's values), and of rollouts whose Eq. 6 penalty
fires differently at the profile's beta_drift. Runs on the profile's ``model.device``.

Longer than 400 lines because it holds every benchmark of the packed forwards and of the signals' cost, each a
short declaration for ``tools.bench.Comparison`` beside the inputs it builds; one file per benchmark would bring
back the satellites the library folded.
"""
from __future__ import annotations

import copy
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd
import torch

from edit_lib.artifacts import recorded_stage_dir
from edit_lib.config import load_profile, Profile
from edit_lib.data.registry import build_dataset
from edit_lib.model.policy import load_policy_from_profile
from edit_lib.model.toy import toy_model, toy_tokenizer
from edit_lib.runner.keys import register_all
from edit_lib.signals.grounding import LAYOUTS, audit_rollouts, audit_rollouts_naive
from edit_lib.signals.probe import build_probe_tree, mark_continuations, probe_rollouts, probe_rollouts_naive
from edit_lib.tools.bench import clocked, Comparison
from edit_lib.train import rewards, rl
from edit_lib.train.rl import rl_dataset, train_rl_arm


def _grader_model(attn: str, seed: int):
    # the embedded grader's size: hidden 128, 4 layers, 4 heads, intermediate 512, vocab ~1000
    return toy_model("qwen3", vocab_size=1000, hidden=128, layers=4, heads=4, kv_heads=4, intermediate=512,
                     attn=attn, seed=seed, init_range=0.05)


def _max_err(*fields: str):
    """A check: the largest absolute difference of each of ``fields`` between the two arms' reads (lists of
    per-rollout results), as ``max_abs_err_<field>``."""
    def check(naive, packed) -> dict:
        return {f"max_abs_err_{f}": max(float(np.abs(np.asarray(getattr(a, f)) - np.asarray(getattr(b, f))).max())
                                        for a, b in zip(packed, naive)) for f in fields}
    return check


def _rollouts(rng, n, prompt_len, n_steps, step_len, vocab):
    prompts = [rng.integers(3, vocab, prompt_len).tolist() for _ in range(n)]
    steps = [[rng.integers(3, vocab, int(rng.integers(step_len // 2, step_len * 3 // 2))).tolist()
              for _ in range(n_steps)] for _ in range(n)]
    return prompts, steps


def bench_probe(n_rollouts: int = 2, n_steps: int = 5, max_mark: int = 26, prompt_len: int = 192,
                step_len: int = 40, repeats: int = 3, attn: str = "sdpa", threads: int = 2, seed: int = 0) -> dict:
    """Time the posterior belief probe (Eq. 1-2): naive (a pass per boundary and mark) vs packed (one call)."""
    torch.set_num_threads(threads)
    model = _grader_model(attn, seed)
    scaffold, marks = mark_continuations(toy_tokenizer(), "Final mark : ", max_mark)
    rng = np.random.default_rng(seed)
    prompts, steps = _rollouts(rng, n_rollouts, prompt_len, n_steps, step_len, 1000)
    kw = dict(gold=rng.integers(0, max_mark + 1, n_rollouts).tolist(), temperature=0.7)
    return Comparison(
        {"naive": lambda: probe_rollouts_naive(model, prompts, steps, scaffold, marks, **kw),
         "packed": lambda: probe_rollouts(model, prompts, steps, scaffold, marks, batch_size=n_rollouts, **kw)},
        _max_err("probs", "expected"), repeats=repeats, statistic="median", warmup=True, shapes=dict(
            attn=attn, threads=threads, n_rollouts=n_rollouts, n_boundaries=n_steps + 1, max_mark=max_mark,
            mark_tokens_max=max(len(m) for m in marks), prompt_len=prompt_len,
            mean_step_len=float(np.mean([len(s) for st in steps for s in st])),
            naive_forward_passes=n_rollouts * (n_steps + 1) * (max_mark + 1), packed_forward_calls=1,
            packed_tokens=sum(len(build_probe_tree(p, st, scaffold, marks)[0]) for p, st in zip(prompts, steps)))
    ).run()


def _naive_audit_tokens(ctx, ctx_rho, ctx_a, steps) -> int:
    """Tokens the naive audit feeds the model: context (+ prefix) + step, per step and variant."""
    n = 0
    for c, cr, ca, st in zip(ctx, ctx_rho, ctx_a, steps):
        for k in range(len(st)):
            chained = sum(map(len, st[:k + 1]))
            n += len(c) + chained + len(cr) + chained + len(ca) + chained + len(c) + len(st[k])
    return n


def bench_audit(n_rollouts: int = 2, n_steps: int = 5, prompt_len: int = 192, step_len: int = 40,
                repeats: int = 5, attn: str = "sdpa", threads: int = 2, seed: int = 0, layout: str = "rows") -> dict:
    """Time the grounding audit (Eq. 3): naive (a pass per step and variant) vs packed (one call per rollout)."""
    torch.set_num_threads(threads)
    model = _grader_model(attn, seed)
    rng = np.random.default_rng(seed)
    ctx, steps = _rollouts(rng, n_rollouts, prompt_len, n_steps, step_len, 1000)
    mask_id = 2
    # [MASK] replaces a 40-token rubric span / a 30-token answer span of the context
    args = (ctx, [c[:40] + [mask_id] + c[80:] for c in ctx], [c[:120] + [mask_id] + c[150:] for c in ctx], steps)

    def check(naive, packed) -> dict:  # each variant's summed step NLLs (Eq. 3's terms; G is reduced from them)
        return dict(max_abs_err_nll=max(float(np.abs(a.nll[v] - b.nll[v]).max())
                                        for a, b in zip(packed, naive) for v in a.nll))
    return Comparison(
        {"naive": lambda: audit_rollouts_naive(model, *args),
         "packed": lambda: audit_rollouts(model, *args, batch_size=1, layout=layout)},
        check, repeats=repeats, statistic="median", warmup=True, shapes=dict(
            layout=layout, attn=attn, threads=threads, n_rollouts=n_rollouts, n_steps=n_steps, prompt_len=prompt_len,
            mean_step_len=float(np.mean([len(s) for st in steps for s in st])),
            naive_forward_passes=n_rollouts * n_steps * 4, packed_forward_calls=n_rollouts,
            naive_tokens=_naive_audit_tokens(*args),
            packed_tokens=sum(len(t) for r in zip(*args) for t in LAYOUTS[layout](*r)[0]))
    ).run()


def bench_probe_real(repeats: int = 3, threads: int = 2, max_mark: int = 3) -> dict:
    """The posterior belief probe (Eq. 1-2) on a real pretrained model and tokenizer: SmolLM2-135M-Instruct
    (``gguf_model``, installed by ``make real-model``) grading an ASAP-style answer through its chat template,
    naive (one pass per boundary and mark) vs packed (one call, App. B). Raises ``RealModelMissing`` when the
    model package is absent."""
    from edit_lib.model.gguf_model import NAME
    from edit_lib.model.policy import Policy, load_policy
    from edit_lib.signals.probe import probe_readout, rollout_tokens
    _real_model()
    torch.set_num_threads(threads)
    model, tok, kind = load_policy(NAME)
    policy = Policy(model=model, tokenizer=tok, kind=kind, name=NAME)
    prompt = ("Question: After reading the group's procedure, describe what additional information you would "
              "need in order to replicate the experiment.\nRubric: 3 points: three additional pieces of "
              "information; 2 points: two; 1 point: one; 0 points: none.\nAnswer: You would need to know how much "
              "vinegar was used, what type of container, and the size of the samples.\n"
              f"End with the line 'Final mark: m/{max_mark}'.")
    completion = ("The answer asks for the amount of vinegar.\nThat is one additional piece of information.\n"
                  "It also asks for the type of container.\nThat is a second piece.\n"
                  "It asks for the size of the samples, a third piece.\nFinal mark: 3/3")
    rt = rollout_tokens(policy, policy.input_text(prompt), completion, rule="auto")
    ro = probe_readout(policy, "Final mark: ", "/", max_mark, read="next_token")
    kw = dict(gold=[3], temperature=0.7)
    n_b = len(rt.steps_ids) + 1
    return Comparison(
        {"naive": lambda: probe_rollouts_naive(model, [rt.prompt_ids], [rt.steps_ids], ro.scaffold, ro.marks, **kw),
         "packed": lambda: probe_rollouts(model, [rt.prompt_ids], [rt.steps_ids], ro.scaffold, ro.marks, **kw)},
        _max_err("probs"), repeats=repeats, statistic="median", warmup=True, shapes=dict(
            model=NAME, threads=threads, n_boundaries=n_b, max_mark=max_mark, prompt_tokens=len(rt.prompt_ids),
            step_tokens=sum(len(s) for s in rt.steps_ids), naive_forward_passes=n_b * (max_mark + 1),
            packed_forward_calls=1)
    ).run()


def _real_model() -> None:
    """Raise ``RealModelMissing`` unless ``make real-model`` installed SmolLM2-135M-Instruct; register it as a
    named Base."""
    from edit_lib.model.gguf_model import RealModelMissing, available
    register_all()
    ok, why = available()
    if not ok:
        raise RealModelMissing(why)


# ------------------------------------------------------------------ ``edit-suite bench packed-sft``
# One warm-up step (``train.packed_sft``) on the real model against TRL's way. The naive way is what ``train.sft``
# (TRL) does with the same pairs: one right-padded batch of whole prompt + completion sequences, LoRA on every
# layer. The packed way lays the shared prompt prefix of one question's batch out once (App. B's block mask); with
# ``lora_layers`` the backward pass also stops early. Both compute the same completion-only loss. A last arm runs
# the packed way under ``attn_implementation: sdpa_blocks`` (``model.block_attention``), which skips the key columns
# the block mask hides.

def _osmosis_question():
    """A project-written key-element question in the ASAP style (eight elements, count-to-band levels)."""
    from edit_lib.data.schema import Level, LevelScheme, MarkingPoint, Question
    pts = tuple(MarkingPoint(f"k{i}", t) for i, t in enumerate((
        "Water moves from a region of high water concentration to a region of low water concentration.",
        "The cell membrane is selectively permeable and lets water through but not larger solutes.",
        "Osmosis continues until the concentrations on both sides of the membrane are equal.",
        "In a salt solution the cell loses water and shrinks (plasmolysis in plant cells).",
        "In pure water an animal cell swells and may burst because it has no cell wall.",
        "A plant cell in pure water becomes turgid; the cell wall stops it bursting.",
        "Active transport moves substances against the gradient and needs energy from respiration.",
        "Diffusion of solutes is passive and needs no energy from the cell."), start=1))
    levels = (Level(1, "One or two key elements", 1, 1, 1), Level(2, "Three key elements", 2, 2, 3),
              Level(3, "Four key elements", 3, 3, 4))
    text = ("Explain how water moves into and out of cells, and what happens to plant and animal cells placed in "
            "salt solution and in pure water.")
    return Question("bench", "biology", text, "", LevelScheme(pts, levels), 3)


def bench_packed_sft(batch_size: int = 16, lora_layers: int = 15, repeats: int = 2, threads: int = 2) -> dict:
    """Seconds of one optimiser step's forward + backward for ``batch_size`` answers of one question on
    SmolLM2-135M-Instruct: TRL-style padded batch (``naive``, LoRA on every layer) vs packed (every layer) vs
    packed with LoRA on the last ``lora_layers`` layers, the last also under ``sdpa_blocks``; each arm's loss
    beside its time. Raises ``RealModelMissing`` without the model package."""
    from edit_lib.config import LoraConfig
    from edit_lib.model import block_attention
    from edit_lib.model.gguf_model import NAME
    from edit_lib.model.policy import Policy, load_policy
    from edit_lib.model.warmup import judgement
    from edit_lib.train.packed_sft import encode_pair, lora_on_layers, pair_tree, packed_loss
    _real_model()
    torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    words = "water moves across the membrane cell salt solution shrinks swells osmosis turgid wall".split()
    q = _osmosis_question()
    answers = [" ".join(rng.choice(words, size=int(rng.integers(10, 60)))) + "." for _ in range(batch_size)]
    marks = [int(rng.integers(0, 4)) for _ in answers]
    tokens: dict[str, int] = {}  # tokens fed to the model: the padded batch's and the packed tree's

    def arm(layers: int, blocks: bool, packed: bool):
        base, tok, kind = load_policy(NAME)
        if blocks:
            base.set_attn_implementation(block_attention.register())
        policy = Policy(model=base, tokenizer=tok, kind=kind, name=NAME)
        enc = [encode_pair(tok, policy.grading_input(q, a), judgement(3, m)) for a, m in zip(answers, marks)]
        model = lora_on_layers(base, LoraConfig(r=16, alpha=32, dropout=0.0), layers).train()
        tree, targets = pair_tree(enc)
        tokens["packed" if packed else "naive"] = len(tree) if packed else batch_size * max(len(p) + len(c)
                                                                                            for p, c in enc)

        def step() -> float:
            loss = packed_loss(model, tree, targets) if packed else _padded_loss(model, enc, tok.eos_token_id)
            loss.backward()
            model.zero_grad(set_to_none=True)
            return float(loss)
        return step

    arms = {"naive": arm(0, False, False), "packed_all_layers": arm(0, False, True),
            "packed_last_layers": arm(lora_layers, False, True),
            "packed_last_layers_blocks": arm(lora_layers, True, True)}
    out = Comparison(arms, lambda a, b: dict(loss_difference=abs(a - b)), repeats=repeats, statistic="median",
                     warmup=True, shapes=dict(model=NAME, batch_size=batch_size, lora_layers=lora_layers)).run()
    return dict(out, naive_tokens=tokens["naive"], packed_tokens=tokens["packed"],
                ratio_blocks_over_sdpa=round(out["packed_last_layers_s"] / out["packed_last_layers_blocks_s"], 3))


def _padded_loss(model, enc, pad_id: int) -> torch.Tensor:
    """TRL's completion-only loss on one right-padded batch of whole sequences (the naive way)."""
    L = max(len(p) + len(c) for p, c in enc)
    ids = torch.full((len(enc), L), pad_id)
    att = torch.zeros((len(enc), L), dtype=torch.long)
    labels = torch.full((len(enc), L), -100)
    for b, (p, c) in enumerate(enc):
        ids[b, :len(p) + len(c)] = torch.tensor(p + c)
        att[b, :len(p) + len(c)] = 1
        labels[b, len(p):len(p) + len(c)] = torch.tensor(c)
    return model(input_ids=ids, attention_mask=att, labels=labels, use_cache=False).loss


# ------------------------------------------------------------------ ``edit-suite bench shaping``
# What belief shaping costs per optimiser step (Sec. 2.3; App. B "Compute budget": about 2 s on a 12 s step, 1.17x).
# EDIT-RL and GRPO run the same steps from the same initialisation, prompts, seed and Table 9 recipe and differ only
# in the shaping reward, whose frozen probe reads every completion of the step in packed batches
# (``train.rewards.shaping_terms``); step times come from a callback, the shaping reward's calls timed inside.
# ``step_time_ratio``: per EDIT-RL step, step time / (step time - shaping time), the median over steps after the
# first. ``arm_ratio`` (median EDIT-RL step / median GRPO step) is beside it, but sampling diverges after the first
# update, so it carries generation-length noise (the arms' mean completion lengths are reported too).

def _timer():
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        """Wall time per optimiser step and the shaping reward's time within it (``spent`` is filled by
        ``_timed_shaping``)."""

        def __init__(self):
            self.times, self.shaping, self.spent, self._t0, self._n = [], [], [], None, 0

        def on_step_begin(self, args, state, control, **kw):
            self._t0, self._n = time.perf_counter(), len(self.spent)

        def on_step_end(self, args, state, control, **kw):
            self.times.append(time.perf_counter() - self._t0)
            self.shaping.append(sum(self.spent[self._n:]))

    return StepTimer()


def _timed_shaping(spent: list):
    """``make_shaping_reward`` whose reward function adds its wall time per call to ``spent``."""
    return lambda *a, **kw: clocked(rewards.make_shaping_reward(*a, **kw), spent)


def bench_shaping(profile: str = "demo", steps: int = 8, dataset: str | None = None) -> dict:
    """Time ``steps`` optimiser steps of GRPO and of EDIT-RL (same init, prompts, seed) on ``dataset`` (default:
    the first of ``rl.datasets`` or of the profile) with the profile's RL recipe; the module docstring says how."""
    P = load_profile(profile)
    register_all()  # 'embedded' / 'micro' are named Bases
    spec = {d.name: d for d in P.data.datasets}
    name = dataset or (list(P.rl.datasets) or list(spec))[0]
    ds = build_dataset(spec[name], seed=P.run.seed)
    shaping = {name: (P.rl.shaping_for(name).beta_drift, P.rl.shaping_for(name).gamma)}
    out = {}
    for arm in ("grpo", "edit_rl"):
        policy = load_policy_from_profile(P)
        frozen = None
        if arm == "edit_rl":
            frozen = load_policy_from_profile(P)
            frozen.model.requires_grad_(False)
        timer, spent = _timer(), []
        timer.spent = spent
        with tempfile.TemporaryDirectory() as tmp, mock.patch.object(rl, "make_shaping_reward", _timed_shaping(spent)):
            res = train_rl_arm(policy, rl_dataset(policy, ds), P.rl, P.sft.lora, tmp, name, P.run.seed, arm,
                               frozen_probe_policy=frozen, probe_cfg=P.probe, shaping=shaping,
                               step_rule=P.steps.rule, max_steps=steps, callbacks=[timer],
                               per_device_batch_size=P.rl.per_device_batch_size or None)
        lengths = [e["completions/mean_length"] for e in res.log_history if "completions/mean_length" in e]
        out[arm] = dict(step_seconds=timer.times, median_step_seconds=statistics.median(timer.times[1:] or timer.times),
                        shaping_seconds=timer.shaping,
                        mean_completion_length=statistics.mean(lengths) if lengths else None)
    e = out["edit_rl"]
    same = [t / (t - sh) for t, sh in zip(e["step_seconds"], e["shaping_seconds"]) if t > sh][1:]
    return dict(profile=P.name, dataset=name, steps=steps,
                completions_per_step=P.rl.rollouts_per_prompt * P.rl.prompts_per_step,
                grpo=out["grpo"], edit_rl=e, step_time_ratio=statistics.median(same) if same else None,
                shaping_share_of_step=statistics.median(sh / t for t, sh in zip(e["step_seconds"][1:],
                                                                                 e["shaping_seconds"][1:])),
                arm_ratio=e["median_step_seconds"] / out["grpo"]["median_step_seconds"])


# ---------------------------------------------------------------- ``edit-suite bench precision``

READS = {"bfloat16": "model", "bfloat16_read_float32": "float32"}
RULES = ("edit", "belief_shift_only")


def belief_differences(ref: pd.DataFrame, other: pd.DataFrame) -> dict:
    """Largest |p| and |expected mark| changes, and the share of boundaries whose argmax changes."""
    keys = ["dataset", "response_id", "rollout_id", "k"]
    m = ref.merge(other, on=keys, suffixes=("", "_o"), validate="one_to_one")
    if len(m) != len(ref):
        raise ValueError(f"the reads cover different boundaries: {len(ref)} against {len(other)}")
    dp = [float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in zip(m["probs"], m["probs_o"])]
    return dict(boundaries=len(m), max_abs_prob=max(dp, default=0.0),
                max_abs_expected=float((m["expected"] - m["expected_o"]).abs().max()),
                argmax_changed=float((m["argmax"] != m["argmax_o"]).mean()))


def picks(rollouts, beliefs, audit, profile: Profile) -> dict:
    """Alg. 1's picks (k lists, best first) per repaired rollout under each rule ('edit', 'belief_shift_only'),
    the audit held fixed: {rule: {rollout: [k, ...]}}."""
    from edit_lib.revision.phase1 import repair_sample
    from edit_lib.selection import ROLLOUT, dataset_percentiles, select_candidates
    sample = repair_sample(rollouts, beliefs, audit, 0, profile.run.seed)
    pct = dataset_percentiles(audit, profile.selection.percentile)
    out = {}
    for rule in RULES:
        sel = select_candidates(sample.steps, profile.selection, rule, percentiles=pct)
        got = out[rule] = {tuple(k): [] for k in sample.keys[ROLLOUT].itertuples(index=False)}
        for r in sel.sort_values([*ROLLOUT, "rank"]).itertuples(index=False):
            got[(r.dataset, r.response_id, r.rollout_id)].append(int(r.k))
    return out


def pick_changes(a: dict, b: dict) -> dict:
    if set(a) != set(b):
        raise ValueError("the two reads repair different rollouts")
    changed = sum(a[k] != b[k] for k in a)
    first = sum(a[k][:1] != b[k][:1] for k in a)
    return dict(rollouts=len(a), picks_changed=changed / max(len(a), 1), first_pick_changed=first / max(len(a), 1))


def firings(beliefs: pd.DataFrame, profile: Profile) -> pd.DataFrame:
    """Per boundary k >= 1: does Eq. 6's hinge max(0, |m_hat_k - m*| - beta_drift) fire (the profile's
    beta_drift per dataset)?"""
    b = beliefs[beliefs.k >= 1].copy()
    beta = b["dataset"].map(lambda d: profile.rl.shaping_for(d).beta_drift)
    b["fires"] = (b["expected"] - b["gold"]).abs() > beta
    return b[["dataset", "response_id", "rollout_id", "k", "fires"]]


def firing_changes(ref: pd.DataFrame, other: pd.DataFrame) -> dict:
    keys = ["dataset", "response_id", "rollout_id"]
    m = ref.merge(other, on=[*keys, "k"], suffixes=("", "_o"), validate="one_to_one")
    per_rollout = m.groupby(keys).agg(a=("fires", "any"), b=("fires_o", "any"))
    return dict(boundary_firings_changed=float((m["fires"] != m["fires_o"]).mean()),
                rollout_penalty_changed=float((per_rollout.a != per_rollout.b).mean()),
                rollouts_penalised=int(per_rollout.a.sum()), rollouts=len(per_rollout))


def bench_precision(profile: str | Path = "smoke", run_root: str | Path | None = None, overrides=(),
                    max_rollouts: int = 0) -> dict:
    """The comparison above on the run ``<run_root>/<profile name>`` (``max_rollouts`` > 0: a seeded subset of
    02's sample)."""
    from edit_lib.data.registry import load_built
    from edit_lib.model.policy import load_policy_from_profile
    from edit_lib.revision.phase1 import read_signals
    from edit_lib.runner.variants import resolve
    from edit_lib.signals.probe import bfloat16_copy
    from edit_lib.signals.tables import probe_table, select_rollouts
    register_all()
    P, paths, _ = resolve(profile, list(overrides), run_root)  # the run of those values: a variant's folder
    d00, d01, d02, d03 = (recorded_stage_dir(paths, s) for s in ("00_data", "01_base_policy", "02_probing",
                                                           "03_audit_validation"))
    rollouts, _, audit = read_signals(d01, d02, d03, P.probe.read, P.audit)
    sel = select_rollouts(rollouts, max_rollouts or P.probe.max_rollouts, seed=P.run.seed)
    datasets = load_built(d00)
    P32 = dataclasses.replace(P, model=dataclasses.replace(P.model, dtype="float32"))
    policy = load_policy_from_profile(P32)
    t0 = time.perf_counter()
    reads = {"float32": probe_table(policy, datasets, sel, dataclasses.replace(P.probe, dtype="model"),
                                    P.steps.rule, progress=False)}
    seconds = {"float32": time.perf_counter() - t0}
    low = copy.copy(policy)
    low.model = bfloat16_copy(policy.model)
    for name, dtype in READS.items():
        t0 = time.perf_counter()
        reads[name] = probe_table(low, datasets, sel, dataclasses.replace(P.probe, dtype=dtype), P.steps.rule,
                                  progress=False)
        seconds[name] = time.perf_counter() - t0
    ref_picks = picks(rollouts, reads["float32"], audit, P)
    ref_fire = firings(reads["float32"], P)
    rows = []
    for name in READS:
        got = picks(rollouts, reads[name], audit, P)
        row = dict(read=name, **belief_differences(reads["float32"], reads[name]),
                   **{f"{k}_{rule}" if k != "rollouts" else "repaired_rollouts": v
                      for rule in RULES for k, v in pick_changes(ref_picks[rule], got[rule]).items()},
                   **firing_changes(ref_fire, firings(reads[name], P)), seconds=seconds[name])
        rows.append(row)
    return dict(profile=P.name, run=str(paths.root), device=str(next(policy.model.parameters()).device),
                probed_rollouts=len(sel), float32_seconds=seconds["float32"], step_rule=P.steps.rule,
                probe_read=P.probe.read, beta_drift={d: P.rl.shaping_for(d).beta_drift for d in datasets},
                comparisons=rows)


def format_precision(result: dict) -> str:
    """The comparison as a short table (one row per bfloat16 read)."""
    cols = ["read", "boundaries", "max_abs_prob", "max_abs_expected", "argmax_changed", "picks_changed_edit",
            "first_pick_changed_edit", "repaired_rollouts", "boundary_firings_changed", "rollout_penalty_changed"]
    df = pd.DataFrame(result["comparisons"])[cols]
    return (f"bfloat16 against float32 on {result['probed_rollouts']} rollouts of {result['run']} "
            f"({result['device']}):\n" + df.round(4).to_string(index=False))
