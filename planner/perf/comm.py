"""Collectives and transfers: all-reduce for tensor parallelism, pipeline hops, point-to-point.

Times in seconds; message sizes in bytes; link bandwidth in bytes/s per direction per device;
latency in seconds per algorithm step.
"""

from __future__ import annotations

import numpy as np

#: activations cross links in 16-bit precision.
ACTIVATION_BYTES = 2.0


def ring_allreduce_s(message_bytes, devices, link_bytes_s, step_latency_s):
    """Ring all-reduce: ``2(t−1)/t · m / bw + 2(t−1) · α``; zero for one device."""
    t = np.asarray(devices, dtype=float)
    steps = 2.0 * (t - 1.0)
    return np.where(t > 1, steps / t * message_bytes / link_bytes_s + steps * step_latency_s, 0.0)


def allreduce_s(message_bytes, devices, link_bytes_s, step_latency_s, call_latency_s=0.0):
    """One all-reduce within a scale-up domain: a per-call floor plus the ring, ``α_call + ring`` on ``t > 1``
    devices, zero on one.

    Inside one node NCCL's tree is a chain through the node's ranks (trees span nodes), so it takes the
    ring's ``2(t−1)`` steps as well: the latency grows with the TP size. The floor ``α_call`` is the launch,
    synchronisation and protocol cost every call pays whatever its size (the flat left part of an
    nccl-tests latency curve); it and the step latency ``α`` are fitted per device family
    (catalogs/calibration/families.yaml).
    """
    t = np.asarray(devices, dtype=float)
    return np.where(t > 1, call_latency_s + ring_allreduce_s(message_bytes, devices, link_bytes_s, step_latency_s), 0.0)


def tensor_parallel_comm_s(layers: int, tokens, hidden_size: int, devices, link_bytes_s, step_latency_s,
                           call_latency_s=0.0):
    """Per forward pass: two all-reduces per layer (after attention, after FFN) of ``tokens · d`` activations.

    ``2 · L · allreduce(tokens · d · 2 bytes)``.
    """
    message = np.asarray(tokens, dtype=float) * hidden_size * ACTIVATION_BYTES
    return 2.0 * layers * allreduce_s(message, devices, link_bytes_s, step_latency_s, call_latency_s)


def pipeline_hops_s(tokens, hidden_size: int, devices, link_bytes_s, hop_latency_s):
    """Per forward pass through a layer pipeline of ``t`` segments: ``(t−1) · (α + tokens·d·2 / bw)`` seconds
    (``bw`` in bytes/s, ``α`` in seconds).

    SRAM machines split the layers across chips, so a token crosses every chip boundary once (``t``: chips,
    on the scale-up link); a pipeline-parallel GPU replica hands a micro-batch's activations from one stage
    to the next (``t``: stages, on each device's scale-out NIC).
    """
    t = np.asarray(devices, dtype=float)
    message = np.asarray(tokens, dtype=float) * hidden_size * ACTIVATION_BYTES
    return np.maximum(t - 1.0, 0.0) * (hop_latency_s + message / link_bytes_s)


def dataflow_exchange_s(layers: int, tokens, hidden_size: int, devices, link_bytes_s, hop_latency_s):
    """Per pass on a dataflow machine whose decoder blocks run as fused kernels sliced over ``t`` sockets:
    one peer exchange of the block's activations per layer, ``L · (α + tokens·d·2 / bw)``, with no
    collective-library call floor (SambaNova SN40L paper, 2024: hardware-orchestrated kernel launches)."""
    t = np.asarray(devices, dtype=float)
    message = np.asarray(tokens, dtype=float) * hidden_size * ACTIVATION_BYTES
    return np.where(t > 1, layers * (hop_latency_s + message / link_bytes_s), 0.0)


def expert_all_to_all_s(moe_layers: int, tokens_per_group, experts_active: int, hidden_size: int, groups: int,
                        bus_bytes_s, call_latency_s):
    """Per pass under expert parallelism: a dispatch and a combine all-to-all per MoE layer.

    Each of ``G`` groups sends its ``T/G`` tokens to ``k`` experts, ``(G−1)/G`` of them elsewhere:
    ``2 · L_moe · (α + (T/G) · k · d · 2 B · (G−1)/G / bw)``.
    """
    g = float(groups)
    message = np.asarray(tokens_per_group, dtype=float) * experts_active * hidden_size * ACTIVATION_BYTES * (g - 1.0) / g
    return 2.0 * moe_layers * (call_latency_s + message / bus_bytes_s) if g > 1 else np.zeros_like(message)


def transfer_s(message_bytes, link_bytes_s, latency_s):
    """Point-to-point transfer: ``α + m / bw``."""
    return latency_s + np.asarray(message_bytes, dtype=float) / link_bytes_s
