"""What-if studies, pure: the study file's schema, scenario expansion with stable keys, one tidy result
row per scenario, Pareto frontiers and the homogeneous-vs-heterogeneous comparison.

No files and no executors here (``study_runner`` runs scenarios and writes outputs). A study is a base
workload plus axes; each axis sets one workload parameter (``param``) to each of its values, or, without
``param``, applies a bundle of parameters per named value. Axes combine as a grid (every combination) or
zipped (advanced together); a ``zip:`` entry zips a few axes inside a grid.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, ValidationError, model_validator

from planner.catalog import Catalog
from planner.messages import describe_errors
from planner.pareto import OK_STATUSES, Sense, frontier_points, pareto_mask  # noqa: F401  (re-exported)
from planner.pareto import finite as _finite
from planner.schema import Frozen, Objective, Plan, Workload

Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.\-]+$", min_length=1, max_length=64)]
#: the results table, in this order, after ``scenario``, ``hash`` and the ``axis.<name>`` columns
RESULT_COLUMNS = (
    "status", "reason", "goodput_scale", "served_rps", "output_tokens_per_s", "output_tokens_per_s_per_user",
    "ttft_ms", "tpot_ms", "power_kw", "cost_usd_per_hour", "capex_usd", "devices", "devices_by_type",
    "tokens_per_s_per_mw", "usd_per_million_tokens", "gain", "baseline_device", "solve_time_s",
    "simulated_verdict", "simulated_worst_miss",
)
#: which way is better, for the columns a frontier or a comparison may use
SENSES: dict[str, Sense] = {
    "goodput_scale": "max", "served_rps": "max", "output_tokens_per_s": "max", "output_tokens_per_s_per_user": "max",
    "tokens_per_s_per_mw": "max", "gain": "max", "ttft_ms": "min", "tpot_ms": "min", "power_kw": "min",
    "cost_usd_per_hour": "min", "capex_usd": "min", "devices": "min", "usd_per_million_tokens": "min",
}
Metric = Literal[tuple(SENSES)]  # type: ignore[valid-type]
CONSTRAINT_PARAMS = ("power_budget_kw", "pue", "devices", "inventory", "cost_budget_usd_per_hour", "max_device_types")
CLASS_PARAMS = ("slo.ttft_ms", "slo.tpot_ms", "rate_rps", "rate_scale", "input_tokens", "output_tokens", "prefix_cache_hit")


class StudyError(ValueError):
    """A study that cannot be expanded; the message names the axis, scenario or field."""


# ------------------------------------------------------------------------------------------- spec
class AxisSpec(Frozen):
    """One axis: ``param`` set to each value (a list, or a mapping label -> value); without ``param``
    each value is a bundle ``{param: value, ...}``. ``each`` adds one single-device fleet per device id
    (``base``: every device the base workload allows); ``classes`` limits per-class params to these."""

    name: Name
    param: str | None = None
    values: list[Any] | dict[str, Any] = Field(default_factory=list)
    each: list[str] | Literal["base"] | None = None
    classes: list[str] | None = None

    @model_validator(mode="after")
    def _has_values(self) -> AxisSpec:
        if not self.values and not self.each:
            raise ValueError("values: an axis needs values (or each)")
        if self.each is not None and self.param not in (None, "devices"):
            raise ValueError(f"each: only for the devices param or a bundle axis (param is {self.param!r})")
        if self.param is None and isinstance(self.values, list) and self.values:
            raise ValueError("values: a bundle axis (no param) maps labels to {param: value} mappings")
        return self


class ZipSpec(Frozen):
    """Axes advanced together (value i of each), all of the same length."""

    zip: list[AxisSpec] = Field(min_length=2)


def _axis_kind(value: Any) -> str:
    return "zip" if isinstance(value, dict) and "zip" in value else "axis"


AxisEntry = Annotated[Annotated[AxisSpec, Tag("axis")] | Annotated[ZipSpec, Tag("zip")], Discriminator(_axis_kind)]


class FrontierSpec(Frozen):
    """A Pareto frontier over two result columns; ``by`` draws one frontier per value of that axis."""

    name: Name | None = None
    x: Metric = "output_tokens_per_s_per_user"
    y: Metric = "tokens_per_s_per_mw"
    x_sense: Sense | None = None
    y_sense: Sense | None = None
    by: str | None = None

    @property
    def label(self) -> str:
        return self.name or f"{self.y}-vs-{self.x}"

    @property
    def senses(self) -> tuple[Sense, Sense]:
        return self.x_sense or SENSES[self.x], self.y_sense or SENSES[self.y]


class CompareSpec(Frozen):
    """Compare each multi-device value of ``axis`` with the best single-device value, per other axes."""

    axis: str
    metric: Metric = "goodput_scale"


class StudyOptions(Frozen):
    """How every scenario is solved (see ``PlanOptions``); the baseline costs one solve per device type."""

    solver: Literal["ortools", "pulp"] = "ortools"
    engine: str | None = None
    time_limit_s: Annotated[float, Field(gt=0)] = 30.0
    relative_gap: Annotated[float, Field(ge=0, lt=1)] = 1e-4
    node_limit: Annotated[int, Field(ge=1)] | None = None  # branch-and-bound nodes per MILP solve (a work limit)
    baseline: bool = False
    #: replay each scenario's plan request by request (planner.simulate, 10 simulated minutes): the rows then say
    #: ``simulated_verdict`` and ``simulated_worst_miss`` (the largest relative excess over an SLO, 0 when it meets)
    simulate: bool = False


class StudySpec(Frozen):
    """A study file, with ``base`` already read into a workload mapping."""

    name: Name
    description: str = ""
    base: dict[str, Any]
    set: dict[str, Any] = Field(default_factory=dict)
    objective: Objective | None = None
    combine: Literal["grid", "zip"] = "grid"
    axes: list[AxisEntry] = Field(min_length=1)
    pareto: list[FrontierSpec] = Field(default_factory=lambda: [FrontierSpec()])
    compare: CompareSpec | None = None
    options: StudyOptions = Field(default_factory=StudyOptions)

    @model_validator(mode="after")
    def _references(self) -> StudySpec:
        names = [a.name for a in self.all_axes()]
        if len(set(names)) != len(names):
            raise ValueError(f"axes: duplicate axis names in {names}")
        for i, f in enumerate(self.pareto):
            if f.by is not None and f.by not in names:
                raise ValueError(f"pareto.{i}.by: {f.by!r} is not an axis ({', '.join(names)})")
        if self.compare is not None and self.compare.axis not in names:
            raise ValueError(f"compare.axis: {self.compare.axis!r} is not an axis ({', '.join(names)})")
        return self

    def all_axes(self) -> list[AxisSpec]:
        """Every axis in file order, zip members flattened."""
        return [a for entry in self.axes for a in (entry.zip if isinstance(entry, ZipSpec) else [entry])]


# ------------------------------------------------------------------------------------- expansion
@dataclass(frozen=True)
class Scenario:
    """One point of the study: its readable key, axis values (the ``axis.<name>`` columns), inputs."""

    index: int
    key: str
    axes: dict[str, Any]
    workload: Workload
    prices: dict[str, dict[str, float]]
    hash: str


def label_of(value: Any) -> str:
    """A short readable label: 10 -> '10', [a, b] -> 'a+b', {k: v} -> 'k:v'."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float | int):
        return f"{value:.10g}"
    if isinstance(value, list | tuple):
        return "+".join(label_of(v) for v in value)
    if isinstance(value, dict):
        return ",".join(f"{k}:{label_of(v)}" for k, v in value.items())
    return str(value)


def each_devices(axis: AxisSpec, base: dict) -> list:
    """The device ids of the axis's ``each`` (``base``: the base workload's constraints.devices)."""
    if axis.each != "base":
        return list(axis.each or ())
    constraints = base.get("constraints")
    return list((constraints.get("devices") if isinstance(constraints, dict) else None) or [])


def axis_points(axis: AxisSpec, base: dict) -> list[tuple[str, Any, dict]]:
    """The axis as (label, column value, {param: value}) per point, ``each`` devices first."""
    points = []
    if axis.each is not None:
        devices = each_devices(axis, base)
        if not devices:
            raise StudyError(f"axis {axis.name}: each: base needs constraints.devices in the base workload")
        points += [(d, d, {"devices": [d]}) for d in devices]
    if isinstance(axis.values, dict):
        for label, value in axis.values.items():
            if axis.param is None and not isinstance(value, dict):
                raise StudyError(f"axis {axis.name}: value {label!r} must be a mapping of params")
            points.append((str(label), str(label), value if axis.param is None else {axis.param: value}))
    else:
        numeric = all(isinstance(v, float | int) and not isinstance(v, bool) for v in axis.values)
        for value in axis.values:
            points.append((label_of(value), value if numeric else label_of(value), {axis.param: value}))
    labels = [p[0] for p in points]
    if len(set(labels)) != len(labels):
        raise StudyError(f"axis {axis.name}: duplicate values {labels}")
    return points


def axis_length(axis: AxisSpec, base: dict) -> int:
    """Points of one axis without building them: its ``each`` devices plus its values."""
    return len(each_devices(axis, base)) + len(axis.values)


def scenario_count(spec: StudySpec) -> int:
    """How many scenarios ``expand`` would build, from the axes' lengths alone (nothing expanded or validated).

    grid: the product over axis entries (a ``zip`` entry counts once, with its longest member);
    ``combine: zip``: the longest axis. An upper bound when zipped lengths differ (``expand`` refuses those).
    """
    if spec.combine == "zip":
        return max(axis_length(a, spec.base) for a in spec.all_axes())
    return math.prod(max(axis_length(a, spec.base) for a in (entry.zip if isinstance(entry, ZipSpec) else [entry]))
                     for entry in spec.axes)


def dimensions(spec: StudySpec) -> list[list[list[tuple[AxisSpec, tuple]]]]:
    """Grid dimensions; each holds steps, each step one point of every axis it advances."""
    if spec.combine == "zip":
        groups = [spec.all_axes()]
    else:
        groups = [entry.zip if isinstance(entry, ZipSpec) else [entry] for entry in spec.axes]
    dims = []
    for group in groups:
        columns = [axis_points(a, spec.base) for a in group]
        lengths = {a.name: len(c) for a, c in zip(group, columns)}
        if len(set(lengths.values())) > 1:
            raise StudyError(f"zipped axes need the same number of values: {lengths}")
        dims.append([[(a, col[i]) for a, col in zip(group, columns)] for i in range(len(columns[0]))])
    return dims


#: scenarios one study may expand to (the REST service sets its own, lower limit); counted before expanding.
MAX_SCENARIOS = 100_000


def expand(spec: StudySpec, catalog: Catalog | None = None, max_scenarios: int = MAX_SCENARIOS) -> list[Scenario]:
    """Every scenario of the study, validated (and checked against ``catalog`` when given), in order.

    Refuses a study of more than ``max_scenarios`` scenarios before building any (``scenario_count``).
    """
    count = scenario_count(spec)
    if count > max_scenarios:
        raise StudyError(f"axes: {count:,} scenarios; a study may have at most {max_scenarios:,}")
    base = apply_params(spec.base, spec.set, None, {})
    if spec.objective is not None:
        base = {**base, "objective": spec.objective}
    scenarios, keys = [], set()
    for index, steps in enumerate(itertools.product(*dimensions(spec))):
        doc, prices, axes, parts = base, {}, {}, []
        for axis, (label, column, params) in (pair for step in steps for pair in step):
            doc = apply_params(doc, params, axis.classes, prices, where=f"axis {axis.name} value {label!r}")
            axes[axis.name] = column
            parts.append(f"{axis.name}={label}")
        key = ", ".join(parts)
        if key in keys:
            raise StudyError(f"scenario {key!r} appears twice")
        keys.add(key)
        workload = _validated(doc, key)
        if catalog is not None:
            check_ids(workload, prices, catalog, key)
        scenarios.append(Scenario(index, key, axes, workload, prices, scenario_hash(workload, prices)))
    return scenarios


def _validated(doc: dict, key: str) -> Workload:
    try:
        return Workload.model_validate(doc)
    except ValidationError as exc:
        raise StudyError(f"scenario {key!r}: {describe_errors(exc, most=1)}") from exc


def check_ids(workload: Workload, prices: dict, catalog: Catalog, key: str) -> None:
    """Every device and model id a scenario names exists in the catalog."""
    named = [("constraints.devices", d) for d in workload.constraints.devices or ()]
    named += [("constraints.inventory", d) for d in workload.constraints.inventory]
    named += [("prices", d) for d in prices]
    for field, device in named:
        if device not in catalog.devices:
            raise StudyError(f"scenario {key!r}: {field}: unknown device {device!r} (known: {', '.join(catalog.devices)})")
    models = [("model", workload.model)] + ([("spec_decode.draft_model", workload.spec_decode.draft_model)]
                                            if workload.spec_decode else [])
    for field, model in models:
        if model not in catalog.models:
            raise StudyError(f"scenario {key!r}: {field}: unknown model {model!r} (known: {', '.join(catalog.models)})")


def scenario_hash(workload: Workload, prices: dict) -> str:
    """Short sha1 of the canonical workload JSON (with the price overrides, when there are any)."""
    payload: Any = workload.model_dump(mode="json")
    if prices:
        payload = {"workload": payload, "prices": prices}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha1(text.encode()).hexdigest()[:12]


# ------------------------------------------------------------------------------------- parameters
def apply_params(doc: dict, params: dict, classes: list[str] | None, prices: dict, where: str = "set") -> dict:
    """A copy of the workload mapping with ``params`` applied; ``prices`` collects price overrides."""
    out = copy.deepcopy(doc)
    for param, value in params.items():
        if param == "prices":
            _merge_prices(prices, value, where)
        elif param in CONSTRAINT_PARAMS:
            out.setdefault("constraints", {})[param] = copy.deepcopy(value)
        elif param in CLASS_PARAMS:
            out["classes"] = _apply_to_classes(out.get("classes") or [], param, value, classes, where)
        elif "." in param:
            _set_path(out, param.split("."), copy.deepcopy(value), where)
        else:
            out[param] = copy.deepcopy(value)
    return out


def _merge_prices(prices: dict, value: Any, where: str) -> None:
    """``{device: price_usd_per_hour}`` or ``{device: {price_usd_per_hour: .., price_usd: ..}}``."""
    if not isinstance(value, dict):
        raise StudyError(f"{where}: prices: a mapping of device id to price (got {value!r})")
    for device, price in value.items():
        fields = price if isinstance(price, dict) else {"price_usd_per_hour": price}
        for field, number in fields.items():
            if field not in ("price_usd_per_hour", "price_usd") or not isinstance(number, float | int) or number <= 0:
                raise StudyError(f"{where}: prices.{device}.{field}: a positive price_usd_per_hour or price_usd (got {number!r})")
        prices[device] = {**prices.get(device, {}), **{k: float(v) for k, v in fields.items()}}


def _apply_to_classes(rows: list, param: str, value: Any, only: list[str] | None, where: str) -> list:
    """Set (or scale, for rate_scale) a per-class field; a mapping value gives one number per class."""
    names = [r.get("name") for r in rows]
    per_class = value if isinstance(value, dict) else {n: value for n in (only or names)}
    unknown = [n for n in list(per_class) + list(only or []) if n not in names]
    if unknown:
        raise StudyError(f"{where}: {param}: unknown class {unknown[0]!r} (classes: {', '.join(map(str, names))})")
    out = []
    for row in rows:
        row = copy.deepcopy(row)
        if row.get("name") in per_class and (only is None or row["name"] in only):
            number = per_class[row["name"]]
            if param == "rate_scale":
                row["rate_rps"] = row.get("rate_rps", 0) * number
            elif param.startswith("slo."):
                row["slo"] = {**row.get("slo", {}), param[4:]: number}
            else:
                row[param] = number
        out.append(row)
    return out


def _set_path(doc: dict, path: list[str], value: Any, where: str) -> None:
    node = doc
    for part in path[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise StudyError(f"{where}: {'.'.join(path)}: {part} is not a mapping")
    node[path[-1]] = value


def with_prices(catalog: Catalog, prices: dict[str, dict[str, float]]) -> Catalog:
    """A catalog whose devices carry the overridden prices (the input catalog is unchanged)."""
    if not prices:
        return catalog
    devices = {d: dev.model_copy(update=prices[d]) if d in prices else dev for d, dev in catalog.devices.items()}
    return replace(catalog, devices=devices)  # families (calibration) and fingerprint kept


# ------------------------------------------------------------------------------------------- rows
def result_row(plan: Plan, solve_time_s: float) -> dict:
    """The plan's key results as the table's columns (means over classes weighted by served rate)."""
    served = {c.name: c.rate_rps_served for c in plan.classes}
    osl = {rc.name: rc.output_tokens for rc in plan.workload.classes}
    tps = sum(served[k] * osl[k] for k in served)
    t = plan.totals
    problem = _inconsistency(plan)
    row = {
        "status": "error" if problem else plan.status,
        "reason": problem or (plan.diagnosis.message if plan.diagnosis else ""),
        "goodput_scale": plan.goodput_scale, "served_rps": sum(served.values()), "output_tokens_per_s": tps,
        "output_tokens_per_s_per_user": _weighted(plan, "output_tokens_per_s_per_user"),
        "ttft_ms": _weighted(plan, "ttft_ms"), "tpot_ms": _weighted(plan, "tpot_ms"),
        "power_kw": t.power_kw, "cost_usd_per_hour": t.cost_usd_per_hour, "capex_usd": t.capex_usd,
        "devices": t.devices, "devices_by_type": json.dumps(dict(sorted(t.devices_by_type.items()))),
        "tokens_per_s_per_mw": tps / (t.power_kw / 1000) if t.power_kw > 0 else math.nan,
        "usd_per_million_tokens": t.cost_usd_per_hour / (tps * 3600 / 1e6) if tps > 0 else math.nan,
        "gain": plan.gain if plan.gain is not None else math.nan,
        "baseline_device": (plan.baseline.device or "") if plan.baseline else "",
        "solve_time_s": solve_time_s,
        **replay_columns(plan),
    }
    return row


def replay_columns(plan: Plan) -> dict:
    """A simulated plan's verdict and its largest relative miss (0 when it meets); '' and NaN without a replay."""
    check = plan.simulation
    if check is None:
        return {"simulated_verdict": "", "simulated_worst_miss": math.nan}
    worst = max((m.relative for m in check.misses if m.relative is not None), default=0.0)
    return {"simulated_verdict": check.verdict, "simulated_worst_miss": worst}


def error_row(reason: str, solve_time_s: float = 0.0) -> dict:
    """A scenario that failed to solve: its reason, and no numbers."""
    row = {c: math.nan for c in RESULT_COLUMNS}
    return {**row, "status": "error", "reason": reason, "devices": 0, "devices_by_type": "{}", "baseline_device": "",
            "solve_time_s": solve_time_s, "simulated_verdict": ""}


def _weighted(plan: Plan, field: str) -> float:
    pairs = [(c.rate_rps_served, getattr(c, field)) for c in plan.classes if getattr(c, field) is not None]
    weight = sum(w for w, _ in pairs)
    return sum(w * v for w, v in pairs) / weight if weight > 0 else math.nan


def _inconsistency(plan: Plan) -> str:
    """A served class with no predicted TPOT has no decode pool: the plan cannot be right."""
    for c in plan.classes:
        if plan.status in OK_STATUSES and c.rate_rps_served > 0 and c.tpot_ms is None:
            return f"inconsistent plan: class {c.name} served at {c.rate_rps_served:.1f} rps without a decode pool"
    return ""


def table_row(scenario: Scenario, result: dict) -> dict:
    """One row of the results table: key, hash, ``axis.<name>`` columns, then the results."""
    axes = {f"axis.{name}": value for name, value in scenario.axes.items()}
    return {"scenario": scenario.key, "hash": scenario.hash, **axes, **{c: result.get(c) for c in RESULT_COLUMNS}}


# ---------------------------------------------------------------------------------------- compare
def single_device_labels(scenarios: list[Scenario], axis: str) -> set[str]:
    """Values of ``axis`` whose scenarios allow exactly one device type."""
    return {str(s.axes[axis]) for s in scenarios
            if s.workload.constraints.devices is not None and len(s.workload.constraints.devices) == 1}


def fleet_comparison(rows: list[dict], axis: str, singles: set[str], metric: str) -> list[dict]:
    """Per combination of the other axes: each multi-device value against the best single-device one.

    ``gain`` = value / best single value (inverted for metrics where lower is better).
    """
    column = f"axis.{axis}"
    others = [c for c in (rows[0] if rows else {}) if c.startswith("axis.") and c != column]
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(r[c] for c in others), []).append(r)
    higher = SENSES[metric] == "max"
    out = []
    for group, members in groups.items():
        ok = [r for r in members if r["status"] in OK_STATUSES and _finite(r[metric])]
        single = [r for r in ok if str(r[column]) in singles]
        best = (max if higher else min)(single, key=lambda r: r[metric], default=None)
        for r in members:
            if str(r[column]) in singles:
                continue
            value = r[metric] if r in ok else math.nan
            gain = math.nan
            if best is not None and _finite(value) and best[metric] > 0 and value > 0:
                gain = value / best[metric] if higher else best[metric] / value
            out.append({"group": ", ".join(f"{c[5:]}={label_of(v)}" for c, v in zip(others, group)),
                        axis: r[column], metric: value, "best_single": best[column] if best else "",
                        f"best_single_{metric}": best[metric] if best else math.nan, "gain": gain})
    return out


@dataclass(frozen=True)
class Analysis:
    """What a finished study shows: its frontiers by label, the fleet comparison, single-device labels."""

    frontiers: dict[str, list[dict]]
    comparison: list[dict]
    singles: set[str]


def analyse(spec: StudySpec, scenarios: list[Scenario], rows: list[dict]) -> Analysis:
    """The study's Pareto frontiers and, with ``compare``, each multi-device fleet against the best single one."""
    frontiers = {f.label: frontier_points(rows, f) for f in spec.pareto}
    if spec.compare is None:
        return Analysis(frontiers, [], set())
    singles = single_device_labels(scenarios, spec.compare.axis)
    return Analysis(frontiers, fleet_comparison(rows, spec.compare.axis, singles, spec.compare.metric), singles)
