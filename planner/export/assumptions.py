"""Every catalog number a plan rests on, with its source: the rows of the Assumptions sheet."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from planner.catalog import Catalog
from planner.schema import Device, ModelArch, Plan

#: catalog paths whose Device field has another name (the loader flattens ``node`` and ``efficiency``).
FLATTENED = {"node.devices_per_node": "devices_per_node", "node.overhead_w": "node_overhead_w",
             "node.rack_units": "rack_units"}

#: unit by field-name suffix, longest first (DESIGN.md: the unit is in the name).
UNITS = (
    ("_usd_per_hour", "$/h"), ("_tflops", "TFLOP/s"), ("_tb_s", "TB/s"), ("_gb_s", "GB/s"), ("_gb", "GB"),
    ("_usd", "$"), ("_us", "µs"), ("_w", "W"), ("_b", "billion"), ("_tokens", "tokens"), ("rack_units", "U"),
    ("mfu", "fraction"), ("mbu", "fraction"), ("domain_size", "devices"), ("devices_per_node", "devices"),
)


@dataclass(frozen=True)
class Assumption:
    """One sourced number: what it belongs to, the field, its value and unit, where it comes from."""

    item: str
    field: str
    value: float
    unit: str
    source: str
    estimate: bool


def plan_assumptions(plan: Plan, catalog: Catalog, device_ids: list[str]) -> list[Assumption]:
    """The catalog numbers of every device the plan uses, then of its model (and draft model)."""
    rows = [row for device_id in device_ids for row in device_assumptions(catalog.device(device_id))]
    model_ids = [plan.workload.model]
    if plan.workload.spec_decode is not None and "spec_decode" in plan.workload.strategies:
        model_ids.append(plan.workload.spec_decode.draft_model)
    for model_id in dict.fromkeys(model_ids):
        rows.extend(model_assumptions(catalog.model(model_id)))
    return rows


def device_assumptions(device: Device) -> list[Assumption]:
    """One row per sourced number of a device, in catalog order."""
    dump = device.model_dump(mode="json")
    return [
        Assumption(item=device.id, field=path, value=_device_value(dump, path), unit=unit_of(path),
                   source=prov.source, estimate=prov.estimate)
        for path, prov in device.provenance.items()
    ]


def model_assumptions(model: ModelArch) -> list[Assumption]:
    """One row per number of a model's configuration; the model card is the source of all of them."""
    return [
        Assumption(item=model.id, field=path, value=value, unit=unit_of(path), source=model.source, estimate=False)
        for path, value in _numbers(model.model_dump(mode="json"), "")
    ]


def unit_of(path: str) -> str:
    """The unit a field name carries (``tdp_w`` is W); a count when the name has none."""
    for segment in reversed([re.sub(r"\[\d+\]$", "", part) for part in path.split(".")]):
        for suffix, unit in UNITS:
            if segment.endswith(suffix):
                return unit
    return "count"


def _device_value(dump: dict, path: str) -> Any:
    if path in FLATTENED:
        return dump[FLATTENED[path]]
    if path.startswith("efficiency."):
        return dump[path.split(".", 1)[1]]
    node: Any = dump
    for part in path.split("."):
        match = re.fullmatch(r"(\w+)\[(\d+)\]", part)
        node = node[match.group(1)][int(match.group(2))] if match else node[part]
    return node


def _numbers(node: Any, path: str):
    """(dotted path, number) for every number in a nested dump, booleans excluded."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _numbers(value, f"{path}.{key}" if path else key)
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        yield path, node
