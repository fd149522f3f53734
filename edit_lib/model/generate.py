"""Batched rollout sampling and greedy decoding for any HF causal LM (App. B "Decoding and evaluation").

`generate` returns one row per (prompt, rollout). Hugging Face `model.generate` is the default engine;
`generate_vllm` is an optional engine for GPU runs where vLLM is installed (never required); `policy_generate`
picks a policy's engine (``model.generation_backend``). Marks are parsed later (prompts.py): pass
`parse(text, prompt_index) -> dict` to add columns per row. Generation takes one request type, `SamplingConfig`,
whose decoding part is the profile sections' one spec, ``config.Decoding`` (``SamplingConfig.of``);
``share_prefix`` (``model.prefix_cache``) encodes a batch's common prompt prefix once (lean_decode.py).

Sampling is seeded per row (``SamplingConfig.seeding = 'row'``, the default): row (i, r), prompt i and rollout r,
draws its noise from its own CPU generator seeded by (`cfg.seed`, i, r) and picks tokens by the Gumbel-max trick
(`RowGumbelSampler`), so its tokens do not depend on the batch it lands in, the batch size, the worker process
or the device (the draws are made on the CPU and moved to the model's device). ``'batch'`` (the default before
the study's power analysis) samples batch b under a seed from (`cfg.seed`, b) with HF's own sampler:
splitting a batch, or moving to CUDA, changes its tokens.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable, Sequence

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm
from transformers import (GenerationConfig, LogitsProcessor, LogitsProcessorList, TemperatureLogitsWarper,
                          TopKLogitsWarper, TopPLogitsWarper)

from edit_lib.config import Decoding, EvalConfig, RolloutConfig, help_field
from edit_lib.model.lean_decode import lean_generate, left_pad, shared_prefix

Parse = Callable[[str, int], dict]
COLUMNS = ["prompt_index", "response_id", "rollout_id", "text", "n_tokens", "n_prompt_tokens", "finished"]


@dataclass
class SamplingConfig(Decoding):
    """A generation request: the decoding spec (``config.Decoding``: greedy or T / top-p / top-k, the budget) and
    how many completions per prompt, in what batches, under which seed. Paper: greedy, 1 completion per marking at
    evaluation (App. B); RL rollouts at T=1.0, 8 per prompt, 1,024-token budget (Table 9); 20 sampled rollouts per
    training response (App. B). A profile section's ``decoding`` becomes one through ``of``."""
    n: int = help_field(1, "Rollouts per prompt (Table 9: 8; App. B pool: 20).")
    batch_size: int = help_field(32, "Sequences (prompt x rollout rows) per generate call.")
    seed: int = help_field(0, "Seed of the sampled rows (see `seeding`).")
    seeding: str = help_field("row", "'row' (default): row (i, r) from its own CPU generator seeded by (seed, i, r), "
                                     "independent of the batch, process and device (RowGumbelSampler); 'batch': "
                                     "batch b under a seed from (seed, b) with HF's sampler.")
    sort_by_length: bool = help_field(True, "Batch prompts of similar length (less padding).")

    @classmethod
    def of(cls, decoding: Decoding, **request) -> "SamplingConfig":
        """The one way a section's decoding spec becomes a request: its fields, with ``request``'s ``n``,
        ``batch_size``, ``seed``, ... (a request value may also set a decoding field, e.g. a derived budget)."""
        return cls(**{**decoding.fields(), **request})

    @classmethod
    def evaluation(cls, max_new_tokens: int = 1024, batch_size: int = 32) -> "SamplingConfig":
        """App. B: one greedy completion per marking."""
        return cls.of(Decoding(greedy=True, max_new_tokens=max_new_tokens), batch_size=batch_size)

    def hf_config(self, pad_token_id: int, eos_token_id) -> GenerationConfig:
        """HF settings for `model.generate`, every sampling flag set explicitly, so a checkpoint's
        generation_config.json (Qwen3: T=0.6, top_k=20) never leaks into rollouts. Greedy, and row-seeded sampling
        (whose temperature, top-k, top-p and noise come from `sampling_processors`), ask HF for argmax."""
        if self.seeding not in ("batch", "row"):
            raise ValueError(f"SamplingConfig.seeding must be 'batch' or 'row', got {self.seeding!r}")
        kw = dict(num_beams=1, max_new_tokens=self.max_new_tokens, repetition_penalty=1.0,
                  pad_token_id=pad_token_id, eos_token_id=eos_token_id)
        if self.greedy or self.seeding == "row":  # sampling flags stay unset: argmax ignores them (and would warn)
            return GenerationConfig(do_sample=False, **kw)
        return GenerationConfig(do_sample=True, temperature=self.temperature, top_p=self.top_p, top_k=self.top_k,
                                typical_p=1.0, **kw)

    def sampling_processors(self, rows: Sequence[tuple[int, int]]) -> LogitsProcessorList:
        """The logits processors that turn HF's argmax into a sample for the batch `rows` ((i, r) per batch row,
        in batch order): temperature (Table 9: 1.0), top-k, top-p, then per-row Gumbel noise. Empty when greedy or
        seeded per batch (HF samples those itself)."""
        if self.greedy or self.seeding != "row":
            return LogitsProcessorList()
        procs = LogitsProcessorList()
        if self.temperature != 1.0:
            procs.append(TemperatureLogitsWarper(self.temperature))
        if self.top_k:
            procs.append(TopKLogitsWarper(int(self.top_k)))
        if self.top_p < 1.0:
            procs.append(TopPLogitsWarper(self.top_p))
        procs.append(RowGumbelSampler(self.seed, rows))
        return procs


def rollout_sampling(cfg: RolloutConfig, seed: int) -> SamplingConfig:
    """The profile's ``rollouts`` section as a request: its decoding, ``n_per_response`` per response (the App. B
    pool), under the run's ``seed``."""
    return SamplingConfig.of(cfg.decoding, n=cfg.n_per_response, batch_size=cfg.batch_size, seed=seed)


def eval_sampling(cfg: EvalConfig, seed: int) -> SamplingConfig:
    """The profile's ``eval`` section as a request (App. B: one greedy completion per marking)."""
    return SamplingConfig.of(cfg.decoding, n=1, batch_size=cfg.batch_size, seed=seed)


def row_generator(seed: int, i: int, r: int) -> torch.Generator:
    """The CPU generator of row (i, r): seeded by ``numpy.random.SeedSequence([seed, i, r])``."""
    state = np.random.SeedSequence([seed, i, r]).generate_state(1, dtype=np.uint64)[0]
    return torch.Generator(device="cpu").manual_seed(int(state))


def gumbel_noise(u: torch.Tensor) -> torch.Tensor:
    """Gumbel(0, 1) noise -log(-log(U)) from uniforms U in [0, 1) (U = 0 clamped to the smallest normal)."""
    return -torch.log(-torch.log(u.clamp_min(torch.finfo(u.dtype).tiny)))


class RowGumbelSampler(LogitsProcessor):
    """Gumbel-max sampling inside HF's greedy loop: adds Gumbel noise to the (temperature-scaled, truncated)
    scores, so argmax(scores + G) is an exact draw from softmax(scores); filtered (-inf) tokens stay -inf.

    Each batch row draws one vocabulary-sized float32 uniform vector per decoding step from its own CPU generator
    (`row_generator`), so row (i, r)'s t-th token uses the t-th draw of its own stream whatever the batch. Rows that
    have finished keep drawing (their tokens are padding). The draws are made ``chunk`` steps at a time (one call
    per row fills the same stream as ``chunk`` single-step calls; the per-row reference test checks it), and the
    noise is computed on the CPU and moved to the device once per chunk, so CUDA adds the CPU's noise bit for bit."""

    def __init__(self, seed: int, rows: Sequence[tuple[int, int]], max_floats: int = 2 ** 24):
        self.generators = [row_generator(seed, i, r) for i, r in rows]
        self.max_floats = max_floats  # the chunk's size cap (64 MB of float32)
        self._noise, self._t = None, 0

    def _refill(self, vocab: int, device) -> None:
        chunk = max(1, min(32, self.max_floats // max(1, len(self.generators) * vocab)))
        u = torch.empty((len(self.generators), chunk, vocab), dtype=torch.float32)
        for row, g in zip(u, self.generators):
            torch.rand(row.shape, generator=g, dtype=torch.float32, out=row)
        self._noise, self._t = gumbel_noise(u).to(device), 0

    def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor) -> torch.Tensor:
        if scores.shape[0] != len(self.generators):
            raise ValueError(f"{scores.shape[0]} score rows for {len(self.generators)} seeded rows")
        if self._noise is None or self._t == self._noise.shape[1] or self._noise.shape[2] != scores.shape[-1]:
            self._refill(scores.shape[-1], scores.device)
        noise = self._noise[:, self._t]
        self._t += 1
        scores = scores.float()
        return (scores + noise).masked_fill(scores == float("-inf"), float("-inf"))


def eos_ids(model, tokenizer) -> list[int]:
    """All ids that end a completion (the model's generation_config may list several, as Qwen3 does)."""
    ids = getattr(model.generation_config, "eos_token_id", None)
    ids = tokenizer.eos_token_id if ids is None else ids
    return sorted({int(i) for i in (ids if isinstance(ids, (list, tuple)) else [ids]) if i is not None})


def _prompt_seed(seed: int, i: int) -> int:
    """The seed derived from (seed, i): batch i's under `seeding = 'batch'`, and vLLM's for prompt i."""
    return int(np.random.SeedSequence([seed, i]).generate_state(1)[0])


def _finish(gen: list[int], eos: set[int]) -> tuple[list[int], bool]:
    """Cut a generated row after its first EOS (kept in the count, dropped from the text)."""
    for j, t in enumerate(gen):
        if t in eos:
            return gen[:j + 1], True
    return gen, False


def _rows_frame(records: list[dict], parse: Parse | None) -> pd.DataFrame:
    if parse is not None:
        records = [{**r, **parse(r["text"], r["prompt_index"])} for r in records]
    df = pd.DataFrame.from_records(records) if records else pd.DataFrame(columns=COLUMNS)
    return df.sort_values(["prompt_index", "rollout_id"], kind="stable").reset_index(drop=True)


@torch.inference_mode()
def generate(model, tokenizer, prompts: Sequence[str], cfg: SamplingConfig | None = None,
             ids: Sequence | None = None, progress: bool = True, parse: Parse | None = None,
             prompt_indices: Sequence[int] | None = None, share_prefix: bool = False,
             lean: bool = False) -> pd.DataFrame:
    """Sample `cfg.n` completions per prompt (or one greedy completion, replicated n times) with HF generate.

    Returns columns prompt_index, response_id (ids[i], default i), rollout_id 0..n-1, text (prompt stripped,
    special tokens removed), n_tokens (generated tokens, EOS included), n_prompt_tokens, finished (EOS reached before
    max_new_tokens), plus the columns `parse(text, prompt_index)` returns. Seeded per row (the default), a sampled
    row (i, r) is a function of (cfg.seed, i, r) and prompt i only (`RowGumbelSampler`), not of batch_size,
    sort_by_length, the other rows or the device; seeded per batch, output is deterministic given cfg.seed and
    cfg.batch_size. Greedy output depends on none of them. All of this holds up to the floating-point
    differences batching (or another device) may make in the logits themselves. ``prompt_indices`` (default 0..len-1) are the prompts' indices in a larger call
    that was split (``model.parallel``): the row seeds and ``prompt_index`` use them. ``share_prefix``
    (``model.prefix_cache``): rows are batched in token order, so prompts of one question share a batch, and each
    batch's common prefix is encoded once (`shared_prefix`); tokens equal the plain call's up to those
    floating-point differences. ``lean`` (``model.lean_decoding``): each batch decodes with
    `lean_decode.lean_generate`, the same tokens in less time on a small model.
    """
    cfg = cfg or SamplingConfig()
    ids = list(range(len(prompts))) if ids is None else list(ids)
    gidx = list(range(len(prompts))) if prompt_indices is None else [int(x) for x in prompt_indices]
    if len(ids) != len(prompts) or len(gidx) != len(prompts):
        raise ValueError(f"{len(ids)} ids and {len(gidx)} prompt indices for {len(prompts)} prompts")
    if not prompts:
        return _rows_frame([], parse)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    eos = eos_ids(model, tokenizer)
    gen_cfg = cfg.hf_config(pad_id, eos)
    enc = tokenizer(list(prompts), add_special_tokens=True)["input_ids"]
    draws = 1 if cfg.greedy else cfg.n
    rows = [(i, r) for i in range(len(prompts)) for r in range(draws)]
    if share_prefix:  # token order: rows with a long common prefix (one question's prompts) share a batch
        rows.sort(key=lambda ir: (enc[ir[0]], ir[1]))
    elif cfg.sort_by_length:  # longest first: an out-of-memory batch shows up at once
        rows.sort(key=lambda ir: -len(enc[ir[0]]))
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    records = []
    bar = tqdm(total=len(rows) * (cfg.n if cfg.greedy else 1), disable=not progress, desc="generate")
    for b, start in enumerate(range(0, len(rows), cfg.batch_size)):
        chunk = rows[start:start + cfg.batch_size]
        seqs = [enc[i] for i, _ in chunk]
        shared = shared_prefix(model, seqs, pad_id, device) if share_prefix else None
        input_ids, mask, cache = shared or (*left_pad(seqs, pad_id, device), None)
        kw = {} if cache is None else {"cache": cache}
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(_prompt_seed(cfg.seed, b))  # the batch's seed (used only by seeding = 'batch')
            decode = partial(lean_generate, model) if lean else model.generate
            out = decode(input_ids=input_ids, attention_mask=mask, generation_config=gen_cfg,
                         logits_processor=cfg.sampling_processors([(gidx[i], r) for i, r in chunk]), **kw)
        for (i, r), row in zip(chunk, out[:, input_ids.shape[1]:].tolist()):
            toks, done = _finish(row, set(eos))
            text = tokenizer.decode(toks, skip_special_tokens=True)
            for rr in (range(cfg.n) if cfg.greedy else [r]):
                records.append({"prompt_index": gidx[i], "response_id": ids[i], "rollout_id": rr, "text": text,
                                "n_tokens": len(toks), "n_prompt_tokens": len(enc[i]), "finished": done})
        bar.update(len(chunk) * (cfg.n if cfg.greedy else 1))
    bar.close()
    model.train(was_training)
    return _rows_frame(records, parse)


def generate_vllm(llm, prompts: Sequence[str], cfg: SamplingConfig | None = None, ids: Sequence | None = None,
                  parse: Parse | None = None, lora_request=None, progress: bool = True) -> pd.DataFrame:
    """Optional GPU engine (``model.generation_backend: vllm``, see ``vllm_engine``): the rows of `generate` from
    a `vllm.LLM`, the same decoding settings (greedy: temperature 0, one completion replicated n times; sampled:
    `cfg.n` completions at `cfg.temperature`, prompt i seeded from (`cfg.seed`, i)), `lora_request` for an
    adapter policy."""
    from vllm import SamplingParams  # noqa: lazy, optional dependency
    cfg = cfg or SamplingConfig()
    ids = list(range(len(prompts))) if ids is None else list(ids)
    if len(ids) != len(prompts):
        raise ValueError(f"{len(ids)} ids for {len(prompts)} prompts")
    if not prompts:
        return _rows_frame([], parse)
    # one seed per prompt, derived from (cfg.seed, prompt index): a shared seed would give every prompt the same
    # random stream
    params = [SamplingParams(n=1 if cfg.greedy else cfg.n, temperature=0.0 if cfg.greedy else cfg.temperature,
                             top_p=1.0 if cfg.greedy else cfg.top_p,
                             top_k=-1 if cfg.greedy or not cfg.top_k else cfg.top_k,
                             max_tokens=cfg.max_new_tokens, seed=_prompt_seed(cfg.seed, i), repetition_penalty=1.0)
              for i in range(len(prompts))]
    # prompts go in as token ids, so the prompt tokens are counted as `generate` counts them
    tokenizer = llm.get_tokenizer()
    enc = [tokenizer(p, add_special_tokens=True)["input_ids"] for p in prompts]
    outs = llm.generate([{"prompt_token_ids": e} for e in enc], params, use_tqdm=progress,
                        lora_request=lora_request)
    records = []
    for i, res in enumerate(outs):
        draws = [res.outputs[0]] * cfg.n if cfg.greedy else list(res.outputs)
        for r, o in enumerate(draws):
            records.append({"prompt_index": i, "response_id": ids[i], "rollout_id": r, "text": o.text,
                            "n_tokens": len(o.token_ids), "n_prompt_tokens": len(enc[i]),
                            "finished": o.finish_reason == "stop"})
    return _rows_frame(records, parse)


def policy_generate(policy, prompts: Sequence[str], cfg: SamplingConfig | None = None, ids: Sequence | None = None,
                    progress: bool = True, parse: Parse | None = None) -> pd.DataFrame:
    """Generate with a `policy.Policy` through its engine (``policy.engine``): vLLM where the profile chose it, the
    engine's generation workers that load the same weights where ``model.generation_workers`` is not 1
    (``parallel.PoolEngine``: the same rows as here), else HF `generate` (sharing each batch's prompt prefix where
    ``policy.prefix_cache``, decoding by the lean loop where ``policy.lean_decoding``). Every rollout, evaluation
    and revision call of the suite goes through here."""
    engine = getattr(policy, "engine", None)
    if engine is not None:
        return engine.generate(prompts, cfg or SamplingConfig(), ids=ids, progress=progress, parse=parse)
    return generate(policy.model, policy.tokenizer, prompts, cfg, ids=ids, progress=progress, parse=parse,
                    share_prefix=getattr(policy, "prefix_cache", False), lean=getattr(policy, "lean_decoding", False))
