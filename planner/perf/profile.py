"""Flatten a model at a weights and KV dtype into the scalars the formulas use (bytes, FLOPs)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.perf import memory
from planner.schema import ModelArch


def default_kv_dtype(weights_dtype: str) -> str:
    """The KV-cache dtype a serving engine uses unless told otherwise: fp8 beside 4-bit weights, else the weights'."""
    return "fp8" if weights_dtype in ("fp4", "int4") else weights_dtype


@dataclass(frozen=True)
class ModelProfile:
    """A model's cost-relevant scalars at given weights and KV dtypes (bytes, FLOPs)."""

    layers: int
    hidden_size: int
    weights_bytes: float
    always_active_bytes: float
    expert_bytes: float
    moe_layers: int
    experts: int
    experts_active: int
    linear_flops_per_token: float
    attention_flops_per_context_token_decode: float
    attention_flops_per_context_token_prefill: float
    full_attention_layers: int
    window_layers: int
    window_tokens: int
    kv_bytes_per_token_layer: float
    kv_heads: int
    mla: bool
    shared_expert_bytes: float = 0.0
    expert_flops_per_token: float = 0.0  # routed active and shared experts
    routed_flops_per_token: float = 0.0  # routed active experts only
    lm_head_flops_per_token: float = 0.0  # 2·V·d, spent only on tokens whose logits are computed

    @property
    def dense_flops_per_token(self) -> float:
        """Linear FLOPs per token outside the routed experts: ``2·P_active − routed``."""
        return self.linear_flops_per_token - self.routed_flops_per_token

    @classmethod
    def of(cls, arch: ModelArch, dtype: str, kv_dtype: str | None = None) -> ModelProfile:
        """The profile at ``dtype`` weights and ``kv_dtype`` KV (default: ``default_kv_dtype(dtype)``)."""
        moe = arch.moe
        kv_dtype = kv_dtype or default_kv_dtype(dtype)
        return cls(
            layers=arch.layers,
            hidden_size=arch.hidden_size,
            weights_bytes=memory.weight_bytes(memory.total_params(arch), dtype),
            always_active_bytes=memory.weight_bytes(memory.always_active_params(arch), dtype),
            expert_bytes=memory.weight_bytes(memory.expert_params(arch), dtype),
            moe_layers=memory.moe_layers(arch),
            experts=moe.experts if moe else 0,
            experts_active=moe.experts_active if moe else 0,
            linear_flops_per_token=2.0 * memory.active_params(arch),
            attention_flops_per_context_token_decode=attention_flops_coefficient(arch, absorbed=True),
            attention_flops_per_context_token_prefill=attention_flops_coefficient(arch, absorbed=False),
            full_attention_layers=arch.layers - arch.sliding_window_layers,
            window_layers=arch.sliding_window_layers,
            window_tokens=arch.sliding_window_tokens,
            kv_bytes_per_token_layer=memory.kv_bytes_per_token_per_layer(arch, kv_dtype),
            kv_heads=arch.kv_heads,
            mla=arch.attention == "mla",
            shared_expert_bytes=memory.weight_bytes(
                memory.moe_layers(arch) * (moe.shared_experts if moe else 0) * memory.expert_params(arch), dtype),
            expert_flops_per_token=2.0 * memory.moe_layers(arch) * ((moe.experts_active + moe.shared_experts) if moe else 0)
            * memory.expert_params(arch),
            routed_flops_per_token=2.0 * memory.moe_layers(arch) * (moe.experts_active if moe else 0)
            * memory.expert_params(arch),
            lm_head_flops_per_token=2.0 * arch.vocab_size * arch.hidden_size,
        )

    @property
    def routed_bytes(self) -> float:
        """Bytes of every routed expert of every MoE layer."""
        return self.moe_layers * self.experts * self.expert_bytes

    def weights_per_device(self, devices, ep: int = 1):
        """Weight bytes per device: all of them split ``n`` ways, or, under expert parallelism, the dense
        part split over the ``n/ep`` devices of an attention replica and the routed experts over all ``n``."""
        n = np.asarray(devices, dtype=float)
        if ep == 1:
            return self.weights_bytes / n
        return (self.weights_bytes - self.routed_bytes) / (n / ep) + self.routed_bytes / n

    def kv_bytes(self, context_tokens):
        """KV bytes of one sequence at context ``c`` (sliding-window layers capped at W)."""
        c = np.asarray(context_tokens, dtype=float)
        per_layer_tokens = self.full_attention_layers * c + self.window_layers * np.minimum(c, self.window_tokens)
        return self.kv_bytes_per_token_layer * per_layer_tokens

    def attended_tokens(self, context_tokens):
        """Layer-tokens attended by one query at context ``c``: ``L_full·c + L_win·min(c, W)``."""
        c = np.asarray(context_tokens, dtype=float)
        return self.full_attention_layers * c + self.window_layers * np.minimum(c, self.window_tokens)


def attention_flops_coefficient(arch: ModelArch, absorbed: bool) -> float:
    """FLOPs per query token per attended token per layer: ``2 · n_h · (d_qk + d_v)``.

    GQA: ``d_qk = d_v = d_h`` (so ``4·n_h·d_h``). MLA decode runs the absorbed form on the latent
    (``d_qk = kv_r + d_rope``, ``d_v = kv_r``); MLA prefill the expanded one (``d_nope + d_rope``, ``d_v``).
    """
    if arch.attention == "gqa":
        return 4.0 * arch.attention_heads * arch.head_dim
    m = arch.mla
    assert m is not None
    if absorbed:
        return 2.0 * arch.attention_heads * (2 * m.kv_lora_rank + m.qk_rope_head_dim)
    return 2.0 * arch.attention_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim)
