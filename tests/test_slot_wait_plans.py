"""Plans price the wait for a decode slot: a decode-side pool's TPOT is its step plus that wait per output token
(``Pool.slot_wait_ms``), its utilisation is capped where the two meet the TPOT SLO, verify recomputes both, and the
replay of such a plan meets the SLOs it claims."""

from __future__ import annotations

import pytest

from planner.catalog import load_catalog
from planner.optimize import PlanOptions, plan_workload
from planner.perf.model import RooflineModel
from planner.schema import Workload
from planner.simulate import SimulationOptions, simulate_plan
from planner.verify import verify_plan


def three_apps() -> Workload:
    """Three apps on L4s with speculative decoding, TPOT SLOs 20, 22 and 25 ms, 2.4 req/s each: small batches near
    their TPOT SLOs, where a replica's few slots queue. Planned at a decode utilisation of 0.9 whatever the batch, a
    batch-12 pool of ``c`` claimed TPOT 24.6 ms and its replay measured 29.1 ms (class ``c`` 26.4 ms, over its 25)."""
    return Workload.model_validate({
        "model": "llama-3.1-8b", "dtype": "bf16", "strategies": ["spec_decode"], "shared_pools": True,
        "spec_decode": {"draft_model": "llama-3.2-1b", "acceptance_rate": 0.7},
        "classes": [{"name": name, "rate_rps": 2.4, "input_tokens": 1024, "output_tokens": 256,
                     "slo": {"ttft_ms": 2000, "tpot_ms": tpot}} for name, tpot in (("a", 20), ("b", 22), ("c", 25))],
        "constraints": {"power_budget_kw": 100, "devices": ["l4"]}, "objective": "min_power",
    })


@pytest.fixture(scope="module")
def plans():
    catalog = load_catalog()
    return catalog, {solver: plan_workload(three_apps(), catalog, PlanOptions(solver=solver, baseline=False))
                     for solver in ("ortools", "pulp")}


@pytest.mark.parametrize("solver", ["ortools", "pulp"])
def test_the_replay_meets_the_tpot_the_plan_claims_with_its_slot_waits(plans, solver):
    catalog, by_solver = plans
    plan = by_solver[solver]
    assert plan.status == "optimal" and plan.verification.ok, plan.verification.messages
    decode = [p for p in plan.pools if p.role == "decode"]
    assert decode and all(p.slot_wait_ms > 0 for p in decode)
    slo = {rc.name: rc.slo.tpot_ms for rc in plan.workload.classes}
    for p in decode:
        for name in p.serves or {p.class_name: 0}:
            assert p.tpot_ms + p.slot_wait_ms <= slo[name] * (1 + 1e-6)
    for c in plan.classes:  # what a request sees, weighted over the pools that serve it
        assert c.tpot_ms <= slo[c.name] * (1 + 1e-6)
    sim = simulate_plan(plan, RooflineModel(catalog), SimulationOptions(duration_s=600.0, seed=1))
    assert sim.verdict == "meets", sim.misses
    for c in sim.classes:
        assert c.simulated_tpot_ms <= c.slo_tpot_ms


def decode_pool(plan):
    return next(p for p in plan.pools if p.role == "decode")


def tampered(plan, **update):
    pools = tuple(p.model_copy(update=update) if p is decode_pool(plan) else p for p in plan.pools)
    return plan.model_copy(update={"pools": pools})


def test_verify_recomputes_the_slot_wait(plans):
    catalog, by_solver = plans
    plan = by_solver["ortools"]
    assert verify_plan(plan, catalog).ok
    pool = decode_pool(plan)
    result = verify_plan(tampered(plan, slot_wait_ms=pool.slot_wait_ms / 2), catalog)
    assert not result.checks["latency_recomputed"], result.messages
    assert any("slot wait" in m for m in result.messages)
    assert pool.slot_waits_ms is not None and set(pool.slot_waits_ms) == set(pool.serves)
    one = {**pool.slot_waits_ms, "c": pool.slot_waits_ms["c"] / 2}  # one class's wait, the largest kept
    result = verify_plan(tampered(plan, slot_waits_ms=one), catalog)
    assert not result.checks["latency_recomputed"], result.messages


def test_verify_refuses_a_utilisation_beyond_the_slot_cap(plans):
    """The shared pool (its cap below 0.9: its 20 ms tier leaves little room over its step) carrying more of each
    class, up to a utilisation of 0.9, its cap raised to match and its slot wait reported honestly there: the demand
    check passes (the pool is within the cap it claims), the re-check's SLO at step + wait does not."""
    from planner.strategies.base import slot_waits

    catalog, by_solver = plans
    plan = by_solver["ortools"]
    pool = decode_pool(plan)
    assert pool.utilization_cap < 0.89
    more = 0.9 / pool.utilization
    members = [rc for rc in plan.workload.classes if rc.name in pool.serves]
    honest = {k: 1000 * v for k, v in slot_waits(pool.tpot_ms / 1000, pool.batch, 0.9, members).items()}
    update = {"utilization": 0.9, "utilization_cap": 0.9, "slot_wait_ms": max(honest.values()), "slot_waits_ms": honest,
              "served_rps": pool.served_rps * more, "serves": {k: v * more for k, v in pool.serves.items()}}
    result = verify_plan(tampered(plan, **update), catalog)
    assert result.checks["demand"], result.messages
    assert not result.checks["latency_recomputed"] and not result.checks["slo"], result.messages
    # the cap alone raised, the pool where it was: a cap at which its SLO would fail
    result = verify_plan(tampered(plan, utilization_cap=0.9), catalog)
    assert not result.checks["latency_recomputed"] and result.checks["slo"], result.messages
