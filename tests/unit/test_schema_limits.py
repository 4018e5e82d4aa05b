"""Every number a workload carries is finite and inside its documented range; limits that hold answer right."""

from __future__ import annotations

import copy
import math

import pytest
from pydantic import ValidationError

from planner.candidates import StrategyError
from planner.messages import describe_errors
from planner.optimize import PlanOptions, plan_workload
from planner.schema import (
    MAX_CLASSES, MAX_COST_BUDGET_USD_PER_HOUR, MAX_DEVICES, MAX_INVENTORY, MAX_POWER_BUDGET_KW, MAX_RATE_RPS,
    MAX_SLO_MS, MIN_RATE_RPS, Workload,
)

BASE = {
    "model": "llama-3.3-70b", "dtype": "fp8", "kv_dtype": "fp8",
    "classes": [{"name": "chat", "rate_rps": 400, "input_tokens": 1500, "output_tokens": 300,
                 "slo": {"ttft_ms": 1000, "tpot_ms": 50}}],
    "strategies": ["aggregated"],
    "constraints": {"power_budget_kw": 500, "devices": ["h100-sxm"]},
}


def with_value(path: str, value):
    doc = copy.deepcopy(BASE)
    node = doc
    keys = path.split(".")
    for key in keys[:-1]:
        node = node[int(key)] if key.isdigit() else node[key]
    node[keys[-1]] = value
    return doc


def error_fields(doc) -> list[str]:
    with pytest.raises(ValidationError) as info:
        Workload.model_validate(doc)
    return [".".join(map(str, e["loc"])) for e in info.value.errors()]


FIELDS = {
    "classes.0.rate_rps": (MIN_RATE_RPS, MAX_RATE_RPS),
    "classes.0.slo.ttft_ms": (None, MAX_SLO_MS),
    "classes.0.slo.tpot_ms": (None, MAX_SLO_MS),
    "constraints.power_budget_kw": (None, MAX_POWER_BUDGET_KW),
    "constraints.cost_budget_usd_per_hour": (None, MAX_COST_BUDGET_USD_PER_HOUR),
    "constraints.pue": (1.0, 3.0),
}


@pytest.mark.parametrize("path", FIELDS)
@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, 1e308])
def test_infinite_nan_and_huge_numbers_are_rejected_naming_the_field(path, value):
    assert path in error_fields(with_value(path, value))


@pytest.mark.parametrize("path", FIELDS)
def test_each_limit_is_inclusive_and_the_next_value_is_not(path):
    low, high = FIELDS[path]
    Workload.model_validate(with_value(path, high))
    assert path in error_fields(with_value(path, high * 1.000001))
    if low is not None:
        Workload.model_validate(with_value(path, low))
        assert path in error_fields(with_value(path, low * 0.999999))


def test_list_limits():
    classes = [{**BASE["classes"][0], "name": f"c{i}"} for i in range(MAX_CLASSES + 1)]
    assert "classes" in error_fields({**BASE, "classes": classes})
    devices = [f"d{i}" for i in range(MAX_DEVICES + 1)]
    assert "constraints.devices" in error_fields(with_value("constraints.devices", devices))
    assert "constraints.inventory" in error_fields(with_value("constraints.inventory", {d: 1 for d in devices}))
    assert "constraints.inventory.h100-sxm.count" in error_fields(
        with_value("constraints.inventory", {"h100-sxm": MAX_INVENTORY + 1}))


def test_error_lines_echo_scalars_only_and_no_spurious_too_short():
    doc = with_value("classes.0.slo", {"ttft_ms": math.inf, "tpot_ms": "x" * 10_000})
    with pytest.raises(ValidationError) as info:
        Workload.model_validate(doc)
    line = describe_errors(info.value)
    assert line.startswith("classes.0.slo.ttft_ms: Input should be a finite number (got inf)")
    assert "classes.0.slo.tpot_ms" in line and "more characters" in line and len(line) < 700
    assert "at least 1 item" not in line and "'rate_rps'" not in line  # the whole classes input is not echoed


def test_a_huge_but_finite_power_budget_gets_the_right_diagnosis(catalog):
    """At the largest power budget allowed, what binds is the inventory, and the diagnosis says so."""
    doc = with_value("constraints.power_budget_kw", MAX_POWER_BUDGET_KW)
    doc["constraints"]["inventory"] = {"h100-sxm": 8}
    doc["objective"] = "min_cost"
    plan = plan_workload(Workload.model_validate(doc), catalog, PlanOptions(baseline=False, time_limit_s=20))
    assert plan.status == "infeasible" and plan.diagnosis.reason == "budget"
    assert set(plan.diagnosis.relaxations) == {"inventory_h100-sxm"}
    assert plan.diagnosis.least_power_budget_kw is None and "power budget" not in plan.diagnosis.message
    assert plan.diagnosis.relaxations["inventory_h100-sxm"] > 8


def test_af_disagg_on_a_dense_model_is_bad_input(catalog):
    workload = Workload.model_validate({**BASE, "strategies": ["aggregated", "af_disagg"]})
    with pytest.raises(StrategyError, match=r"strategies: af_disagg needs an MoE model \(llama-3.3-70b is dense\)"):
        plan_workload(workload, catalog, PlanOptions(baseline=False))
