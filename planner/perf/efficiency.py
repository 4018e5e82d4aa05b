"""How much of a device's peak a kernel reaches: shared structural terms of the cost model.

Each device family has peak efficiencies (``mfu`` for large bf16 GEMMs, ``mbu`` for large weight
reads) and ratios to them, all fitted per family (catalogs/calibration/families.yaml holds the sourced
priors; the fit is in catalogs/calibration/fit.yaml):

- a GEMM of ``M`` token rows keeps the tensor cores busy only once ``M`` fills the instruction tile:
  ``MFU(M) = MFU_peak · s_c(dtype) · M / (M + M½)``, i.e. an ``M``-row GEMM costs the FLOPs of
  ``M + M½`` rows at full efficiency (tile quantisation). This is the compute side only: that small-M
  GEMMs reach few FLOP/s because they are memory bound is the roofline's own ``max``.
  ``s_c`` is the family's ``fp8_compute_scale`` / ``fp4_compute_scale`` (1 for bf16);
- a dense GEMM split over ``p`` tensor-parallel devices keeps ``w / (w + w½)`` of that, ``w = d/p``:
  a thin slice has too few output tiles to fill the chip's waves (``gemm_half_width`` per family);
- the routed experts' grouped GEMM runs at ``grouped_gemm_efficiency`` of that (per-expert tiles,
  rows scattered by expert, fine-grained scales);
- weight reads run at ``MBU_peak · s_r(dtype)``: 4-bit weights are unpacked and rescaled in the
  read path, and today's fp4 GEMV kernels reach about half the bandwidth of bf16/fp8 ones;
- decode attention reads the KV cache at ``MBU · attention_read_efficiency`` (paged gathers, a
  split-K reduction, and only ``b · n_kv`` independent heads to spread over the chip).

The small-kernel penalty on weight reads (a read of ``x`` bytes costs ``t0 + x / (η·B)``) is the
per-layer launch floor of roofline.py (``L · a``), not a second efficiency curve here.

Sources (collected in the cost-model issue note, 2026-12):
- GEMM half-points: the smallest M of a tensor-core instruction tile, 64 rows for Hopper's
  ``wgmma.mma_async`` (m64nNk16/k32, PTX ISA) and 64/128 for Blackwell's ``tcgen05.mma``; the
  measured half-plateau points of GEMM sweeps over M (vLLM PR #20646: B200 bf16 ≈ 128, nvfp4 ≈ 512;
  DeepGEMM #60: Hopper fp8 ≈ 256) are upper bounds, since they include the memory-bound regime.
  SRAM machines hold their weights stationary in the compute fabric and stream token vectors through
  it (Groq's 320×320 MXM takes one 320-vector per cycle; Cerebras cores run 8-wide FP16 SIMD on the
  wafer-resident weights), so they pad no tile: ``M½ = 0`` (silicon.py).
- Read scales: fp4 GEMV at 22–50 % of bandwidth (FlashInfer #1732, CUTLASS #2266, Helion #3046)
  against ≈ 70 % for bf16/fp8 (vLLM #20646: 74 % on B200 bf16) → ≈ 0.5.
"""

from __future__ import annotations

import numpy as np

#: tokens per GEMM at which the achieved MFU is half its large-M value, per compute format.
GEMM_HALF_TOKENS: dict[str, float] = {"bf16": 64.0, "fp8": 64.0, "int8": 64.0, "fp4": 128.0}
#: weight-read efficiency of a weights format relative to bf16.
READ_SCALE: dict[str, float] = {"bf16": 1.0, "fp16": 1.0, "fp8": 1.0, "int8": 1.0, "fp4": 0.5, "int4": 0.5}


def gemm_efficiency(tokens, peak, half_tokens):
    """Achieved MFU of a GEMM over ``M`` tokens: ``peak · M / (M + M½)`` (0 at M = 0)."""
    m = np.asarray(tokens, dtype=float)
    return peak * m / (m + half_tokens)


def width_efficiency(width, half_width):
    """Share of a dense GEMM's efficiency left when each device computes a slice ``w = d/p`` of the layer's
    width (``p`` devices splitting it under TP): ``w / (w + w½)`` (1 when ``w½ = 0``).

    Tile and wave quantisation along the split dimension: fewer output tiles than the SMs can run at once
    leave part of the chip idle, and a thinner slice has fewer tiles (NVIDIA, Matrix Multiplication
    Background User's Guide, DU-09799-001, 2023-02, "Dimension Quantization Effects").
    """
    w = np.asarray(width, dtype=float)
    return w / (w + half_width)


def kernel_times(flops, flops_s, compute_efficiency, bytes_read, bytes_s, memory_efficiency):
    """Compute and memory time of one kernel group: ``(FLOPs / (F·η_c), bytes / (B·η_m))`` seconds.

    Zero work costs zero time (its efficiency is never divided by).
    """
    f = np.asarray(flops, dtype=float)
    b = np.asarray(bytes_read, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        compute = np.where(f > 0, f / (flops_s * compute_efficiency), 0.0)
        memory = np.where(b > 0, b / (bytes_s * memory_efficiency), 0.0)
    return compute, memory
