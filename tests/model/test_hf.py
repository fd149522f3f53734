"""Tests for edit_lib.model.hf (loading, tiny Qwen3, LoRA of App. B) and edit_lib.embedded.tokenizer (word-level, digits split)."""
from dataclasses import fields

import pytest
import torch

from edit_lib import config
from edit_lib.model.hf import (PAPER_LORA_TARGETS, LoraConfig, ModelConfig, attach_lora, count_parameters,
                               init_tiny_model, load_model_and_tokenizer, lora_to_peft, merge_lora,
                               prepare_tokenizer, save_model_and_tokenizer, tiny_qwen3_config)
from edit_lib.embedded.tokenizer import DEFAULT_SPECIAL_TOKENS, canonicalize, train_word_tokenizer, words

torch.set_num_threads(1)  # other processes share the 2 cores: oversubscribed torch threads are 10-50x slower
CORPUS = [
    "Question 3 (12 marks): Explain why the Treaty of Versailles angered Germany.",
    "Step 1: the answer mentions reparations, point A: accept.\nStep 2: 'war guilt' is a paraphrase of point B: accept.",
    "Total: 7/12 marks.\nFinal mark: 7",
    "The student's answer doesn't mention territory; no credit (0 marks).",
]
SMALL = dict(hidden=32, layers=2, heads=2, intermediate=64, max_position=256)


@pytest.fixture(scope="module")
def tok():
    return train_word_tokenizer(CORPUS)


@pytest.fixture()
def model(tok):
    return init_tiny_model(tok, seed=0, **SMALL)


def _ids(tok, text="Final mark : 7 / 1 2"):
    return torch.tensor([tok(text)["input_ids"]])


# ---- tokenizer ----------------------------------------------------------------------------------------------

def test_digits_and_punctuation_split_one_per_token(tok):
    assert tok.tokenize("12") == ["1", "2"]
    assert tok.tokenize("7/12") == ["7", "/", "1", "2"]
    assert tok.tokenize("mark: 10.") == ["mark", ":", "1", "0", "."]
    assert tok.tokenize("mark\nFinal") == ["mark", "\n", "Final"]  # newline is a token
    assert words("don't  x_y") == ["don", "'", "t", "x", "_", "y"]


def test_special_tokens_and_unknown_words(tok):
    assert tok.convert_ids_to_tokens([0, 1, 2, 3]) == list(DEFAULT_SPECIAL_TOKENS)
    assert (tok.pad_token_id, tok.unk_token_id, tok.bos_token_id, tok.eos_token_id) == (0, 1, 2, 3)
    assert tok("zzzunseen")["input_ids"] == [tok.unk_token_id]
    assert all(tok.convert_tokens_to_ids(d) != tok.unk_token_id for d in "0123456789\n")
    assert tok.padding_side == "left"


@pytest.mark.parametrize("text", CORPUS + ["  Step 1 :accept\n\n\nFinal   mark:  1 2\n", "\nx 5"])
def test_decode_encode_roundtrip_of_canonical_text(tok, text):
    if "x" in text.split():
        text = text.replace("x", "Final")
    c = canonicalize(text)
    assert tok.decode(tok(c)["input_ids"]) == c
    assert canonicalize(c) == c  # idempotent
    assert "  " not in c and " \n" not in c and "\n " not in c


def test_canonicalize_examples():
    assert canonicalize("Total:7/12 marks.\n  Final mark: 7") == "Total : 7 / 1 2 marks .\nFinal mark : 7"


def test_skip_special_tokens_and_vocab_determinism(tok):
    ids = tok(canonicalize(CORPUS[2]))["input_ids"] + [tok.eos_token_id, tok.pad_token_id]
    assert tok.decode(ids, skip_special_tokens=True) == canonicalize(CORPUS[2])
    again = train_word_tokenizer(CORPUS)
    assert again.get_vocab() == tok.get_vocab()
    rare = train_word_tokenizer(CORPUS, extra_words=["zebra-x"], min_frequency=2)
    assert "Versailles" not in rare.get_vocab() and {"zebra", "-", "x"} <= rare.get_vocab().keys() and "Step" in rare.get_vocab()
    with pytest.raises(ValueError):
        train_word_tokenizer(CORPUS, special_tokens=("<pad>",))


# ---- models -------------------------------------------------------------------------------------------------

def test_one_type_per_concept_and_fields_have_help():
    """The profile's `model` and `sft.lora` sections are the types model/hf.py loads with (no second copy)."""
    assert ModelConfig is config.ModelConfig and LoraConfig is config.LoraConfig
    prof = config.load_profile("paper")
    assert type(prof.model) is ModelConfig and type(prof.sft.lora) is LoraConfig
    for cls in (ModelConfig, LoraConfig):
        for f in fields(cls):
            assert f.metadata.get("help"), f"{cls.__name__}.{f.name}"
    with pytest.raises(ValueError):
        load_model_and_tokenizer(ModelConfig("nowhere", dtype="float64"))


def test_lora_config_maps_to_peft():
    """App. B recipe: r=64, alpha=128, dropout 0.05, all seven projections; peft's names differ from ours."""
    peft_cfg = lora_to_peft(LoraConfig())
    assert (peft_cfg.r, peft_cfg.lora_alpha, peft_cfg.lora_dropout, peft_cfg.bias) == (64, 128, 0.05, "none")
    assert set(peft_cfg.target_modules) == set(PAPER_LORA_TARGETS) and len(PAPER_LORA_TARGETS) == 7
    small = lora_to_peft(LoraConfig(r=4, alpha=8, dropout=0.0, target_modules=["q_proj"], bias="lora_only"))
    assert (small.r, small.lora_alpha, small.lora_dropout, set(small.target_modules), small.bias) == (
        4, 8, 0.0, {"q_proj"}, "lora_only")


def test_tiny_config_and_default_size():
    cfg = tiny_qwen3_config(800)
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads,
            cfg.head_dim, cfg.intermediate_size, cfg.tie_word_embeddings) == (128, 4, 4, 4, 32, 512, True)
    assert tiny_qwen3_config(10, kv_heads=2).num_key_value_heads == 2
    with pytest.raises(ValueError):
        tiny_qwen3_config(10, hidden=130)
    with pytest.raises(ValueError):
        tiny_qwen3_config(10, heads=4, kv_heads=3)
    m = init_tiny_model(train_word_tokenizer(["w"], extra_words=[f"w{chr(97 + i % 26)}{chr(97 + i // 26)}" for i in range(26 * 30)]))
    h, f, L, v = 128, 512, 4, m.config.vocab_size
    per_layer = 4 * h * h + 3 * h * f + 2 * h + 2 * 32  # attn, mlp, 2 RMSNorms, q/k norms (head_dim 32)
    assert count_parameters(m) == v * h + L * per_layer + h  # tied embeddings counted once, final norm
    assert 1.0e6 < count_parameters(m) < 1.2e6


def test_lora_attach_trainable_params_and_paper_defaults(model):
    spec = LoraConfig()
    assert (spec.r, spec.alpha, spec.dropout, tuple(spec.target_modules)) == (64, 128, 0.05, PAPER_LORA_TARGETS)
    base_total = count_parameters(model)
    peft_model = attach_lora(model, LoraConfig(r=4, alpha=8))
    h, f, kv = 32, 64, 32
    shapes = [(h, h), (h, kv), (h, kv), (h, h), (h, f), (h, f), (f, h)]  # q k v o gate up down (in, out)
    expected = 2 * sum(4 * (i + o) for i, o in shapes)
    assert count_parameters(peft_model, trainable_only=True) == expected
    assert count_parameters(peft_model) == base_total + expected
    names = [n for n, p in peft_model.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n for n in names)


def test_merge_gives_same_logits_as_adapter(model, tok):
    x = _ids(tok)
    base = model(x).logits.detach().clone()
    pm = attach_lora(model, LoraConfig(r=8, alpha=16, dropout=0.0))
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for n, p in pm.named_parameters():
            if "lora_" in n:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    pm.eval()
    adapted = pm(x).logits.detach()
    assert (adapted - base).abs().max() > 1e-2  # the adapter is not a no-op
    merged = merge_lora(pm)
    assert not any("lora_" in n for n, _ in merged.named_parameters())
    torch.testing.assert_close(merged(x).logits, adapted, atol=1e-5, rtol=1e-5)
    assert merge_lora(merged) is merged


def test_save_load_roundtrip_identical_logits(model, tok, tmp_path):
    path = save_model_and_tokenizer(model, tok, tmp_path / "grader")
    # attn_implementation "": transformers' default kernel, the one the freshly built model uses (exact equality)
    m2, t2 = load_model_and_tokenizer(ModelConfig(str(path), device="cpu", attn_implementation="",
                                                  local_files_only=True))
    assert t2.get_vocab() == tok.get_vocab() and t2.padding_side == "left" and t2.pad_token_id == tok.pad_token_id
    text = canonicalize(CORPUS[1])
    assert t2.decode(t2(text)["input_ids"]) == text
    assert torch.equal(m2(_ids(t2)).logits, model(_ids(tok)).logits)
    assert m2.generation_config.eos_token_id == tok.eos_token_id and not m2.training and m2.dtype == torch.float32
    m3, _ = load_model_and_tokenizer(ModelConfig(str(path), dtype="bfloat16", device="cpu", attn_implementation="eager"))
    assert m3.dtype == torch.bfloat16 and m3.config._attn_implementation == "eager"


def test_prepare_tokenizer_pad_falls_back_to_eos(tok):
    t = train_word_tokenizer(CORPUS)
    t.pad_token = None
    t.padding_side = "right"
    prepare_tokenizer(t)
    assert t.pad_token == t.eos_token and t.padding_side == "left"
