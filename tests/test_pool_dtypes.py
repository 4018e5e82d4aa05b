"""Weights dtype per pool (``dtypes: [fp8, bf16]``): each allowed dtype is its own route through each strategy."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from planner.optimize import PlanOptions, plan_workload
from planner.schema import Workload, route_of, strategy_of
from planner.verify import verify_plan


def chat(**extra) -> Workload:
    return Workload.model_validate({
        "model": "llama-3.3-70b", "strategies": ["pd_disagg", "aggregated"],
        "classes": [{"name": "chat", "rate_rps": 20, "input_tokens": 1500, "output_tokens": 300,
                     "slo": {"ttft_ms": 1000, "tpot_ms": 50}}],
        "constraints": {"power_budget_kw": 150, "devices": ["h100-sxm", "a100-80gb"]}, **extra,
    })


def test_dtypes_default_dtype_to_their_first_and_must_hold_it():
    assert chat(dtypes=["fp8", "bf16"]).dtype == "fp8"
    assert chat(dtypes=["fp8", "bf16"]).allowed_dtypes == ("fp8", "bf16")
    assert chat().allowed_dtypes == ("bf16",)
    with pytest.raises(ValidationError, match=r"dtypes: \['fp8', 'bf16'\] must be distinct and include dtype \(fp4\)"):
        chat(dtype="fp4", dtypes=["fp8", "bf16"])
    with pytest.raises(ValidationError, match="must be distinct"):
        chat(dtypes=["fp8", "fp8"])


def test_routes_name_a_strategy_at_a_dtype():
    assert route_of("pd_disagg", None) == "pd_disagg" and route_of("pd_disagg", "fp8") == "pd_disagg@fp8"
    assert strategy_of("pd_disagg@fp8") == strategy_of("pd_disagg") == "pd_disagg"


@pytest.fixture(scope="module")
def plans(catalog_module):
    options = PlanOptions(baseline=False)
    return {name: plan_workload(w, catalog_module, options)
            for name, w in (("both", chat(dtypes=["fp8", "bf16"])), ("fp8", chat(dtype="fp8")), ("bf16", chat(dtype="bf16")))}


@pytest.fixture(scope="module")
def catalog_module():
    from planner.catalog import load_catalog
    return load_catalog()


def test_a_plan_choosing_dtypes_is_at_least_as_good_as_either_alone(plans):
    both, fp8, bf16 = plans["both"], plans["fp8"], plans["bf16"]
    assert both.status == fp8.status == bf16.status == "optimal"
    assert both.verification.ok, both.verification.messages
    # fp8 weights halve the bytes every decode step reads (and every device runs them, weight-only where it lacks fp8
    # matmuls), so here fp8 serves more than bf16 and the choice lands on fp8 everywhere
    assert fp8.goodput_scale > 1.2 * bf16.goodput_scale
    assert both.goodput_scale == pytest.approx(max(fp8.goodput_scale, bf16.goodput_scale), rel=2e-4)
    assert {p.dtype for p in both.pools} == {"fp8"}
    assert set(both.classes[0].strategy_shares) <= {"pd_disagg@fp8", "aggregated@fp8"}


def test_each_route_keeps_a_requests_prefill_and_decode_at_one_dtype(plans):
    both = plans["both"]
    for route, share in both.classes[0].strategy_shares.items():
        pools = [p for p in both.pools if p.route == route]
        assert pools and all(p.dtype == route.split("@")[1] for p in pools)
        if strategy_of(route) == "pd_disagg" and share > 0:
            assert {p.role for p in pools} == {"prefill", "decode"}


@pytest.mark.parametrize("dtype, check", [
    ("bf16", "demand"),       # the pool moves to the other route: its own route is short of what it serves
    ("int4", "latency_recomputed"),  # a dtype the workload does not allow
])
def test_verify_recomputes_each_pool_at_its_own_dtype(plans, catalog_module, dtype, check):
    both = plans["both"]
    pool = max(both.pools, key=lambda p: p.devices)
    tampered = both.model_copy(update={"pools": tuple(p.model_copy(update={"dtype": dtype}) if p is pool else p
                                                      for p in both.pools)})
    result = verify_plan(tampered, catalog_module)
    assert not result.checks[check], result.messages


def test_a_single_dtype_plan_has_no_pool_dtypes(plans):
    assert all(p.dtype is None for p in plans["fp8"].pools)
    assert all("@" not in route for route in plans["fp8"].classes[0].strategy_shares)


def test_the_workbook_says_the_pools_choose_their_dtype(plans, catalog_module, tmp_path):
    import openpyxl

    from planner.export.workbook import write_plan_workbook

    path = tmp_path / "plan.xlsx"
    write_plan_workbook(plans["both"], catalog_module, path)
    summary = openpyxl.load_workbook(path)["Summary"]
    model = next(row[1] for row in summary.iter_rows(values_only=True) if row[0] == "Model")
    assert model == "llama-3.3-70b (weights per pool: fp8, bf16; KV cache each dtype’s default)"
    pools = openpyxl.load_workbook(path)["Pools"]
    routes = {row[1] for row in pools.iter_rows(min_row=2, values_only=True) if row[2] in ("prefill", "decode", "aggregated")}
    assert routes and routes <= {"pd_disagg@fp8", "aggregated@fp8"}


def test_an_unreachable_slo_is_diagnosed_at_the_fastest_dtype_allowed(catalog_module):
    """The best TPOT a diagnosis reports is the best over every allowed dtype: with bf16 and fp8 allowed, the fp8
    figure (half the weight bytes a batch-1 step reads), not bf16's."""
    from planner.diagnose import slo_shortfalls

    def best_tpot(workload):
        tight = workload.model_copy(update={"classes": (workload.classes[0].model_copy(
            update={"slo": workload.classes[0].slo.model_copy(update={"tpot_ms": 0.1})}),)})
        (shortfall,) = [s for s in slo_shortfalls(tight, catalog_module, ["chat"]) if s.slo == "tpot_ms"]
        return shortfall.best_ms

    both, fp8, bf16 = best_tpot(chat(dtypes=["bf16", "fp8"])), best_tpot(chat(dtype="fp8")), best_tpot(chat(dtype="bf16"))
    assert both == pytest.approx(fp8) and fp8 < bf16
