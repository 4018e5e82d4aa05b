"""Strict validation: wrong values are rejected with the field named."""

import pytest
from pydantic import ValidationError

from planner.schema import EstimateRequest, RequestClass, Workload


def _class(**over):
    base = dict(name="chat", rate_rps=10, input_tokens=1000, output_tokens=200, slo={"ttft_ms": 500, "tpot_ms": 50})
    return {**base, **over}


def test_negative_rate_names_the_field():
    with pytest.raises(ValidationError) as info:
        RequestClass(**_class(rate_rps=-1))
    assert info.value.errors()[0]["loc"] == ("rate_rps",)


def test_unknown_dtype_rejected():
    with pytest.raises(ValidationError) as info:
        EstimateRequest(model="m", device="d", dtype="fp7")
    assert info.value.errors()[0]["loc"] == ("dtype",)


def test_unknown_field_rejected():
    with pytest.raises(ValidationError):
        RequestClass(**_class(colour="red"))


def test_workload_needs_spec_settings_for_spec_strategy():
    with pytest.raises(ValidationError, match="spec_decode"):
        Workload(model="m", classes=[_class()], strategies=["spec_decode"], constraints={"power_budget_kw": 100})


def test_duplicate_class_names_rejected():
    with pytest.raises(ValidationError, match="duplicate"):
        Workload(model="m", classes=[_class(), _class()], constraints={"power_budget_kw": 100})


def test_prefix_cache_hit_must_be_below_one():
    with pytest.raises(ValidationError):
        RequestClass(**_class(prefix_cache_hit=1.0))
