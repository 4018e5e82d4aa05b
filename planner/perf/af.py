"""Attention/FFN disaggregation of MoE decode (MegaScale-Infer style).

Attention replicas hold the attention weights, dense layers, LM head and the KV cache; expert
replicas hold the routed and shared experts. ``r`` attention replicas may share one expert replica
(M:N): the experts then run the ``r·b`` tokens of all of them in each layer. Activations cross the link
twice per MoE layer per step (dispatch and combine); ``m`` micro-batches ping-pong so that one computes
while the other is in flight, hiding all but ``1/m`` of the transfers:

``step = max(T_attention(b), T_experts(r·b)) + L_moe · 2 · (α + b·d·2 / bw) / m``,

with ``bw`` the slower side's share of the link (the expert side's NICs carry all ``r`` replicas' traffic).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from planner.perf.comm import ACTIVATION_BYTES
from planner.perf.profile import ModelProfile
from planner.perf.roofline import PassCost, decode_step
from planner.perf.silicon import HardwareArrays

MICRO_BATCHES = 2


def attention_side(model: ModelProfile) -> ModelProfile:
    """The model as the attention replicas see it: no experts, all attention and KV."""
    routed = model.moe_layers * model.experts * model.expert_bytes
    return replace(
        model,
        weights_bytes=model.weights_bytes - routed - model.shared_expert_bytes,
        always_active_bytes=model.always_active_bytes - model.shared_expert_bytes,
        linear_flops_per_token=model.linear_flops_per_token - model.expert_flops_per_token,
        routed_flops_per_token=0.0,
        expert_flops_per_token=0.0,
        moe_layers=0,
        experts=0,
        experts_active=0,
    )


def expert_side(model: ModelProfile) -> ModelProfile:
    """The model as the expert replicas see it: MoE layers' experts only, no attention, no KV."""
    routed = model.moe_layers * model.experts * model.expert_bytes
    return replace(
        model,
        layers=model.moe_layers,
        weights_bytes=routed + model.shared_expert_bytes,
        always_active_bytes=model.shared_expert_bytes,
        linear_flops_per_token=model.expert_flops_per_token,
        routed_flops_per_token=model.routed_flops_per_token,
        attention_flops_per_context_token_decode=0.0,
        attention_flops_per_context_token_prefill=0.0,
        kv_bytes_per_token_layer=0.0,
        lm_head_flops_per_token=0.0,
    )


def af_decode_step(model: ModelProfile, attention_hw: HardwareArrays, attention_devices, expert_hw: HardwareArrays,
                   expert_devices, batch, context_tokens, link_bytes_s, link_latency_s,
                   micro_batches: int = MICRO_BATCHES, sharing: int = 1) -> tuple[np.ndarray, PassCost, PassCost]:
    """Decode step time of an attention replica running ``b`` sequences, with an expert replica that serves
    ``sharing`` such attention replicas (``link_bytes_s``: the attention replica's share of the slower side).

    Returns (step seconds, attention-side pass, expert-side pass).
    """
    attention = decode_step(attention_side(model), attention_hw, attention_devices, batch, context_tokens)
    experts = decode_step(expert_side(model), expert_hw, expert_devices, sharing * np.asarray(batch, dtype=float), 0.0,
                          requests=0.0)
    message = np.asarray(batch, dtype=float) * model.hidden_size * ACTIVATION_BYTES
    transfers = model.moe_layers * 2.0 * (link_latency_s + message / link_bytes_s) / micro_batches
    return np.maximum(attention.total_s, experts.total_s) + transfers, attention, experts
