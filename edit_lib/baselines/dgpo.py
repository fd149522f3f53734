"""DGPO: distribution-guided token-level reallocation of the GRPO advantage (Jin et al. 2026, arXiv 2605.03327),
one of the RL baselines of the paper's Sec. 3.1 (Experiment Setup; trained with the shared recipe of Table 9).

GRPO gives every token of a completion the same sequence advantage A_i. DGPO reallocates it over the completion's
T_i real (unpadded) tokens: A_{i,t} = A_i * w_{i,t}, with

    w_{i,t} = T_i * softmax_t(s_{i,t} / tau),   s_{i,t} = d_{i,t} * H_{i,t}^kappa,

d_{i,t} = 1 - sum_v sqrt(p_v q_v) (one minus the Bhattacharyya coefficient of the policy's and the reference's
next-token distributions p, q) and H_{i,t} the policy's next-token entropy divided by log|V|; tau = 0.5, kappa = 1.
Each row's weights sum to T_i, so the sequence's total credit is kept and only its split over tokens changes.

Departures from the paper and from public code: book/departures.md, section "DGPO (edit_lib/baselines/dgpo.py)".
"""
from __future__ import annotations

import math

import torch
from trl import GRPOTrainer


def _check(policy_logits: torch.Tensor, ref_logits: torch.Tensor, mask: torch.Tensor | None = None) -> None:
    if policy_logits.dim() != 3 or policy_logits.shape != ref_logits.shape:
        raise ValueError(f"dgpo: policy_logits and ref_logits must both be (B, T, V) of one shape, got "
                         f"{tuple(policy_logits.shape)} and {tuple(ref_logits.shape)}")
    if policy_logits.size(-1) < 2:
        raise ValueError(f"dgpo: the vocabulary needs at least 2 entries (H is divided by log|V|), got "
                         f"{policy_logits.size(-1)}")
    if mask is not None and tuple(mask.shape) != tuple(policy_logits.shape[:2]):
        raise ValueError(f"dgpo: mask must be (B, T) = {tuple(policy_logits.shape[:2])}, got {tuple(mask.shape)}")


@torch.no_grad()
def dgpo_token_stats(policy_logits: torch.Tensor, ref_logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token DGPO signals (Jin et al. 2026; the DGPO baseline of Sec. 3.1): the policy-reference distance
    d = 1 - sum_v sqrt(p_v q_v) (Bhattacharyya) and the policy's normalised entropy H = -sum_v p_v log p_v / log|V|,
    both (B, T) in [0, 1], from next-token logits (B, T, V). No gradient."""
    _check(policy_logits, ref_logits)
    logp = torch.log_softmax(policy_logits.detach().float(), dim=-1)
    logq = torch.log_softmax(ref_logits.detach().float(), dim=-1)
    # 1 - BC = 0.5 * sum (sqrt p - sqrt q)^2 for normalised p, q: exact 0 at p = q, no cancellation
    d = 0.5 * (torch.exp(0.5 * logp) - torch.exp(0.5 * logq)).pow(2).sum(-1)
    h = -(logp.exp() * logp).sum(-1) / math.log(policy_logits.size(-1))
    return d.clamp(0.0, 1.0), h.clamp(0.0, 1.0)


@torch.no_grad()
def dgpo_token_weights(policy_logits: torch.Tensor, ref_logits: torch.Tensor, mask: torch.Tensor,
                       tau: float = 0.5, kappa: float = 1.0, return_stats: bool = False):
    """DGPO token weights w = T * softmax(s / tau) over each completion's real tokens, s = d * H^kappa (Jin et al.
    2026; the DGPO baseline of Sec. 3.1), from next-token logits (B, T, V) of the policy and the reference and the
    completion mask (B, T; 1 real, 0 padding). Returns w (B, T) float32 without gradient: padded positions get 0
    and stay out of the softmax, each row sums to its number of real tokens (a row with none is all 0), and w = 1
    everywhere when d = 0 (DGPO = GRPO). With `return_stats`, returns (w, d, H)."""
    if not tau > 0:
        raise ValueError(f"dgpo: tau must be > 0, got {tau}")
    if not kappa >= 0:
        raise ValueError(f"dgpo: kappa must be >= 0, got {kappa}")
    _check(policy_logits, ref_logits, mask)
    d, h = dgpo_token_stats(policy_logits, ref_logits)
    real = mask.detach().to(device=d.device).bool()
    z = (d * h.pow(kappa)) / tau
    z = z.masked_fill(~real, float("-inf"))
    top = z.max(dim=-1, keepdim=True).values
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))  # rows without real tokens
    e = torch.exp(z - top) * real  # exp(-inf) = 0 at padding
    n = real.sum(-1, keepdim=True).to(e.dtype)
    total = e.sum(-1, keepdim=True)
    # e * (n / total): with all s equal, e = 1 and total = n, so w is exactly 1
    w = torch.where(total > 0, e * (n / total.clamp_min(torch.finfo(e.dtype).tiny)), torch.zeros_like(e))
    return (w, d, h) if return_stats else w


class DGPOTrainer(GRPOTrainer):
    """TRL `GRPOTrainer` with DGPO's (B, T) advantages (Jin et al. 2026; the DGPO baseline of Sec. 3.1, trained
    with the Table 9 recipe like GRPO). Overrides one method, `_generate_and_score_completions`: after TRL has
    generated, scored and group-normalised (B,) advantages, it reads the policy's and the reference's next-token
    logits over the completion tokens without gradient and returns advantages[:, None] * w (`dgpo_token_weights`),
    which TRL's `_compute_loss` multiplies into the per-token terms as it is.

    The reference is TRL's KL reference: `ref_model` when there is one, else the peft model with its adapter
    disabled (the merged initialisation under a fresh LoRA), or the adapter named 'ref' when TRL made one.
    Logged per generation batch: `dgpo/distance_mean` (mean d over real tokens), `dgpo/distance_max`,
    `dgpo/entropy_mean`, `dgpo/weight_max`, `dgpo/weight_min`, `dgpo/weight_absdev_mean` (mean |w - 1|)."""

    def __init__(self, *args, tau: float = 0.5, kappa: float = 1.0, **kwargs):
        if not tau > 0 or not kappa >= 0:
            raise ValueError(f"DGPOTrainer: need tau > 0 and kappa >= 0, got tau={tau}, kappa={kappa}")
        super().__init__(*args, **kwargs)
        self.dgpo_tau, self.dgpo_kappa = float(tau), float(kappa)
        from accelerate.utils import is_peft_model
        if self.ref_model is None and not is_peft_model(self.accelerator.unwrap_model(self.model)):
            raise ValueError("DGPOTrainer: no reference policy: train a LoRA (peft_config / a peft model) or set "
                             "beta > 0 so that TRL keeps a reference model")

    def _completion_logits(self, model, input_ids, attention_mask, n_completion: int) -> torch.Tensor:
        """Next-token logits (rows, n_completion, V) predicting the completion tokens, at the sampling temperature
        (the distributions the completions were drawn from)."""
        out = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        return out.logits[:, -n_completion - 1:-1, :].float() / self.temperature

    @torch.no_grad()
    def _dgpo_weights(self, inputs: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        from trl.trainer.utils import use_adapter
        ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
        att = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        mask = inputs["completion_mask"]
        if "tool_mask" in inputs:
            mask = mask * inputs["tool_mask"]
        n = inputs["completion_ids"].size(1)
        chunk = max(1, int(self.args.per_device_train_batch_size))  # full (rows, T, V) logits: bound the memory
        model = self.accelerator.unwrap_model(self.model)
        was_training = model.training
        model.eval()  # the policy's distribution, without dropout noise in d
        ws, ds, hs = [], [], []
        try:
            for a in range(0, ids.size(0), chunk):
                sl = slice(a, a + chunk)
                with self.accelerator.autocast():
                    pol = self._completion_logits(model, ids[sl], att[sl], n)
                    if self.ref_model is not None:
                        ref = self._completion_logits(self.ref_model, ids[sl], att[sl], n)
                    else:
                        with use_adapter(model, adapter_name="ref" if "ref" in model.peft_config else None):
                            ref = self._completion_logits(model, ids[sl], att[sl], n)
                w, d, h = dgpo_token_weights(pol, ref, mask[sl], self.dgpo_tau, self.dgpo_kappa, return_stats=True)
                ws.append(w), ds.append(d), hs.append(h)
        finally:
            model.train(was_training)
        return torch.cat(ws), torch.cat(ds), torch.cat(hs)

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        w, d, h = self._dgpo_weights(out)
        adv = out["advantages"]
        out["advantages"] = adv.unsqueeze(1) * w.to(adv.device, adv.dtype)
        mask = out["completion_mask"].bool()
        mode = "train" if self.model.training else "eval"
        if mask.any():
            m = self._metrics[mode]
            m["dgpo/distance_mean"].append(d[mask].mean().item())
            m["dgpo/distance_max"].append(d[mask].max().item())
            m["dgpo/entropy_mean"].append(h[mask].mean().item())
            m["dgpo/weight_max"].append(w[mask].max().item())
            m["dgpo/weight_min"].append(w[mask].min().item())
            m["dgpo/weight_absdev_mean"].append((w[mask] - 1).abs().mean().item())  # 0: uniform, DGPO = GRPO
        return out
