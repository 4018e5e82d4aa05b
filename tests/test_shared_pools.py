"""Shared pools: prefill and decode replicas that serve several classes (``shared_pools: true``)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from planner.catalog import load_catalog
from planner.milp.build import BuildOptions, build_model
from planner.optimize import PlanOptions, plan_workload
from planner.perf.model import RooflineModel
from planner.schema import Workload
from planner.simulate import SimulationOptions, simulate_plan
from planner.solvers.base import SolveOptions, Termination, get_backend
from planner.strategies.base import ClassLoad
from planner.verify import verify_plan
from tests.solvers.conftest import candidate, units_for
from tests.solvers.conftest import workload as synthetic


def two_apps(shared: bool, **extra) -> Workload:
    """Two classes alike but for their TPOT SLO (40 and 50 ms), 3 req/s each, on H100 SXM, prefill/decode split."""
    return Workload.model_validate({
        "model": "llama-3.1-8b", "dtype": "bf16", "strategies": ["pd_disagg"], "shared_pools": shared,
        "classes": [{"name": name, "rate_rps": 3, "input_tokens": 1024, "output_tokens": 256,
                     "slo": {"ttft_ms": 2000, "tpot_ms": tpot}} for name, tpot in (("a", 40), ("b", 50))],
        "constraints": {"power_budget_kw": 100, "devices": ["h100-sxm"]},
        "objective": "min_power", **extra,
    })


@pytest.mark.parametrize("solver", ["ortools", "pulp"])
def test_two_small_classes_share_one_prefill_and_one_decode_replica(catalog, solver):
    """Each class alone fills a fifth of a replica of each role: per-class pools need 4 H100s, shared pools 2."""
    own = plan_workload(two_apps(False), catalog, PlanOptions(solver=solver, baseline=False))
    shared = plan_workload(two_apps(True), catalog, PlanOptions(solver=solver, baseline=False))
    assert own.status == shared.status == "optimal"
    assert own.totals.devices_by_type == {"h100-sxm": 4}
    assert shared.totals.devices_by_type == {"h100-sxm": 2}
    assert shared.totals.power_kw == pytest.approx(own.totals.power_kw / 2)
    assert shared.verification.ok, shared.verification.messages
    decode = next(p for p in shared.pools if p.role == "decode")
    assert decode.class_name == "a"  # the tighter TPOT bounds the mix
    assert decode.serves == pytest.approx({"a": 3.0, "b": 3.0})
    # both classes' sequences step alike (same context), so y = Σ λ_k τ osl / b = 6 · τ · 256 / b per replica
    assert decode.utilization == pytest.approx(6 * decode.tpot_ms / 1000 * 256 / decode.batch)
    assert decode.tpot_ms + decode.slot_wait_ms <= 40 and decode.slot_wait_ms > 0
    for c in shared.classes:  # what a request sees: the step and its wait for a slot per token
        assert c.rate_rps_served == pytest.approx(3.0) and c.tpot_ms == pytest.approx(decode.tpot_ms + decode.slot_wait_ms)


def test_shared_pools_are_off_by_default(catalog):
    assert Workload.model_validate({**two_apps(False).model_dump(by_alias=True, exclude={"shared_pools"})}).shared_pools is False


def shared_candidate(loads: list[tuple[str, float, float]], tpot_ms: float, power_w: float = 1000.0):
    """One shared decode candidate on device ``s``: (class, slots capacity rps, own step s) per class."""
    base = candidate(loads[0][0], "decode", "s", loads[0][1], power_w)
    return replace(base, tpot_ms=tpot_ms, mix=tuple(ClassLoad(k, cap, step) for k, cap, step in loads))


def solve(work, cands):
    model = build_model(work, units_for([rc.name for rc in work.classes]), cands, BuildOptions(objective=work.objective))
    return model, get_backend("ortools").solve(model, SolveOptions(time_limit_s=10))


def test_the_tier_row_keeps_the_mix_within_the_tightest_tpot():
    """Class a steps in 20 ms alone, b in 60 ms; the tier is a's 40 ms: x_a (1 − 40/20) + x_b (1 − 40/60) ≤ 0, so
    b may ride only on three times as much of a (x_b ≤ 3 x_a). With a at 1 req/s and b at 4 (caps 10 req/s per
    replica each), b's share needs x_b = 0.4 but a's gives x_a = 0.1, so b needs its own replicas."""
    work = synthetic({"a": 1.0, "b": 4.0}, 100.0, objective="min_power")
    prefill = [candidate(k, "prefill", "p", 100.0, 1.0) for k in ("a", "b")]
    own_b = candidate("b", "decode", "d", 10.0, 5000.0)  # costly: used only when the mix cannot carry b
    shared = shared_candidate([("a", 10.0, 0.020), ("b", 10.0, 0.060)], tpot_ms=40.0)
    model, result = solve(work, prefill + [shared, own_b])
    assert result.termination is Termination.OPTIMAL
    x = dict(zip(model.var_names, result.x))
    xa, xb = x[f"x:{shared.key}>a"], x[f"x:{shared.key}>b"]
    assert xa == pytest.approx(0.1) and xb <= 3 * xa + 1e-9
    # b's remaining 4 − 10 · xb req/s on its own replicas: at xb = 0.3, 1 req/s, one own replica
    assert xb == pytest.approx(0.3) and x[f"n:{own_b.key}"] == pytest.approx(1.0)
    # with b at 0.3 req/s the mix carries it all: no own replica
    model, result = solve(synthetic({"a": 1.0, "b": 0.3}, 100.0, objective="min_power"), prefill + [shared, own_b])
    x = dict(zip(model.var_names, result.x))
    assert x[f"n:{own_b.key}"] == pytest.approx(0.0) and x[f"n:{shared.key}"] == pytest.approx(1.0)


def test_shared_replicas_carry_no_idle_share():
    """A shared replica's class share is real traffic: at most what the class sends, so a fast class cannot be
    padded with phantom sequences to let a slow class ride (b alone steps beyond the tier)."""
    work = synthetic({"a": 0.1, "b": 4.0}, 100.0, objective="min_power")
    prefill = [candidate(k, "prefill", "p", 100.0, 1.0) for k in ("a", "b")]
    shared = shared_candidate([("a", 10.0, 0.020), ("b", 10.0, 0.060)], tpot_ms=40.0)
    model, result = solve(work, prefill + [shared, candidate("b", "decode", "d", 10.0, 5000.0)])
    x = dict(zip(model.var_names, result.x))
    assert x[f"x:{shared.key}>a"] == pytest.approx(0.01)  # a's 0.1 req/s at 10 per replica
    assert x[f"x:{shared.key}>b"] == pytest.approx(0.03)  # three times that, no more


@pytest.fixture(scope="module")
def shared_plan():
    catalog = load_catalog()
    return catalog, plan_workload(two_apps(True), catalog, PlanOptions(baseline=False))


def tampered(plan, role: str, **update):
    pools = tuple(p.model_copy(update=update) if p.role == role else p for p in plan.pools)
    return plan.model_copy(update={"pools": pools})


@pytest.mark.parametrize("role, update, check", [
    ("decode", {"tpot_ms": 20.0}, "latency_recomputed"),           # a TPOT the mix does not step at
    ("decode", {"serves": {"a": 3.0, "b": 9.0}}, "latency_recomputed"),  # more of b than its utilisation says
    ("decode", {"serves": {"a": 3.0, "b": 0.0}}, "demand"),       # b's decode traffic served nowhere
    ("prefill", {"ttft_ms": 10.0}, "latency_recomputed"),         # a TTFT the queue does not reach
    ("prefill", {"batch": 4096}, "memory"),                       # 4,096 prompts' KV at once
])
def test_verify_recomputes_a_shared_pool(shared_plan, role, update, check):
    catalog, plan = shared_plan
    assert verify_plan(plan, catalog).ok
    result = verify_plan(tampered(plan, role, **update), catalog)
    assert not result.checks[check], result.messages


def test_a_shared_pool_meets_every_slo_it_serves(shared_plan, catalog):
    _, plan = shared_plan
    tight = plan.workload.model_copy(update={"classes": (plan.workload.classes[0],
                                                         plan.workload.classes[1].model_copy(update={"slo": plan.workload.classes[1].slo.model_copy(update={"tpot_ms": 10.0})}))})
    result = verify_plan(plan.model_copy(update={"workload": tight}), catalog)
    assert not result.checks["slo"] and any("b/pd_disagg/decode" in m for m in result.messages)


def test_the_replay_sends_every_class_to_the_shared_pools(shared_plan):
    catalog, plan = shared_plan
    sim = simulate_plan(plan, RooflineModel(catalog), SimulationOptions(duration_s=120.0, seed=1))
    by_class = {c.name: c for c in sim.classes}
    assert set(by_class) == {"a", "b"}
    assert all(c.simulated_tpot_ms is not None and np.isfinite(c.simulated_tpot_ms) for c in by_class.values())
    assert sim.verdict == "meets"


def test_a_shared_prefill_pool_is_priced_at_its_slowest_class_cached_prefixes_included(catalog):
    """A 32k prompt that is 95% cached has fewer new tokens than a plain 2k one, yet its pass is slower (it attends
    over the whole prefix): the shared pool's TTFT must cover that pass (the review's case)."""
    work = Workload.model_validate({
        "model": "llama-3.1-8b", "dtype": "bf16", "strategies": ["pd_disagg"], "shared_pools": True,
        "classes": [{"name": "a", "rate_rps": 2, "input_tokens": 2000, "output_tokens": 200, "slo": {"ttft_ms": 190, "tpot_ms": 50}},
                    {"name": "b", "rate_rps": 2, "input_tokens": 32000, "output_tokens": 200, "prefix_cache_hit": 0.95,
                     "slo": {"ttft_ms": 190, "tpot_ms": 50}}],
        "constraints": {"power_budget_kw": 100, "devices": ["h100-sxm"]}, "objective": "min_power",
    })
    from planner.strategies.base import slowest_prefill

    plan = plan_workload(work, catalog, PlanOptions(baseline=False))
    assert plan.verification.ok, plan.verification.messages
    costs = RooflineModel(catalog)
    model, h100 = costs.profile("llama-3.1-8b", "bf16", None), costs.silicon("h100-sxm", "bf16")
    a_pass = float(costs.prefill(model, h100, 1, 2000.0, 0.0).total_s.reshape(-1)[0])
    b_pass = float(costs.prefill(model, h100, 1, 1600.0, 30400.0).total_s.reshape(-1)[0])
    assert b_pass > a_pass  # fewer new tokens, a slower pass
    assert slowest_prefill(costs, model, h100, 1, list(work.classes), [1]) == pytest.approx([b_pass])
    for pool in plan.pools:
        if pool.role == "prefill" and pool.serves is not None and pool.serves.get("b", 0) > 0:
            b_pass = float(costs.prefill(model, h100, pool.tp, 1600.0, 30400.0, prompts=pool.batch).total_s.reshape(-1)[0])
            assert pool.ttft_ms >= 1000 * b_pass



def cached_prompts(shared: bool) -> Workload:
    """8,000-token prompts 95% cached: 400 new tokens a pass, but the whole prompt's KV (8,000 × 131,072 B = 1.048576 GB
    of bf16 KV) leaves for the decode pool: on n H100s (50 GB/s of NIC each) 47.68·n requests/s."""
    return Workload.model_validate({
        "model": "llama-3.1-8b", "dtype": "bf16", "strategies": ["pd_disagg"], "shared_pools": shared,
        "classes": [{"name": k, "rate_rps": 20, "input_tokens": 8000, "output_tokens": 100, "prefix_cache_hit": 0.95,
                     "slo": {"ttft_ms": ttft, "tpot_ms": 50}} for k, ttft in (("a", 1000), ("b", 2000))],
        "constraints": {"power_budget_kw": 100, "devices": ["h100-sxm"]}, "objective": "min_power",
    })


def test_a_shared_prefill_replica_hands_off_no_more_kv_than_its_nics_send(catalog):
    """``cached_prompts``: 47.68·n requests/s is below what the passes take on 1, 2 and 4 H100s: there the NICs, not
    the TTFT, limit a shared prefill replica."""
    from planner import graph as task_graph
    from planner.candidates import generate_candidates
    from planner.perf.profile import ModelProfile

    work = cached_prompts(True)
    graph = task_graph.build_task_graph(work, ModelProfile.of(catalog.model(work.model), "bf16", work.kv_dtype), None)
    candidates, _ = generate_candidates(work, catalog, graph)
    shared = {c.tp: c for c in candidates if c.mix and c.role == "prefill"}
    for n in (1, 2, 4):
        assert shared[n].capacity_rps == pytest.approx(n * 50e9 / 1.048576e9) and shared[n].limited_by == "network"


@pytest.mark.parametrize("shared", [True, False])
def test_verify_recomputes_a_prefill_pools_nic_limit(catalog, shared):
    """40 req/s of ``cached_prompts`` take one prefill H100 (one shared, or one per class), its NICs the limit
    (47.68 req/s; its passes would take 67): a plan claiming a fifth more capacity fails the recomputation."""
    plan = plan_workload(cached_prompts(shared), catalog, PlanOptions(baseline=False))
    assert plan.verification.ok, plan.verification.messages
    prefill = [i for i, p in enumerate(plan.pools) if p.role == "prefill"]
    assert {plan.pools[i].limited_by for i in prefill} == {"network"}
    assert not any(name.startswith("slo.ttft_ms") for name in plan.binding_constraints)
    pools = list(plan.pools)
    for i in prefill:
        pools[i] = pools[i].model_copy(update={"capacity_rps": 1.2 * pools[i].capacity_rps,  # and its utilisation with it
                                               "utilization": pools[i].utilization / 1.2})
    result = verify_plan(plan.model_copy(update={"pools": tuple(pools)}), catalog)
    assert {k for k, ok in result.checks.items() if not ok} == {"latency_recomputed"}, result.messages

def test_an_idle_shared_decode_pool_still_verifies(shared_plan):
    """Replicas with no traffic (the MILP may keep one when it costs nothing) report, and are re-checked at, their
    tier class's own step at the pool's batch."""
    from planner.strategies import strategy
    from planner.strategies.base import mean_context
    from planner.verify import checking_at

    catalog, plan = shared_plan
    costs = RooflineModel(catalog)
    pool = next(p for p in plan.pools if p.role == "decode" and p.serves)
    tier = next(rc for rc in plan.workload.classes if rc.name == pool.class_name)
    step = float(costs.decode(costs.profile("llama-3.1-8b", "bf16", None), costs.silicon(pool.device, "bf16"), pool.tp,
                              pool.batch, mean_context(tier)).total_s.reshape(-1)[0])
    idle = pool.model_copy(update={"serves": {k: 0.0 for k in pool.serves}, "utilization": 0.0, "tpot_ms": 1000 * step})
    check = checking_at(plan.workload, PlanOptions().candidates, costs)
    assert strategy("pd_disagg").recheck(idle, tier, check).latency_ok
    assert not strategy("pd_disagg").recheck(idle.model_copy(update={"tpot_ms": 500 * step}), tier, check).latency_ok


def test_a_shared_pools_engine_takes_every_class_it_serves():
    from planner.deploy.engines import envelope
    from planner.schema import RequestClass

    short = RequestClass.model_validate({"name": "a", "rate_rps": 1, "input_tokens": 1024, "output_tokens": 256,
                                         "slo": {"ttft_ms": 1000, "tpot_ms": 40}})
    long = short.model_copy(update={"name": "b", "input_tokens": 8000, "output_tokens": 100, "prefix_cache_hit": 0.5})
    both = envelope([short, long])
    assert (both.name, both.input_tokens, both.output_tokens, both.prefix_cache_hit) == ("a", 8000, 256, 0.5)
    assert envelope([short]) is short


def test_a_shared_prefill_tier_serves_only_classes_of_its_statistic_with_a_looser_ttft(catalog):
    """Tiers: a (500 ms at p90) alone has no one to share with; b and c (2000 ms, mean) share one tier. a's
    tighter tier may not take b and c, whose TTFT statistic is another."""
    from planner import graph as task_graph
    from planner.candidates import generate_candidates
    from planner.perf.profile import ModelProfile

    slos = {"a": {"ttft_ms": 500, "tpot_ms": 100, "percentile": 90}, "b": {"ttft_ms": 2000, "tpot_ms": 100},
            "c": {"ttft_ms": 2000, "tpot_ms": 100}}
    workload = Workload.model_validate({
        "model": "llama-3.1-8b", "dtype": "bf16", "strategies": ["pd_disagg"], "shared_pools": True,
        "classes": [{"name": k, "rate_rps": 3, "input_tokens": 1024, "output_tokens": 256, "slo": slo} for k, slo in slos.items()],
        "constraints": {"power_budget_kw": 100, "devices": ["h100-sxm"]},
    })
    graph = task_graph.build_task_graph(workload, ModelProfile.of(catalog.model(workload.model), "bf16", workload.kv_dtype), None)
    candidates, _ = generate_candidates(workload, catalog, graph)
    tiers = {tuple(load.class_name for load in c.mix) for c in candidates if c.mix and c.role == "prefill"}
    assert tiers == {("b", "c")}


def test_no_shared_prefill_candidate_where_no_utilisation_meets_the_ttft(catalog):
    """A 1 ms TTFT is shorter than any prefill of 1024 tokens: no replica can serve it at any utilisation."""
    from planner import graph as task_graph
    from planner.candidates import generate_candidates
    from planner.perf.profile import ModelProfile

    workload = two_apps(True).model_copy(update={"classes": tuple(
        rc.model_copy(update={"slo": rc.slo.model_copy(update={"ttft_ms": 1.0})}) for rc in two_apps(True).classes)})
    graph = task_graph.build_task_graph(workload, ModelProfile.of(catalog.model(workload.model), "bf16", workload.kv_dtype), None)
    candidates, _ = generate_candidates(workload, catalog, graph)
    assert [c for c in candidates if c.role == "prefill"] == []


def test_with_shared_pools_the_plan_is_never_worse_than_the_class_by_class_one(catalog, monkeypatch):
    """The full MILP starts from the class-by-class plan; when it finds nothing (here: made to), that plan is the
    answer, with the full MILP's own status."""
    import planner.optimize as optimize
    from planner.solvers.base import SolveResult

    real = optimize.solve_first_stage

    def finds_nothing(workload, units, candidates, options, exclude_mixes=(), start_from=None):
        solved = real(workload, units, candidates, options, exclude_mixes, start_from)
        empty = SolveResult(Termination.TIME_LIMIT, "ortools", "scip", message="made to find nothing")
        return optimize.Solved(candidates, solved.model, empty, (empty,), solved.time_s)

    monkeypatch.setattr(optimize, "solve_first_stage", finds_nothing)
    plan = plan_workload(two_apps(True), catalog, PlanOptions(baseline=False))
    assert plan.status == "time_limit" and plan.verification.ok
    assert plan.totals.devices_by_type == {"h100-sxm": 4}  # the class-by-class plan's fleet


def test_the_replay_prices_a_shared_pool_at_its_slowest_class():
    """As the plan does: the longest prompt for prefill, the longest mean context for decode."""
    from planner.schema import Pool, RequestClass
    from planner.simulate.run import slowest

    def rc(name, isl, osl, hit=0.0):
        return RequestClass.model_validate({"name": name, "rate_rps": 1, "input_tokens": isl, "output_tokens": osl,
                                            "prefix_cache_hit": hit, "slo": {"ttft_ms": 1000, "tpot_ms": 50}})

    short, long_prompt, long_answer = rc("a", 1000, 100), rc("b", 6000, 100), rc("c", 500, 12000)
    fields = dict(class_name="a", strategy="pd_disagg", device="h100-sxm", tp=1, batch=8, replicas=1, devices=1,
                  devices_by_type={"h100-sxm": 1}, power_kw=1.0, cost_usd_per_hour=1.0, capex_usd=1.0, utilization=0.5,
                  utilization_cap=0.9, capacity_rps=1.0, served_rps=1.0, ttft_ms=None, tpot_ms=None, limited_by="slo")
    prefill, decode = Pool(role="prefill", **fields), Pool(role="decode", **fields)
    assert slowest(prefill, [short, long_prompt, long_answer]).name == "b"
    assert slowest(decode, [short, long_prompt, long_answer]).name == "c"  # 500 + 6,000 over 6,000 + 50
    assert slowest(decode, [short]) is short


def test_lp_rounding_gives_a_point_when_the_lp_uses_shared_replicas():
    """The rounding covers demand with the classes' own replicas (shared shares zeroed with their replicas), so a
    model whose LP leans on a shared replica still gets a feasible starting point."""
    from planner.milp.rounding import relaxed, rounded_solution
    from planner.solvers.base import SolveOptions as Options

    work = synthetic({"a": 1.0, "b": 1.0}, 100.0)
    cands = [candidate(k, role, role[0], 4.0, 500.0) for k in ("a", "b") for role in ("prefill", "decode")]
    cands.append(shared_candidate([("a", 10.0, 0.020), ("b", 10.0, 0.030)], tpot_ms=40.0, power_w=300.0))
    model = build_model(work, units_for(["a", "b"]), cands, BuildOptions(objective="max_goodput"))
    lp = get_backend("ortools").solve(relaxed(model), Options(time_limit_s=10))
    assert lp.x[model.blocks["x"]].sum() > 0  # the LP uses the cheap shared replica
    point = rounded_solution(model, lp.x)
    assert point is not None and model.max_violation(point) <= 1e-6
    # own replicas alone: per unit of scale each class needs 1/4 of a 500 W prefill and of a 500 W decode replica,
    # 500 W for both classes, so the 100 kW budget covers a scale of 200 (not a point at scale 0)
    assert point[model.blocks["scale"]][0] == pytest.approx(200.0)
