"""``siliconmix estimate``: one model on one device configuration, from the grid oracle."""

from __future__ import annotations

from planner.catalog import Catalog
from planner.perf import memory
from planner.perf.grid import GridSpec, evaluate_grid
from planner.perf.profile import HardwareArrays, ModelProfile
from planner.schema import Estimate, EstimateRequest
from planner.units import BYTES_PER_GB, s_to_ms


class DoesNotFit(ValueError):
    """The configuration cannot run: weights or the batch's KV exceed memory, or TP exceeds the domain."""


def estimate(request: EstimateRequest, catalog: Catalog, require_fit: bool = False) -> Estimate:
    """Price ``request`` with the roofline model. With ``require_fit``, raise DoesNotFit instead of ``fits=False``."""
    arch = catalog.model(request.model)
    device = catalog.device(request.device)
    kv_dtype = request.kv_dtype or request.dtype
    model = ModelProfile.of(arch, request.dtype, kv_dtype)
    hardware = HardwareArrays.of([device], request.dtype)
    spec = GridSpec(
        tp=(request.tp,), batch=(request.batch,), input_tokens=(request.isl,), output_tokens=request.osl,
        paged_kv=request.paged_kv, reserved_context_tokens=arch.max_context_tokens,
    )
    grid = evaluate_grid(model, hardware, spec)

    def one(array):
        return array.reshape(-1)[0].item()

    if require_fit:
        _check_fit(request, device.scale_up.domain_size, grid, one)
    tpot_s, ttft_s = one(grid.tpot_s), one(grid.ttft_s)
    return Estimate(
        model=arch.id, device=device.id, dtype=request.dtype, kv_dtype=kv_dtype,
        tp=request.tp, batch=request.batch, isl=request.isl, osl=request.osl,
        ttft_ms=s_to_ms(ttft_s),
        tpot_ms=s_to_ms(tpot_s),
        output_tokens_per_s=request.batch / tpot_s,
        output_tokens_per_s_per_user=1.0 / tpot_s,
        output_tokens_per_s_per_device=request.batch / tpot_s / request.tp,
        prefill_tokens_per_s=request.isl / ttft_s,
        weights_bytes_per_device=one(grid.weights_bytes_per_device),
        kv_bytes_per_token=memory.kv_bytes_per_token(arch, kv_dtype),
        kv_bytes_per_request=float(model.kv_bytes(request.isl + request.osl)),
        max_batch_in_memory=int(one(grid.max_batch_in_memory)),
        fits=bool(one(grid.fits)),
        bound=one(grid.decode.bound),
        prefill_bound=one(grid.prefill.bound),
        decode_compute_ms=s_to_ms(one(grid.decode.compute_s)),
        decode_memory_ms=s_to_ms(one(grid.decode.memory_s)),
        decode_communication_ms=s_to_ms(one(grid.decode.communication_s)),
        power_w=one(grid.power_w),
    )


def _check_fit(request: EstimateRequest, domain_size: int, grid, one) -> None:
    where = f"{request.model} ({request.dtype}) on {request.tp}x {request.device}"
    if not one(grid.within_domain):
        raise DoesNotFit(f"tp {request.tp} exceeds the scale-up domain of {request.device} ({domain_size} devices)")
    if not one(grid.weights_fit):
        gb = one(grid.weights_bytes_per_device) / BYTES_PER_GB
        raise DoesNotFit(f"{where}: weights need {gb:.1f} GB per device, more than fits; raise --tp or lower --dtype")
    if not one(grid.fits):
        raise DoesNotFit(
            f"{where}: batch {request.batch} at isl {request.isl} + osl {request.osl} needs more KV memory than is free; "
            f"at most {int(one(grid.max_batch_in_memory))} requests fit"
        )
