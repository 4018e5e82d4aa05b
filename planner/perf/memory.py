"""Parameter counts, weight bytes and KV-cache bytes (GQA and MLA), and what fits in memory.

Counts follow the published config fields: SwiGLU FFNs have three ``hidden x ffn`` matrices;
norms and biases (< 0.01 % of parameters) are ignored.
"""

from __future__ import annotations

import numpy as np

from planner.schema import ModelArch
from planner.units import DTYPE_BYTES

#: share of device memory a serving engine may fill with weights and KV; the rest holds
#: activations, CUDA graphs and allocator slack (vLLM's default ``gpu_memory_utilization``).
USABLE_MEMORY_FRACTION = 0.9
#: KV-cache page size in tokens (vLLM's default block size).
KV_BLOCK_TOKENS = 16


def attention_params_per_layer(arch: ModelArch) -> float:
    """Attention weights of one layer.

    GQA: ``d·n_h·d_h (Q) + 2·d·n_kv·d_h (K, V) + n_h·d_h·d (O)``.
    MLA: ``d·q_r + q_r·n_h·(d_nope + d_rope)`` (or ``d·n_h·(d_nope+d_rope)`` without a Q LoRA)
    ``+ d·(kv_r + d_rope) + kv_r·n_h·(d_nope + d_v) + n_h·d_v·d``.
    """
    d, n_h = arch.hidden_size, arch.attention_heads
    if arch.attention == "gqa":
        return d * n_h * arch.head_dim * 2 + 2 * d * arch.kv_heads * arch.head_dim
    m = arch.mla
    assert m is not None
    qk_dim = m.qk_nope_head_dim + m.qk_rope_head_dim
    q = d * m.q_lora_rank + m.q_lora_rank * n_h * qk_dim if m.q_lora_rank else d * n_h * qk_dim
    kv = d * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank * n_h * (m.qk_nope_head_dim + m.v_head_dim)
    return q + kv + n_h * m.v_head_dim * d


def swiglu_params(hidden_size: int, ffn_size: int) -> float:
    """One gated FFN (gate, up, down): ``3·d·d_ff``."""
    return 3.0 * hidden_size * ffn_size


def moe_layers(arch: ModelArch) -> int:
    """Layers whose FFN is a mixture of experts."""
    return 0 if arch.moe is None else arch.layers - arch.moe.dense_layers


def expert_params(arch: ModelArch) -> float:
    """One routed expert's parameters: ``3·d·d_expert``."""
    return 0.0 if arch.moe is None else swiglu_params(arch.hidden_size, arch.moe.expert_ffn_size)


def always_active_params(arch: ModelArch) -> float:
    """Parameters every token reads: attention, dense FFNs, shared experts, routers, LM head.

    The input embedding is a lookup (no FLOPs, one row read) and is excluded.
    """
    dense_ffn_layers = arch.layers - moe_layers(arch)
    params = arch.layers * attention_params_per_layer(arch)
    params += dense_ffn_layers * swiglu_params(arch.hidden_size, arch.ffn_size)
    params += arch.vocab_size * arch.hidden_size  # LM head
    if arch.moe is not None:
        params += moe_layers(arch) * (arch.moe.shared_experts * expert_params(arch) + arch.hidden_size * arch.moe.experts)
    return params


def total_params(arch: ModelArch) -> float:
    """All parameters: always-active ones, every routed expert, and the input embedding if untied."""
    routed = 0.0 if arch.moe is None else moe_layers(arch) * arch.moe.experts * expert_params(arch)
    untied_embedding = 0.0 if arch.tie_embeddings else arch.vocab_size * arch.hidden_size
    return always_active_params(arch) + routed + untied_embedding


def active_params(arch: ModelArch) -> float:
    """Parameters one token multiplies through: always-active plus ``k`` routed experts per MoE layer."""
    routed = 0.0 if arch.moe is None else moe_layers(arch) * arch.moe.experts_active * expert_params(arch)
    return always_active_params(arch) + routed


def weight_bytes(params: float, dtype: str) -> float:
    """Bytes to store ``params`` in ``dtype``: ``params · bytes_per_element``."""
    return params * DTYPE_BYTES[dtype]


def kv_bytes_per_token_per_layer(arch: ModelArch, kv_dtype: str) -> float:
    """KV bytes one token adds to one layer. GQA: ``2·n_kv·d_h·b``; MLA: ``(kv_r + d_rope)·b``."""
    b = DTYPE_BYTES[kv_dtype]
    if arch.attention == "mla":
        assert arch.mla is not None
        return (arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim) * b
    return 2.0 * arch.kv_heads * arch.head_dim * b


def kv_bytes_per_token(arch: ModelArch, kv_dtype: str) -> float:
    """KV bytes per token over all layers: ``L · per_layer`` (Llama-3.3-70B bf16: 327,680)."""
    return arch.layers * kv_bytes_per_token_per_layer(arch, kv_dtype)


def paged_kv_tokens(input_tokens, output_tokens, block_tokens: int = KV_BLOCK_TOKENS):
    """Tokens a paged cache holds for one live request, on average over its life.

    Continuous batching keeps requests at every stage of generation, so the mean live context is
    ``isl + osl/2``, rounded up to whole pages of ``block_tokens``.
    """
    live = np.asarray(input_tokens, dtype=float) + np.asarray(output_tokens, dtype=float) / 2.0
    return np.ceil(live / block_tokens) * block_tokens


def contiguous_kv_tokens(reserved_context_tokens):
    """Tokens a contiguous (pre-paging) cache reserves per request: the maximum context, always."""
    return np.asarray(reserved_context_tokens, dtype=float)


def max_concurrent_requests(usable_bytes_per_device, weights_bytes_per_device, kv_bytes_per_request_per_device):
    """Requests whose KV fits next to the weights: ``floor((usable - weights) / kv_per_request)``, ≥ 0."""
    free = np.asarray(usable_bytes_per_device, dtype=float) - weights_bytes_per_device
    return np.maximum(np.floor(free / kv_bytes_per_request_per_device), 0.0)
