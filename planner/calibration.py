"""Compare the cost model with published measurements and fit efficiency factors per device family.

Regimes (catalogs/calibration/README.md):
- ``single_user``: the decode step at batch 1 and context ``isl + osl/2``;
- ``max_throughput``: the best batch that fits under paged KV, each decode step carrying the
  chunked-prefill tokens ``b·isl/osl`` that keep the replica fed, times ``devices / tp`` replicas.
Unknown lengths are evaluated at isl 1000, osl 500 (those records are checks, not fit targets).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import Field

from planner.catalog import Catalog
from planner.perf.grid import GridSpec, evaluate_grid
from planner.perf.profile import HardwareArrays, ModelProfile
from planner.perf.roofline import chunked_prefill_tokens_per_step, decode_step
from planner.schema import Device, Frozen, Id, WeightsDtype
from planner.units import s_to_ms

DEFAULT_ISL, DEFAULT_OSL = 1000, 500
BATCHES = tuple(2**i for i in range(13))  # 1 .. 4096, the largest batch a serving engine is run at
CHECK_ONLY_MARKERS = ("LOW CONFIDENCE", "PRECISION INTERPRETED")
#: grid searched by ``fit_family``: prefill MFU, decode MBU, per-layer latency of a pass (µs).
FIT_MFU = tuple(np.round(np.linspace(0.2, 0.8, 13), 3))
FIT_MBU = tuple(np.round(np.linspace(0.1, 0.95, 18), 3))
FIT_LAYER_US = (0.0, 1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 60.0, 80.0, 120.0, 160.0)
#: weight of the pull toward the catalog priors, per factor, in squared-log units: a factor the
#: records do not inform (MFU from batch-1 data only, say) stays at its prior.
PRIOR_WEIGHT = 0.05


class Measurement(Frozen):
    """One published measurement (catalogs/calibration/measurements.yaml)."""

    id: str
    source: str
    date: str | None
    model: Id
    device: Id
    devices: int = Field(ge=1)
    tp: int | None = Field(default=None, ge=1)
    weights_dtype: WeightsDtype
    kv_dtype: WeightsDtype | None
    framework: str | None
    regime: Literal["max_throughput", "single_user", "server"]
    isl: int | None = Field(default=None, ge=1)
    osl: float | None = Field(default=None, gt=0)
    metric: Literal["output_tokens_per_s", "output_tokens_per_s_per_user", "tpot_ms", "ttft_ms"]
    value: float = Field(gt=0)
    notes: str = ""

    @property
    def fit_target(self) -> bool:
        """Fitted on unless marked low-confidence / interpreted or missing its prompt length."""
        return self.isl is not None and not any(m in self.notes for m in CHECK_ONLY_MARKERS)


class Family(Frozen):
    """Devices sharing one set of fitted efficiency factors."""

    name: str
    devices: tuple[Id, ...]


@dataclass(frozen=True)
class Comparison:
    measurement: Measurement
    predicted: float

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted - self.measurement.value) / self.measurement.value


def predict(measurement: Measurement, catalog: Catalog, variants: list[Device] | None = None) -> np.ndarray:
    """The model's value of ``measurement.metric``, one entry per device variant (default: the catalog device)."""
    arch = catalog.model(measurement.model)
    devices = variants or [catalog.device(measurement.device)]
    kv_dtype = measurement.kv_dtype or measurement.weights_dtype
    model = ModelProfile.of(arch, measurement.weights_dtype, kv_dtype)
    hw = HardwareArrays.of(devices, measurement.weights_dtype)
    tp = measurement.tp or measurement.devices
    isl = measurement.isl or DEFAULT_ISL
    osl = float(measurement.osl or DEFAULT_OSL)
    if measurement.regime == "single_user":
        tpot_s = decode_step(model, hw, tp, 1, isl + osl / 2).total_s.reshape(-1)
        return s_to_ms(tpot_s) if measurement.metric == "tpot_ms" else 1.0 / tpot_s
    spec = GridSpec(tp=(tp,), batch=BATCHES, input_tokens=(isl,), output_tokens=int(round(osl)))
    grid = evaluate_grid(model, hw, spec)
    b = np.asarray(BATCHES, dtype=float).reshape(1, 1, -1, 1)
    q = chunked_prefill_tokens_per_step(b, isl, osl)
    step = decode_step(model, hw.expand(4), tp, b, isl + osl / 2, prefill_tokens=q).total_s
    per_replica = np.where(grid.fits, b / step, 0.0)
    return (measurement.devices // tp) * per_replica.max(axis=(1, 2, 3))


def compare(measurements: list[Measurement], catalog: Catalog) -> list[Comparison]:
    """Predicted against measured for every supported record."""
    return [Comparison(m, float(predict(m, catalog)[0])) for m in measurements if m.regime != "server"]


def median_ape(comparisons: list[Comparison]) -> float:
    """Median absolute percentage error."""
    return float(np.median([abs(c.error_pct) for c in comparisons]))


def fit_family(family: Family, measurements: list[Measurement], catalog: Catalog) -> dict:
    """Grid-search (MFU, MBU, layer latency) minimising the squared log error over the family's fit targets.

    Every variant is priced in one grid call per record (the device axis holds the variants).
    """
    usable = [m for m in measurements if m.device in family.devices and m.regime != "server"]
    records = [m for m in usable if m.fit_target]
    note = "fitted on its fit-target records"
    if not records:
        records, note = usable, "no fit-target records: fitted on check-only records, the only data for this family"
    if not records:
        return {"family": family.name, "records": [], "note": "no records: catalog priors kept"}
    combos = list(itertools.product(FIT_MFU, FIT_MBU, FIT_LAYER_US))
    grid = np.asarray(combos)
    prior = catalog.device(family.devices[0])
    loss = PRIOR_WEIGHT * (
        np.log(grid[:, 0] / prior.mfu) ** 2
        + np.log(grid[:, 1] / prior.mbu) ** 2
        + np.log((grid[:, 2] + 1.0) / (prior.layer_latency_us + 1.0)) ** 2
    )
    for record in records:
        base = catalog.device(record.device)
        variants = [base.model_copy(update={"mfu": f, "mbu": b, "layer_latency_us": l}) for f, b, l in combos]
        predicted = predict(record, catalog, variants)
        loss += np.log(np.maximum(predicted, 1e-12) / record.value) ** 2
    best = int(np.argmin(loss))
    mfu, mbu, layer_us = combos[best]
    return {
        "family": family.name,
        "mfu": float(mfu),
        "mbu": float(mbu),
        "layer_latency_us": float(layer_us),
        "records": [r.id for r in records],
        "note": note,
        "loss": float(loss[best]),
    }
