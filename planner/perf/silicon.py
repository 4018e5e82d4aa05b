"""A device in base SI units, converted once, and the same numbers stacked for a grid of devices.

``Silicon`` is what every caller of the cost model holds for one device at one weights dtype:
peak FLOP/s of the compute format the weights run on, bandwidths in bytes/s, usable capacities in
bytes, links, power per device with its node share, prices and the efficiency terms.
``HardwareArrays`` stacks several into numpy arrays shaped for broadcasting over a grid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from planner.perf.efficiency import GEMM_HALF_TOKENS, READ_SCALE
from planner.perf.memory import USABLE_MEMORY_FRACTION
from planner.schema import Device
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


def compute_scale(device: Device, fmt: str) -> float:
    """Large-GEMM efficiency of compute format ``fmt`` relative to bf16 on ``device`` (its family's term)."""
    if fmt in ("fp8", "int8"):
        return device.fp8_compute_scale
    if fmt == "fp4":
        return device.fp4_compute_scale
    return 1.0


#: chips per SRAM-machine replica, as multiples of the least count that holds the weights (1x to 8x)
SRAM_MULTIPLES = (1, 2, 3, 4, 6, 8)
#: pipeline stages a GPU replica may span (across scale-up domains) when no single domain holds the weights
PIPELINE_STAGES = (2, 4, 8)


@dataclass(frozen=True)
class Silicon:
    """One device at one weights dtype, in bytes, FLOP/s, seconds and watts."""

    device: Device
    weights_dtype: str
    compute_dtype: str
    flops_s: float
    weights_bw_bytes_s: float
    kv_bw_bytes_s: float
    usable_weights_bytes: float
    usable_kv_bytes: float
    shared_tier: bool
    link_bytes_s: float
    link_latency_s: float
    domain_size: int
    nic_bytes_s: float
    nic_latency_s: float
    power_w: float  # TDP plus this device's share of its node's overhead
    sram: bool  # weights in on-chip SRAM, layers pipelined across chips
    kv_spill: bool  # KV kept in the weights' SRAM while it fits there, the rest in the KV tier
    dataflow: bool  # weights streamed from HBM through an on-chip pipeline (no TP collectives)
    mfu: float  # large-GEMM MFU at this compute format (family peak · format scale)
    mbu: float  # weight-read MBU at this weights format (family peak · format scale)
    activation_mbu: float  # MBU of streaming 16-bit activation tensors (family peak, no format scale)
    expert_mfu: float  # large grouped-GEMM MFU of the routed experts (mfu · grouped-GEMM efficiency)
    kv_mbu: float  # decode attention's KV-read MBU (family peak · attention read efficiency)
    gemm_half_tokens: float
    gemm_half_width: float  # per-device width d/p at which dense GEMMs run at half their efficiency
    layer_latency_s: float
    moe_layer_latency_s: float
    step_overhead_s: float
    sequence_overhead_s: float  # the framework's per-sequence cost of one step
    collective_latency_s: float
    collective_step_s: float  # one ring step of an all-reduce (the family's fitted term)
    collective_bytes_s: float  # all-reduce bus bandwidth: link bandwidth · collective efficiency

    @classmethod
    def of(cls, device: Device, weights_dtype: str) -> Silicon:
        fmt = compute_dtype(device, weights_dtype)
        return cls(
            device=device,
            weights_dtype=weights_dtype,
            compute_dtype=fmt,
            flops_s=tflops_to_flops(device.peak_dense_tflops[fmt]),
            weights_bw_bytes_s=tb_s_to_bytes_s(device.weights_memory.bandwidth_tb_s),
            kv_bw_bytes_s=tb_s_to_bytes_s(device.kv_memory.bandwidth_tb_s),
            usable_weights_bytes=USABLE_MEMORY_FRACTION * gb_to_bytes(device.weights_memory.capacity_gb),
            usable_kv_bytes=USABLE_MEMORY_FRACTION * gb_to_bytes(device.kv_memory.capacity_gb),
            shared_tier=device.weights_tier == device.kv_tier,
            link_bytes_s=gb_s_to_bytes_s(device.scale_up.bandwidth_gb_s),
            link_latency_s=us_to_s(device.scale_up.latency_us),
            domain_size=device.scale_up.domain_size,
            nic_bytes_s=gb_s_to_bytes_s(device.scale_out.bandwidth_gb_s),
            nic_latency_s=us_to_s(device.scale_out.latency_us),
            power_w=device.tdp_w + device.node_overhead_w / device.devices_per_node,
            sram=device.is_sram_machine,
            kv_spill=device.is_sram_machine and device.kv_tier != device.weights_tier,
            dataflow=device.kind == "dataflow" and not device.is_sram_machine,
            mfu=device.mfu * compute_scale(device, fmt),
            mbu=device.mbu * READ_SCALE[weights_dtype],
            activation_mbu=device.mbu,
            expert_mfu=device.mfu * compute_scale(device, fmt) * device.grouped_gemm_efficiency,
            kv_mbu=device.mbu * device.attention_read_efficiency,
            # weight-stationary SRAM machines stream each token's vector through resident weights: no tile to pad
            gemm_half_tokens=0.0 if device.is_sram_machine else GEMM_HALF_TOKENS[fmt],
            gemm_half_width=0.0 if device.is_sram_machine else device.gemm_half_width,
            layer_latency_s=us_to_s(device.layer_latency_us),
            moe_layer_latency_s=us_to_s(device.moe_layer_latency_us),
            step_overhead_s=us_to_s(device.step_overhead_us),
            sequence_overhead_s=us_to_s(device.sequence_overhead_us),
            collective_latency_s=us_to_s(device.collective_latency_us),
            collective_step_s=us_to_s(device.collective_step_latency_us),
            collective_bytes_s=gb_s_to_bytes_s(device.scale_up.bandwidth_gb_s) * device.collective_efficiency,
        )

    @property
    def id(self) -> str:
        return self.device.id

    def kv_room_bytes(self, weights_bytes_per_device, extra_weights_per_device=0.0):
        """Bytes per device left for KV: usable KV memory, less the weights when they share a tier
        (plus the SRAM left beside the weights where KV spills from SRAM to a second tier)."""
        weights = weights_bytes_per_device + extra_weights_per_device
        if self.shared_tier:
            return self.usable_kv_bytes - weights
        if self.kv_spill:
            return self.usable_kv_bytes + max(self.usable_weights_bytes - weights, 0.0)
        return self.usable_kv_bytes

    def replica_power_w(self, devices: int) -> float:
        """IT power of ``devices`` of this kind: ``n · (TDP + node overhead / devices per node)``."""
        return devices * self.power_w

    def device_counts(self, weights_bytes: float, max_devices: int = 64) -> list[int]:
        """Devices per replica that hold ``weights_bytes``.

        GPUs and other HBM devices: powers of two from the least count that fits up to the scale-up
        domain (at most ``max_devices``). SRAM machines: ``SRAM_MULTIPLES`` of the least chip count
        that holds the weights (more chips: more pipeline stages to fill with a batch, more SRAM for KV),
        within the domain.
        """
        least = max(1, math.ceil(weights_bytes / self.usable_weights_bytes))
        if self.sram:
            return [m * least for m in SRAM_MULTIPLES if m * least <= self.domain_size]
        return [2**i for i in range(0, 13) if least <= 2**i <= min(self.domain_size, max_devices)]

    def replica_shapes(self, weights_bytes: float, max_devices: int = 64, max_pp: int = 1) -> list[tuple[int, int]]:
        """``(tp, pp)`` shapes of a replica holding ``weights_bytes``: ``tp × pp`` devices, ``pp`` pipeline stages
        of a ``tp``-way TP group each.

        ``(n, 1)`` for every count of ``device_counts``. Only when there is none on a GPU-like device (not an SRAM
        or dataflow pipeline: the weights exceed one scale-up domain at its largest TP), pipelines across domains:
        for each ``pp`` of ``PIPELINE_STAGES`` up to ``max_pp``, the TP counts of ``device_counts`` that hold a
        stage's ``1/pp`` of the weights.
        """
        counts = self.device_counts(weights_bytes, max_devices)
        if counts or self.sram or self.dataflow:
            return [(n, 1) for n in counts]
        return [(n, pp) for pp in PIPELINE_STAGES if pp <= max_pp
                for n in self.device_counts(weights_bytes / pp, max_devices)]


#: Silicon fields that HardwareArrays stacks (numbers and flags; not the Device itself).
_STACKED = tuple(f.name for f in fields(Silicon) if f.name not in ("device", "weights_dtype", "compute_dtype"))


@dataclass(frozen=True)
class HardwareArrays:
    """The numbers of several ``Silicon``, one entry per device (shape ``(D,)`` or ``(D, 1, ..., 1)``)."""

    ids: tuple[str, ...]
    arrays: dict[str, np.ndarray]

    @classmethod
    def of(cls, silicon: list[Silicon]) -> HardwareArrays:
        return cls(
            ids=tuple(s.id for s in silicon),
            arrays={name: np.asarray([getattr(s, name) for s in silicon]) for name in _STACKED},
        )

    def __getattr__(self, name: str) -> np.ndarray:
        try:
            return self.__dict__["arrays"][name]
        except KeyError:
            raise AttributeError(name) from None

    def expand(self, ndim: int) -> HardwareArrays:
        """The same arrays reshaped to ``(D, 1, ..., 1)`` for broadcasting over ``ndim`` axes."""
        shape = (len(self.ids),) + (1,) * (ndim - 1)
        return HardwareArrays(self.ids, {k: v.reshape(shape) for k, v in self.arrays.items()})
