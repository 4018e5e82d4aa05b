"""Evaluate the cost model over a whole grid in one call: devices x parallelism x batch x prompt length.

``estimate`` prices one configuration as a 1x1x1x1 grid and the calibration a batch axis per record,
both in the steady state of a replica serving ``b`` requests (``GridSpec.steady_state``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.perf import memory
from planner.perf.profile import ModelProfile
from planner.perf.roofline import PassCost, decode_step, kv_share, prefill_pass
from planner.perf.silicon import HardwareArrays


@dataclass(frozen=True)
class GridSpec:
    """Axes of a grid. ``input_tokens`` is the prompt length; context at decode is ``isl + osl/2``. A replica is
    ``tp × pp`` devices: ``pp`` pipeline stages of ``tp`` (roofline.pipeline_shape)."""

    tp: tuple[int, ...]
    batch: tuple[int, ...]
    input_tokens: tuple[int, ...]
    output_tokens: int
    paged_kv: bool = True
    reserved_context_tokens: int | None = None
    static_batch_prefill: bool = False  # TTFT of the whole batch's prompts prefilled together
    # with steady_state False: a static batch (prefilled together, then decoded), which no per-request scheduler runs
    steady_state: bool = False  # decode steps carry the prompts of requests that replace finished ones
    ep: int = 1  # expert-parallel groups, each an attention replica of tp/ep devices (roofline._pass)
    pp: int = 1  # pipeline stages across nodes (GPU-like devices)


@dataclass(frozen=True)
class GridResult:
    """Arrays shaped ``(devices, tp, batch, input_tokens)`` (prefill arrays have batch axis 1)."""

    decode: PassCost  # the step a request's tokens wait for (TPOT)
    prefill: PassCost  # the prompt pass (TTFT)
    serving: PassCost  # the step with all prefill work folded in: the replica's throughput step
    weights_bytes_per_device: np.ndarray
    kv_bytes_per_request_per_device: np.ndarray
    max_batch_in_memory: np.ndarray
    weights_fit: np.ndarray
    within_domain: np.ndarray
    fits: np.ndarray
    devices: np.ndarray
    batch: np.ndarray
    power_w: np.ndarray

    @property
    def tpot_s(self) -> np.ndarray:
        return self.decode.total_s

    @property
    def ttft_s(self) -> np.ndarray:
        return self.prefill.total_s

    @property
    def output_tokens_per_s(self) -> np.ndarray:
        """Tokens/s of one replica, prefill work included: ``b / serving step``."""
        return self.batch / self.serving.total_s


def evaluate_grid(model: ModelProfile, hardware: HardwareArrays, spec: GridSpec) -> GridResult:
    """Price every (device, tp, batch, prompt length) combination of ``spec`` on ``hardware``."""
    hw = hardware.expand(4)
    n = np.asarray(spec.tp, dtype=float).reshape(1, -1, 1, 1) * spec.pp  # devices per replica
    b = np.asarray(spec.batch, dtype=float).reshape(1, 1, -1, 1)
    isl = np.asarray(spec.input_tokens, dtype=float).reshape(1, 1, 1, -1)
    context = isl + spec.output_tokens / 2.0

    static = spec.static_batch_prefill and not spec.steady_state  # no scheduler: no per-request host work
    if spec.steady_state:
        # a closed loop at concurrency b: each step carries b·isl/osl prefill tokens on average, of
        # which (b−1)·isl/osl belong to the other requests a decoding request shares its steps with
        # (each prompt token attends over its own prompt's prefix: isl/2 on average)
        per_request = isl / spec.output_tokens
        decode = decode_step(model, hw, n, b, context, prefill_tokens=(b - 1.0) * per_request, ep=spec.ep,
                             prefill_context_tokens=isl / 2.0, pp=spec.pp)
        serving = decode_step(model, hw, n, b, context, prefill_tokens=b * per_request, ep=spec.ep,
                              prefill_context_tokens=isl / 2.0, pp=spec.pp)
    else:
        decode = serving = decode_step(model, hw, n, b, context, ep=spec.ep, requests=0.0 if static else None,
                                       pp=spec.pp)
    prefill = prefill_pass(model, hw, n, isl, prompts=b if spec.static_batch_prefill else 1.0, ep=spec.ep,
                           requests=0.0 if static else None, pp=spec.pp)

    if spec.paged_kv:
        held_tokens = memory.paged_kv_tokens(isl, spec.output_tokens)
    else:
        reserved = spec.reserved_context_tokens or int(max(spec.input_tokens)) + spec.output_tokens
        held_tokens = memory.contiguous_kv_tokens(np.full_like(isl, reserved))
    kv_per_request = model.kv_bytes(held_tokens) * kv_share(model, hw, n / spec.ep, spec.pp) / spec.ep
    weights_per_device = model.weights_per_device(n, spec.ep)
    usable_w = hw.usable_weights_bytes
    beside_weights = np.where(hw.kv_spill, np.maximum(usable_w - weights_per_device, 0.0), 0.0)
    kv_room = np.where(hw.shared_tier, hw.usable_kv_bytes - weights_per_device, hw.usable_kv_bytes + beside_weights)
    max_batch = memory.max_concurrent_requests(kv_room, 0.0, kv_per_request)
    weights_fit = weights_per_device <= usable_w
    within_domain = n / spec.pp <= hw.domain_size  # a stage's TP group within one domain
    fits = weights_fit & within_domain & (max_batch >= b)
    return GridResult(
        decode=decode,
        prefill=prefill,
        serving=serving,
        weights_bytes_per_device=np.broadcast_to(weights_per_device, n.shape),
        kv_bytes_per_request_per_device=kv_per_request,
        max_batch_in_memory=np.where(weights_fit, max_batch, 0.0),
        weights_fit=weights_fit,
        within_domain=within_domain,
        fits=fits,
        devices=n,
        batch=b,
        power_w=n * hw.power_w,
    )
