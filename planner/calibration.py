"""The cost model against published measurements: fit each device family, and check it left out.

Every record is predicted in the regime ``siliconmix estimate`` reports (a replica serving ``b``
requests in steady state; catalogs/calibration/README.md):

- ``single_user``: batch 1 (TPOT is the pure decode step; TTFT one prompt; end-to-end
  ``TTFT + (osl − 1)·TPOT``);
- ``fixed_concurrency``: batch ``b = concurrency · tp / devices`` per replica, system tokens/s
  ``replicas · b / serving step``; a static batch (the notes say so) is prefilled together and
  decoded with no prompt folded in and no per-request scheduler: ``replicas · b · osl / (TTFT + (osl − 1)·TPOT)``;
- ``max_throughput``: the batch (≤ 4096) that maximises tokens/s under paged KV memory.
``server`` records and those missing a prompt length or marked check-only are compared, never fitted.

Fit: per family, the efficiency terms ``FITTED_TERMS`` minimise
``Σ log(pred/measured)² + Σ ((log θ − log θ₀) / σ)²`` (priors θ₀ and spreads σ in families.yaml),
with scipy's trust-region least squares. Leave-one-out: each record predicted by its family's fit
without it, by the linearised (PRESS) formula or by an exact refit; the LOO residuals give each
family's uncertainty bands.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
from pydantic import Field
from scipy.optimize import least_squares

from planner.catalog import FITTED_TERMS, Catalog
from planner.perf.model import GridSpec, RooflineModel
from planner.schema import Device, Frozen, Id, WeightsDtype
from planner.units import s_to_ms

BATCHES = tuple(b for b in sorted({int(round(1.5**i)) for i in range(0, 21)} | {2**i for i in range(12)}) if b <= 2048)  # 1 .. 2048
CHECK_ONLY_MARKERS = ("LOW CONFIDENCE", "PRECISION INTERPRETED")
#: prompt and output lengths assumed for a per-user speed published without them (catalogs/calibration/README.md).
ASSUMED_LENGTHS = (1000, 500)
#: log offsets so latency terms of zero stay fittable: θ enters the fit as ``log(θ + offset)``.
LOG_OFFSET = {"mfu": 0.0, "mbu": 0.0, "layer_latency_us": 1.0, "moe_layer_latency_us": 1.0,
              "step_overhead_us": 10.0, "collective_latency_us": 1.0, "collective_efficiency": 0.0,
              "grouped_gemm_efficiency": 0.0, "attention_read_efficiency": 0.0,
              "fp8_compute_scale": 0.0, "fp4_compute_scale": 0.0, "collective_step_latency_us": 0.1,
              "sequence_overhead_us": 1.0, "gemm_half_width": 1.0}
BOUNDS = {"mfu": (0.05, 1.0), "mbu": (0.05, 1.0), "layer_latency_us": (0.0, 500.0),
          "moe_layer_latency_us": (0.0, 2000.0), "step_overhead_us": (0.0, 50_000.0), "collective_latency_us": (0.0, 500.0),
          "collective_efficiency": (0.05, 1.0), "grouped_gemm_efficiency": (0.05, 1.0),
          "attention_read_efficiency": (0.05, 1.0),
          "fp8_compute_scale": (0.05, 1.0), "fp4_compute_scale": (0.05, 1.0),
          "collective_step_latency_us": (0.0, 100.0), "sequence_overhead_us": (0.0, 1000.0),
          "gemm_half_width": (0.0, 100_000.0)}
METRIC_GROUP = {"tpot_ms": "tpot", "output_tokens_per_s_per_user": "tpot", "e2e_latency_ms": "tpot",
                "ttft_ms": "ttft", "output_tokens_per_s": "throughput"}
#: bands come from a family's own LOO residuals when it has this many in a metric group, else from all.
MIN_BAND_RECORDS = 5
BAND_QUANTILES = (0.1, 0.9)


class Measurement(Frozen):
    """One published measurement (catalogs/calibration/measurements.yaml)."""

    id: str
    source: str
    date: str | None
    model: Id
    device: Id
    devices: int = Field(ge=1)
    tp: int | None = Field(default=None, ge=1)
    pp: int | None = Field(default=None, ge=1)
    ep: int | None = Field(default=None, ge=1)
    weights_dtype: WeightsDtype
    kv_dtype: WeightsDtype | None
    framework: str | None
    regime: Literal["max_throughput", "single_user", "fixed_concurrency", "server"]
    concurrency: int | None = Field(default=None, ge=1)
    speculative: bool = False
    isl: int | None = Field(default=None, ge=1)
    osl: float | None = Field(default=None, gt=0)
    metric: Literal["output_tokens_per_s", "output_tokens_per_s_per_user", "tpot_ms", "ttft_ms", "e2e_latency_ms"]
    value: float = Field(gt=0)
    notes: str = ""

    @property
    def comparable(self) -> bool:
        """Predictable in a modelled regime: lengths known, or assumed (``ASSUMED_LENGTHS``) for a
        per-user speed, where they move a short-context prediction by a few percent."""
        known = self.isl is not None and self.osl is not None
        return (self.regime != "server" and (known or self.regime != "max_throughput")
                and not (self.regime == "fixed_concurrency" and self.concurrency is None))

    @property
    def fit_target(self) -> bool:
        """Fitted on: lengths known, not speculative, not marked low-confidence or interpreted."""
        return (self.comparable and self.isl is not None and self.osl is not None and not self.speculative
                and not any(m in self.notes for m in CHECK_ONLY_MARKERS))

    @property
    def static_batch(self) -> bool:
        """A static batch of ``concurrency`` requests: prefilled together, then decoded to ``osl`` with no
        new prompt folded in (the notes say "static batch")."""
        return self.regime == "fixed_concurrency" and "static batch" in self.notes.lower()

    @property
    def group(self) -> str:
        return METRIC_GROUP[self.metric]


@dataclass(frozen=True)
class Comparison:
    measurement: Measurement
    family: str
    predicted: float  # in-sample (with the fit in force)
    predicted_loo: float | None = None  # with the record's family refitted without it

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted - self.measurement.value) / self.measurement.value

    @property
    def loo_error_pct(self) -> float | None:
        if self.predicted_loo is None:
            return None
        return 100.0 * (self.predicted_loo - self.measurement.value) / self.measurement.value


# ------------------------------------------------------------------------------------ prediction
def replica_devices(m: Measurement, costs: RooflineModel) -> int:
    """Devices per replica: the stated TP (× PP); else, on an SRAM machine, the whole published system
    (one pipeline), and on other devices the fewest that hold the weights (powers of two)."""
    if m.tp is not None:
        return m.tp * (m.pp or 1)
    silicon = costs.silicon(m.device, m.weights_dtype)
    if silicon.sram:
        return m.devices
    model = costs.profile(m.model, m.weights_dtype, m.kv_dtype)
    counts = silicon.device_counts(model.weights_bytes, max_devices=max(m.devices, 1))
    return counts[0] if counts else m.devices


def expert_groups(m: Measurement, model) -> int:
    """Expert-parallel groups of a record: its stated ``ep`` on a MoE model, else 1 (experts under TP)."""
    return m.ep if m.ep and model.moe_layers else 1


def predict(m: Measurement, costs: RooflineModel, variants: list[Device] | None = None) -> np.ndarray:
    """The model's value of ``m.metric`` for ``m``, one entry per device variant (default: the catalog device)."""
    devices = variants or [costs.catalog.device(m.device)]
    silicon = [costs.silicon(d, m.weights_dtype) for d in devices]
    model = costs.profile(m.model, m.weights_dtype, m.kv_dtype)
    n = replica_devices(m, costs)
    replicas = max(m.devices // n, 1)
    isl, osl = int(m.isl or ASSUMED_LENGTHS[0]), float(m.osl or ASSUMED_LENGTHS[1])
    if m.regime == "single_user":
        batches = (1,)
    elif m.regime == "fixed_concurrency":
        batches = (max(1, int(round(m.concurrency * n / m.devices))),)
    else:
        batches = BATCHES
    spec = GridSpec(tp=(n,), batch=batches, input_tokens=(isl,), output_tokens=max(int(round(osl)), 1),
                    steady_state=m.regime != "single_user" and not m.static_batch,
                    static_batch_prefill=m.static_batch, ep=expert_groups(m, model))
    grid = costs.grid(model, silicon, spec)
    tpot_s = grid.tpot_s.reshape(len(devices), -1)
    ttft_s = np.broadcast_to(grid.ttft_s, grid.tpot_s.shape).reshape(len(devices), -1)
    rate = grid.output_tokens_per_s.reshape(len(devices), -1)
    if m.regime == "max_throughput":
        fits = grid.fits.reshape(len(devices), -1)
        best = np.argmax(np.where(fits, rate, -1.0), axis=1)
        pick = np.arange(len(devices)), best
        ok = fits[pick]
        tpot_s, ttft_s, rate = tpot_s[pick], ttft_s[pick], np.where(ok, rate[pick], 1e-9)
    else:
        tpot_s, ttft_s, rate = tpot_s[:, 0], ttft_s[:, 0], rate[:, 0]
    if m.metric == "output_tokens_per_s":
        if m.static_batch:  # the batch's tokens over its wall time: the joint prefill, then osl − 1 more steps
            return replicas * batches[0] * osl / (ttft_s + (osl - 1.0) * tpot_s)
        return replicas * rate
    if m.metric == "tpot_ms":
        return s_to_ms(tpot_s)
    if m.metric == "output_tokens_per_s_per_user":
        return 1.0 / tpot_s
    if m.metric == "ttft_ms":
        return s_to_ms(ttft_s)
    return s_to_ms(ttft_s + (osl - 1.0) * tpot_s)  # e2e_latency_ms


def chosen_batch(m: Measurement, costs: RooflineModel) -> int:
    """The per-replica batch the prediction of ``m`` runs at (max_throughput: the best that fits)."""
    if m.regime == "single_user":
        return 1
    n = replica_devices(m, costs)
    if m.regime == "fixed_concurrency":
        return max(1, int(round(m.concurrency * n / m.devices)))
    model = costs.profile(m.model, m.weights_dtype, m.kv_dtype)
    spec = GridSpec(tp=(n,), batch=BATCHES, input_tokens=(int(m.isl),), output_tokens=max(int(round(m.osl)), 1),
                    steady_state=True, ep=expert_groups(m, model))
    grid = costs.grid(model, costs.silicon(m.device, m.weights_dtype), spec)
    rate = np.where(grid.fits, grid.output_tokens_per_s, -1.0).reshape(-1)
    return int(BATCHES[int(np.argmax(rate))])


# ------------------------------------------------------------------------------------------- fit
@dataclass
class FamilyFit:
    """Fitted terms of one family, the records behind them, the loss reached and, per record, the
    left-out log residual of the linearised fit."""

    name: str
    params: dict[str, float]
    records: list[str]
    loss: float
    x: np.ndarray | None = field(default=None, repr=False)
    loo_log_residuals: dict[str, float] = field(default_factory=dict)


def linearised_loo(residuals: np.ndarray, jacobian: np.ndarray, n_data: int) -> np.ndarray:
    """Left-out residuals of a least-squares fit: ``r_i / (1 − h_ii)``, ``h = diag(J (JᵀJ)⁻¹ Jᵀ)``.

    Exact for a linear model (the PRESS residuals); for the fit's smooth nonlinear model it is the
    one-step Newton refit from the optimum without record ``i``. The prior rows stay in: a left-out
    record is still predicted by a fit that is pulled toward the priors.
    """
    gram = jacobian.T @ jacobian
    leverage = np.einsum("ij,jk,ik->i", jacobian, np.linalg.pinv(gram), jacobian)
    return residuals[:n_data] / np.maximum(1.0 - leverage[:n_data], 1e-6)


def _to_x(values: dict[str, float]) -> np.ndarray:
    return np.log(np.asarray([values[k] + LOG_OFFSET[k] for k in FITTED_TERMS]))


def _from_x(x: np.ndarray) -> dict[str, float]:
    out = {}
    for k, v in zip(FITTED_TERMS, x):
        lo, hi = BOUNDS[k]
        out[k] = float(min(max(np.exp(v) - LOG_OFFSET[k], lo), hi))
    return out


def _x_bounds() -> tuple[np.ndarray, np.ndarray]:
    lo = np.log(np.asarray([BOUNDS[k][0] + LOG_OFFSET[k] for k in FITTED_TERMS]))
    hi = np.log(np.asarray([BOUNDS[k][1] + LOG_OFFSET[k] for k in FITTED_TERMS]))
    return lo, hi


def family_priors(catalog_priors: Catalog, family: str) -> dict[str, float]:
    """The family's prior terms: those of its first device (the hardware files and families.yaml)."""
    device = catalog_priors.device(catalog_priors.families[family].devices[0])
    return {k: float(getattr(device, k)) for k in FITTED_TERMS}


def fit_family(family: str, records: list[Measurement], catalog_priors: Catalog, prior_log_sd: dict[str, float],
               start: np.ndarray | None = None) -> FamilyFit:
    """Least-squares fit of one family's terms to ``records``, regularised toward the priors.

    Residuals are ``log(pred/measured)`` per record and ``(x − x₀)/σ`` per term; the Jacobian is a
    forward difference whose steps are priced together with the point, as extra device variants.
    """
    prior = family_priors(catalog_priors, family)
    x0 = _to_x(prior)
    sd = np.asarray([prior_log_sd[k] for k in FITTED_TERMS])
    if not records:
        return FamilyFit(family, prior, [], 0.0, x0)
    costs = RooflineModel(catalog_priors)
    measured = np.log(np.asarray([r.value for r in records]))
    step = 1e-4

    def variants(x):
        points = [x] + [x + step * np.eye(len(x))[i] for i in range(len(x))]
        return points

    cache: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

    def evaluate(x):
        key = x.tobytes()
        if key not in cache:
            points = variants(x)
            preds = np.empty((len(points), len(records)))
            for j, record in enumerate(records):
                base = catalog_priors.device(record.device)
                devs = [base.model_copy(update=_from_x(p)) for p in points]
                preds[:, j] = np.log(np.maximum(predict(record, costs, devs), 1e-12))
            data = preds - measured
            prior_res = (np.asarray(points) - x0) / sd
            res = np.concatenate([data, prior_res], axis=1)
            cache.clear()
            cache[key] = (res[0], (res[1:] - res[0]).T / step)
        return cache[key]

    lo, hi = _x_bounds()
    x_start = np.clip(x0 if start is None else start, lo + 1e-9, hi - 1e-9)
    result = least_squares(lambda x: evaluate(x)[0], x_start, jac=lambda x: evaluate(x)[1], bounds=(lo, hi),
                           method="trf", xtol=1e-8, ftol=1e-10, max_nfev=200)
    residuals, jacobian = evaluate(result.x)
    loo = linearised_loo(residuals, jacobian, len(records))
    return FamilyFit(family, _from_x(result.x), [r.id for r in records], float(2 * result.cost), result.x,
                     {r.id: float(v) for r, v in zip(records, loo)})


# ---------------------------------------------------------------------------------- calibration
@dataclass
class Calibration:
    """A whole calibration: fits, per-record comparisons (in-sample and left out), bands and coverage."""

    fits: dict[str, FamilyFit]
    comparisons: list[Comparison]
    bands: dict[str, dict[str, tuple[float, float]]]
    coverage: dict[str, dict]

    def summary(self) -> dict:
        out = summarise(self.comparisons)
        out["band_coverage_pct"] = self.band_coverage_pct()
        return out

    def band_coverage_pct(self) -> float | None:
        """Share of fit targets whose measurement falls inside its family's band around the prediction."""
        inside = []
        for c in self.comparisons:
            band = self.bands.get(c.family, {}).get(c.measurement.group)
            if band is None or not c.measurement.fit_target:
                continue
            inside.append(band[0] <= _measured_over_predicted(c.measurement, c.predicted) <= band[1])
        return 100.0 * float(np.mean(inside)) if inside else None


def families_of(catalog: Catalog) -> dict[str, str]:
    """Device id → family name."""
    return {d: f.name for f in catalog.families.values() for d in f.devices}


def calibrate(measurements: list[Measurement], catalog_priors: Catalog, prior_log_sd: dict[str, float],
              leave_one_out: bool | str = True) -> Calibration:
    """Fit every family with records; predict every comparable record in-sample and left out.

    ``leave_one_out``: ``True`` for the linearised left-out residuals of each fit (fast), ``"exact"``
    to refit each family once per record, ``False`` for none.
    """
    family_of = families_of(catalog_priors)
    comparable = [m for m in measurements if m.comparable and m.device in family_of]
    by_family: dict[str, list[Measurement]] = defaultdict(list)
    for m in comparable:
        if m.fit_target:
            by_family[family_of[m.device]].append(m)
    # a family whose only records are check-only is fitted on them (non-speculative ones), and says so
    for m in comparable:
        fam = family_of[m.device]
        if not m.speculative and not any(r.fit_target for r in comparable if family_of[r.device] == fam):
            by_family[fam].append(m)
    fits = {name: fit_family(name, recs, catalog_priors, prior_log_sd) for name, recs in sorted(by_family.items())}
    fitted = fitted_catalog(catalog_priors, fits)
    costs = RooflineModel(fitted)
    loo: dict[str, float] = {}
    if leave_one_out == "exact":
        for name, recs in by_family.items():
            for i, record in enumerate(recs):
                refit = fit_family(name, recs[:i] + recs[i + 1:], catalog_priors, prior_log_sd, start=fits[name].x)
                loo[record.id] = float(predict(record, RooflineModel(fitted_catalog(catalog_priors, {name: refit})))[0])
    elif leave_one_out:
        for name, recs in by_family.items():
            for record in recs:
                loo[record.id] = float(record.value * np.exp(fits[name].loo_log_residuals[record.id]))
    comparisons = [Comparison(m, family_of[m.device], float(predict(m, costs)[0]), loo.get(m.id)) for m in comparable]
    return Calibration(fits, comparisons, bands_from(comparisons), coverage_of(comparisons, costs))


def fitted_catalog(catalog_priors: Catalog, fits: dict[str, FamilyFit]) -> Catalog:
    """``catalog_priors`` with each fitted family's terms set on its devices."""
    devices = dict(catalog_priors.devices)
    for name, fit in fits.items():
        for device_id in catalog_priors.families[name].devices:
            devices[device_id] = devices[device_id].model_copy(update=fit.params)
    return replace(catalog_priors, devices=devices)


def bands_from(comparisons: list[Comparison]) -> dict[str, dict[str, tuple[float, float]]]:
    """Per family and metric group: the p10–p90 of measured/predicted over the LOO residuals (always ∋ 1)."""
    ratios: dict[tuple[str, str], list[float]] = defaultdict(list)
    pooled: dict[str, list[float]] = defaultdict(list)
    for c in comparisons:
        if c.predicted_loo is None or not c.measurement.fit_target:
            continue
        r = _measured_over_predicted(c.measurement, c.predicted_loo)
        ratios[(c.family, c.measurement.group)].append(r)
        pooled[c.measurement.group].append(r)
    out: dict[str, dict[str, tuple[float, float]]] = defaultdict(dict)
    families = {c.family for c in comparisons}
    for fam in families:
        for group in ("tpot", "ttft", "throughput"):
            values = ratios.get((fam, group), [])
            source = values if len(values) >= MIN_BAND_RECORDS else pooled.get(group, [])
            if len(source) < 2:
                continue
            lo, hi = np.quantile(source, BAND_QUANTILES)
            out[fam][group] = (round(float(min(lo, 1.0)), 4), round(float(max(hi, 1.0)), 4))
    return dict(out)


def _measured_over_predicted(m: Measurement, predicted: float) -> float:
    """A latency-like ratio: measured/predicted time (inverted for rates), so a band multiplies a predicted time."""
    if m.metric in ("output_tokens_per_s", "output_tokens_per_s_per_user"):
        return predicted / m.value
    return m.value / predicted


def coverage_of(comparisons: list[Comparison], costs: RooflineModel) -> dict[str, dict]:
    """Per family: the dtypes, largest TP, prompt length and batch its fit records span."""
    out: dict[str, dict] = {}
    for c in comparisons:
        m = c.measurement
        if not m.fit_target:
            continue
        cov = out.setdefault(c.family, {"dtypes": set(), "max_tp": 0, "max_isl": 0, "max_batch": 0})
        cov["dtypes"].add(m.weights_dtype)
        cov["max_tp"] = max(cov["max_tp"], replica_devices(m, costs))
        cov["max_isl"] = max(cov["max_isl"], int(m.isl))
        cov["max_batch"] = max(cov["max_batch"], chosen_batch(m, costs))
    return {k: {**v, "dtypes": sorted(v["dtypes"])} for k, v in out.items()}


def source_of(m: Measurement) -> str:
    """The publication a record comes from, for per-source medians (the text before the first comma)."""
    return m.source.split(",")[0].split(" (")[0].strip()[:60]


def summarise(comparisons: list[Comparison]) -> dict:
    """Median APE in-sample and left out: overall, per family, per source; p90, signed bias, band coverage."""
    fitted = [c for c in comparisons if c.measurement.fit_target]

    def stats(items: list[Comparison]) -> dict:
        ins = np.asarray([abs(c.error_pct) for c in items])
        loo = np.asarray([abs(c.loo_error_pct) for c in items if c.loo_error_pct is not None])
        signed = np.asarray([c.loo_error_pct if c.loo_error_pct is not None else c.error_pct for c in items])
        return {
            "records": len(items),
            "median_ape_pct": float(np.median(ins)) if len(ins) else None,
            "loo_median_ape_pct": float(np.median(loo)) if len(loo) else None,
            "loo_p90_ape_pct": float(np.quantile(loo, 0.9)) if len(loo) else None,
            "median_signed_error_pct": float(np.median(signed)) if len(signed) else None,
        }

    by_family: dict[str, list[Comparison]] = defaultdict(list)
    by_source: dict[str, list[Comparison]] = defaultdict(list)
    for c in fitted:
        by_family[c.family].append(c)
        by_source[source_of(c.measurement)].append(c)
    per_source = {k: stats(v) for k, v in sorted(by_source.items())}
    medians = [s["loo_median_ape_pct"] for s in per_source.values() if s["loo_median_ape_pct"] is not None]
    return {
        "overall": stats(fitted),
        "checks": stats([c for c in comparisons if not c.measurement.fit_target]),
        "mean_of_source_loo_medians_pct": float(np.mean(medians)) if medians else None,
        "families": {k: stats(v) for k, v in sorted(by_family.items())},
        "sources": per_source,
    }


def median_ape(comparisons: list[Comparison]) -> float:
    """Median absolute percentage error, in-sample."""
    return float(np.median([abs(c.error_pct) for c in comparisons]))


def fit_body(cal: Calibration, date: str, version: str) -> dict:
    """What ``calibrate --fit --write`` stores in fit.yaml."""
    summary = cal.summary()
    return {
        "date": date,
        "cost_model": f"siliconmix {version}",
        "summary": {k: summary["overall"][k] for k in ("records", "median_ape_pct", "loo_median_ape_pct")},
        "families": [
            {"name": name, "params": {k: round(v, 6) for k, v in fit.params.items()}, "records": fit.records,
             "fitted_on_check_records": not any(c.measurement.fit_target for c in cal.comparisons if c.family == name),
             "loss": round(fit.loss, 6), "bands": {g: list(b) for g, b in cal.bands.get(name, {}).items()},
             "coverage": cal.coverage.get(name, {})}
            for name, fit in cal.fits.items()
        ],
        "residuals_predicted_over_measured": {
            c.measurement.id: {"in_sample": round(c.predicted / c.measurement.value, 4),
                               "loo": None if c.predicted_loo is None else round(c.predicted_loo / c.measurement.value, 4)}
            for c in cal.comparisons
        },
    }
