"""Times of a replica's forward passes: a prefill of prompts, one decode step.

A pass is three kernel groups, each on its own roofline, plus communication and fixed overheads:

``T = max(C_dense, M_dense) + max(C_experts, M_experts) + max(C_attention, M_attention) + comm + fixed``

- dense GEMMs (attention projections, dense FFNs, shared experts) over ``T`` tokens read the
  always-active weights, the LM head runs only on the rows that sample a token (``dense_gemm_flops``),
  and a device's slice ``d/p`` of them runs at ``width_efficiency``;
  routed experts read only the experts the tokens touch, each GEMM over ``T·k/E_touched`` rows, and
  their activation copies stream at the family's peak MBU; attention reads the KV cache of the batch
  (efficiencies: efficiency.py);
- communication: two all-reduces per layer under tensor parallelism, each with a per-call floor
  (comm.py); chip-boundary hops on SRAM pipelines;
- fixed: ``L · a + L_moe · b + c + S · e``, the per-layer launch/synchronisation floor ``a``, the extra
  routing/permute/grouped-GEMM launches of a MoE layer ``b``, the framework's per-step cost ``c`` and
  its per-request host work ``e`` for each of the ``S`` sequences in the pass.

GPUs split every layer over ``n`` devices (TP), or, pipeline parallel across nodes, the layers into ``pp``
stages of ``n/pp``-way TP groups. SRAM machines split the layers into ``S = min(n, L)`` sequential stages
of ``p = n/S`` chips. ``g`` micro-batches keep the stages busy (``min(T, S)`` on SRAM, ``min(sequences, pp)``
on GPUs), so a pass costs what one stage group of ``p`` devices takes for ``T/g`` tokens through every
layer: at batch 1 the stages run one after another, and the batch fills the pipeline.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from planner.perf import comm
from planner.perf.comm import ACTIVATION_BYTES
from planner.perf.efficiency import gemm_efficiency, kernel_times, width_efficiency
from planner.perf.moe import touched_experts
from planner.perf.profile import ModelProfile
from planner.perf.silicon import HardwareArrays

BOUNDS = ("compute", "memory", "communication", "overhead")


class PassCost(NamedTuple):
    """Parts of one forward pass, seconds.

    ``compute_s`` and ``memory_s`` sum the kernel groups' compute and memory times; ``roofline_s``
    sums each group's larger one; ``total_s = roofline_s + communication_s + overhead_s``.
    """

    compute_s: np.ndarray
    memory_s: np.ndarray
    roofline_s: np.ndarray
    communication_s: np.ndarray
    overhead_s: np.ndarray

    @property
    def total_s(self) -> np.ndarray:
        return self.roofline_s + self.communication_s + self.overhead_s

    @property
    def bound(self) -> np.ndarray:
        """``compute``, ``memory``, ``communication`` or ``overhead``: whichever part is largest."""
        stacked = np.stack(np.broadcast_arrays(self.compute_s, self.memory_s, self.communication_s, self.overhead_s))
        return np.array(BOUNDS)[np.argmax(stacked, axis=0)]


def carried_attention_flops(model: ModelProfile, tokens, mean_context_tokens):
    """Attention FLOPs of ``q`` query tokens that attend over ``x`` tokens each on average (prefill form):
    ``2·n_h·(d_qk+d_v) · q · attended(x)``, FLOPs (``attended``: layer-tokens, sliding windows capped)."""
    q = np.asarray(tokens, dtype=float)
    return model.attention_flops_per_context_token_prefill * q * model.attended_tokens(mean_context_tokens)


def prefill_attention_flops(model: ModelProfile, new_tokens, cached_tokens=0.0):
    """Attention FLOPs of ``s`` new tokens after ``p`` cached: ``2·n_h·(d_qk+d_v) · s · attended(p + s/2)``."""
    s = np.asarray(new_tokens, dtype=float)
    return carried_attention_flops(model, s, np.asarray(cached_tokens, dtype=float) + s / 2.0)


def kv_share(model: ModelProfile, hw: HardwareArrays, devices, pp: int = 1):
    """Per-device share of a sequence's KV: layer-split on SRAM pipelines; on GPUs head-split over the
    ``t = n/pp`` devices of a TP group (``1/min(t, n_kv)``, MLA's latent on every rank: 1) and layer-split over
    ``pp`` stages: ``share_TP / pp``."""
    n = np.asarray(devices, dtype=float)
    t = n / pp
    tp_share = np.ones_like(n) if model.mla else 1.0 / np.minimum(t, model.kv_heads)
    return np.where(hw.sram, 1.0 / n, tp_share / pp)


def fixed_overhead_s(model: ModelProfile, hw: HardwareArrays, sequences=0.0):
    """Fixed cost of one pass over ``S`` sequences: ``L · a + L_moe · b + c + S · e`` seconds (``a``, ``b``,
    ``c`` in seconds, ``e`` in seconds per sequence)."""
    fixed = model.layers * hw.layer_latency_s + model.moe_layers * hw.moe_layer_latency_s + hw.step_overhead_s
    return fixed + np.asarray(sequences, dtype=float) * hw.sequence_overhead_s


def pipeline_shape(model: ModelProfile, hw: HardwareArrays, devices, tokens, pp: int = 1, sequences=None):
    """``(S, p, g)``: sequential stages, devices working on one layer at once, micro-batches in flight.

    GPUs: ``S = pp`` stages of ``p = n/pp`` devices (TP alone: one stage of ``n``) and ``g = min(m, pp)``
    micro-batches of whole sequences (``m``: the pass's sequences, default its tokens; an engine never splits
    one sequence over micro-batches in flight). SRAM pipelines: ``S = min(n, L)`` stages of ``p = n/S`` chips
    and ``g = min(T, S)`` micro-batches of ``T/g`` tokens.
    """
    n = np.asarray(devices, dtype=float)
    t = np.maximum(np.asarray(tokens, dtype=float), 1.0)
    m = t if sequences is None else np.maximum(np.asarray(sequences, dtype=float), 1.0)
    stages = np.where(hw.sram, np.minimum(n, model.layers), float(pp))
    return stages, n / stages, np.minimum(np.where(hw.sram, t, m), stages)


def kv_bandwidth(model: ModelProfile, hw: HardwareArrays, devices, kv_resident_bytes):
    """Bandwidth KV is read at: its own tier's, or, where KV spills from the weights' SRAM, the blend
    ``1 / (f/B_sram + (1−f)/B_kv)`` with ``f`` the share of the resident KV that fits beside the weights."""
    n = np.asarray(devices, dtype=float)
    room = np.maximum(hw.usable_weights_bytes - model.weights_bytes / n, 0.0)
    resident = np.maximum(np.asarray(kv_resident_bytes, dtype=float), 1.0)
    fast = np.where(hw.kv_spill, np.minimum(room / resident, 1.0), 0.0)
    return 1.0 / (fast / hw.weights_bw_bytes_s + (1.0 - fast) / hw.kv_bw_bytes_s)


def moe_shuffle_bytes(model: ModelProfile, tokens):
    """Activation bytes a MoE layer moves per pass besides its weights: ``T · L_moe · (3k + 2) · d · 2``.

    Permute writes ``k`` copies of each token's hidden state, the grouped GEMM reads them, its outputs
    (``k`` per token) are read back by unpermute, which reads and writes one combined state per token
    (``(k + k + k + 1 + 1) · d`` values). TP ranks each shuffle every token; EP ranks their own.
    """
    return np.asarray(tokens, dtype=float) * model.moe_layers * (3 * model.experts_active + 2) * model.hidden_size * ACTIVATION_BYTES


def expert_imbalance(tokens_per_group, groups):
    """Busiest expert group's load over the mean, for uniform routing of ``μ`` tokens to each of ``G`` groups.

    The largest of ``G`` Poisson(μ) counts is about ``μ + sqrt(2 μ ln G)``, so the factor is
    ``1 + sqrt(2 ln G / μ)`` (1 for one group). Skewed real routing is worse; load balancers bring it
    back toward this bound (TensorRT-LLM tech blog 4: ×2.56 without EPLB, ×1.11 with it on DeepSeek-R1).
    """
    g = np.asarray(groups, dtype=float)
    mu = np.maximum(np.asarray(tokens_per_group, dtype=float), 1e-9)
    return 1.0 + np.sqrt(2.0 * np.log(np.maximum(g, 1.0)) / mu)


def dense_gemm_flops(model: ModelProfile, tokens, logit_rows):
    """FLOPs of the dense GEMMs of a pass over ``T`` tokens of which ``R`` compute logits:
    ``T · (F_dense − F_head) + R · F_head`` with ``F_head = 2·V·d`` (the LM head runs only on the rows
    whose next token is sampled: one per decoding sequence, the last token of a prompt)."""
    t = np.asarray(tokens, dtype=float)
    head = model.lm_head_flops_per_token
    return t * (model.dense_flops_per_token - head) + np.asarray(logit_rows, dtype=float) * head


def pipeline_fill(stages, micro_batches):
    """How much longer a one-shot pass takes on a pipeline than one micro-batch's trip through it:
    ``(S + g − 1) / S`` (dimensionless) for ``g`` micro-batches entering ``S`` stages one after another, the last
    leaving ``g − 1`` stage times after the first. A steady stream of decode steps keeps the pipeline full, so its
    steps pay none of it."""
    s = np.asarray(stages, dtype=float)
    return (s + np.asarray(micro_batches, dtype=float) - 1.0) / s


def _pass(model: ModelProfile, hw: HardwareArrays, devices, tokens, attention_flops, kv_read_bytes,
          kv_write_bytes, ep: int = 1, logit_rows=None, sequences=0.0, pp: int = 1, batch_sequences=None) -> PassCost:
    """Price a pass over ``tokens`` tokens whose attention costs ``attention_flops`` and reads/writes KV bytes.

    ``logit_rows`` of the tokens run the LM head (default: all). ``kv_read_bytes``/``kv_write_bytes`` are
    per device (already divided by its share). ``pp > 1``: a GPU pipeline of ``pp`` stages over the scale-out
    network, ``batch_sequences`` sequences split into its micro-batches (``pipeline_shape``); each micro-batch
    crosses the ``pp − 1`` stage boundaries on the NICs (``comm.pipeline_hops_s``). ``ep > 1`` is
    data-parallel attention with expert parallelism: ``ep`` attention replicas of ``n/ep``-way TP each
    take ``1/ep`` of the tokens; the routed experts are split over the ``ep`` groups, whose busiest one
    sets the pace (``expert_imbalance``), with a dispatch and a combine all-to-all per MoE layer.
    """
    n = np.asarray(devices, dtype=float)
    t_all = np.asarray(tokens, dtype=float)
    stages, p, g = pipeline_shape(model, hw, n, t_all, pp, batch_sequences)
    p = p / ep  # devices sharing one layer's dense work: the attention TP group
    t = t_all / g  # tokens of one micro-batch: what one pass through the stages carries
    t_dense = t / ep  # tokens of one attention replica
    logits = t_all if logit_rows is None else np.asarray(logit_rows, dtype=float)
    dense_flops = dense_gemm_flops(model, t_dense, logits / g / ep) / p
    dense_bytes = model.always_active_bytes / p
    dense_mfu = gemm_efficiency(t_dense, hw.mfu, hw.gemm_half_tokens) * width_efficiency(
        model.hidden_size / p, hw.gemm_half_width)
    c_dense, m_dense = kernel_times(dense_flops, hw.flops_s, dense_mfu, dense_bytes, hw.weights_bw_bytes_s, hw.mbu)
    if model.moe_layers:
        touched = touched_experts(model.experts, model.experts_active, t)
        rows = t * model.experts_active / touched  # tokens per touched expert
        share = imbalance = 1.0
        if ep > 1:
            share = 1.0 / ep
            imbalance = expert_imbalance(t * model.experts_active / ep, ep)
        expert_bytes = model.moe_layers * touched * share * model.expert_bytes / p
        c_exp, m_exp = kernel_times(t * model.routed_flops_per_token * share * imbalance / p, hw.flops_s,
                                    gemm_efficiency(rows, hw.expert_mfu, hw.gemm_half_tokens),
                                    expert_bytes, hw.weights_bw_bytes_s, hw.mbu)
        # activation copies stream at the family's peak MBU: the weights format's unpack penalty is not theirs
        m_exp = m_exp + kernel_times(0.0, hw.flops_s, 1.0, moe_shuffle_bytes(model, t_dense), hw.weights_bw_bytes_s,
                                     hw.activation_mbu)[1]
    else:
        c_exp = m_exp = np.zeros(1)
    # KV per chip (layer-split on a pipeline): one micro-batch crosses the S stages in turn
    kv_bytes = (kv_read_bytes + kv_write_bytes) * stages / g
    c_att, m_att = kernel_times(attention_flops / g / ep / p, hw.flops_s, hw.mfu, kv_bytes,
                                kv_bandwidth(model, hw, n, kv_read_bytes), hw.kv_mbu)
    compute = c_dense + c_exp + c_att
    memory = m_dense + m_exp + m_att
    roof = np.maximum(c_dense, m_dense) + np.maximum(c_exp, m_exp) + np.maximum(c_att, m_att)
    # a micro-batch's two all-reduces per layer within its stage's TP group, and its hops between the stages
    tp = comm.tensor_parallel_comm_s(model.layers, t / ep, model.hidden_size, p, hw.collective_bytes_s,
                                     hw.collective_step_s, hw.collective_latency_s)
    tp = tp + comm.pipeline_hops_s(t, model.hidden_size, pp, hw.nic_bytes_s, hw.nic_latency_s)
    if ep > 1 and model.moe_layers:
        tp = tp + comm.expert_all_to_all_s(model.moe_layers, t_all / ep, model.experts_active, model.hidden_size,
                                           ep, hw.collective_bytes_s, hw.collective_latency_s)
    hops = comm.pipeline_hops_s(t, model.hidden_size, n, hw.link_bytes_s, hw.link_latency_s)
    fused = comm.dataflow_exchange_s(model.layers, t_all, model.hidden_size, n, hw.link_bytes_s, hw.link_latency_s)
    communication = np.where(hw.sram, hops, np.where(hw.dataflow, fused, tp))
    overhead = fixed_overhead_s(model, hw, sequences)
    shape = np.broadcast(compute, memory, communication, overhead).shape
    return PassCost(*(np.broadcast_to(x, shape) for x in (compute, memory, roof, communication, overhead)))


def decode_step(model: ModelProfile, hw: HardwareArrays, devices, batch, context_tokens, prefill_tokens=0.0,
                ep: int = 1, prefill_context_tokens=None, requests=None, pp: int = 1) -> PassCost:
    """One decode step of ``b`` sequences at mean context ``c`` on ``n`` devices (``ep``, ``pp``: see ``_pass``;
    under ``pp`` the ``b`` decoding sequences make the micro-batches, and a carried chunk rides in one of them,
    which then sets the pace: carried tokens are priced as if every micro-batch held as many, an upper bound).

    Optionally carries ``q`` more tokens in the same pass; the step then runs its GEMMs over ``b + q``
    rows and adds their attention and KV writes. Given ``prefill_context_tokens``, the carried tokens
    are pieces of prompts (chunked prefill): each attends over its own prompt's prefix, ``p + s/2`` on
    average for prompts of ``s`` new tokens after ``p`` cached, whatever the decoding batch's context,
    and only the ``b`` decoding rows run the LM head. Without it they extend the batch's own sequences
    (speculative verification): they attend over ``c`` and each computes logits. ``requests`` is how
    many requests' host work the step carries (default ``b``; an expert replica schedules none).
    """
    n = np.asarray(devices, dtype=float)
    b = np.asarray(batch, dtype=float)
    q = np.asarray(prefill_tokens, dtype=float)
    if pp > 1:
        q = q * np.where(hw.sram, 1.0, pipeline_shape(model, hw, n, b + q, pp, b)[2])
    c = np.asarray(context_tokens, dtype=float)
    attention = b * model.attention_flops_per_context_token_decode * model.attended_tokens(c)
    prompts = prefill_context_tokens is not None
    attention = attention + carried_attention_flops(model, q, prefill_context_tokens if prompts else c)
    share = kv_share(model, hw, n / ep, pp) / ep  # a device holds the KV of its replica's 1/ep of the sequences
    kv_read = b * model.kv_bytes(c) * share
    kv_write = (b + q) * model.kv_bytes(1.0) * share
    return _pass(model, hw, n, b + q, attention, kv_read, kv_write, ep, logit_rows=b if prompts else b + q,
                 sequences=b if requests is None else requests, pp=pp, batch_sequences=b)


def prefill_pass(model: ModelProfile, hw: HardwareArrays, devices, new_tokens, cached_tokens=0.0, prompts=1.0,
                 ep: int = 1, requests=None, pp: int = 1) -> PassCost:
    """Prefill of ``m`` prompts of ``s`` new tokens after ``p`` cached ones, together, on ``n`` devices (under
    ``pp`` the ``m`` prompts make the micro-batches: one prompt crosses the stages in turn, and the last one leaves
    ``pipeline_fill`` later than one micro-batch's trip; the host overhead is not stretched).

    GEMMs run over ``m·s`` rows (the LM head over the ``m`` last ones); each prompt's attention covers
    its own prefix; the KV of the cached prefix is read and that of the ``m·s`` new tokens written.
    ``requests``: how many requests' host work the pass carries (default ``m``; none in a static batch).
    """
    n = np.asarray(devices, dtype=float)
    s = np.asarray(new_tokens, dtype=float)
    m = np.asarray(prompts, dtype=float)
    p = np.asarray(cached_tokens, dtype=float)
    share = kv_share(model, hw, n / ep, pp) / ep
    attention = m * prefill_attention_flops(model, s, p)
    cost = _pass(model, hw, n, m * s, attention, m * model.kv_bytes(p) * share, m * model.kv_bytes(s) * share, ep,
                 logit_rows=m, sequences=m if requests is None else requests, pp=pp, batch_sequences=m)
    if pp == 1:
        return cost
    stages, _, g = pipeline_shape(model, hw, n, m * s, pp, m)
    fill = np.where(hw.sram, 1.0, pipeline_fill(stages, g))
    return cost._replace(compute_s=cost.compute_s * fill, memory_s=cost.memory_s * fill,
                         roofline_s=cost.roofline_s * fill, communication_s=cost.communication_s * fill)


def chunked_prefill_tokens_per_step(batch, input_tokens, output_tokens, prefix_cache_hit=0.0):
    """Prefill tokens an aggregated replica must fold into each decode step to keep up.

    In steady state each request needs ``isl·(1−hit)`` prefill tokens per ``osl`` decode steps, so
    a step over ``b`` sequences carries ``b · isl·(1−hit) / osl`` prefill tokens (Sarathi-style
    mixed batches); this is the interference chunked prefill puts on TPOT.
    """
    uncached = np.asarray(input_tokens, dtype=float) * (1.0 - np.asarray(prefix_cache_hit, dtype=float))
    return np.asarray(batch, dtype=float) * uncached / np.asarray(output_tokens, dtype=float)
