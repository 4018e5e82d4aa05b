"""Shared pools with partners: speculative-decoding verify+draft replicas and attention/expert groups that serve
several classes (``shared_pools: true``)."""

from __future__ import annotations

import pytest

from planner.catalog import load_catalog
from planner.optimize import PlanOptions, plan_workload, price_workload
from planner.perf.model import RooflineModel
from planner.plan import shared_pool
from planner.schema import Workload
from planner.strategies import spec_decode
from planner.verify import checking_at, verify_plan


def two_apps(shared: bool, tpots=(40, 50), devices=("h100-sxm",)) -> Workload:
    """Two classes alike but for their TPOT SLOs, 3 req/s each, Llama-3.1-8B verified with a Llama-3.2-1B draft."""
    return Workload.model_validate({
        "model": "llama-3.1-8b", "dtype": "bf16", "strategies": ["spec_decode"], "shared_pools": shared,
        "spec_decode": {"draft_model": "llama-3.2-1b", "acceptance_rate": 0.7},
        "classes": [{"name": name, "rate_rps": 3, "input_tokens": 1024, "output_tokens": 256,
                     "slo": {"ttft_ms": 2000, "tpot_ms": tpot}} for name, tpot in zip("ab", tpots)],
        "constraints": {"power_budget_kw": 100, "devices": list(devices)}, "objective": "min_power",
    })


@pytest.mark.parametrize("solver", ["ortools", "pulp"])
def test_two_small_classes_share_one_verify_draft_replica(catalog, solver):
    """Each class alone uses a tenth of a replica of each role: per-class pools need 4 H100s, shared pools 2."""
    own = plan_workload(two_apps(False), catalog, PlanOptions(solver=solver, baseline=False))
    shared = plan_workload(two_apps(True), catalog, PlanOptions(solver=solver, baseline=False))
    assert own.status == shared.status == "optimal"
    assert own.totals.devices_by_type == {"h100-sxm": 4} and shared.totals.devices_by_type == {"h100-sxm": 2}
    assert shared.totals.power_kw == pytest.approx(own.totals.power_kw / 2)
    assert shared.verification.ok, shared.verification.messages
    decode = next(p for p in shared.pools if p.role == "decode")
    assert decode.strategy == "spec_decode" and decode.class_name == "a"  # the tighter TPOT bounds the mix
    assert decode.serves == pytest.approx({"a": 3.0, "b": 3.0})
    assert decode.draft_tokens == next(p for p in own.pools if p.role == "decode").draft_tokens  # one k for the mix
    # both classes' sequences round alike (same context): y = Σ λ_k τ osl / b = 6 · τ · 256 / b per replica
    assert decode.utilization == pytest.approx(6 * decode.tpot_ms / 1000 * 256 / decode.batch)
    assert decode.tpot_ms <= 40


@pytest.fixture(scope="module")
def shared_plan():
    catalog = load_catalog()
    return catalog, plan_workload(two_apps(True), catalog, PlanOptions(baseline=False))


@pytest.mark.parametrize("update, check", [
    ({"tpot_ms": 10.0}, "latency_recomputed"),                  # a TPOT the rounds do not reach
    ({"draft_tokens": 4}, "latency_recomputed"),                # another draft length rounds at another TPOT
    ({"draft_tokens": None}, "latency_recomputed"),             # no draft length to recompute with
    ({"serves": {"a": 3.0, "b": 9.0}}, "latency_recomputed"),  # more of b than its utilisation says
    ({"batch": 100_000}, "memory"),                             # 100,000 sequences' KV on one H100
])
def test_verify_recomputes_a_shared_verify_draft_pool(shared_plan, update, check):
    catalog, plan = shared_plan
    assert verify_plan(plan, catalog).ok
    pools = tuple(p.model_copy(update=update) if p.role == "decode" else p for p in plan.pools)
    result = verify_plan(plan.model_copy(update={"pools": pools}), catalog)
    assert not result.checks[check], result.messages


def test_a_shared_group_with_a_draft_server_counts_its_targets_and_partner(catalog):
    """A shared candidate of H100 targets whose draft runs on a CS-3 serving r of them: its pool has r targets per
    MILP replica and one partner each, and the re-check prices the server's r·b sequences."""
    work = two_apps(True, tpots=(6, 8), devices=("h100-sxm", "cs-3"))
    options = PlanOptions(baseline=False)
    priced = price_workload(work, catalog, options, RooflineModel(catalog))
    groups = [c for c in priced.candidates if c.mix and c.partner_device == "cs-3" and c.partner_share > 1]
    assert groups, "no shared verify group with a shared draft server was priced"
    c = groups[0]
    pool = shared_pool(c, 2, {(c.key, "a"): 0.5, (c.key, "b"): 0.25}, 1.0, None)
    assert pool.replicas == 2 * c.partner_share and pool.partner_replicas == 2 and pool.partner_tp == c.partner_tp
    assert pool.devices_by_type == {"h100-sxm": 2 * c.partner_share * c.tp, "cs-3": 2 * c.partner_tp}
    assert pool.serves == pytest.approx({"a": c.utilization_cap * c.mix[0].capacity_rps * 0.5,
                                         "b": c.utilization_cap * c.mix[1].capacity_rps * 0.25})
    check = checking_at(work, options.candidates, RooflineModel(catalog))
    again = spec_decode.recheck(pool, work.classes[0], check)
    assert again.latency_ok and again.memory_ok, again.note
    # the same group with its server serving twice the targets rounds slower than the plan says
    crowded = pool.model_copy(update={"partner_replicas": 1})
    assert not spec_decode.recheck(crowded, work.classes[0], check).latency_ok


def test_shared_verify_draft_candidates_only_where_allowed(catalog):
    options = PlanOptions(baseline=False)
    for shared, expect in ((False, 0), (True, 1)):
        priced = price_workload(two_apps(shared), catalog, options, RooflineModel(catalog))
        found = [c for c in priced.candidates if c.mix and c.role == "decode"]
        assert (len(found) > 0) == bool(expect)
        assert all(c.strategy == "spec_decode" and {m.class_name for m in c.mix} == {"a", "b"} for c in found)


def test_the_replay_runs_a_shared_verify_draft_pool_at_its_mix(shared_plan):
    from planner.simulate import SimulationOptions, simulate_plan

    catalog, plan = shared_plan
    sim = simulate_plan(plan, RooflineModel(catalog), SimulationOptions(duration_s=120.0, seed=1))
    assert {c.name for c in sim.classes} == {"a", "b"} and sim.verdict == "meets", sim.misses


def moe_apps(shared: bool) -> Workload:
    """Two classes alike but for their TPOT SLOs (40 and 50 ms), 1 req/s each, Qwen3-30B-A3B attention/FFN split."""
    return Workload.model_validate({
        "model": "qwen3-30b-a3b", "dtype": "fp8", "strategies": ["af_disagg"], "shared_pools": shared,
        "classes": [{"name": name, "rate_rps": 1, "input_tokens": 1024, "output_tokens": 256,
                     "slo": {"ttft_ms": 2000, "tpot_ms": tpot}} for name, tpot in zip("ab", (40, 50))],
        "constraints": {"power_budget_kw": 500, "devices": ["h100-sxm"]}, "objective": "min_power",
    })


@pytest.fixture(scope="module")
def af_plans():
    catalog = load_catalog()
    return catalog, {(shared, solver): plan_workload(moe_apps(shared), catalog, PlanOptions(solver=solver, baseline=False))
                     for shared in (False, True) for solver in ("ortools", "pulp")}


@pytest.mark.parametrize("solver", ["ortools", "pulp"])
def test_two_small_moe_classes_share_one_attention_expert_group(af_plans, solver):
    """Per class: a prefill H100 and an attention H100 beside an expert H100, 6 in all; shared, 3."""
    _, plans = af_plans
    own, shared = plans[(False, solver)], plans[(True, solver)]
    assert own.status == shared.status == "optimal"
    assert own.totals.devices_by_type == {"h100-sxm": 6} and shared.totals.devices_by_type == {"h100-sxm": 3}
    assert shared.totals.power_kw == pytest.approx(own.totals.power_kw / 2)
    assert shared.verification.ok, shared.verification.messages
    decode = next(p for p in shared.pools if p.role == "decode")
    assert (decode.strategy, decode.class_name, decode.partner_device, decode.partner_replicas) == ("af_disagg", "a", "h100-sxm", 1)
    assert decode.serves == pytest.approx({"a": 1.0, "b": 1.0})
    assert decode.utilization == pytest.approx(2 * decode.tpot_ms / 1000 * 256 / decode.batch)


@pytest.mark.parametrize("update, check", [
    ({"tpot_ms": 10.0}, "latency_recomputed"),                  # a TPOT the ping-pong does not step at
    ({"serves": {"a": 1.0, "b": 5.0}}, "latency_recomputed"),  # more of b than its utilisation says
    ({"partner_tp": 8}, "devices"),                             # 8 expert devices the totals do not count
    ({"batch": 1_000_000}, "memory"),                           # a million sequences' KV on one H100
])
def test_verify_recomputes_a_shared_attention_pool(af_plans, update, check):
    catalog, plans = af_plans
    plan = plans[(True, "ortools")]
    pools = tuple(p.model_copy(update=update) if p.role == "decode" else p for p in plan.pools)
    result = verify_plan(plan.model_copy(update={"pools": pools}), catalog)
    assert not result.checks[check], result.messages


def test_the_replay_runs_a_shared_attention_pool_at_its_mix(af_plans):
    from planner.simulate import SimulationOptions, simulate_plan

    catalog, plans = af_plans
    sim = simulate_plan(plans[(True, "ortools")], RooflineModel(catalog), SimulationOptions(duration_s=120.0, seed=1))
    assert {c.name for c in sim.classes} == {"a", "b"} and sim.verdict == "meets", sim.misses


@pytest.mark.parametrize("model, strategy", [("llama-3.3-70b", "spec_decode"), ("llama-3.1-8b", "pd_disagg")])
def test_no_shared_decode_side_replica_where_kv_spills_from_sram(catalog, model, strategy):
    """d-Matrix Corsair keeps what KV fits beside the weights in SRAM and the rest in LPDDR, read at a bandwidth set
    by the KV resident, whose mix is not the one read: the mix bound fails there, so no shared decode-side candidate
    runs on it (as decode replica or draft server), while its own candidates stay."""
    work = Workload.model_validate({
        "model": model, "dtype": "fp8", "strategies": [strategy], "shared_pools": True,
        "spec_decode": {"draft_model": "llama-3.2-1b", "acceptance_rate": 0.75},
        "classes": [{"name": n, "rate_rps": 3, "input_tokens": 1000, "output_tokens": 500,
                     "slo": {"ttft_ms": 1000, "tpot_ms": t}} for n, t in (("a", 12), ("b", 15))],
        "constraints": {"power_budget_kw": 1000, "devices": ["h100-sxm", "dmatrix-corsair"]}, "objective": "max_goodput",
    })
    priced = price_workload(work, catalog, PlanOptions(baseline=False), RooflineModel(catalog)).candidates
    assert any(not c.mix and "dmatrix-corsair" in c.devices_by_type and c.role == "decode" for c in priced)
    shared = [c for c in priced if c.mix and c.role == "decode"]
    assert shared and all("dmatrix-corsair" not in c.devices_by_type for c in shared)
