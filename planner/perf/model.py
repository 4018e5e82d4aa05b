"""The cost model's one seam: every caller outside ``planner/perf`` prices work through ``CostModel``.

A ``CostModel`` answers for a model profile on a set of devices: a prefill pass, a decode step, an
attention/FFN-disaggregated decode step, a speculative-decoding round, and whole grids of them.
Each answer is a ``Cost``: the breakdown (compute / memory / communication / fixed overheads), the
``source`` of its numbers and an uncertainty band from the calibration's leave-one-out residuals.
``RooflineModel`` is the analytical implementation; a measured-table backend would be one more
class with the same methods.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

import numpy as np

from planner.perf import af, spec
from planner.perf.af import attention_side, expert_side  # noqa: F401
from planner.perf.grid import GridResult, GridSpec, evaluate_grid
from planner.perf.memory import (  # noqa: F401  (re-exported: the seam is the only import outside perf)
    USABLE_MEMORY_FRACTION,
    active_params,
    kv_bytes_per_token,
    paged_kv_tokens,
    total_params,
)
from planner.perf.comm import ACTIVATION_BYTES, transfer_s  # noqa: F401
from planner.perf.profile import ModelProfile, default_kv_dtype  # noqa: F401
from planner.perf.roofline import PassCost, chunked_prefill_tokens_per_step, decode_step, kv_share, prefill_pass  # noqa: F401
from planner.perf.silicon import HardwareArrays, Silicon, UnsupportedDtype, compute_dtype  # noqa: F401
from planner.perf.spec import expected_tokens_per_round  # noqa: F401
from planner.schema import Band, Device, FamilyCalibration

#: a band for a device family with no calibration record: measured/predicted within ×0.5 … ×2.
UNCALIBRATED_BAND = (0.5, 2.0)
#: extrapolation widens a calibrated band by this factor in log space.
EXTRAPOLATION_WIDENING = 1.5


@dataclass(frozen=True)
class Confidence:
    """How far to trust a device's numbers: ``calibrated``, ``extrapolated`` or ``estimated``, and why."""

    level: str
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class Cost:
    """A pass priced by a CostModel: seconds with their breakdown, where they come from, and a band."""

    parts: PassCost
    source: tuple[str, ...]  # per device
    band_low: np.ndarray  # measured/predicted ratio, per device, broadcastable to total_s
    band_high: np.ndarray

    @property
    def total_s(self) -> np.ndarray:
        return self.parts.total_s

    @property
    def low_s(self) -> np.ndarray:
        return self.parts.total_s * self.band_low

    @property
    def high_s(self) -> np.ndarray:
        return self.parts.total_s * self.band_high

    @property
    def bound(self) -> np.ndarray:
        return self.parts.bound


class CostModel(Protocol):
    """What every caller of the cost model may ask."""

    def silicon(self, device: Device | str, weights_dtype: str) -> Silicon: ...
    def profile(self, model_id: str, weights_dtype: str, kv_dtype: str | None = None) -> ModelProfile: ...
    def hardware(self, silicon: list[Silicon]) -> HardwareArrays: ...
    def prefill(self, model: ModelProfile, hw, devices, new_tokens, cached_tokens=0.0, prompts=1.0, ep: int = 1,
                pp: int = 1) -> Cost: ...
    def decode(self, model: ModelProfile, hw, devices, batch, context_tokens, prefill_tokens=0.0, ep: int = 1,
               prefill_context_tokens=None, pp: int = 1) -> Cost: ...
    def af_decode(self, model: ModelProfile, attention, attention_devices, experts, expert_devices, batch,
                  context_tokens, link_bytes_s, link_latency_s, sharing: int = 1) -> Cost: ...
    def spec_tpot_s(self, draft_step_s, verify_step_s, draft_tokens, acceptance_rate, round_trip_s=0.0): ...
    def spec_round_s(self, draft_step_s, draft_tokens, verify_step_s, round_trip_s=0.0): ...
    def expected_tokens_per_round(self, acceptance_rate, draft_tokens): ...
    def kv_share(self, model: ModelProfile, hw, devices, pp: int = 1): ...
    def grid(self, model: ModelProfile, hw, spec: GridSpec) -> GridResult: ...
    def band(self, device_id: str, metric: str) -> Band: ...
    def source(self, device_id: str) -> str: ...
    def confidence(self, device_id: str, **regime) -> Confidence: ...


class RooflineModel:
    """The analytical cost model (roofline.py and its structural terms) over one catalog."""

    def __init__(self, catalog):
        self.catalog = catalog
        self._silicon: dict[tuple[str, str], Silicon] = {}
        self._arrays: dict[int, tuple[Silicon, HardwareArrays]] = {}

    # ---------------------------------------------------------------- inputs in base units
    def silicon(self, device: Device | str, weights_dtype: str) -> Silicon:
        """A device at ``weights_dtype`` in base units (converted once per catalog and dtype)."""
        d = self.catalog.device(device) if isinstance(device, str) else device
        key = (d.id, weights_dtype)
        if key not in self._silicon or self._silicon[key].device is not d:
            self._silicon[key] = Silicon.of(d, weights_dtype)
        return self._silicon[key]

    def profile(self, model_id: str, weights_dtype: str, kv_dtype: str | None = None) -> ModelProfile:
        """A catalog model at a weights dtype and KV dtype (default: ``default_kv_dtype``)."""
        return ModelProfile.of(self.catalog.model(model_id), weights_dtype, kv_dtype)

    def hardware(self, silicon) -> HardwareArrays:
        """Stacked arrays of one Silicon (cached while that Silicon lives) or of several."""
        if isinstance(silicon, HardwareArrays):
            return silicon
        if not isinstance(silicon, Silicon):
            return HardwareArrays.of(list(silicon))
        held = self._arrays.get(id(silicon))
        if held is None or held[0] is not silicon:
            held = (silicon, HardwareArrays.of([silicon]))
            self._arrays[id(silicon)] = held
        return held[1]

    # ---------------------------------------------------------------- passes
    def prefill(self, model, hw, devices, new_tokens, cached_tokens=0.0, prompts=1.0, ep: int = 1, pp: int = 1) -> Cost:
        """Prefill of ``prompts`` prompts on ``devices`` devices in all (``pp`` pipeline stages of ``devices/pp``)."""
        arrays = self.hardware(hw)
        return self._cost(prefill_pass(model, arrays, devices, new_tokens, cached_tokens, prompts, ep, pp=pp), arrays,
                          "ttft")

    def decode(self, model, hw, devices, batch, context_tokens, prefill_tokens=0.0, ep: int = 1,
               prefill_context_tokens=None, pp: int = 1) -> Cost:
        """A decode step of ``batch`` on ``devices`` devices in all (``pp`` pipeline stages of ``devices/pp``)."""
        arrays = self.hardware(hw)
        return self._cost(decode_step(model, arrays, devices, batch, context_tokens, prefill_tokens, ep,
                                      prefill_context_tokens, pp=pp), arrays, "tpot")

    def af_decode(self, model, attention, attention_devices, experts, expert_devices, batch, context_tokens,
                  link_bytes_s, link_latency_s, sharing: int = 1) -> Cost:
        """Decode step of an attention replica with an expert replica shared by ``sharing`` of them (af.py);
        band of the attention side."""
        a, f = self.hardware(attention), self.hardware(experts)
        step, attn, _ = af.af_decode_step(model, a, attention_devices, f, expert_devices, batch, context_tokens,
                                          link_bytes_s, link_latency_s, sharing=sharing)
        parts = attn._replace(roofline_s=step - attn.communication_s - attn.overhead_s)
        return self._cost(parts, a, "tpot")

    def spec_tpot_s(self, draft_step_s, verify_step_s, draft_tokens, acceptance_rate, round_trip_s=0.0):
        """TPOT under speculation: ``(k·t_draft + t_verify + t_rtt) / E[tokens per round]`` (spec.py)."""
        round_s = spec.spec_round_s(draft_step_s, draft_tokens, verify_step_s, round_trip_s)
        return spec.spec_tpot_s(round_s, acceptance_rate, draft_tokens)

    def spec_round_s(self, draft_step_s, draft_tokens, verify_step_s, round_trip_s=0.0):
        return spec.spec_round_s(draft_step_s, draft_tokens, verify_step_s, round_trip_s)

    def expected_tokens_per_round(self, acceptance_rate, draft_tokens):
        return spec.expected_tokens_per_round(acceptance_rate, draft_tokens)

    def kv_share(self, model, hw, devices, pp: int = 1):
        """Per-device share of a sequence's KV (roofline.kv_share)."""
        return kv_share(model, self.hardware(hw), devices, pp)

    def grid(self, model, hw, grid_spec: GridSpec) -> GridResult:
        return evaluate_grid(model, self.hardware(hw), grid_spec)

    # ---------------------------------------------------------------- trust
    @cached_property
    def _family_of(self) -> dict[str, FamilyCalibration]:
        return {d: fam for fam in self.catalog.families.values() for d in fam.devices}

    def family(self, device_id: str) -> FamilyCalibration | None:
        return self._family_of.get(device_id)

    def band(self, device_id: str, metric: str) -> Band:
        """The measured/predicted band of ``metric`` for a device: its family's, or the uncalibrated one."""
        fam = self.family(device_id)
        if fam is None or not fam.fitted or fam.checks_only or metric not in fam.bands:
            return Band(low=UNCALIBRATED_BAND[0], high=UNCALIBRATED_BAND[1])
        return fam.bands[metric]

    def confidence(self, device_id: str, weights_dtype: str | None = None, tp: int | None = None,
                   isl: int | None = None, batch: int | None = None) -> Confidence:
        """``calibrated`` inside the fitted range of a calibrated family; ``extrapolated`` outside it;
        ``estimated`` when the family has no record or the device's key numbers are estimates."""
        device = self.catalog.device(device_id)
        fam = self.family(device_id)
        reasons = []
        estimated_keys = sorted(k for k, p in device.provenance.items()
                                if p.estimate and (k.startswith("peak_dense_tflops") or k.startswith("memory_tiers")
                                                   or k == "tdp_w"))
        if fam is None or not fam.fitted:
            reasons.append(f"no calibration record for {device_id}'s family: efficiencies are priors")
        elif fam.checks_only:
            reasons.append(f"family {fam.name} is fitted only on vendor claims ({fam.records} check-only records)")
        if estimated_keys:
            reasons.append("estimated catalog numbers: " + ", ".join(estimated_keys))
        if reasons:
            return Confidence("estimated", tuple(reasons))
        outside = []
        if weights_dtype is not None and fam.dtypes and weights_dtype not in fam.dtypes:
            outside.append(f"dtype {weights_dtype} not among the family's records ({', '.join(fam.dtypes)})")
        if tp is not None and fam.max_tp and tp > fam.max_tp:
            outside.append(f"tp {tp} above the records' largest ({fam.max_tp})")
        if isl is not None and fam.max_isl and isl > fam.max_isl:
            outside.append(f"isl {isl} above the records' longest ({fam.max_isl})")
        if batch is not None and fam.max_batch and batch > fam.max_batch:
            outside.append(f"batch {batch} above the records' largest ({fam.max_batch})")
        if outside:
            return Confidence("extrapolated", tuple(outside))
        return Confidence("calibrated", (f"family {fam.name}: {fam.records} records, fitted {fam.date}",))

    def _cost(self, parts: PassCost, arrays: HardwareArrays, metric: str) -> Cost:
        bands = [self.band(i, metric) for i in arrays.ids]
        shape = (len(arrays.ids),) + (1,) * max(np.ndim(parts.total_s) - 1, 0)
        low = np.asarray([b.low for b in bands]).reshape(shape)
        high = np.asarray([b.high for b in bands]).reshape(shape)
        sources = tuple(self.source(i) for i in arrays.ids)
        return Cost(parts, sources, low, high)

    def source(self, device_id: str) -> str:
        """Where a device's cost numbers come from."""
        fam = self.family(device_id)
        if fam is not None and fam.fitted:
            return f"roofline, efficiencies fitted for family {fam.name} ({fam.records} records, {fam.date})"
        return "roofline, efficiency priors (no calibration record)"
