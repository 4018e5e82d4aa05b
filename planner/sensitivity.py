"""Which estimated inputs could change a plan: each re-solved at ``1 − δ`` and ``1 + δ``.

The inputs are the catalog numbers a plan's devices rest on: per device type the plan uses (most devices
first), then per type only the best alternative plan uses, its TDP, hourly price, purchase price, the dense
FLOP/s of the compute format the workload runs on when the catalog marks that figure an estimate, and the
cost model's efficiency terms of its family (moved for every member of the family at once: the fit sets
them per family). They are tried kind by kind (every device's TDP, then every device's hourly price, ...,
the purchase price last: it enters only the capex a plan reports), so that a bound of ``max_inputs`` inputs,
``2 · max_inputs`` re-solves, drops the least telling kinds of the least used devices; the dropped ones are
listed as not tried.

Per side the analysis reports the objective's relative change ``(re-solved − plan) / plan`` and whether the
device mix changes: device-count shares moved by at least ``share_threshold`` in total-variation distance
``½ Σ_d |s_d − s'_d|`` (a device type that comes or goes counts by its share: a new vendor's tenth of the
fleet flips the mix, one device filling leftover power does not; ``types_change`` says either). An input is
``sensitive`` when either side changes the mix or moves the objective by more than ``threshold``.

Re-solves run one after another through ``resolve`` (the caller's planner without baselines, alternatives
or a reference fleet): each takes well under a second on the examples, less than a spawned worker process
needs to import the planner and load the catalog, and in-process they stay cancellable by the caller's
cancel token. Pure computation: no I/O.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Callable

from planner.catalog import Catalog, FITTED_TERMS
from planner.perf.model import compute_dtype
from planner.progress import Progress, observed, report
from planner.schema import Device, NotTried, Plan, Sensitivity, SensitivityInput, SensitivitySide

#: the efficiency terms tried by default: peak GEMM and weight-read efficiency, the KV read of decode
#: attention, and the fixed costs per pass and per layer (the terms that set prefill and decode times)
DEFAULT_TERMS = ("mfu", "mbu", "attention_read_efficiency", "step_overhead_us", "layer_latency_us")
#: the quantity each objective optimises, as the plan reports it
OBJECTIVE_QUANTITY = {"max_goodput": "goodput_scale", "fixed_footprint": "goodput_scale", "min_cost": "cost_usd_per_hour",
                      "min_power": "power_kw", "max_interactivity": "tpot_factor"}


@dataclass(frozen=True)
class SensitivityOptions:
    """How far to move each input (``delta``), what counts as a change, and how many inputs to try."""

    delta: float = 0.2
    threshold: float = 0.05
    share_threshold: float = 0.1
    max_inputs: int = 24
    efficiency_terms: tuple[str, ...] = DEFAULT_TERMS

    def __post_init__(self) -> None:
        checks = (("delta", 0 < self.delta < 1, "a fraction in (0, 1), e.g. 0.2 for ±20 %"),
                  ("threshold", 0 < self.threshold < math.inf, "a positive fraction, e.g. 0.05 for 5 %"),
                  ("share_threshold", 0 < self.share_threshold <= 1, "a fraction in (0, 1]"),
                  ("max_inputs", isinstance(self.max_inputs, int) and self.max_inputs >= 1, "an integer of at least 1"))
        for name, ok, allowed in checks:
            if not ok:
                raise ValueError(f"sensitivity {name}: must be {allowed} (got {getattr(self, name)!r})")
        unknown = [t for t in self.efficiency_terms if t not in FITTED_TERMS]
        if unknown:
            raise ValueError(f"sensitivity efficiency_terms: unknown term {unknown[0]!r}; known: {', '.join(FITTED_TERMS)}")


@dataclass(frozen=True)
class Input:
    """One catalog number to move: ``field`` (a Device.provenance key) on every device of ``devices``."""

    target: str
    field: str
    devices: tuple[str, ...]
    estimate: bool
    source: str

    @property
    def key(self) -> str:
        return f"{self.target}.{self.field}"


Resolve = Callable[[Catalog], Plan]


def analyse(plan: Plan, catalog: Catalog, options: SensitivityOptions, resolve: Resolve) -> Sensitivity:
    """The sensitivity section of ``plan``: each input of ``plan_inputs`` (up to ``options.max_inputs``) moved by
    ``−delta`` and ``+delta`` and the workload re-planned with ``resolve`` on the moved catalog.

    Reports the stage ``sensitivity`` before each input, with the plan and the inputs done so far as the best
    plan yet; the re-solves' own stages are not reported (their plans are not answers).
    """
    start = time.perf_counter()
    devices, alternative = devices_of(plan)
    found = plan_inputs(plan, catalog, devices, options.efficiency_terms)
    tried, skipped = found[:options.max_inputs], found[options.max_inputs:]
    bound = [NotTried(key=i.key, reason=f"beyond the bound of {options.max_inputs} inputs") for i in skipped]

    def section(done: list[SensitivityInput], stopped: list[Input]) -> Sensitivity:
        return Sensitivity(
            delta=options.delta, threshold=options.threshold, share_threshold=options.share_threshold,
            max_inputs=options.max_inputs, objective_quantity=OBJECTIVE_QUANTITY[plan.objective],
            objective_value=objective_value(plan), devices=devices, alternative_devices=alternative,
            inputs=tuple(done), resolves=2 * len(done), time_s=time.perf_counter() - start,
            not_tried=(*(NotTried(key=i.key, reason="stopped before it was tried") for i in stopped), *bound))

    done: list[SensitivityInput] = []
    for n, item in enumerate(tried):
        report(Progress("sensitivity", best=lambda d=tuple(done), rest=tried[n:]:
                        plan.model_copy(update={"sensitivity": section(list(d), list(rest))})))
        sides = []
        for factor in (1 - options.delta, 1 + options.delta):
            moved, value, applied = perturbed(catalog, item, factor)
            with observed(_ignore):
                sides.append(side_of(plan, resolve(moved), applied, value, options.share_threshold))
        done.append(verdict(catalog, item, *sides, options.threshold))
    return section(done, [])


def _ignore(progress: Progress) -> None:
    """The observer of the re-solves: their stages and plans are not the plan's."""


def devices_of(plan: Plan) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The plan's device types, most devices first (ties by id), then those only its best alternative uses."""
    def ranked(counts: dict[str, int]) -> list[str]:
        return [d for d, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if n > 0]

    own = ranked(plan.totals.devices_by_type)
    other = [d for d in ranked(plan.alternatives[0].devices_by_type) if d not in own] if plan.alternatives else []
    return (*own, *other), tuple(other)


def plan_inputs(plan: Plan, catalog: Catalog, devices: tuple[str, ...], terms: tuple[str, ...]) -> list[Input]:
    """Every input to try, kind by kind (TDP, hourly price, derived FLOP/s, each efficiency term, purchase price),
    within a kind in the order of ``devices``; a family's terms once, at the first of its devices."""
    by_kind: dict[str, list[Input]] = {}
    families: set[str] = set()
    for device_id in devices:
        device = catalog.device(device_id)
        items = device_inputs(device, plan.workload.dtype)
        if device.family is None or device.family not in families:
            items += family_inputs(device, catalog, terms)
            families.add(device.family or "")
        for item in items:  # the FLOP/s of any compute format are one kind
            kind = "peak_dense_tflops" if item.field.startswith("peak_dense_tflops.") else item.field
            by_kind.setdefault(kind, []).append(item)
    kinds = ["tdp_w", "price_usd_per_hour", "peak_dense_tflops", *(f"efficiency.{t}" for t in terms), "price_usd"]
    return [item for kind in kinds for item in by_kind.get(kind, [])]


def device_inputs(device: Device, weights_dtype: str) -> list[Input]:
    """TDP, hourly and purchase price of ``device``, and the dense FLOP/s it runs ``weights_dtype`` at when the
    catalog marks that figure an estimate (a published peak is not an estimate to test)."""
    fields = ["tdp_w", "price_usd_per_hour", "price_usd"]
    flops = f"peak_dense_tflops.{compute_dtype(device, weights_dtype)}"
    if flops in device.provenance and device.provenance[flops].estimate:
        fields.append(flops)
    return [Input(device.id, f, (device.id,), *_sourced(device, f)) for f in fields]


def family_inputs(device: Device, catalog: Catalog, terms: tuple[str, ...]) -> list[Input]:
    """The efficiency ``terms`` of ``device``'s family, each moving every member of the family in the catalog (the
    device alone when it has none); a zero term (no such overhead) stays zero when scaled, so it is left out."""
    members = tuple(d.id for d in catalog.devices.values() if d.family == device.family) if device.family else (device.id,)
    return [Input(device.family or device.id, f"efficiency.{t}", members, *_sourced(device, f"efficiency.{t}"))
            for t in terms if getattr(device, t) > 0]


def _sourced(device: Device, field: str) -> tuple[bool, str]:
    """Whether the catalog marks ``field`` of ``device`` an estimate, and its source."""
    p = device.provenance.get(field)
    return (p.estimate, p.source) if p is not None else (False, "not recorded")


def perturbed(catalog: Catalog, item: Input, factor: float) -> tuple[Catalog, float, float]:
    """``catalog`` with ``item`` scaled by ``factor`` on each of its devices (clamped at the field's upper
    bound: an efficiency stays ≤ 1); also the first device's new value and the factor applied to it."""
    devices = dict(catalog.devices)
    for device_id in item.devices:
        devices[device_id] = scaled(devices[device_id], item.field, factor)
    first = item.devices[0]
    before, after = field_value(catalog.device(first), item.field), field_value(devices[first], item.field)
    return replace(catalog, devices=MappingProxyType(devices)), after, after / before


def field_value(device: Device, field: str) -> float:
    """The number at ``field`` (``tdp_w``, ``peak_dense_tflops.bf16``, ``efficiency.mbu``) of ``device``."""
    head, _, rest = field.partition(".")
    if head == "peak_dense_tflops":
        return device.peak_dense_tflops[rest]
    return getattr(device, rest if head == "efficiency" else field)


def scaled(device: Device, field: str, factor: float) -> Device:
    """``device`` with the number at ``field`` times ``factor``, at most the Device field's upper bound."""
    head, _, rest = field.partition(".")
    if head == "peak_dense_tflops":
        update = {head: {**device.peak_dense_tflops, rest: device.peak_dense_tflops[rest] * factor}}
    else:
        name = rest if head == "efficiency" else field
        update = {name: min(getattr(device, name) * factor, _upper_bound(name))}
    return Device.model_validate({**device.model_dump(), **update})


def _upper_bound(name: str) -> float:
    """The largest value the Device field ``name`` allows (its ``le``), else infinity."""
    return min((m.le for m in Device.model_fields[name].metadata if getattr(m, "le", None) is not None), default=math.inf)


def objective_value(plan: Plan) -> float:
    """The quantity the plan's objective optimises: goodput scale, $/h, facility kW or the TPOT factor."""
    quantity = OBJECTIVE_QUANTITY[plan.objective]
    if quantity == "tpot_factor":
        return plan.interactivity.tpot_factor
    return plan.goodput_scale if quantity == "goodput_scale" else getattr(plan.totals, quantity)


def share_shift(a: dict[str, int], b: dict[str, int]) -> float:
    """Total-variation distance between two fleets' device-count shares: ``½ Σ_d |a_d/Σa − b_d/Σb|``."""
    total_a, total_b = sum(a.values()), sum(b.values())
    if total_a == 0 or total_b == 0:
        return 0.0 if total_a == total_b else 1.0
    return 0.5 * sum(abs(a.get(d, 0) / total_a - b.get(d, 0) / total_b) for d in set(a) | set(b))


def side_of(plan: Plan, resolved: Plan, factor: float, value: float, share_threshold: float) -> SensitivitySide:
    """What one re-solve changed against ``plan``."""
    if resolved.status == "infeasible":
        return SensitivitySide(factor=factor, value=value, status="infeasible", objective_value=None,
                               objective_change_pct=None, devices_by_type={}, share_shift=None, types_change=True,
                               mix_changes=True, cost_usd_per_hour=0.0, power_kw=0.0)
    base, new = objective_value(plan), objective_value(resolved)
    mine, theirs = plan.totals.devices_by_type, resolved.totals.devices_by_type
    shift = share_shift(mine, theirs)
    return SensitivitySide(
        factor=factor, value=value, status=resolved.status, objective_value=new,
        objective_change_pct=100.0 * (new - base) / base if base else None, devices_by_type=dict(theirs),
        share_shift=shift, types_change={d for d, n in mine.items() if n} != {d for d, n in theirs.items() if n},
        mix_changes=shift >= share_threshold,
        cost_usd_per_hour=resolved.totals.cost_usd_per_hour, power_kw=resolved.totals.power_kw)


def verdict(catalog: Catalog, item: Input, low: SensitivitySide, high: SensitivitySide,
            threshold: float) -> SensitivityInput:
    """The input's row: both sides and whether either flips the mix or moves the objective past ``threshold``."""
    flips = low.mix_changes or high.mix_changes
    moves = any(s.objective_change_pct is None or abs(s.objective_change_pct) > 100.0 * threshold for s in (low, high))
    return SensitivityInput(
        key=item.key, target=item.target, field=item.field, devices=item.devices,
        base_value=field_value(catalog.device(item.devices[0]), item.field), estimate=item.estimate,
        source=item.source, low=low, high=high, flips_mix=flips, moves_objective=moves, sensitive=flips or moves)
