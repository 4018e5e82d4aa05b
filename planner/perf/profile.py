"""Flatten a model (at a weights/KV dtype) and a list of devices into the numbers the formulas use.

``ModelProfile`` holds scalars in base units; ``HardwareArrays`` holds one numpy entry per device,
shaped for broadcasting over a (device, parallelism, batch, context) grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.perf import memory
from planner.schema import Device, ModelArch
from planner.units import gb_s_to_bytes_s, gb_to_bytes, tb_s_to_bytes_s, tflops_to_flops, us_to_s

#: compute formats a weights format may run on, fastest first (weight-only quantisation falls back
#: to a wider format: fp8 weights on an A100 run bf16 matmuls).
COMPUTE_FALLBACK: dict[str, tuple[str, ...]] = {
    "fp4": ("fp4", "fp8", "int8", "bf16"),
    "int4": ("fp4", "int8", "fp8", "bf16"),
    "fp8": ("fp8", "int8", "bf16"),
    "int8": ("int8", "fp8", "bf16"),
    "bf16": ("bf16",),
    "fp16": ("bf16",),
}


class UnsupportedDtype(ValueError):
    """A device lists no compute format that can run the requested weights dtype."""


def compute_dtype(device: Device, weights_dtype: str) -> str:
    """The fastest compute format of ``device`` able to run ``weights_dtype`` weights."""
    for candidate in COMPUTE_FALLBACK[weights_dtype]:
        if candidate in device.peak_dense_tflops:
            return candidate
    raise UnsupportedDtype(
        f"{device.id} lists no compute format for {weights_dtype} weights "
        f"(it has {sorted(device.peak_dense_tflops)})"
    )


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
    expert_flops_per_token: float = 0.0

    @classmethod
    def of(cls, arch: ModelArch, dtype: str, kv_dtype: str) -> ModelProfile:
        moe = arch.moe
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
        )

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


@dataclass(frozen=True)
class HardwareArrays:
    """Per-device numbers in base units, one entry per device (shape ``(D,)``)."""

    ids: tuple[str, ...]
    flops_s: np.ndarray
    weights_bw_bytes_s: np.ndarray
    kv_bw_bytes_s: np.ndarray
    weights_capacity_bytes: np.ndarray
    kv_capacity_bytes: np.ndarray
    shared_tier: np.ndarray
    link_bytes_s: np.ndarray
    link_latency_s: np.ndarray
    domain_size: np.ndarray
    layer_latency_s: np.ndarray
    mfu: np.ndarray
    mbu: np.ndarray
    sram: np.ndarray
    power_w: np.ndarray

    @classmethod
    def of(cls, devices: list[Device], weights_dtype: str) -> HardwareArrays:
        def arr(values):
            return np.asarray(list(values), dtype=float)

        return cls(
            ids=tuple(d.id for d in devices),
            flops_s=arr(tflops_to_flops(d.peak_dense_tflops[compute_dtype(d, weights_dtype)]) for d in devices),
            weights_bw_bytes_s=arr(tb_s_to_bytes_s(d.weights_memory.bandwidth_tb_s) for d in devices),
            kv_bw_bytes_s=arr(tb_s_to_bytes_s(d.kv_memory.bandwidth_tb_s) for d in devices),
            weights_capacity_bytes=arr(gb_to_bytes(d.weights_memory.capacity_gb) for d in devices),
            kv_capacity_bytes=arr(gb_to_bytes(d.kv_memory.capacity_gb) for d in devices),
            shared_tier=np.asarray([d.weights_tier == d.kv_tier for d in devices]),
            link_bytes_s=arr(gb_s_to_bytes_s(d.scale_up.bandwidth_gb_s) for d in devices),
            link_latency_s=arr(us_to_s(d.scale_up.latency_us) for d in devices),
            domain_size=arr(d.scale_up.domain_size for d in devices),
            layer_latency_s=arr(us_to_s(d.layer_latency_us) for d in devices),
            mfu=arr(d.mfu for d in devices),
            mbu=arr(d.mbu for d in devices),
            sram=np.asarray([d.is_sram_machine for d in devices]),
            power_w=arr(d.tdp_w + d.node_overhead_w / d.devices_per_node for d in devices),
        )

    def expand(self, ndim: int) -> HardwareArrays:
        """The same arrays reshaped to ``(D, 1, ..., 1)`` for broadcasting over ``ndim`` axes."""
        shape = (len(self.ids),) + (1,) * (ndim - 1)
        fields = {k: (v.reshape(shape) if isinstance(v, np.ndarray) else v) for k, v in self.__dict__.items()}
        return HardwareArrays(**fields)
