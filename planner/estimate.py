"""``siliconmix estimate``: one model on one device configuration, priced by the CostModel.

A replica serving ``batch`` requests in steady state: TTFT is the prefill of the batch's prompts
together (one prompt at batch 1); TPOT one decode step at mean context ``isl + osl/2`` that also
carries the other requests' prompt chunks; throughput folds in all prefill work. Each figure carries
its calibration band (measured/predicted) and the configuration's confidence.
"""

from __future__ import annotations

from planner.catalog import Catalog
from planner.perf.model import EXTRAPOLATION_WIDENING, GridSpec, RooflineModel, default_kv_dtype, kv_bytes_per_token
from planner.provenance import stamp
from planner.schema import Device, Estimate, EstimateRequest, ModelArch
from planner.units import BYTES_PER_GB, s_to_ms


class DoesNotFit(ValueError):
    """The configuration cannot run: weights or the batch's KV exceed memory, or TP exceeds the domain."""


class InvalidParallelism(ValueError):
    """A tensor-parallel size the model's attention heads do not split over (``field`` names the input)."""

    field = "tp"


def check_parallelism(request: EstimateRequest, arch: ModelArch, device: Device) -> None:
    """Raise InvalidParallelism unless the heads split over each attention replica's ``tp / ep`` devices.

    SRAM machines are exempt: they split a model by layers across chips, not by heads.
    """
    attention_tp = request.tp // request.ep
    if device.is_sram_machine or arch.splits_over(attention_tp):
        return
    size = f"tp {request.tp}" if request.ep == 1 else f"tp {request.tp} / ep {request.ep} = {attention_tp} per attention replica"
    allowed = ", ".join(str(t * request.ep) for t in arch.tensor_parallel_sizes())
    raise InvalidParallelism(f"{size}: {arch.id} has {arch.attention_heads} attention heads and {arch.kv_heads} KV heads, "
                             f"which do not split evenly over {attention_tp} devices; allowed tp"
                             + (f" with ep {request.ep}" if request.ep > 1 else "") + f": {allowed}")


def estimate(request: EstimateRequest, catalog: Catalog, require_fit: bool = False) -> Estimate:
    """Price ``request``. With ``require_fit``, raise DoesNotFit instead of returning ``fits=False``."""
    costs = RooflineModel(catalog)
    arch = catalog.model(request.model)
    if request.ep > 1 and arch.moe is None:
        raise DoesNotFit(f"ep {request.ep}: expert parallelism needs a mixture-of-experts model; {arch.id} is dense")
    check_parallelism(request, arch, catalog.device(request.device))
    kv_dtype = request.kv_dtype or default_kv_dtype(request.dtype)
    model = costs.profile(request.model, request.dtype, kv_dtype)
    silicon = costs.silicon(request.device, request.dtype)
    if request.pp > 1 and (silicon.sram or silicon.dataflow):
        raise DoesNotFit(f"pp {request.pp}: {request.device} pipelines its layers over its own chips; pipeline stages "
                         "across nodes are for GPU-like devices")
    if request.pp > 1 and request.ep > 1:
        raise DoesNotFit(f"pp {request.pp} with ep {request.ep}: a pipelined replica runs tensor parallelism alone")
    spec = GridSpec(
        tp=(request.tp,), batch=(request.batch,), input_tokens=(request.isl,), output_tokens=request.osl,
        paged_kv=request.paged_kv, reserved_context_tokens=arch.max_context_tokens, static_batch_prefill=True,
        steady_state=True, ep=request.ep if arch.moe is not None else 1, pp=request.pp,
    )
    grid = costs.grid(model, silicon, spec)

    def one(array):
        return array.reshape(-1)[0].item()

    if require_fit:
        _check_fit(request, silicon.domain_size, grid, one)
    tpot_s, ttft_s = one(grid.tpot_s), one(grid.ttft_s)
    devices = request.tp * request.pp
    trust = costs.confidence(silicon.id, request.dtype, devices, request.isl, request.batch)
    widen = EXTRAPOLATION_WIDENING if trust.level == "extrapolated" else 1.0
    ttft_band, tpot_band, throughput_band = (costs.band(silicon.id, g).widened(widen) for g in ("ttft", "tpot", "throughput"))
    return Estimate(
        model=arch.id, device=silicon.id, dtype=request.dtype, kv_dtype=kv_dtype,
        tp=request.tp, pp=request.pp, batch=request.batch, isl=request.isl, osl=request.osl,
        ttft_ms=s_to_ms(ttft_s),
        tpot_ms=s_to_ms(tpot_s),
        output_tokens_per_s=one(grid.output_tokens_per_s),
        output_tokens_per_s_per_user=1.0 / tpot_s,
        output_tokens_per_s_per_device=one(grid.output_tokens_per_s) / devices,
        prefill_tokens_per_s=request.batch * request.isl / ttft_s,
        weights_bytes_per_device=one(grid.weights_bytes_per_device),
        kv_bytes_per_token=kv_bytes_per_token(arch, kv_dtype),
        kv_bytes_per_request=float(model.kv_bytes(request.isl + request.osl)),
        max_batch_in_memory=int(one(grid.max_batch_in_memory)),
        fits=bool(one(grid.fits)),
        bound=one(grid.decode.bound),
        prefill_bound=one(grid.prefill.bound),
        decode_compute_ms=s_to_ms(one(grid.decode.compute_s)),
        decode_memory_ms=s_to_ms(one(grid.decode.memory_s)),
        decode_communication_ms=s_to_ms(one(grid.decode.communication_s)),
        decode_overhead_ms=s_to_ms(one(grid.decode.overhead_s)),
        power_w=one(grid.power_w),
        ttft_ms_low=s_to_ms(ttft_s * ttft_band.low), ttft_ms_high=s_to_ms(ttft_s * ttft_band.high),
        tpot_ms_low=s_to_ms(tpot_s * tpot_band.low), tpot_ms_high=s_to_ms(tpot_s * tpot_band.high),
        output_tokens_per_s_low=one(grid.output_tokens_per_s) / throughput_band.high,
        output_tokens_per_s_high=one(grid.output_tokens_per_s) / throughput_band.low,
        confidence=trust.level, confidence_reasons=trust.reasons,
        source=costs.source(silicon.id),
        options=request, **stamp(catalog),
    )


def _check_fit(request: EstimateRequest, domain_size: int, grid, one) -> None:
    stages = f" × pp {request.pp}" if request.pp > 1 else ""
    where = f"{request.model} ({request.dtype}) on {request.tp}x {request.device}{stages}"
    if not one(grid.within_domain):
        raise DoesNotFit(f"tp {request.tp} exceeds the scale-up domain of {request.device} ({domain_size} devices)")
    if not one(grid.weights_fit):
        gb = one(grid.weights_bytes_per_device) / BYTES_PER_GB
        raise DoesNotFit(f"{where}: weights need {gb:.1f} GB per device, more than fits; raise --tp or --pp, or lower --dtype")
    if not one(grid.fits):
        raise DoesNotFit(
            f"{where}: batch {request.batch} at isl {request.isl} + osl {request.osl} needs more KV memory than is free; "
            f"at most {int(one(grid.max_batch_in_memory))} requests fit"
        )
