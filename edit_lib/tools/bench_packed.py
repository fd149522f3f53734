"""``edit-suite bench packed-sft``: one warm-up step (``train.packed_sft``) on the real model against TRL's way.

The naive way is what ``train.sft`` (TRL) does with the same pairs: one right-padded batch of whole
prompt + completion sequences, LoRA on every layer. The packed way lays the shared prompt prefix of one
question's batch out once (App. B's block mask); with ``lora_layers`` the backward pass also stops early. Both
compute the same completion-only loss; the benchmark reports the wall time of one forward + backward, the ratio,
and the token counts. A last row runs the packed way under ``attn_implementation: sdpa_blocks``
(``model.block_attention``), which skips the key columns the block mask hides, against plain SDPA.
"""
from __future__ import annotations

import numpy as np
import torch


def _question():
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
    """Seconds of one optimiser step's forward + backward for ``batch_size`` answers of one question:
    TRL-style padded batch (LoRA on every layer) vs packed (every layer) vs packed with LoRA on the last
    ``lora_layers`` layers, the last also under ``sdpa_blocks``, on SmolLM2-135M-Instruct. Raises
    ``RealModelMissing`` without the model package."""
    import time

    from edit_lib.model.gguf_model import NAME, RealModelMissing, available
    from edit_lib.model.policy import Policy, load_policy
    from edit_lib.model.warmup import judgement
    from edit_lib.runner.keys import register_all
    from edit_lib.train.packed_sft import encode_pair, lora_on_layers, pair_tree, packed_loss
    from edit_lib.config import LoraConfig
    register_all()
    ok, why = available()
    if not ok:
        raise RealModelMissing(why)
    torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    words = "water moves across the membrane cell salt solution shrinks swells osmosis turgid wall".split()
    q = _question()
    answers = [" ".join(rng.choice(words, size=int(rng.integers(10, 60)))) + "." for _ in range(batch_size)]

    def step_time(model, fn) -> float:
        ts = []
        for _ in range(repeats + 1):  # the first call pays one-off allocation costs
            t0 = time.perf_counter()
            fn(model).backward()
            model.zero_grad(set_to_none=True)
            ts.append(time.perf_counter() - t0)
        return float(np.median(ts[1:]))

    out = {"bench": "packed-sft", "model": NAME, "batch_size": batch_size, "lora_layers": lora_layers,
           "repeats": repeats}
    from edit_lib.model import block_attention
    for name, layers in (("packed_all_layers", 0), ("packed_last_layers", lora_layers), ("naive", 0),
                         ("packed_last_layers_blocks", lora_layers)):
        base, tok, kind = load_policy(NAME)
        if name.endswith("_blocks"):
            base.set_attn_implementation(block_attention.register())
        policy = Policy(model=base, tokenizer=tok, kind=kind, name=NAME)
        enc = [encode_pair(tok, policy.grading_input(q, a), judgement(3, int(rng.integers(0, 4)))) for a in answers]
        model = lora_on_layers(base, LoraConfig(r=16, alpha=32, dropout=0.0), layers).train()
        if name == "naive":
            out["naive_s"] = step_time(model, lambda m: _padded_loss(m, enc, tok.eos_token_id))
            out["naive_tokens"] = batch_size * max(len(p) + len(c) for p, c in enc)
        else:
            tree, targets = pair_tree(enc)
            out[f"{name}_s"] = step_time(model, lambda m: packed_loss(m, tree, targets))
            out["packed_tokens"] = len(tree)
    out["speedup_packed"] = out["naive_s"] / out["packed_all_layers_s"]
    out["speedup_packed_last_layers"] = out["naive_s"] / out["packed_last_layers_s"]
    out["speedup_blocks_over_sdpa"] = out["packed_last_layers_s"] / out["packed_last_layers_blocks_s"]
    return out


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
