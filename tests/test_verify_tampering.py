"""The verifier recomputes every pool from the catalog and the cost model: each test edits exactly one quantity
of a real plan (keeping what a careless editor would keep consistent) and names the check that must fail."""

from __future__ import annotations

import pytest

from planner.optimize import PlanOptions, plan_workload
from planner.plan import totals_of
from planner.schema import Plan, Workload
from planner.verify import verify_plan

EXACT = PlanOptions(relative_gap=1e-9, time_limit_s=30, baseline=False)


def _workload(model: str, strategies: list[str], devices: list[str], tpot_ms: float, **extra) -> Workload:
    return Workload.model_validate({
        "model": model, "dtype": "fp8", "kv_dtype": "fp8",
        "classes": [{"name": "chat", "rate_rps": 10, "input_tokens": 1000, "output_tokens": 400,
                     "slo": {"ttft_ms": 1500, "tpot_ms": tpot_ms}}],
        "strategies": strategies, "constraints": {"power_budget_kw": 400, "devices": devices}, **extra,
    })


@pytest.fixture(scope="module")
def spec_plan(catalog) -> Plan:
    spec = {"draft_model": "llama-3.2-1b", "acceptance_rate": 0.8, "draft_tokens": 4}
    return plan_workload(_workload("llama-3.3-70b", ["spec_decode"], ["h200", "cs-3"], 15, spec_decode=spec), catalog, EXACT)


@pytest.fixture(scope="module")
def af_plan(catalog) -> Plan:
    return plan_workload(_workload("qwen3-235b-a22b", ["af_disagg"], ["h200", "b200"], 60), catalog, EXACT)


def _edit(plan: Plan, role: str, **update) -> Plan:
    """``plan`` with its first pool of ``role`` changed by ``update`` (nothing else)."""
    i = next(i for i, p in enumerate(plan.pools) if p.role == role)
    pools = list(plan.pools)
    pools[i] = pools[i].model_copy(update=update)
    return plan.model_copy(update={"pools": tuple(pools)})


def _failed(plan: Plan, catalog) -> set[str]:
    result = verify_plan(plan, catalog)
    return {name for name, ok in result.checks.items() if not ok}


def test_the_untampered_plans_verify(catalog, spec_plan, af_plan):
    for plan in (spec_plan, af_plan):
        assert plan.status == "optimal"
        assert _failed(plan, catalog) == set()
    assert any(p.strategy == "spec_decode" and p.role == "decode" for p in spec_plan.pools)
    assert any(p.partner_role == "ffn" for p in af_plan.pools)


def test_claiming_fewer_devices_with_consistent_totals_is_caught_by_the_recount(catalog, af_plan):
    """Every pool claims half its devices and power, and the totals agree: tp × replicas says otherwise."""
    halved = tuple(p.model_copy(update={"devices_by_type": {d: n // 2 for d, n in p.devices_by_type.items()},
                                        "devices": sum(n // 2 for n in p.devices_by_type.values()),
                                        "power_kw": p.power_kw / 2, "cost_usd_per_hour": p.cost_usd_per_hour / 2})
                   for p in af_plan.pools)
    edited = af_plan.model_copy(update={"pools": halved, "totals": totals_of(list(halved), af_plan.workload.constraints.pue)})
    failed = _failed(edited, catalog)
    assert {"devices", "power", "cost"} <= failed


def test_a_spec_decode_pool_edited_to_a_million_sequences_does_not_fit(catalog, spec_plan):
    assert _failed(_edit(spec_plan, "decode", batch=1_000_000), catalog) >= {"memory"}


def test_a_spec_decode_pool_reporting_half_its_tpot_fails_the_recompute(catalog, spec_plan):
    pool = next(p for p in spec_plan.pools if p.role == "decode")
    assert _failed(_edit(spec_plan, "decode", tpot_ms=pool.tpot_ms / 2), catalog) == {"latency_recomputed"}


def test_an_af_pool_reporting_half_its_tpot_fails_the_recompute(catalog, af_plan):
    pool = next(p for p in af_plan.pools if p.role == "decode")
    assert _failed(_edit(af_plan, "decode", tpot_ms=pool.tpot_ms / 2), catalog) == {"latency_recomputed"}


def test_an_af_pool_with_a_smaller_expert_pool_fails_the_device_recount(catalog, af_plan):
    pool = next(p for p in af_plan.pools if p.role == "decode")
    failed = _failed(_edit(af_plan, "decode", partner_tp=pool.partner_tp * 2), catalog)
    assert "devices" in failed


def test_a_prefill_pool_reporting_a_lower_ttft_fails_the_recompute(catalog, af_plan):
    pool = next(p for p in af_plan.pools if p.role == "prefill")
    assert _failed(_edit(af_plan, "prefill", ttft_ms=pool.ttft_ms * 0.9), catalog) == {"latency_recomputed"}


def test_a_pool_claiming_twice_its_capacity_fails(catalog, spec_plan):
    pool = next(p for p in spec_plan.pools if p.role == "decode")
    assert "latency_recomputed" in _failed(_edit(spec_plan, "decode", capacity_rps=pool.capacity_rps * 2), catalog)


def test_a_pool_reporting_a_ttft_half_again_its_slo_fails_the_slo_and_the_recompute(catalog, af_plan):
    assert _failed(_edit(af_plan, "prefill", ttft_ms=1500 * 1.5), catalog) == {"slo", "latency_recomputed"}


def test_a_class_whose_shares_sum_to_nine_tenths_fails_the_split_by_a_tenth(catalog, spec_plan):
    (chat,) = spec_plan.classes
    shares = {name: 0.9 * share for name, share in chat.strategy_shares.items()}
    edited = spec_plan.model_copy(update={"classes": (chat.model_copy(update={"strategy_shares": shares}),)})
    result = verify_plan(edited, catalog)
    assert {name for name, ok in result.checks.items() if not ok} == {"split"}
    assert result.max_violation == pytest.approx(0.1)
    assert result.messages == (f"class chat: shares sum to {sum(shares.values())}",)


def test_an_inventory_one_device_short_of_the_plan_fails_the_inventory_by_one(catalog, spec_plan):
    device, used = sorted(spec_plan.totals.devices_by_type.items())[0]
    cons = spec_plan.workload.constraints.model_copy(update={"inventory": {device: used - 1}})
    edited = spec_plan.model_copy(update={"workload": spec_plan.workload.model_copy(update={"constraints": cons})})
    result = verify_plan(edited, catalog)
    assert {name for name, ok in result.checks.items() if not ok} == {"inventory"}
    assert result.max_violation == 1.0 and result.messages == (f"{device}: {used} devices > inventory {used - 1}",)


def test_a_plan_that_drops_a_unit_from_its_own_graph_still_owes_its_demand(catalog, spec_plan):
    """The decode pools gone, the totals recounted, and the plan's graph emptied so it names no decode unit: the
    demand is checked against the task graph the workload gives, not the plan's."""
    pools = tuple(p for p in spec_plan.pools if p.role != "decode")
    edited = spec_plan.model_copy(update={"pools": pools, "totals": totals_of(list(pools), spec_plan.workload.constraints.pue),
                                          "graph": {**spec_plan.graph, "nodes": [], "links": []}})
    assert _failed(edited, catalog) == {"demand"}


def test_a_share_on_a_strategy_the_class_has_no_pools_for_fails_the_split(catalog, af_plan):
    """Half the traffic claimed by pd_disagg, which the workload does not allow: nothing could serve it."""
    (chat,) = af_plan.classes
    edited = af_plan.model_copy(update={"classes": (chat.model_copy(update={"strategy_shares": {"af_disagg": 0.5,
                                                                                               "pd_disagg": 0.5}}),)})
    assert _failed(edited, catalog) == {"split"}


@pytest.mark.parametrize(("moved", "failed"), [(5e-7, set()), (1e-4, {"demand"})])
def test_a_share_within_an_engines_tolerance_is_none_and_one_beyond_it_is_owed(catalog, spec_plan, moved, failed):
    """pd_disagg allowed too and ``moved`` of the class's traffic on it, with no pd_disagg pool: 5e-7 of the rate is
    an engine's feasibility tolerance (none to serve), 1e-4 is demand no pool serves."""
    (chat,) = spec_plan.classes
    workload = spec_plan.workload.model_copy(update={"strategies": ("spec_decode", "pd_disagg")})
    shares = {"spec_decode": 1.0 - moved, "pd_disagg": moved}
    edited = spec_plan.model_copy(update={"workload": workload,
                                          "classes": (chat.model_copy(update={"strategy_shares": shares}),)})
    assert _failed(edited, catalog) == failed


def test_a_pool_reporting_less_utilisation_than_its_traffic_gives_fails_the_demand(catalog, spec_plan):
    """The queues are priced at the reported utilisation: one below what served / capacity gives would hide waits."""
    pool = next(p for p in spec_plan.pools if p.role == "prefill")
    edited = _edit(spec_plan, "prefill", utilization=pool.utilization / 2)
    assert "demand" in _failed(edited, catalog)


def test_a_cost_budget_the_plan_spends_exactly_passes_and_one_a_tenth_short_fails_the_cost(catalog, spec_plan):
    paid = spec_plan.totals.cost_usd_per_hour
    for budget, failed in ((paid, set()), (0.9 * paid, {"cost"})):
        cons = spec_plan.workload.constraints.model_copy(update={"cost_budget_usd_per_hour": budget})
        edited = spec_plan.model_copy(update={"workload": spec_plan.workload.model_copy(update={"constraints": cons})})
        assert _failed(edited, catalog) == failed, budget
