"""Roofline times of a replica's forward passes: prefill of a prompt, one decode step.

A pass costs ``max(compute, memory) + communication + L · layer_latency`` where
compute = FLOPs / (n · F · MFU), memory = bytes read per device / (B · MBU), communication is the
tensor-parallel all-reduces (GPUs) or the chip-to-chip pipeline hops (SRAM machines), and the
per-layer latency stands for kernel launches, synchronisation and on-chip hops that no roofline
sees (it sets the batch-1 floor; calibrated per device, see catalogs/calibration/).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from planner.perf import comm
from planner.perf.moe import touched_experts
from planner.perf.profile import HardwareArrays, ModelProfile


class PassCost(NamedTuple):
    """Parts of one forward pass, seconds; ``total_s`` = max(compute, memory) + communication."""

    compute_s: np.ndarray
    memory_s: np.ndarray
    communication_s: np.ndarray

    @property
    def total_s(self) -> np.ndarray:
        return np.maximum(self.compute_s, self.memory_s) + self.communication_s

    @property
    def bound(self) -> np.ndarray:
        """``compute``, ``memory`` or ``communication``: whichever term is largest."""
        stacked = np.stack(np.broadcast_arrays(self.compute_s, self.memory_s, self.communication_s))
        return np.array(["compute", "memory", "communication"])[np.argmax(stacked, axis=0)]


def decode_flops(model: ModelProfile, batch, context_tokens):
    """FLOPs of one decode step: ``b · (2·P_active + 2·n_h·(d_qk+d_v)·attended(c))``."""
    b = np.asarray(batch, dtype=float)
    attention = model.attention_flops_per_context_token_decode * model.attended_tokens(context_tokens)
    return b * (model.linear_flops_per_token + attention)


def prefill_flops(model: ModelProfile, new_tokens, cached_tokens=0.0):
    """FLOPs to prefill ``s`` new tokens after ``p`` cached ones (causal attention).

    ``s · 2·P_active + 2·n_h·(d_qk+d_v) · s · attended(p + s/2)``: each new token attends to the
    cached prefix and, on average, half of the new tokens.
    """
    s = np.asarray(new_tokens, dtype=float)
    mean_context = np.asarray(cached_tokens, dtype=float) + s / 2.0
    attention = model.attention_flops_per_context_token_prefill * s * model.attended_tokens(mean_context)
    return s * model.linear_flops_per_token + attention


def touched_weight_bytes(model: ModelProfile, tokens):
    """Weight bytes a pass over ``tokens`` tokens reads: always-active weights plus touched experts.

    ``W_active + L_moe · E·(1 − (1 − k/E)^tokens) · W_expert``. The input embedding is a lookup of
    one row per token and is not read whole.
    """
    if model.moe_layers == 0:
        return np.full_like(np.asarray(tokens, dtype=float), model.always_active_bytes)
    experts = touched_experts(model.experts, model.experts_active, tokens)
    return model.always_active_bytes + model.moe_layers * experts * model.expert_bytes


def kv_share(model: ModelProfile, hw: HardwareArrays, devices):
    """Per-device share of a sequence's KV: layer-split on SRAM pipelines, head-split under TP."""
    n = np.asarray(devices, dtype=float)
    if model.mla:
        tp_share = np.ones_like(n)
    else:
        tp_share = 1.0 / np.minimum(n, model.kv_heads)
    return np.where(hw.sram, 1.0 / n, tp_share)


def communication_s(model: ModelProfile, hw: HardwareArrays, devices, tokens):
    """Collectives of one pass plus the per-layer latency floor ``L · layer_latency``."""
    tp = comm.tensor_parallel_comm_s(model.layers, tokens, model.hidden_size, devices, hw.link_bytes_s, hw.link_latency_s)
    hops = comm.pipeline_hops_s(tokens, model.hidden_size, devices, hw.link_bytes_s, hw.link_latency_s)
    return np.where(hw.sram, hops, tp) + model.layers * hw.layer_latency_s


def decode_step(model: ModelProfile, hw: HardwareArrays, devices, batch, context_tokens, prefill_tokens=0.0) -> PassCost:
    """One decode step of ``b`` sequences at mean context ``c`` on ``n`` devices.

    Optionally carries ``q`` prefill tokens (a chunked-prefill piece) in the same pass.
    compute = (decode FLOPs + prefill FLOPs(q)) / (n·F·MFU);
    memory = touched weights / (n·B_w·MBU) + b·KV(c)·share / (B_kv·MBU).
    """
    n = np.asarray(devices, dtype=float)
    b = np.asarray(batch, dtype=float)
    q = np.asarray(prefill_tokens, dtype=float)
    flops = decode_flops(model, b, context_tokens) + prefill_flops(model, q, context_tokens)
    compute = flops / (n * hw.flops_s * hw.mfu)
    weights = touched_weight_bytes(model, b + q) / (n * hw.weights_bw_bytes_s * hw.mbu)
    kv = b * model.kv_bytes(context_tokens) * kv_share(model, hw, n) / (hw.kv_bw_bytes_s * hw.mbu)
    return PassCost(compute, weights + kv, communication_s(model, hw, n, b + q))


def prefill_pass(model: ModelProfile, hw: HardwareArrays, devices, new_tokens, cached_tokens=0.0, prompts=1.0) -> PassCost:
    """Prefill of ``m`` prompts of ``s`` new tokens after ``p`` cached ones, together, on ``n`` devices.

    compute = m · prefill FLOPs(s, p) / (n·F·MFU); memory = touched weights (once) / (n·B_w·MBU) + the
    KV written for ``m·s`` tokens; communication all-reduces ``m·s`` tokens per layer.
    """
    n = np.asarray(devices, dtype=float)
    s = np.asarray(new_tokens, dtype=float)
    m = np.asarray(prompts, dtype=float)
    compute = m * prefill_flops(model, s, cached_tokens) / (n * hw.flops_s * hw.mfu)
    weights = touched_weight_bytes(model, m * s) / (n * hw.weights_bw_bytes_s * hw.mbu)
    kv_written = m * model.kv_bytes(s) * kv_share(model, hw, n) / (hw.kv_bw_bytes_s * hw.mbu)
    return PassCost(compute, weights + kv_written, communication_s(model, hw, n, m * s))


def chunked_prefill_tokens_per_step(batch, input_tokens, output_tokens, prefix_cache_hit=0.0):
    """Prefill tokens an aggregated replica must fold into each decode step to keep up.

    In steady state each request needs ``isl·(1−hit)`` prefill tokens per ``osl`` decode steps, so
    a step over ``b`` sequences carries ``b · isl·(1−hit) / osl`` prefill tokens (Sarathi-style
    mixed batches); this is the interference chunked prefill puts on TPOT.
    """
    uncached = np.asarray(input_tokens, dtype=float) * (1.0 - np.asarray(prefix_cache_hit, dtype=float))
    return np.asarray(batch, dtype=float) * uncached / np.asarray(output_tokens, dtype=float)
