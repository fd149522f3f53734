from edit_lib.config import Decoding
"""DGPO token weights and trainer (edit_lib/baselines/dgpo.py; Jin et al. 2026, the DGPO baseline of Sec. 3.1):
w = T * softmax(d * H^kappa / tau) over the real tokens, checked against a hand computation in numpy."""
import dataclasses
import math
import time

import numpy as np
import pytest
import torch

from edit_lib.baselines.dgpo import dgpo_token_stats, dgpo_token_weights

torch.set_num_threads(1)


def _logits(b=3, t=6, v=7, seed=0, scale=2.0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, t, v, generator=g) * scale


MASK = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0]])


def test_rows_sum_to_their_token_count_and_padding_gets_zero():
    w = dgpo_token_weights(_logits(seed=1), _logits(seed=2), MASK)
    assert torch.allclose(w.sum(-1), MASK.sum(-1).float(), atol=1e-5)
    assert (w[MASK == 0] == 0).all() and (w[MASK == 1] > 0).all()
    assert not torch.allclose(w[0], torch.ones(6))  # different policies: a real reallocation


def test_padding_does_not_enter_the_softmax():
    pol, ref = _logits(seed=1), _logits(seed=2)
    w = dgpo_token_weights(pol, ref, MASK)
    pol2, ref2 = pol.clone(), ref.clone()
    pol2[1, 3:] = 50 * torch.randn(3, 7)  # change only padded positions
    assert torch.equal(dgpo_token_weights(pol2, ref2, MASK), w)


def test_weights_carry_no_gradient():
    pol = _logits(seed=1).requires_grad_(True)
    ref = _logits(seed=2).requires_grad_(True)
    w, d, h = dgpo_token_weights(pol, ref, MASK, return_stats=True)
    assert not w.requires_grad and not d.requires_grad and not h.requires_grad and w.grad_fn is None


def test_equal_policy_and_reference_give_exactly_grpo():
    pol = _logits(seed=3)
    w, d, _ = dgpo_token_weights(pol, pol.clone(), MASK, return_stats=True)
    assert (d == 0).all()
    assert torch.equal(w, MASK.float())  # exactly 1 on real tokens, 0 on padding


def _by_hand(pol, ref, mask, tau, kappa):
    """Independent numpy computation: probabilities, BC, entropy / log|V|, s, softmax over real tokens."""
    def softmax(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    p, q = softmax(pol.astype(np.float64)), softmax(ref.astype(np.float64))
    d = 1.0 - np.sqrt(p * q).sum(-1)
    h = -(p * np.log(p)).sum(-1) / math.log(p.shape[-1])
    s = d * h ** kappa
    real = mask.astype(bool)
    e = np.exp(s[real] / tau)
    w = np.zeros_like(s)
    w[real] = real.sum() * e / e.sum()
    return w, d, h


def test_hand_computed_one_row_case():
    pol = np.array([[[2.0, 0.0, -1.0], [0.0, 0.0, 0.0], [3.0, 1.0, 0.0], [1.0, 1.0, 1.0]]])
    ref = np.array([[[0.0, 1.0, 0.0], [1.0, -2.0, 0.5], [3.0, 1.0, 0.0], [0.0, 0.0, 0.0]]])
    mask = np.array([[1, 1, 1, 0]])
    # one position by hand: uniform policy (H = 1) vs q = softmax([1, -2, 0.5])
    q = np.exp([1.0, -2.0, 0.5]) / np.exp([1.0, -2.0, 0.5]).sum()
    d1 = 1 - np.sqrt(q / 3).sum()
    w_t, d_t, h_t = dgpo_token_weights(torch.tensor(pol, dtype=torch.float32), torch.tensor(ref, dtype=torch.float32),
                                       torch.tensor(mask), tau=0.5, kappa=1.0, return_stats=True)
    w, d, h = _by_hand(pol, ref, mask, 0.5, 1.0)
    assert d[0, 1] == pytest.approx(d1, abs=1e-12) and h[0, 1] == pytest.approx(1.0)
    assert d[0, 2] == pytest.approx(0.0, abs=1e-12)  # identical distributions
    np.testing.assert_allclose(d_t.numpy(), d, atol=1e-6)
    np.testing.assert_allclose(h_t.numpy(), h, atol=1e-6)
    np.testing.assert_allclose(w_t.numpy(), w, atol=1e-5)
    assert w_t[0, 3] == 0 and w_t[0, :3].sum().item() == pytest.approx(3.0, abs=1e-5)


@pytest.mark.parametrize("tau,kappa", [(0.5, 1.0), (0.1, 2.0), (2.0, 0.5)])
def test_batch_matches_hand_computation(tau, kappa):
    pol, ref = _logits(seed=5, scale=3.0), _logits(seed=6, scale=3.0)
    w_t = dgpo_token_weights(pol, ref, MASK, tau=tau, kappa=kappa)
    for i in range(3):
        w, _, _ = _by_hand(pol[i:i + 1].numpy(), ref[i:i + 1].numpy(), MASK[i:i + 1].numpy(), tau, kappa)
        np.testing.assert_allclose(w_t[i:i + 1].numpy(), w, atol=1e-4)


def test_lower_tau_concentrates_weight_and_kappa_gates_by_entropy():
    pol, ref = _logits(seed=7, scale=3.0), _logits(seed=8, scale=3.0)
    m = torch.ones(3, 6, dtype=torch.long)
    maxes = [dgpo_token_weights(pol, ref, m, tau=t).max(-1).values for t in (2.0, 0.5, 0.1, 0.02)]
    for hi, lo in zip(maxes, maxes[1:]):
        assert (lo > hi).all()
    assert torch.allclose(dgpo_token_weights(pol, ref, m, tau=1e3), torch.ones(3, 6), atol=1e-3)  # tau -> inf: GRPO
    # kappa = 0 ignores entropy: s = d; a large kappa gates s towards 0 (H < 1), so the weights flatten to 1
    d, h = dgpo_token_stats(pol, ref)
    z = d / 0.5
    w0 = 6 * torch.softmax(z, -1)
    torch.testing.assert_close(dgpo_token_weights(pol, ref, m, kappa=0.0), w0)
    assert (h < 0.9).all()
    assert not torch.allclose(dgpo_token_weights(pol, ref, m, kappa=1.0), torch.ones(3, 6), atol=1e-2)
    assert torch.allclose(dgpo_token_weights(pol, ref, m, kappa=200.0), torch.ones(3, 6), atol=1e-3)


def test_row_without_tokens_is_zero_and_bad_input_is_an_error():
    pol, ref = _logits(b=2), _logits(b=2, seed=4)
    m = torch.tensor([[1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]])
    w = dgpo_token_weights(pol, ref, m)
    assert torch.isfinite(w).all() and (w[1] == 0).all() and w[0].sum().item() == pytest.approx(2.0, abs=1e-6)
    with pytest.raises(ValueError, match="tau"):
        dgpo_token_weights(pol, ref, m, tau=0.0)
    with pytest.raises(ValueError, match="mask"):
        dgpo_token_weights(pol, ref, m[:, :3])
    with pytest.raises(ValueError, match="shape"):
        dgpo_token_weights(pol, ref[:, :3], m)


def _trainer(cls, out, **kw):
    from datasets import Dataset

    from edit_lib.config import ModelConfig, load_profile
    from edit_lib.model.policy import load_policy
    from edit_lib.train.rl import build_grpo_config, build_rl_lora
    prof = load_profile("paper")
    rl = dataclasses.replace(prof.rl, rollouts_per_prompt=2, prompts_per_step=2, decoding=Decoding(max_new_tokens=32),
                             steps=1, steps_by_dataset={})
    model, tok, _ = load_policy("micro", ModelConfig(name_or_path="micro", torch_threads=1, local_files_only=True))
    args = build_grpo_config(rl, prof.sft.lora, out, "sas_history", 42, use_cpu=True, progress=False)
    data = Dataset.from_list([{"prompt": f"question {i} answer"} for i in range(4)])

    def reward(completions, **_):  # any non-constant reward, so the advantages are not all 0
        return [float(len(c)) for c in completions]
    return cls(model=model, reward_funcs=reward, args=args, train_dataset=data, processing_class=tok,
               peft_config=build_rl_lora(prof.sft.lora), **kw)


def test_dgpo_trainer_runs_one_step_and_equals_grpo_at_step_zero(tmp_path):
    from trl import GRPOTrainer

    from edit_lib.baselines.dgpo import DGPOTrainer
    torch.manual_seed(0)
    t = _trainer(DGPOTrainer, str(tmp_path / "dgpo"), tau=0.5, kappa=1.0)
    assert (t.dgpo_tau, t.dgpo_kappa, t.beta) == (0.5, 1.0, 0.02)
    start = time.perf_counter()
    res = t.train()
    dgpo_s = time.perf_counter() - start
    assert math.isfinite(res.training_loss)
    logs = [r for r in t.state.log_history if "dgpo/distance_mean" in r]
    assert logs, "dgpo metrics not logged"
    # step 0: the fresh LoRA equals the reference, so d = 0 and every weight is 1 (DGPO = GRPO)
    assert logs[0]["dgpo/distance_mean"] == 0.0 and logs[0]["dgpo/weight_max"] == 1.0
    torch.manual_seed(0)
    g = _trainer(GRPOTrainer, str(tmp_path / "grpo"))
    start = time.perf_counter()
    g.train()
    grpo_s = time.perf_counter() - start
    print(f"step time DGPO / GRPO on the micro grader: {dgpo_s:.2f}s / {grpo_s:.2f}s = {dgpo_s / grpo_s:.2f}")


def test_dgpo_trainer_weights_move_once_the_adapter_differs_from_the_reference(tmp_path):
    from edit_lib.baselines.dgpo import DGPOTrainer
    torch.manual_seed(0)
    t = _trainer(DGPOTrainer, str(tmp_path / "dgpo"))
    with torch.no_grad():  # move the fresh LoRA away from the reference (its B matrices start at 0)
        for name, p in t.model.named_parameters():
            if "lora_B" in name:
                p.add_(0.05 * torch.randn_like(p))
    g = torch.Generator().manual_seed(1)
    vocab = t.model.get_input_embeddings().weight.shape[0]
    inputs = {"prompt_ids": torch.randint(0, vocab, (2, 5), generator=g),
              "prompt_mask": torch.ones(2, 5, dtype=torch.long),
              "completion_ids": torch.randint(0, vocab, (2, 8), generator=g),
              "completion_mask": torch.tensor([[1] * 8, [1] * 5 + [0] * 3])}
    w, d, h = t._dgpo_weights(inputs)
    assert w.shape == (2, 8) and (d[inputs["completion_mask"] == 1] > 0).all()
    assert torch.allclose(w.sum(-1), torch.tensor([8.0, 5.0]), atol=1e-4) and (w[1, 5:] == 0).all()
    assert not torch.allclose(w[0], torch.ones(8))
