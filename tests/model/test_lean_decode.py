"""Lean decoding (edit_lib.model.lean_decode, ``model.lean_decoding``) against transformers generate: the same rows
(token ids, texts, n_tokens, finished flags) for greedy, row-seeded sampling (temperature, top-k, top-p), batch-seeded
sampling and the shared prompt prefix, with uneven prompt lengths (left padding), EOS before the budget, batch sizes
1 and more; on the shipped embedded grader, the tiny test grader and the toy Qwen3 (grouped-query, SDPA) and Llama
(eager) models. Where it cannot promise generate's tokens it warns and uses generate."""
import copy
import warnings
from unittest import mock

import pandas as pd
import pytest
import torch
from transformers import AutoModelForCausalLM, GenerationConfig, LogitsProcessor, LogitsProcessorList
from transformers.cache_utils import DynamicLayer

from edit_lib.config import ConfigError, ModelConfig, load_profile
from edit_lib.model import generate as gen_mod, lean_decode
from edit_lib.model.generate import SamplingConfig, generate, policy_generate
from edit_lib.model.lean_decode import GrowingLayer, growing_cache, lean_generate, left_pad, shared_prefix
from edit_lib.model.policy import Policy, load_policy
import test_generate
from test_prefix_cache import SHARED
from toy_models import toy_model, toy_tokenizer

PROMPTS = test_generate.PROMPTS
model, tok = test_generate.model, test_generate.tok  # the tiny grader and its tokenizer (module fixtures)

torch.set_num_threads(1)  # other processes share the 2 cores

TOY_PROMPTS = ["Question : what is the mass", "Rubric : award 1 mark for the unit and 2 marks for the method ;",
               "Step 1 :", "Final mark : 7 / Final mark : 18 / Final mark"]
SAMPLED = dict(temperature=1.0, top_p=0.9, top_k=8)


@pytest.fixture(scope="module")
def embedded():
    m, t, kind = load_policy("embedded")
    return m, t, [Policy(m, t, kind).input_text(p) for p in
                  ["Question : name the unit of mass . Answer : grams", "Answer : kilograms because it is heavy",
                   "Question : state the method used to measure the mass of the sample and name two errors . Answer "
                   ": weigh it on a balance , zero error", "mark it"]]


@pytest.fixture(scope="module", params=["qwen3-sdpa", "llama-sdpa", "llama-eager"])
def toy(request):
    arch, attn = request.param.split("-")
    return toy_model(arch, vocab_size=len(toy_tokenizer()), attn=attn, seed=1, init_range=0.5), toy_tokenizer()


def same(model, tok, prompts, cfg, falls_back: bool = False, **kw) -> pd.DataFrame:
    """generate's rows with and without lean decoding, asserted equal (and the lean loop really used unless
    ``falls_back``); returns them."""
    ref = generate(model, tok, prompts, cfg, progress=False, **kw)
    with warnings.catch_warnings():
        if not falls_back:
            warnings.filterwarnings("error", message="model.lean_decoding")
        got = generate(model, tok, prompts, cfg, progress=False, lean=True, **kw)
    pd.testing.assert_frame_equal(ref, got)
    return ref


class Record(LogitsProcessor):
    """Keeps every step's scores and token rows as the loop hands them to the logits processors."""

    def __init__(self):
        self.seen = []

    def __call__(self, input_ids, scores):
        self.seen.append((input_ids.clone(), scores.clone()))
        return scores


def raw_ids(model, tok, prompts, cfg, lean):
    """The decoded token ids themselves (prompt and new tokens) of one batch."""
    ids, mask = left_pad([tok(p)["input_ids"] for p in prompts], tok.pad_token_id, "cpu")
    gen_cfg = cfg.hf_config(tok.pad_token_id, gen_mod.eos_ids(model, tok))
    run = (lambda **kw: lean_generate(model, **kw)) if lean else model.generate
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return run(input_ids=ids, attention_mask=mask, generation_config=gen_cfg,
                   logits_processor=cfg.sampling_processors([(i, 0) for i in range(len(prompts))]))


def bit_identical(m, t, prompts, shared: bool = False, compact: bool = False):
    """Every step's float32 scores and token rows, as the logits processors receive them, equal generate's bit for
    bit (not only their argmax); the one-token steps go through `lean_decode.LeanStep` where it covers the model
    (counted, so a silent fallback to transformers' forward fails). ``compact``: the lean loop drops finished rows
    from its forward (`lean_decode.COMPACT_EVERY`), so a live row's logits come from a smaller batch, whose kernels
    may round differently: the tokens stay equal and the live rows' scores within 1e-5. Returns each one-token
    step's row count."""
    steps = []
    real_step = lean_decode.LeanStep.__call__
    seqs = [t(p)["input_ids"] for p in prompts]
    gen_cfg = SamplingConfig.evaluation(max_new_tokens=24).hf_config(t.pad_token_id, gen_mod.eos_ids(m, t))
    runs = []
    for run in (m.generate, lambda **kw: lean_generate(m, **kw)):
        ids, mask, cache = shared_prefix(m, seqs, t.pad_token_id, "cpu") if shared else \
            (*left_pad(seqs, t.pad_token_id, "cpu"), None)
        rec = Record()
        with torch.inference_mode(), mock.patch.object(lean_decode, "COMPACT_EVERY", 4 if compact else 0), \
                mock.patch.object(lean_decode.LeanStep, "__call__",
                                  lambda self, *a: steps.append(a[0].shape[0]) or real_step(self, *a)):
            out = run(input_ids=ids, attention_mask=mask, generation_config=gen_cfg,
                      logits_processor=LogitsProcessorList([rec]), **({} if cache is None else {"cache": cache}))
        runs.append((out, rec.seen[:out.shape[1] - ids.shape[1]]))  # generate may run steps it then undoes
    (ref, ref_seen), (got, got_seen) = runs
    assert torch.equal(ref, got) and len(ref_seen) == len(got_seen) == ref.shape[1] - ids.shape[1] > 1
    eos = torch.tensor(gen_mod.eos_ids(m, t))
    for (ids_a, a), (ids_b, b) in zip(ref_seen, got_seen):
        live = ~torch.isin(ids_a[:, ids.shape[1]:], eos).any(1)  # a finished row's scores make only padding
        assert torch.equal(ids_a, ids_b)
        if compact:
            torch.testing.assert_close(a[live], b[live], rtol=1e-5, atol=1e-5)
        else:
            assert torch.equal(a, b)
    if lean_decode.why_not(lean_decode._transformers_model(m)):
        assert not steps
    else:  # every step after the prompt's (a one-token prompt suffix may be one too)
        assert len(got_seen) - 1 <= len(steps) <= len(got_seen)
    return steps


@pytest.mark.parametrize("compact", [False, True], ids=["whole-batch", "compacted"])
@pytest.mark.parametrize("case", ["padded", "unpadded", "shared-prefix", "two-threads"])
def test_every_steps_logits_are_bit_identical(embedded, model, tok, case, compact):
    """Padded rows (positions from the mask), one unpadded row (generate drops the mask), a shared prompt prefix
    (``model.prefix_cache``, on the tiny grader), and the demo's two torch threads; each with every row in every
    forward (bit for bit) and with finished rows dropped (the same tokens)."""
    m, t, prompts = embedded
    if case == "shared-prefix":
        bit_identical(model, tok, SHARED, shared=True, compact=compact)
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(2 if case == "two-threads" else threads)
    try:
        rows = bit_identical(m, t, prompts[:1] if case == "unpadded" else prompts, compact=compact)
        if case == "padded":  # rows that finished left the forward only where compaction is on
            assert max(rows) <= len(prompts) and (min(rows) < len(prompts)) == compact
    finally:
        torch.set_num_threads(threads)


def test_toy_models_logits_are_bit_identical(toy):
    """Grouped-query SDPA (Qwen3) and eager attention (Llama) read the growing cache's views as generate's tensors."""
    bit_identical(*toy, TOY_PROMPTS)


@pytest.mark.parametrize("batch_size", [1, 3, 64])
def test_embedded_grader_greedy_and_row_sampled(embedded, batch_size):
    m, t, prompts = embedded
    greedy = same(m, t, prompts, SamplingConfig.evaluation(max_new_tokens=40, batch_size=batch_size))
    assert greedy.finished.any() and not greedy.finished.all()  # EOS before the budget, and the budget reached
    sampled = same(m, t, prompts, SamplingConfig(n=3, max_new_tokens=40, batch_size=batch_size, seed=5, **SAMPLED))
    assert sampled.groupby("prompt_index").text.nunique().gt(1).any()  # really sampled


def test_embedded_grader_token_ids(embedded):
    m, t, prompts = embedded
    for cfg in [SamplingConfig.evaluation(max_new_tokens=30), SamplingConfig(max_new_tokens=30, seed=2, **SAMPLED)]:
        assert torch.equal(raw_ids(m, t, prompts, cfg, lean=False), raw_ids(m, t, prompts, cfg, lean=True))


@pytest.mark.parametrize("batch_size", [1, 2, 64])
def test_tiny_grader_every_mode(model, tok, batch_size):
    greedy = same(model, tok, PROMPTS, SamplingConfig.evaluation(max_new_tokens=12, batch_size=batch_size))
    sampled = same(model, tok, PROMPTS * 2, SamplingConfig(n=4, max_new_tokens=10, seed=1, batch_size=batch_size))
    assert sampled.finished.any() and not sampled.finished.all()
    same(model, tok, PROMPTS, SamplingConfig(n=3, max_new_tokens=10, seed=3, batch_size=batch_size,
                                             temperature=0.7, top_k=5, top_p=0.8))
    batch_seeded = same(model, tok, PROMPTS, SamplingConfig(n=3, max_new_tokens=10, seed=3, batch_size=batch_size,
                                                            seeding="batch", top_p=0.9))
    assert batch_seeded.groupby("prompt_index").text.nunique().gt(1).any() and len(greedy) == len(PROMPTS)


@pytest.mark.parametrize("batch_size", [2, 64])
def test_shared_prompt_prefix(model, tok, batch_size):
    """``model.prefix_cache`` together with lean decoding: the cached prefix is copied into the growing cache."""
    same(model, tok, SHARED, SamplingConfig.evaluation(max_new_tokens=12, batch_size=batch_size), share_prefix=True)
    same(model, tok, SHARED, SamplingConfig(n=2, max_new_tokens=10, seed=4, batch_size=batch_size),
         share_prefix=True)


def test_toy_models_without_eos(toy):
    m, t = toy
    assert gen_mod.eos_ids(m, t) == []  # no EOS: every row runs to the budget
    for bs in (1, 3):
        same(m, t, TOY_PROMPTS, SamplingConfig.evaluation(max_new_tokens=15, batch_size=bs))
        same(m, t, TOY_PROMPTS, SamplingConfig(n=2, max_new_tokens=15, batch_size=bs, seed=7, **SAMPLED))


def test_peft_wrapped_model(model, tok):
    from edit_lib.model.hf import LoraConfig, attach_lora
    wrapped = attach_lora(model, LoraConfig(r=4, alpha=8))
    try:
        torch.nn.init.normal_(next(p for n, p in wrapped.named_parameters() if "lora_B" in n))  # a moved adapter
        same(wrapped, tok, PROMPTS, SamplingConfig(n=2, max_new_tokens=10, seed=6, batch_size=3))
    finally:
        wrapped.unload()


def step_pair(hf, seqs, pad_id, steps: int = 3):
    """``hf``'s logits and `LeanStep`'s, side by side, for ``steps`` one-token steps after a left-padded prompt
    batch (each with its own growing cache fed by transformers' prompt forward). Both forwards of a step start from
    the same torch seed: a model in training mode draws dropout masks."""
    ids, mask = left_pad(seqs, pad_id, "cpu")
    mask = None if bool(mask.all()) else mask
    pos = (torch.ones_like(ids) if mask is None else mask).long().cumsum(-1) - 1
    pos = pos.clamp(min=0)
    caches = [growing_cache(hf.config, ids.shape[1] + steps) for _ in range(2)]
    with torch.inference_mode():
        first = []
        for c in caches:
            torch.manual_seed(0)
            first.append(hf(input_ids=ids, position_ids=pos, attention_mask=mask, cache=c, use_cache=True,
                            logits_to_keep=1).logits)
        assert torch.equal(*first)
        tok, p = first[0][:, -1].argmax(-1, keepdim=True), pos[:, -1:]
        step = lean_decode.LeanStep(hf)
        for _ in range(steps):
            p = p + 1
            mask = None if mask is None else torch.cat([mask, mask.new_ones(len(seqs), 1)], -1)
            torch.manual_seed(1)
            ref = hf(input_ids=tok, position_ids=p, attention_mask=mask, cache=caches[0], use_cache=True,
                     logits_to_keep=1).logits
            torch.manual_seed(1)
            yield ref, step(tok, p, mask, caches[1])
            tok = ref[:, -1].argmax(-1, keepdim=True)


@pytest.mark.parametrize("which", ["embedded", "eager", "lora", "lora-dropout", "sdpa_blocks", "qwen3-gqa",
                                   "llama-gqa", "llama-gqa-eager"])
def test_lean_step_gives_the_models_logits(embedded, model, tok, which):
    """`LeanStep` against the model's own forward at one-token steps, padded and unpadded: the shipped grader, a
    LoRA-wrapped grader with a moved adapter (PEFT's modules run as they are), the same in training mode with LoRA
    dropout (as GRPO samples: each forward from the same random state, so the draws must come in the same order),
    the block attention of ``model.attn_implementation: sdpa_blocks``, eager attention (the demo's: a float
    mask even without padding), and grouped-query toy Qwen3 and Llama models."""
    m, t, prompts = embedded
    seqs, pad = [t(p)["input_ids"] for p in prompts], t.pad_token_id
    if which.startswith("lora"):
        from edit_lib.model.hf import LoraConfig, attach_lora
        m = attach_lora(model, LoraConfig(r=4, alpha=8, dropout=0.3 if which == "lora-dropout" else 0.0))
        m.train(which == "lora-dropout")
        torch.nn.init.normal_(next(p for n, p in m.named_parameters() if "lora_B" in n))
        seqs, pad = [tok(p)["input_ids"] for p in PROMPTS], tok.pad_token_id
    elif which in ("sdpa_blocks", "eager"):
        from edit_lib.model import block_attention
        block_attention.register()
        m = copy.deepcopy(m)
        m.set_attn_implementation(which)
    elif which != "embedded":
        tt = toy_tokenizer()
        m = toy_model(which.split("-")[0], vocab_size=len(tt), attn="eager" if which.endswith("eager") else "sdpa",
                      seed=2, init_range=0.5)
        seqs, pad = [tt(p)["input_ids"] for p in TOY_PROMPTS], tt.pad_token_id
    try:
        hf = lean_decode._transformers_model(m)
        assert lean_decode.why_not(hf) is None
        for batch in (seqs, seqs[:1]):  # padded, then one row (no mask)
            for ref, got in step_pair(hf, batch, pad):
                assert torch.equal(ref, got)
    finally:
        if which.startswith("lora"):
            m.eval()
            m.unload()


def test_lean_step_folds_lora_adapters(model, tok):
    """``LeanStep(merge_lora=True)``: every LoRA linear's weight is W + (alpha / r) B A, computed here from the
    adapter's own matrices, the base weights are left as they were, and the step's logits are the model's up to
    float rounding (one product a projection instead of three)."""
    from edit_lib.model.hf import LoraConfig, attach_lora
    m = attach_lora(model, LoraConfig(r=4, alpha=8, dropout=0.3)).eval()
    try:
        for n, p in m.named_parameters():
            if "lora_B" in n:
                torch.nn.init.normal_(p, std=0.5)
        hf = lean_decode._transformers_model(m)
        bases = {n: p.detach().clone() for n, p in hf.named_parameters() if "base_layer" in n}
        folded = lean_decode.merged_lora(hf.model.layers)
        assert len(folded) == 7 * len(hf.model.layers)  # App. B's q/k/v/o/gate/up/down in every layer
        for mod, (weight, bias) in folded.items():
            a, b = mod.lora_A["default"].weight, mod.lora_B["default"].weight
            assert torch.allclose(weight, mod.base_layer.weight + 2.0 * (b @ a), atol=1e-6) and bias is None
        assert all(torch.equal(bases[n], p) for n, p in hf.named_parameters() if "base_layer" in n)
        ids, mask = left_pad([tok(p)["input_ids"] for p in PROMPTS], tok.pad_token_id, "cpu")
        pos = (mask.long().cumsum(-1) - 1).clamp(min=0)
        with torch.inference_mode():
            cache = growing_cache(hf.config, ids.shape[1] + 1)
            first = hf(input_ids=ids, position_ids=pos, attention_mask=mask, cache=cache, use_cache=True).logits
            tok1, p1, mask1 = first[:, -1:].argmax(-1), pos[:, -1:] + 1, torch.cat([mask, mask[:, :1] * 0 + 1], -1)
            plain = lean_decode.LeanStep(hf)(tok1, p1, mask1, copy.deepcopy(cache))
            merged = lean_decode.LeanStep(hf, merge_lora=True)(tok1, p1, mask1, cache)
        assert torch.allclose(plain, merged, atol=1e-4) and not torch.equal(plain, merged)
    finally:
        m.unload()


def test_lean_step_leaves_lora_with_a_bias_or_dora_unfolded(model):
    """peft's ``lora_bias`` (a bias on B, outside the delta weight) and DoRA run their own forward: not folded."""
    from peft import LoraConfig as PeftLora, get_peft_model
    for extra in ({"lora_bias": True}, {"use_dora": True}):
        m = get_peft_model(copy.deepcopy(model), PeftLora(r=4, target_modules=["q_proj", "v_proj"], **extra))
        assert lean_decode.merged_lora(lean_decode._transformers_model(m).model.layers) == {}


@pytest.mark.parametrize("training", [False, True], ids=["eval", "dropout-draws"])
def test_lean_generate_folds_lora_only_where_no_dropout_draws(model, tok, training):
    """A fold skips the LoRA dropout's draws, so `lean_generate` folds only a policy in eval mode (06's rollouts)."""
    from edit_lib.model.hf import LoraConfig, attach_lora
    m = attach_lora(model, LoraConfig(r=4, alpha=8, dropout=0.3)).train(training)
    made = []
    real = lean_decode.LeanStep

    def spy(hf, merge_lora=False):
        made.append(merge_lora)
        return real(hf, merge_lora=merge_lora)
    ids, mask = left_pad([tok(p)["input_ids"] for p in PROMPTS], tok.pad_token_id, "cpu")
    cfg = GenerationConfig(do_sample=True, max_new_tokens=6, pad_token_id=tok.pad_token_id,
                           eos_token_id=tok.eos_token_id)
    try:
        with mock.patch.object(lean_decode, "LeanStep", spy):  # as TRL's trainer calls the policy's generate
            lean_generate(m, ids, mask, cfg)
        assert made == [not training]
    finally:
        m.eval()
        m.unload()


def test_lean_step_names_what_it_does_not_cover(model):
    t = toy_tokenizer()
    flex = toy_model("llama", vocab_size=len(t), attn="sdpa")
    flex.config._attn_implementation = "flex_attention"
    assert "attn_implementation 'flex_attention'" in lean_decode.why_not(flex)
    config = copy.deepcopy(toy_model("qwen3", vocab_size=len(t)).config)
    config.layer_types = ["sliding_attention"] * config.num_hidden_layers
    assert lean_decode.why_not(AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")) == \
        "sliding-window layers"
    with pytest.raises(ValueError, match="one token per row, got 2"):
        lean_decode.LeanStep(model)(torch.ones(1, 2, dtype=torch.long), torch.zeros(1, 2, dtype=torch.long), None,
                                     growing_cache(model.config, 4))


def test_growing_layer_returns_dynamic_layers_states():
    g = torch.Generator().manual_seed(0)
    grow, plain = GrowingLayer(capacity=9), DynamicLayer()
    for width in (4, 1, 1, 3):
        k, v = torch.randn(2, 3, width, 5, generator=g), torch.randn(2, 3, width, 5, generator=g)
        for a, b in zip(grow.update(k, v), plain.update(k, v)):
            assert torch.equal(a, b)
    assert grow.get_seq_length() == plain.get_seq_length() == 9
    with pytest.raises(RuntimeError, match="buffer of 9"):
        grow.update(k[:, :, :1], v[:, :, :1])


def test_unsupported_settings_fall_back_to_generate_with_a_warning(model, tok):
    cfg = SamplingConfig(n=2, max_new_tokens=8, seed=1)
    model.generation_config.max_time = 1e6  # a stopping rule the lean loop does not implement
    try:
        with pytest.warns(UserWarning, match="model.lean_decoding: max_time"):
            same(model, tok, PROMPTS, cfg, falls_back=True)
    finally:
        model.generation_config.max_time = None
    t = toy_tokenizer()
    config = copy.deepcopy(toy_model("qwen3", vocab_size=len(t)).config)
    config.use_sliding_window, config.sliding_window = True, 4
    config.layer_types = ["sliding_attention"] * config.num_hidden_layers
    window = AutoModelForCausalLM.from_config(config).eval()
    with pytest.warns(UserWarning, match="sliding-window"):
        same(window, t, TOY_PROMPTS, SamplingConfig.evaluation(max_new_tokens=6), falls_back=True)


def test_profile_value_reaches_generate(model, tok, monkeypatch):
    calls = []
    monkeypatch.setattr(gen_mod, "lean_generate", lambda m, **kw: calls.append(m) or m.generate(**kw))
    policy_generate(Policy(model, tok, "tiny"), PROMPTS[:2], SamplingConfig.evaluation(max_new_tokens=3),
                    progress=False)
    assert calls == []
    policy_generate(Policy(model, tok, "tiny", lean_decoding=True), PROMPTS[:2],
                    SamplingConfig.evaluation(max_new_tokens=3), progress=False)
    assert calls == [model]
    assert load_profile("demo", ["model.lean_decoding=true"]).model.lean_decoding is True
    with pytest.raises(ConfigError, match="lean_decoding .* generation_backend 'hf', got 'vllm'"):
        ModelConfig(lean_decoding=True, generation_backend="vllm")


def test_lean_rollouts_decode_trl_calls_and_fall_back_once(model, tok):
    """`lean_rollouts` (06's GRPO rollouts): a call as TRL makes it decodes by the lean loop with generate's tokens;
    where the loop cannot promise them it warns and generate runs (not the wrapper again); any other call goes to
    generate untouched."""
    from edit_lib.model.hf import LoraConfig, attach_lora
    wrapped = attach_lora(model, LoraConfig(r=4, alpha=8))
    try:
        ids, mask = left_pad([tok(p)["input_ids"] for p in PROMPTS], tok.pad_token_id, "cpu")
        cfg = SamplingConfig.evaluation(max_new_tokens=8).hf_config(tok.pad_token_id, gen_mod.eos_ids(model, tok))
        want = wrapped.generate(input_ids=ids, attention_mask=mask, generation_config=cfg)
        lean_decode.lean_rollouts(wrapped)
        with mock.patch.object(lean_decode, "lean_generate", wraps=lean_decode.lean_generate) as spy:
            assert torch.equal(wrapped.generate(input_ids=ids, attention_mask=mask, generation_config=cfg), want)
            assert spy.call_count == 1
            cfg.max_time = 1e6  # a stopping rule the lean loop does not implement
            with pytest.warns(UserWarning, match="model.lean_decoding: max_time"):
                assert torch.equal(wrapped.generate(input_ids=ids, attention_mask=mask, generation_config=cfg), want)
            assert spy.call_count == 2
            wrapped.generate(input_ids=ids, attention_mask=mask, generation_config=cfg, max_new_tokens=2)
            assert spy.call_count == 2
    finally:
        del wrapped.generate
        wrapped.unload()
