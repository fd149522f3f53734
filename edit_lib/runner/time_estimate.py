"""GPU time ESTIMATE for ``edit-suite run --dry-run --gpu NAME``: the rules, the GPUs, each stage's work (at
``dataset_sizes``) and App. B's figures beside it. Longer than 400 lines because the rules and the work are one.

Rules (N: parameters in matrix multiplies, every weight but the input embedding table; L layers; d_q = query heads
x head_dim; S tokens of a sequence; n_lora the adapter's parameters):
* forward of one sequence: 2 N S + 2 L d_q S^2 FLOPs (each weight one multiply-add per token; causal attention,
  QK^T and AV over S^2 / 2 query-key pairs).
* LoRA training of one sequence: the full forward, plus the backward through the frozen weights down to the
  lowest adapter (dX = dY W^T costs what Y = X W costs: one more forward of the matmuls; attention's backward is
  twice its forward), plus one more forward where gradient checkpointing recomputes it, plus 6 n_lora S for the
  adapters' own forward and gradients. Frozen weights get no weight gradient, so with checkpointing this is 6 N S
  (the familiar 6 x parameters) and without it 4 N S.
* compute time = FLOPs / (the GPU's dense bf16 peak x MFU). Generation is memory-bandwidth bound instead: each
  decode step reads the weights once for its whole batch and every sequence's KV cache, so decode time = bytes
  read / (HBM bandwidth x efficiency), or the compute time where that is longer; the prompt's prefill is compute.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import NamedTuple

from edit_lib import paper_reference as ref
from edit_lib.systems import ABLATIONS, BASE, BASELINES, EDIT_RL, EDIT_SFT, EDIT_SFT_GRPO, INT_SFT, baselines_loaded, \
    of_source


@dataclass(frozen=True)
class GPU:
    label: str
    bf16_tflops: float  # dense Tensor Core BF16 peak, without 2:4 sparsity (datasheets print it doubled with "*")
    hbm_tb_s: float  # memory bandwidth, TB/s
    memory_gb: float


GPUS = {  # vendor datasheets, by name (values as printed there; dense = the sparsity figure halved)
    "h100": GPU("NVIDIA H100 SXM 80GB", 989.0, 3.35, 80),  # NVIDIA H100 Tensor Core GPU datasheet, SXM column
    "h200": GPU("NVIDIA H200 SXM 141GB", 989.0, 4.8, 141),  # NVIDIA H200 Tensor Core GPU datasheet, SXM column
    "a100": GPU("NVIDIA A100 80GB SXM", 312.0, 2.039, 80),  # NVIDIA A100 Tensor Core GPU datasheet, 80GB SXM
    "l40s": GPU("NVIDIA L40S 48GB", 362.05, 0.864, 48),  # NVIDIA L40S datasheet (GDDR6, not HBM)
}
PAPER_GPU = "h200"  # App. B "Compute budget": "All RL runs use a single GPU (H200 141 GB)"
# Suite's choices, fixed before any GPU timing and printed with every estimate:
MFU = {"train": 0.35,  # LoRA steps under HF Trainer / TRL, bf16, gradient checkpointing: 8B-size matmuls run near
                       # peak, but norms, rotary, the LoRA branch's thin matmuls and the optimiser do not
       "forward": 0.35}  # packed probe / audit reads and prefill: the same matmuls, no backward; the dense 4D
                         # masks keep attention off flash kernels, but attention is under 10% of the FLOPs here
BANDWIDTH_EFFICIENCY = {"hf": 0.3,  # transformers generate: eager per-layer kernels launched from Python each step
                        "vllm": 0.6}  # vLLM: CUDA graphs and paged KV, continuous batching
VLLM_SEQS = 256  # vLLM schedules up to max_num_seqs (its default, 256) sequences at once, whatever batch_size says


def gpu_named(name: str) -> GPU:
    """The GPU called ``name`` (case-insensitive key of ``GPUS``); KeyError naming the known ones."""
    key = name.strip().lower()
    if key not in GPUS:
        raise KeyError(f"--gpu {name!r}: unknown GPU; known: {', '.join(GPUS)} "
                       f"({'; '.join(f'{k} = {g.label}' for k, g in GPUS.items())})")
    return GPUS[key]


def gpu_for_device(device_name: str) -> str | None:
    """The ``GPUS`` key of a CUDA device name (``torch.cuda.get_device_name``), or None when none fits."""
    low = device_name.lower()
    return next((k for k in GPUS if k in low), None)


@dataclass(frozen=True)
class Shape:
    """What the rules need of a model (from ``dry_run.parameter_counts``)."""
    matmul: int  # N: every weight but the input embedding (an untied lm_head is a matmul; a tied one too)
    layers: int
    d_q: int
    kv_bytes: int  # K and V of one token, all layers
    lora: int
    w: int  # bytes per weight element

    @classmethod
    def of(cls, counts: dict, w: int = 2) -> "Shape":
        embed = 0 if counts["tied"] else counts["vocab"] * counts["hidden"]
        return cls(matmul=counts["total"] - embed, layers=counts["layers"], d_q=counts["heads"] * counts["head_dim"],
                   kv_bytes=2 * counts["layers"] * counts["kv_heads"] * counts["head_dim"] * w,
                   lora=counts["trainable"], w=w)


def forward_flops(m: Shape, tokens: float, n: float = 1) -> float:
    """n forwards of ``tokens`` tokens each (module docstring)."""
    return n * (2 * m.matmul * tokens + 2 * m.layers * m.d_q * tokens ** 2)


def train_flops(m: Shape, tokens: float, n: float = 1, checkpointing: bool = True) -> float:
    """n LoRA training passes (forward + backward) of ``tokens`` tokens each (module docstring)."""
    linear, attention, again = 2 * m.matmul * tokens, 2 * m.layers * m.d_q * tokens ** 2, int(checkpointing)
    return n * (linear * (2 + again) + attention * (3 + again) + 6 * m.lora * tokens)


def compute_seconds(flops: float, gpu: GPU, kind: str) -> float:
    return flops / (gpu.bf16_tflops * 1e12 * MFU[kind])


def generate_seconds(m: Shape, gpu: GPU, n: float, batch: int, prompt: float, budget: float, mean: float,
                     backend: str = "hf", adapter_bytes: float = 0.0) -> float:
    """Prefill + decode of ``n`` sequences, ``batch`` at a time. 'hf' batches are static: each decodes until its
    longest completion ends, taken at the ``budget``; 'vllm' keeps ``batch`` sequences decoding and each runs its
    ``mean`` length. A decode step reads the weights (+ an unmerged fp32 adapter) once and each sequence's KV
    cache at its average length."""
    if n <= 0:
        return 0.0
    batch = min(batch, n)
    batches = math.ceil(n / batch) if backend == "hf" else n / batch
    steps = budget if backend == "hf" else mean
    b = n / batches
    context = prompt + steps / 2
    read = batches * steps * (m.matmul * m.w + adapter_bytes + b * m.kv_bytes * context)
    decode_flops = batches * steps * b * (2 * m.matmul + 4 * m.layers * m.d_q * context)
    decode = max(read / (gpu.hbm_tb_s * 1e12 * BANDWIDTH_EFFICIENCY[backend]),
                 compute_seconds(decode_flops, gpu, "forward"))
    return compute_seconds(forward_flops(m, prompt, n), gpu, "forward") + decode


def check_memory_seconds(profile, counts: dict, prompt_tokens: int, gpu: GPU, probe_extra: int = 64) -> dict:
    """The estimate of each phase ``check-gpu --memory`` times (``check_memory``; its shapes in ``profile``):
    random weights, so every completion runs to its budget. Keys match ``check_memory``'s timed phases. Fixed
    per-step costs (kernel launches, Python, the row sampler's CPU draws) are not modelled; on two layers they
    dominate decoding, so its ratios test them, while 02 and 05 (FLOP-bound) test the MFU."""
    m, p, P = Shape.of(counts), profile, prompt_tokens
    C, Ce = p.rollouts.decoding.max_new_tokens, p.eval.decoding.max_new_tokens
    g, Cr = p.rl.rollouts_per_prompt * p.rl.prompts_per_step, p.rl.decoding.max_new_tokens
    adapter = counts["trainable"] * 4
    fwd = lambda fl: compute_seconds(fl, gpu, "forward")  # noqa: E731
    sft_tokens = P + C + 1
    return {
        "01 sampled rollouts": generate_seconds(m, gpu, p.rollouts.batch_size, p.rollouts.batch_size, P, C, C),
        "01 greedy batch": generate_seconds(m, gpu, p.eval.batch_size, p.eval.batch_size, P, Ce, Ce),
        "02 packed probe forward": fwd(forward_flops(m, P + C + probe_extra, p.probe.batch_size)),
        "05 LoRA SFT step": compute_seconds(train_flops(m, sft_tokens, p.sft.per_device_batch_size,
                                                        p.sft.gradient_checkpointing), gpu, "train"),
        "05 greedy batch (adapter)": generate_seconds(m, gpu, p.eval.batch_size, p.eval.batch_size, P, Ce, Ce,
                                                      adapter_bytes=adapter),
        "06 EDIT-RL step": generate_seconds(m, gpu, g, g, P, Cr, Cr)
        + compute_seconds(train_flops(m, P + Cr, g, True), gpu, "train")
        + fwd(forward_flops(m, P + Cr, g)) * (p.rl.beta_kl > 0) + fwd(forward_flops(m, P + Cr + probe_extra, g)),
    }


def compare_times(measured: dict, estimated: dict) -> list[dict]:
    """One row per phase in both: measured and estimated seconds and estimate / measured (None where nothing was
    measured or the measurement is zero)."""
    rows = []
    for phase, est in estimated.items():
        got = measured.get(phase)
        rows.append(dict(phase=phase, measured_s=None if got is None else float(f"{got:.4g}"),
                         estimate_s=float(f"{est:.4g}"), ratio=float(f"{est / got:.3g}") if got else None))
    return rows


TABLE8 = {"sas_history": ("SAS", "History"), "sas_geography": ("SAS", "Geography"), "sas_physics": ("SAS", "Physics"),
          "private_biology": ("Private-Science", "Biology"), "private_physics": ("Private-Science", "Physics")}
# ---------------------------------------------------------------- each stage's work
# Sizes: a dataset on disk is read (responses per split); one that is not gets Table 8's counts where its name is one
# of the paper's datasets, and is left out (said so) otherwise. What no data gives is assumed and printed
# (``assumptions``): prompt tokens, a completion's mean length as a share of its budget, App. B's ratios on
# Private-Biology (incorrect rollouts per rollout, SFT pool per incorrect rollout, 5.2 probe boundaries), and the
# distinct steps 04 rewrites per incorrect rollout. Each stage's work is what its notebook runs (01-08); where a
# count depends on results (pools, kept revisions) the estimate takes the upper or App. B value. App. B's "Compute
# budget" figures (Private-Biology, on its own counts) are set beside an estimate of the same work on its GPU.

SPLIT_OF = {"train": "train", "id_test": "id", "ood_test": "ood"}
MEAN_SHARE = 0.5  # assumption: a completion's mean length is half its token budget (the paper gives no length)
SCAFFOLD_TOKENS = 8  # assumption: tokens of one answer scaffold "Final mark: " and its read (dry_run's 8 / boundary)
AUDIT_ROWS = 4  # grounding.VARIANTS: full, rubric-masked, answer-masked, no-prefix, each about one sequence long
EDITS = 6  # App. I / Table 14: lor_a1, lor_a2, lor_b1, pts_x0.5, pts_x1.5, pts_x2.0 (data.rubric_edits.EDITS)


class Work(NamedTuple):
    """One item of a stage's work: what, its time (seconds here; hours in ``estimate``), how the suite spreads it
    (``GENERATE``, ``RL_RUNS`` or ``SFT``, as ``wall_clock`` says; '' in the stage's process on one GPU) and, for
    ``RL_RUNS`` / ``SFT``, its number of ``runs``."""
    what: str
    time: float
    spread: str = ""
    runs: int = 1


GENERATE, RL_RUNS, SFT = "generate", "rl_runs", "sft"


def app_b(metric: str, system: str = "") -> float:
    """An App. B Private-Biology figure of paper_reference.csv."""
    return ref.value("App. B", metric, system, subject="Biology")


def paper_ratios() -> dict:
    """App. B's Private-Biology figures the estimate assumes for any dataset (each cited in paper_reference.csv;
    App. B: 20 sampled rollouts per training response, Table 8's 10,159 of them)."""
    rollouts = 20 * ref.value("Table 8", "responses", "", subject="Biology", split="train", dataset="Private-Science")
    wrong = app_b("incorrect_rollouts")
    return dict(incorrect_share=wrong / rollouts, edit_pool_per_incorrect=app_b("pool_size", EDIT_SFT) / wrong,
                int_pool_per_incorrect=app_b("pool_size", INT_SFT) / wrong,
                boundaries=app_b("probe_boundaries_mean"))


def try_build(spec, profile):
    """(the dataset ``spec`` names, built as 00 builds it, None) or (None, why not: 'data not on disk' or 'data
    not read: <the error's first line>', named, never hidden: the run itself would stop on it)."""
    from edit_lib.data.schema import DataError, DataFileNotFound
    from edit_lib.data.registry import build_dataset
    try:
        return build_dataset(spec, profile.run.seed, profile.data.on_error), None
    except DataFileNotFound:
        return None, "data not on disk"
    except (DataError, OSError) as e:
        return None, f"data not read: {str(e).splitlines()[0]}"


def dataset_sizes(profile) -> list[dict]:
    """Per dataset: responses per split and where they come from ('read from disk', 'generated', 'assumed: Table
    8', or 'unknown': left out of the estimate)."""
    out = []
    for spec in profile.data.datasets:
        ds, why = try_build(spec, profile)
        if ds is not None:
            how = "generated (synthetic source)" if spec.source == "synthetic" else "read from disk"
            out.append(dict(dataset=spec.name, source=how, **{s: len(ds.split(s)) for s in SPLIT_OF}))
        elif spec.name in TABLE8:
            bench, subject = TABLE8[spec.name]
            n = ref.load().query("table == 'Table 8' and metric == 'responses' and dataset == @bench and "
                                 "subject == @subject").set_index("split")["value"]
            out.append(dict(dataset=spec.name, source=f"assumed: Table 8 ({why})",
                            **{s: int(n.get(v, 0)) for s, v in SPLIT_OF.items()}))
        else:
            out.append(dict(dataset=spec.name, source=f"unknown ({why}; not a Table 8 dataset): left out",
                            train=0, id_test=0, ood_test=0))
    return out


class Estimator:
    """Seconds of the primitive work on one GPU for one profile (``time_estimate`` rules)."""

    def __init__(self, profile, counts: dict, gpu: GPU, prompt_tokens: int, ratios: dict | None = None,
                 backend: str | None = None):
        self.p, self.gpu, self.P = profile, gpu, prompt_tokens
        self.m = Shape.of(counts, 4 if profile.model.dtype == "float32" else 2)
        self.backend = backend or profile.model.generation_backend
        self.adapter = counts["trainable"] * 4  # an unmerged fp32 adapter read at every decode step
        self.r = ratios or paper_ratios()
        self.scaffold = (self.r["boundaries"] + 1) * SCAFFOLD_TOKENS
        C = profile.rollouts.decoding.max_new_tokens
        self.seq = prompt_tokens + MEAN_SHARE * C  # a rollout: prompt + its mean completion
        self.prefix = prompt_tokens + MEAN_SHARE * C / 2  # a revised prefix: on average half-way through it
        sel = profile.selection  # distinct steps 04 rewrites per incorrect rollout (``assumptions``)
        self.units = min(sel.shortlist_k, self.r["boundaries"]) + sel.budget_n + 1

    def gen(self, n, batch, prompt, budget, adapter=False) -> float:
        batch = max(batch, VLLM_SEQS) if self.backend == "vllm" else batch
        return generate_seconds(self.m, self.gpu, n, batch, prompt, budget, MEAN_SHARE * budget, self.backend,
                                self.adapter if adapter else 0.0)

    def fwd(self, n, tokens) -> float:
        return compute_seconds(forward_flops(self.m, tokens, n), self.gpu, "forward")

    def train(self, n, tokens, checkpointing=True) -> float:
        return compute_seconds(train_flops(self.m, tokens, n, checkpointing), self.gpu, "train")

    def rl_step(self, arm: str) -> dict:
        """One optimiser step of Table 9's recipe: the group generation, the update (TRL's GRPOConfig checkpoints
        gradients by default), the KL reference forward (adapter disabled) and EDIT-RL's frozen-probe read."""
        rl, P = self.p.rl, self.P
        g, C = rl.rollouts_per_prompt * rl.prompts_per_step, rl.decoding.max_new_tokens
        seq = P + MEAN_SHARE * C  # an RL completion at its mean length
        return dict(generate=self.gen(g, g, P, C), update=self.train(g, seq),
                    kl_reference=self.fwd(g, seq) if rl.beta_kl > 0 else 0.0,
                    probe_read=self.fwd(g, seq + self.scaffold) if arm == "edit_rl" else 0.0)


@dataclass
class Sizes:
    """One dataset's counts for the estimate: responses, the Phase-1 sample and its rollouts (01-04)."""
    name: str
    train: int
    tests: int  # id_test + ood_test responses (07's splits)
    sample: int  # 01's Phase-1 sample of training responses (rollouts.responses_per_dataset; 0 = all)
    rollouts: float
    incorrect: float
    probed: float
    audited: float
    repaired: float

    @classmethod
    def of(cls, p, row: dict, incorrect_share: float) -> "Sizes":
        sample = min(row["train"], p.rollouts.responses_for(row["dataset"]) or row["train"])
        roll = sample * p.rollouts.n_per_response
        wrong = roll * incorrect_share
        capped = lambda cap: roll if not cap else max(wrong, min(cap, roll))  # noqa: E731 (every incorrect one)
        return cls(row["dataset"], row["train"], row["id_test"] + row["ood_test"], sample, roll, wrong,
                   capped(p.probe.max_rollouts), capped(p.audit.max_rollouts),
                   min(wrong, p.selection.max_rollouts) if p.selection.max_rollouts else wrong)


def _signals(e: Estimator, c: Sizes) -> dict:
    """01 (sampled rollouts, greedy Base on every split), 02 (both reads of Eq. 1), 03 (Eq. 3's four rows)."""
    p, P = e.p, e.P
    return {"01_base_policy": [Work(f"{c.name}: sampled rollouts", e.gen(c.rollouts, p.rollouts.batch_size, P,
                                                                         p.rollouts.decoding.max_new_tokens), GENERATE),
                               Work(f"{c.name}: greedy Base", e.gen(c.train + c.tests, p.eval.batch_size, P,
                                                                    p.eval.decoding.max_new_tokens), GENERATE)],
            "02_probing": [Work(f"{c.name}: probe, both reads", 2 * e.fwd(c.probed, e.seq + e.scaffold), GENERATE)],
            "03_audit_validation": [Work(f"{c.name}: audit, {AUDIT_ROWS} rows",
                                         e.fwd(AUDIT_ROWS * c.audited, e.seq), GENERATE)]}


def _repairs(e: Estimator, c: Sizes, ablation: list[str] | None) -> dict:
    """04 (InT proposals, checklists, rewrites of every rule's steps, N continuations; the other checklist policies
    on the ablation dataset) and 05's generation (InT continuations, the Table 6 ablations' repairs)."""
    p, s, rb = e.p, e.p.revision, e.p.revision.batch_size
    cont, units = s.continuation_budget(p.rollouts), c.repaired * e.units

    def repair(n):  # n rewrites and their N continuations
        return e.gen(n, rb, e.seq, s.rewrite_decoding.max_new_tokens) + e.gen(n * s.n_continuations, rb, e.prefix, cont)
    out = {"04_counterfactual_selection": [
        Work(f"{c.name}: InT proposals", e.gen(c.repaired * p.int_sft.n_proposals, rb, e.seq,
                                               p.int_sft.decoding.max_new_tokens), GENERATE),
        Work(f"{c.name}: checklists", e.gen(c.sample, rb, e.P, s.checklist_budget), GENERATE),
        Work(f"{c.name}: rewrites + continuations", repair(units), GENERATE)],
        "05_edit_sft": [Work(f"{c.name}: InT continuations", e.gen(c.repaired * p.int_sft.n_continuations, rb,
                                                                   e.prefix, cont), GENERATE)]}
    if ablation is not None:
        if s.compare_checklist_policies:  # two more policies: at most every EDIT / BSO / random rewrite again
            out["04_counterfactual_selection"].append(Work(f"{c.name}: other checklist policies",
                                                           repair(c.repaired * (e.units - 1) * 2), GENERATE))
        out["05_edit_sft"].append(Work(f"{c.name}: ablation repairs",
                                       repair(c.repaired * p.selection.budget_n * len(ablation)), GENERATE))
    return out


def _sft(e: Estimator, c: Sizes, ablation: list[str] | None, skip: set) -> tuple[list, dict]:
    """05's SFT runs (pools from App. B's ratios, ``sft.max_pool``, ``sft.epochs``; a loaded SFT baseline's pool
    as EDIT-SFT's) and its greedy check; the graded SFT policies (07, 08)."""
    p = e.p
    pools = {EDIT_SFT: c.incorrect * e.r["edit_pool_per_incorrect"],
             INT_SFT: c.incorrect * e.r["int_pool_per_incorrect"]}
    pools.update({a: pools[EDIT_SFT] for a in [*(ablation or []), *(n for n, b in BASELINES.items() if b.pool)]})
    pools = {k: min(v, p.sft.max_pool) if p.sft.max_pool else v for k, v in pools.items() if k not in skip}
    items = [Work(f"{c.name}: SFT {k}", e.train(v * p.sft.epochs, e.seq, p.sft.gradient_checkpointing), SFT)
             for k, v in pools.items()]
    check = min(p.sft.check_responses, c.train) * 2 + 8 * max(len(pools) - 1, 0)  # Base + EDIT-SFT; 8 each else
    items.append(Work(f"{c.name}: greedy check",
                      e.gen(check, p.eval.batch_size, e.P, p.eval.decoding.max_new_tokens, True), GENERATE))
    return items, {k: 1 for k in pools}


def _rl(e: Estimator, c: Sizes, every: list[str], grid: bool, skip: set) -> tuple[list, dict]:
    """06: every planned run (``rl_runs.run_seeds``) x its steps, Figure 3's checkpoint curves and Table 10 on a
    grid dataset, EDIT-RL's calibration reads; the graded RL policies per system (07, 08)."""
    from edit_lib.train.rl_runs import GRID, run_seeds
    p, P, Ce, eb = e.p, e.P, e.p.eval.decoding.max_new_tokens, e.p.eval.batch_size
    steps, items, policies = p.rl.steps_for(c.name), [], {}
    for system, arm in ((s.name, s.arm) for s in of_source("rl")):
        seeds = [] if system in skip else run_seeds(p, every, system, c.name)
        if not seeds:
            continue
        policies[system] = len(seeds)
        items.append(Work(f"{c.name}: {system} x {len(seeds)} seed(s)",
                          len(seeds) * steps * sum(e.rl_step(arm).values()), RL_RUNS, len(seeds)))
        if system in GRID and grid and p.rl.checkpoint_every:
            n = min(c.tests, 2 * p.rl.curve_responses) if p.rl.curve_responses else c.tests
            points = steps // p.rl.checkpoint_every + 1
            items.append(Work(f"{c.name}: Figure 3 curve {system}", e.gen(points * n, eb, P, Ce, True), GENERATE))
    if grid:  # Table 10: greedy rollouts of the two SFT-initialised RL systems, probed by each and the frozen SFT
        n = min(c.tests, p.rl.divergence_responses or c.tests) * 2
        items.append(Work(f"{c.name}: Table 10", e.gen(n, eb, P, Ce, True) + 2 * e.fwd(n, e.seq + e.scaffold)))
    drawn = p.rl.shaping.calibration_fraction * c.train
    items.append(Work(f"{c.name}: EDIT-RL calibration",
                      e.fwd(drawn * p.rollouts.n_per_response, e.seq + e.scaffold)
                      + e.gen(drawn * p.rl.rollouts_per_prompt, eb, P, p.rl.decoding.max_new_tokens)
                      + e.fwd(drawn * p.rl.rollouts_per_prompt, e.seq + e.scaffold)))
    return items, policies


def stage_work(est: Estimator, sizes: list[dict]) -> dict[str, list[Work]]:
    """Per stage 01-09: its ``Work`` items (seconds) over every dataset with known sizes."""
    from edit_lib.systems import not_run
    p, e = est.p, est
    every = [s["dataset"] for s in sizes]  # the profile's datasets: the rl and rsr sections name them
    rl_sets, grid = p.rl.datasets_in(every), p.rl.subset_in("grid_datasets", every)
    skip = set(not_run(p))
    abl = p.sft.ablation_dataset or sorted(every)[0]
    ablations = [a for a in ABLATIONS if a not in skip]
    w = defaultdict(list)
    for row in sizes:
        if not row["train"] + row["id_test"] + row["ood_test"]:
            continue
        c = Sizes.of(p, row, e.r["incorrect_share"])
        for part in (_signals(e, c), _repairs(e, c, ablations if c.name == abl else None)):
            for stage, items in part.items():
                w[stage] += items
        items, policies = _sft(e, c, ablations if c.name == abl else None, skip)
        w["05_edit_sft"] += items
        if c.name in rl_sets:
            items, rl_policies = _rl(e, c, every, c.name in grid, skip)
            w["06_rl"] += items
            policies.update(rl_policies)
        graded = 1 + sum(policies.values())  # Base and every trained policy, on id_test + ood_test
        w["07_evaluation"].append(Work(f"{c.name}: {graded} policies greedy",
                                       e.gen(graded * c.tests, p.eval.batch_size, e.P,
                                             p.eval.decoding.max_new_tokens, True), GENERATE))
        # [] = every dataset with PTS / LoR questions: SAS-Bench's rubrics are free text (08 edits nothing there)
        free_text = {d.name for d in p.data.datasets if d.source == "sasbench"}
        if c.name in p.rsr.datasets if p.rsr.datasets else (c.name in every and c.name not in free_text):
            n = sum(row[x] for x in p.rsr.splits)
            n = min(n, p.rsr.responses_per_edit) if p.rsr.responses_per_edit else n
            k = sum({BASE: 1, **policies}.get(x, 0) for x in p.rsr.systems)
            w["08_rsr_interventions"].append(Work(f"{c.name}: {EDITS} edits x {k} policies",
                                                  e.gen(EDITS * k * n, p.eval.batch_size, e.P,
                                                        p.eval.decoding.max_new_tokens, True), GENERATE))
    w["09_significance"] = []
    return dict(w)


def assumptions(est: Estimator) -> list[str]:
    """What the estimate assumes, as printed lines."""
    r = est.r
    return [f"prompt {est.P} tokens; a completion's mean length {MEAN_SHARE:g} x its budget (the paper gives none)",
            f"incorrect rollouts {r['incorrect_share']:.3f} of rollouts, EDIT pool {r['edit_pool_per_incorrect']:.3f} "
            f"and InT pool {r['int_pool_per_incorrect']:.3f} samples per incorrect rollout, {r['boundaries']:g} probe "
            f"boundaries per rollout (App. B, Private-Biology, for every dataset)",
            f"04 rewrites min(k, boundaries) + n + 1 = {est.units:g} "
            "distinct steps per incorrect rollout (EDIT and belief-shift-only within the shortlist, random, the "
            "self-audit pick; overlaps not removed: an upper count)",
            f"generation backend {est.backend!r}; answer scaffold {SCAFFOLD_TOKENS} tokens per boundary",
            "a baseline of run.baselines: an SFT one's pool as EDIT-SFT's, an RL one's runs as its arm's"]


# ---------------------------------------------------------------- the report: per stage, and App. B beside it
def paper_comparison(est: Estimator) -> list[dict]:
    """The estimate of the work App. B times, on App. B's own counts (Private-Biology: 10,159 training responses,
    20 rollouts each, 55,278 incorrect; the profile's recipe), beside App. B's figure: unit 'h' (GPU-hours) or
    's' (seconds); ratio = estimate / paper. ``est`` should be on App. B's GPU (``time_estimate.PAPER_GPU``)."""
    p, P, e = est.p, est.P, est
    wrong, responses = app_b("incorrect_rollouts"), ref.value("Table 8", "responses", "", subject="Biology",
                                                               split="train", dataset="Private-Science")
    rb, s = p.revision.batch_size, p.revision
    cont, units = s.continuation_budget(p.rollouts), wrong * p.selection.budget_n  # EDIT's own picks only
    probe = e.fwd(wrong, e.seq + e.scaffold)
    audit = e.fwd(AUDIT_ROWS * wrong, e.seq)
    revise = (e.gen(responses, rb, P, s.checklist_budget) + e.gen(units, rb, e.seq, s.rewrite_decoding.max_new_tokens)
              + e.gen(units * s.n_continuations, rb, e.prefix, cont))
    int_p = (e.gen(wrong * p.int_sft.n_proposals, rb, e.seq, p.int_sft.decoding.max_new_tokens)
             + e.gen(wrong * p.int_sft.n_continuations, rb, e.prefix, cont))
    grpo, edit_rl = e.rl_step("grpo"), e.rl_step("edit_rl")
    steps = 500  # App. B: "for the 500-step run" (Table 9: 500 steps on Private-Science)
    rows = [("02_probing", "posterior-belief probing, 55,278 incorrect rollouts, one read", probe,
             "gpu_hours_probe", EDIT_SFT, "h"),
            ("03_audit_validation", "grounding audit (4 rows) + candidate selection", audit,
             "gpu_hours_audit_selection", EDIT_SFT, "h"),
            ("04_counterfactual_selection", "EDIT's atomic revisions: checklists, rewrites, N continuations", revise,
             "gpu_hours_revisions", EDIT_SFT, "h"),
            ("02-04", "EDIT Phase 1 in all", probe + audit + revise, "gpu_hours_phase1", EDIT_SFT, "h"),
            ("04-05", "InT Phase 1: proposals and guided continuations", int_p, "gpu_hours_phase1", INT_SFT, "h"),
            ("06_rl", "EDIT-SFT+GRPO, 500 steps", steps * sum(grpo.values()), "gpu_hours_rl", EDIT_SFT_GRPO, "h"),
            ("06_rl", "EDIT-SFT+EDIT-RL, 500 steps", steps * sum(edit_rl.values()), "gpu_hours_rl",
             EDIT_RL, "h"),
            ("06_rl", "one GRPO optimiser step", sum(grpo.values()), "step_seconds", EDIT_SFT_GRPO, "s"),
            ("06_rl", "EDIT-RL's frozen-probe read per step", edit_rl["probe_read"], "probe_read_seconds",
             EDIT_RL, "s")]
    out = []
    for stage, what, seconds, metric, system, unit in rows:
        est_v = seconds / 3600 if unit == "h" else seconds
        paper = app_b(metric, system)
        out.append(dict(stage=stage, work=what, unit=unit, estimate=est_v, paper=paper, ratio=est_v / paper,
                        backend=est.backend))
    return out


def estimate(profile, counts: dict, gpu_name: str, prompt_tokens: int) -> dict:
    """Everything the dry run prints of time: per stage GPU-hours on ``gpu_name`` (its work items too), the sizes
    and assumptions, and App. B's figures beside the same work on App. B's GPU."""
    gpu = gpu_named(gpu_name)
    est = Estimator(profile, counts, gpu, prompt_tokens)
    sizes = dataset_sizes(profile)
    with baselines_loaded(profile.run.baselines):  # the profile's own systems train and are graded too
        work = stage_work(est, sizes)
    stages = [dict(stage=k, hours=sum(w.time for w in v) / 3600, items=[w._replace(time=w.time / 3600) for w in v])
              for k, v in sorted(work.items())]
    on_paper_gpu = [paper_comparison(Estimator(profile, counts, gpu_named(PAPER_GPU), prompt_tokens, est.r, b))
                    for b in ("hf", "vllm")]  # both engines: App. B's rollout engine is co-located (vLLM-like)
    paper = [dict(a, estimate_vllm=b["estimate"], ratio_vllm=b["ratio"]) for a, b in zip(*on_paper_gpu)]
    return dict(gpu=gpu_name.lower(), label=gpu.label, sizes=sizes, stages=stages, assumptions=assumptions(est),
                paper=paper, paper_gpu=gpu_named(PAPER_GPU).label)


def wall_clock(profile, stages: list[dict], gpus: int) -> list[dict]:
    """Each stage's wall-clock hours on ``gpus`` GPUs, from its GPU-hours (``estimate``: ``Work``
    items in hours) and how the suite spreads each item (``Work.spread``): 06's RL runs are engine units of one GPU
    each, as many at once as GPUs (at most ``rl.workers`` when > 1; longest first), or, with ``rl.workers`` 1, one
    after another, each over ``rl.processes`` GPUs; generation and 02's and 03's probe and audit passes go over
    the engine's generation units, one GPU each (at most ``model.generation_workers`` when > 1), or in the stage's
    process with ``generation_workers`` 1; 05's SFT runs are engine units of one GPU each with ``sft.workers``
    other than 1 (at most ``sft.workers`` when > 1), else one after another over ``sft.processes`` GPUs; the rest
    (06's calibration and Table 10) runs in the stage's process on one GPU. ``width``: the mean GPUs busy (GPU-hours /
    wall-clock)."""
    if gpus < 1:
        raise ValueError(f"--gpus must be at least 1, got {gpus}")
    rl, sft, gen = profile.rl, profile.sft, profile.model.generation_workers
    width = {RL_RUNS: min(gpus, rl.workers) if rl.workers > 1 else gpus,
             SFT: min(gpus, sft.workers) if sft.workers > 1 else gpus}
    on_engine = {RL_RUNS: rl.workers != 1, SFT: sft.workers != 1}
    over = {RL_RUNS: rl.processes, SFT: sft.processes}  # GPUs one run spreads over, off the engine
    generators = min(gpus, gen) if gen > 1 else gpus if gen == 0 else 1
    out = []
    for s in stages:
        serial, units = 0.0, {RL_RUNS: [], SFT: []}
        for w in s["items"]:
            if w.spread in units and on_engine[w.spread]:
                units[w.spread] += [w.time / w.runs] * w.runs
            elif w.spread in units:
                serial += w.time / min(gpus, over[w.spread])
            elif w.spread == GENERATE:
                serial += w.time / generators
            else:
                serial += w.time
        wall = serial
        for kind, runs in units.items():  # 05's SFT runs and 06's RL runs: each kind a phase of its stage
            busy = [0.0] * width[kind]
            for h in sorted(runs, reverse=True):  # longest first onto the GPU free soonest (engine.bounded's order)
                busy[busy.index(min(busy))] += h
            wall += max(busy, default=0.0)
        out.append(dict(stage=s["stage"], gpu_hours=s["hours"], wall=wall,
                        width=s["hours"] / wall if wall else 0.0))
    return out
