"""A constraint that makes a plan procurable: at most N device types in the fleet."""

from __future__ import annotations

import pytest

from planner.optimize import PlanOptions, plan_workload
from planner.schema import Workload
from planner.verify import verify_plan

EXACT = PlanOptions(relative_gap=1e-9, time_limit_s=30)


def chat(**constraints) -> Workload:
    return Workload.model_validate({
        "model": "llama-3.1-8b", "dtype": "fp8", "kv_dtype": "fp8",
        "classes": [{"name": "chat", "rate_rps": 20, "input_tokens": 1000, "output_tokens": 200,
                     "slo": {"ttft_ms": 1000, "tpot_ms": 50}},
                    {"name": "docs", "rate_rps": 5, "input_tokens": 6000, "output_tokens": 100,
                     "slo": {"ttft_ms": 3000, "tpot_ms": 80}}],
        # pd_disagg alone: its prefill and decode pools take different devices (aggregated H200s alone would win)
        "strategies": ["pd_disagg"],
        "constraints": {"power_budget_kw": 300, "pue": 1.2, "devices": ["h100-sxm", "h200", "mi300x", "trn2"],
                        **constraints},
    })


@pytest.fixture(scope="module")
def free(catalog):
    return plan_workload(chat(), catalog, EXACT)


def test_the_unconstrained_plan_mixes_device_types(free):
    assert free.status == "optimal" and len(free.totals.devices_by_type) >= 2


def test_one_device_type_is_the_best_homogeneous_fleet(catalog, free):
    """With max_device_types 1 the best plan is known: the best single-device-type fleet."""
    one = plan_workload(chat(max_device_types=1), catalog, EXACT)
    assert one.status == "optimal" and one.verification.ok
    assert len(one.totals.devices_by_type) == 1
    assert one.goodput_scale == pytest.approx(free.baseline.goodput_scale, rel=1e-6)
    assert next(iter(one.totals.devices_by_type)) == free.baseline.device
    assert one.goodput_scale <= free.goodput_scale * (1 + 1e-9)


def test_the_verifier_recounts_device_types(catalog, free):
    limited = free.model_copy(update={"workload": chat(max_device_types=1)})
    assert not verify_plan(limited, catalog).checks["procurement"]
    assert verify_plan(free, catalog).checks["procurement"]
