"""Unit conversions: the only place a decimal power of ten appears.

Catalogs and schemas carry the unit in the field name (``memory_gb``, ``bandwidth_tb_s``,
``tdp_w``, ``ttft_ms``). The cost model converts once, with these constants, to base SI floats:
bytes, FLOP/s, bytes/s, seconds, watts. Everything is decimal SI; GiB never appears.
"""

BYTES_PER_GB = 1e9
BYTES_PER_TB = 1e12
BYTES_PER_S_PER_GB_S = 1e9
BYTES_PER_S_PER_TB_S = 1e12
FLOPS_PER_TFLOPS = 1e12
PARAMS_PER_BILLION = 1e9
SECONDS_PER_MS = 1e-3
SECONDS_PER_US = 1e-6
MS_PER_SECOND = 1e3
WATTS_PER_KW = 1e3
SECONDS_PER_HOUR = 3600.0
HOURS_PER_YEAR = 8760.0
TOKENS_PER_MILLION = 1e6

#: bytes per stored element for each numeric format the cost model knows.
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "fp4": 0.5,
    "int4": 0.5,
}

#: compute formats a device may list a peak for (``peak_dense_tflops`` keys).
COMPUTE_DTYPES = ("bf16", "fp8", "fp4", "int8")


def gb_to_bytes(value_gb: float) -> float:
    """Decimal gigabytes to bytes (x 1e9)."""
    return value_gb * BYTES_PER_GB


def tb_s_to_bytes_s(value_tb_s: float) -> float:
    """Decimal TB/s to bytes/s (x 1e12)."""
    return value_tb_s * BYTES_PER_S_PER_TB_S


def gb_s_to_bytes_s(value_gb_s: float) -> float:
    """Decimal GB/s to bytes/s (x 1e9)."""
    return value_gb_s * BYTES_PER_S_PER_GB_S


def tflops_to_flops(value_tflops: float) -> float:
    """TFLOP/s to FLOP/s (x 1e12)."""
    return value_tflops * FLOPS_PER_TFLOPS


def ms_to_s(value_ms: float) -> float:
    """Milliseconds to seconds."""
    return value_ms * SECONDS_PER_MS


def us_to_s(value_us: float) -> float:
    """Microseconds to seconds."""
    return value_us * SECONDS_PER_US


def s_to_ms(value_s: float) -> float:
    """Seconds to milliseconds."""
    return value_s * MS_PER_SECOND
