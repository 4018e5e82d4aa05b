"""End-to-end planning on the real catalog: invariants every plan must keep, and diagnoses."""

from __future__ import annotations

import pytest

from planner.optimize import PlanOptions, plan_workload
from planner.schema import Workload

EXACT = PlanOptions(relative_gap=1e-9, time_limit_s=30, baseline=False)


def chat(power_kw=300.0, tpot_ms=50.0, ttft_ms=1000.0, devices=("h100-sxm", "h200", "mi300x", "trn2"), **extra) -> Workload:
    return Workload.model_validate({
        "model": "llama-3.1-8b", "dtype": "fp8", "kv_dtype": "fp8",
        "classes": [{"name": "chat", "rate_rps": 20, "input_tokens": 1000, "output_tokens": 200,
                     "slo": {"ttft_ms": ttft_ms, "tpot_ms": tpot_ms}},
                    {"name": "docs", "rate_rps": 5, "input_tokens": 6000, "output_tokens": 100,
                     "slo": {"ttft_ms": 3000, "tpot_ms": 80}}],
        "strategies": ["aggregated", "pd_disagg"],
        "constraints": {"power_budget_kw": power_kw, "pue": 1.2, "devices": list(devices)},
        **extra,
    })


@pytest.fixture(scope="module")
def base_plan(catalog):
    return plan_workload(chat(), catalog, EXACT)


def test_plan_is_optimal_verified_and_within_budget(base_plan):
    plan = base_plan
    assert plan.status == "optimal"
    assert plan.verification.ok, plan.verification.messages
    assert plan.totals.power_kw <= 300.0 + 1e-6
    assert plan.goodput_scale > 1.0
    for c in plan.classes:
        assert sum(c.strategy_shares.values()) == pytest.approx(1.0)
        assert c.rate_rps_served == pytest.approx(c.rate_rps * plan.goodput_scale)
    assert {p.role for p in plan.pools} <= {"aggregated", "prefill", "decode"}
    assert plan.graph["nodes"] and plan.graph["links"]


def test_more_power_never_lowers_goodput(catalog, base_plan):
    more = plan_workload(chat(power_kw=450.0), catalog, EXACT)
    assert more.goodput_scale >= base_plan.goodput_scale * (1 - 1e-8)
    assert more.verification.ok


def test_looser_slo_never_lowers_goodput(catalog, base_plan):
    loose = plan_workload(chat(tpot_ms=80.0, ttft_ms=2000.0), catalog, EXACT)
    assert loose.goodput_scale >= base_plan.goodput_scale * (1 - 1e-8)
    assert loose.verification.ok


def test_heterogeneous_never_worse_than_best_homogeneous(catalog):
    plan = plan_workload(chat(), catalog, PlanOptions(relative_gap=1e-9, time_limit_s=30, baseline_gap=1e-9))
    assert plan.baseline.device in {"h100-sxm", "h200", "mi300x", "trn2"}
    assert plan.goodput_scale >= plan.baseline.goodput_scale * (1 - 1e-8)
    assert plan.gain >= 1.0 - 1e-8  # equal within the solves' 1e-9 gaps


@pytest.mark.parametrize("objective", ["min_cost", "min_power"])
def test_cost_and_power_objectives_serve_the_workload_exactly(catalog, objective):
    plan = plan_workload(chat(objective=objective), catalog, EXACT)
    assert plan.status == "optimal" and plan.goodput_scale == pytest.approx(1.0)
    assert plan.verification.ok


def test_min_power_uses_no_more_power_than_min_cost(catalog):
    cheap = plan_workload(chat(objective="min_cost"), catalog, EXACT)
    frugal = plan_workload(chat(objective="min_power"), catalog, EXACT)
    assert frugal.totals.power_kw <= cheap.totals.power_kw + 1e-6
    assert cheap.totals.cost_usd_per_hour <= frugal.totals.cost_usd_per_hour + 1e-6


def test_impossible_tpot_is_diagnosed(catalog):
    plan = plan_workload(chat(tpot_ms=0.05), catalog, EXACT)
    assert plan.status == "infeasible"
    assert plan.diagnosis.reason == "slo_unreachable"
    shortfall = next(s for s in plan.diagnosis.slo_shortfalls if s.class_name == "chat")
    assert shortfall.slo == "tpot_ms" and shortfall.best_ms > 0.05
    assert "chat" in plan.diagnosis.message and "tpot_ms" in plan.diagnosis.message


def test_tiny_power_budget_gives_the_least_budget_that_works(catalog):
    plan = plan_workload(chat(power_kw=1.0), catalog, EXACT)
    assert plan.status == "infeasible"
    assert plan.diagnosis.reason == "budget"
    least = plan.diagnosis.least_power_budget_kw
    assert least > 1.0
    # the diagnosis is actionable: at that budget the workload is served at scale ≥ 1
    enough = plan_workload(chat(power_kw=least * (1 + 1e-6), objective="min_power"), catalog, EXACT)
    assert enough.status == "optimal"


def test_pulp_backend_gives_the_same_plan_value(catalog, base_plan):
    other = plan_workload(chat(), catalog, PlanOptions(solver="pulp", relative_gap=1e-9, time_limit_s=30, baseline=False))
    assert other.goodput_scale == pytest.approx(base_plan.goodput_scale, rel=1e-6)
    assert other.totals.power_kw == pytest.approx(base_plan.totals.power_kw, rel=1e-6)


def test_speculative_and_af_strategies_plan_and_verify(catalog):
    spec = Workload.model_validate({
        "model": "llama-3.3-70b", "dtype": "fp8", "kv_dtype": "fp8",
        "classes": [{"name": "fast", "rate_rps": 10, "input_tokens": 1000, "output_tokens": 400,
                     "slo": {"ttft_ms": 1500, "tpot_ms": 15}}],
        "strategies": ["pd_disagg", "spec_decode"],
        "spec_decode": {"draft_model": "llama-3.2-1b", "acceptance_rate": 0.8, "draft_tokens": 4},
        "constraints": {"power_budget_kw": 400, "devices": ["h200", "cs-3"]},
    })
    plan = plan_workload(spec, catalog, EXACT)
    assert plan.status == "optimal" and plan.verification.ok
    moe = Workload.model_validate({
        "model": "qwen3-235b-a22b", "dtype": "fp8", "kv_dtype": "fp8",
        "classes": [{"name": "chat", "rate_rps": 10, "input_tokens": 1000, "output_tokens": 300,
                     "slo": {"ttft_ms": 2000, "tpot_ms": 60}}],
        "strategies": ["af_disagg"],
        "constraints": {"power_budget_kw": 400, "devices": ["h200", "b200"]},
    })
    plan = plan_workload(moe, catalog, EXACT)
    assert plan.status == "optimal" and plan.verification.ok
    assert any(p.partner_role == "ffn" for p in plan.pools)


def test_verifier_catches_a_tampered_plan(catalog, base_plan):
    from planner.verify import verify_plan

    pool = base_plan.pools[0]
    bigger = pool.model_copy(update={"devices_by_type": {k: v * 100 for k, v in pool.devices_by_type.items()}})
    tampered = base_plan.model_copy(update={"pools": (bigger,) + base_plan.pools[1:]})
    result = verify_plan(tampered, catalog)
    assert not result.ok and not result.checks["devices"]  # the shape (tp × replicas) says otherwise
    slow = pool.model_copy(update={"tpot_ms": 10_000.0, "ttft_ms": 10_000.0})
    result = verify_plan(base_plan.model_copy(update={"pools": (slow,) + base_plan.pools[1:]}), catalog)
    assert not result.checks["slo"]


def test_verifier_catches_missing_pools_fewer_replicas_and_overload(catalog, base_plan):
    from planner.verify import verify_plan

    assert verify_plan(base_plan, catalog).ok
    first = base_plan.pools[0]
    unit = (first.class_name, first.strategy, first.role)
    missing = tuple(p for p in base_plan.pools if (p.class_name, p.strategy, p.role) != unit)
    assert not verify_plan(base_plan.model_copy(update={"pools": missing}), catalog).checks["demand"]
    halved = tuple(p.model_copy(update={"replicas": max(1, p.replicas // 2)}) if p.replicas > 1 else p for p in base_plan.pools)
    if halved != base_plan.pools:
        assert not verify_plan(base_plan.model_copy(update={"pools": halved}), catalog).ok
    overloaded = tuple(p.model_copy(update={"served_rps": p.served_rps * 10}) for p in base_plan.pools)
    assert not verify_plan(base_plan.model_copy(update={"pools": overloaded}), catalog).checks["demand"]


def test_predicted_ttft_is_at_the_planned_utilisation(base_plan):
    for pool in base_plan.pools:
        if pool.ttft_ms is not None:
            assert pool.utilization <= pool.utilization_cap + 1e-9
            assert pool.ttft_ms <= 3000 + 1e-6


def test_duplicate_or_empty_device_lists_are_rejected():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="more than once"):
        chat(devices=("h200", "h200"))
    with pytest.raises(ValidationError):
        chat(devices=())


def test_unknown_inventory_id_is_an_error(catalog):
    from planner.catalog import UnknownId

    workload = chat().model_copy(update={"constraints": chat().constraints.model_copy(update={"inventory": {"nosuch": 4}})})
    with pytest.raises(UnknownId, match="nosuch"):
        plan_workload(workload, catalog, EXACT)


def test_an_slo_no_device_reaches_is_answered_before_any_engine_runs(catalog):
    plan = plan_workload(chat(ttft_ms=1.0), catalog, PlanOptions(baseline=False))
    assert plan.status == "infeasible" and plan.diagnosis.reason == "slo_unreachable"
    assert (plan.solver.backend, plan.solver.engine, plan.solver.engine_version) == ("ortools", "-", "")  # none ran
    assert plan.solver.gap is None and plan.pools == ()
