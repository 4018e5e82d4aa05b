"""Shared aggregated pools: one replica running prefill chunks and decode for several classes (``shared_pools``)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from planner.catalog import load_catalog
from planner.milp.build import BuildOptions, build_model
from planner.optimize import PlanOptions, plan_workload
from planner.perf.model import RooflineModel
from planner.schema import RequestClass, Workload
from planner.simulate import SimulationOptions, simulate_plan
from planner.solvers.base import SolveOptions, Termination, get_backend
from planner.strategies.aggregated import mean_step_s, shared_steps, shared_tiers, steps
from planner.strategies.base import ClassLoad
from planner.verify import verify_plan
from tests.solvers.conftest import candidate
from tests.solvers.conftest import workload as synthetic


def two_apps(shared: bool) -> Workload:
    """Two classes alike but for their TPOT SLO (40 and 50 ms), 3 req/s each, aggregated on H100 SXM."""
    return Workload.model_validate({
        "model": "llama-3.1-8b", "dtype": "bf16", "strategies": ["aggregated"], "shared_pools": shared,
        "classes": [{"name": name, "rate_rps": 3, "input_tokens": 1024, "output_tokens": 256,
                     "slo": {"ttft_ms": 2000, "tpot_ms": tpot}} for name, tpot in (("a", 40), ("b", 50))],
        "constraints": {"power_budget_kw": 100, "devices": ["h100-sxm"]},
        "objective": "min_power",
    })


def rc(name: str, isl: int, osl: int, hit: float = 0.0, tpot: float = 50.0, ttft: float = 2000.0, **slo) -> RequestClass:
    return RequestClass.model_validate({"name": name, "rate_rps": 1, "input_tokens": isl, "output_tokens": osl,
                                        "prefix_cache_hit": hit, "slo": {"ttft_ms": ttft, "tpot_ms": tpot, **slo}})


@pytest.fixture(scope="module")
def costs():
    return RooflineModel(load_catalog())


@pytest.mark.parametrize("solver", ["ortools", "pulp"])
def test_two_small_classes_share_one_aggregated_replica(catalog, solver):
    """Each class alone keeps a fifth of an H100's slots busy (a at batch 128: 3 req/s · 256 steps · 33.3 ms / 128 =
    0.200), so per-class pools need 2 H100s and a shared one 1, at twice that utilisation (the classes step alike:
    y = 6 · 256 · τ / b)."""
    own = plan_workload(two_apps(False), catalog, PlanOptions(solver=solver, baseline=False))
    shared = plan_workload(two_apps(True), catalog, PlanOptions(solver=solver, baseline=False))
    assert own.status == shared.status == "optimal"
    assert own.totals.devices_by_type == {"h100-sxm": 2}
    assert shared.totals.devices_by_type == {"h100-sxm": 1}
    assert shared.totals.power_kw == pytest.approx(own.totals.power_kw / 2)
    assert shared.verification.ok, shared.verification.messages
    (pool,) = shared.pools
    assert pool.role == "aggregated" and pool.class_name == "a" and pool.replicas == 1
    assert pool.serves == pytest.approx({"a": 3.0, "b": 3.0})
    assert pool.utilization == pytest.approx(6 * 256 * pool.tpot_ms / 1000 / pool.batch)
    own_a = next(p for p in own.pools if p.class_name == "a")
    assert (pool.batch, pool.tpot_ms) == (own_a.batch, pytest.approx(own_a.tpot_ms))  # alike: a's own step
    assert pool.utilization == pytest.approx(2 * own_a.utilization)
    assert pool.tpot_ms <= 40 and pool.ttft_ms <= 2000


def test_the_mix_is_priced_at_its_heaviest_prefill_and_longest_prompt_context(costs):
    """a: 1,000-token prompts, 250-token answers (4 prefill tokens per sequence and step, context 1,125, prompt
    context 500); b: 2,000 tokens half cached, 1,000 out (1 per step, context 2,500, prompt context 1,000 + 500).
    At b = 64 the mix carries at most Q = 256 prefill tokens a step, priced at context 1,500, as a share 256/1,000 of
    the steps carrying a whole 1,000-token prompt and the rest none; a prompt's service is one step (1,000 new tokens
    within the 2,048 budget) at the longest mean context, 2,500, the slower of the two."""
    model, h100 = costs.profile("llama-3.1-8b", "bf16", None), costs.silicon("h100-sxm", "bf16")
    a, b = rc("a", 1000, 250), rc("b", 2000, 1000, hit=0.5)
    tau, service, q = shared_steps(costs, model, h100, 1, [64], [a, b], 2048)

    def step(context, tokens, prompt_context):
        return float(costs.decode(model, h100, 1, 64.0, context, prefill_tokens=tokens,
                                  prefill_context_tokens=prompt_context).total_s.reshape(-1)[0])

    assert q == pytest.approx([256.0])
    assert tau[:, 0] == pytest.approx([0.256 * step(ctx, 1000.0, 1500.0) + 0.744 * step(ctx, 0.0, 1500.0)
                                       for ctx in (1125.0, 2500.0)])
    assert service == pytest.approx([max(step(2500.0, 1000.0, 500.0), step(2500.0, 1000.0, 1500.0))])
    for k, own in enumerate((a, b)):  # never below a class's own figures
        own_step, _, own_service, _ = steps(costs, model, h100, 1, [64], own, 2048)
        assert tau[k, 0] >= own_step[0] and service[0] >= own_service[0]
    same, _, _ = shared_steps(costs, model, h100, 1, [64], [a, a.model_copy(update={"name": "a2"})], 2048)
    assert same[:, 0] == pytest.approx([steps(costs, model, h100, 1, [64], a, 2048)[0][0]] * 2)  # alike: exact


def test_a_mixed_step_is_within_the_slot_weighted_bound(costs):
    """a (isl 1,000, osl 200) and b (isl 900, osl 400) have one mean context, 1,100, and 5 and 2.25 prefill tokens per
    sequence and step: a mix with a share w of a's sequences carries b·(5w + 2.25(1 − w)) tokens, each attending over
    at most 500. That step is at most w·τ̂_a + (1 − w)·τ̂_b."""
    model, h100 = costs.profile("llama-3.1-8b", "bf16", None), costs.silicon("h100-sxm", "bf16")
    a, b = rc("a", 1000, 200), rc("b", 900, 400)
    batch = np.array([16.0, 64.0, 256.0])
    tau, _, _ = shared_steps(costs, model, h100, 1, batch, [a, b], 2048)
    for w in (0.1, 0.5, 0.9):
        mixed = costs.decode(model, h100, 1, batch, 1100.0, prefill_tokens=batch * (5 * w + 2.25 * (1 - w)),
                             prefill_context_tokens=500.0).total_s.reshape(-1)
        assert np.all(mixed <= w * tau[0] + (1 - w) * tau[1] + 1e-15)


def test_tiers_take_every_class_at_least_as_loose_on_both_slos():
    """a (40 ms, 500 ms), b (50, 2,000), c (60, 1,000): T = 40 with F = 500 takes all three, with F = 1,000 b and c;
    every other pair of bounds gives one of those sets or a single class."""
    a, b, c = rc("a", 1000, 100, tpot=40, ttft=500), rc("b", 1000, 100, tpot=50, ttft=2000), rc("c", 1000, 100, tpot=60, ttft=1000)
    assert [[k.name for k in tier] for tier in shared_tiers([c, b, a])] == [["a", "b", "c"], ["b", "c"]]


def test_shared_aggregated_candidates_leave_percentile_classes_alone_and_have_distinct_keys(catalog):
    from planner import graph as task_graph
    from planner.candidates import generate_candidates
    from planner.perf.profile import ModelProfile

    slos = {"a": {"ttft_ms": 500, "tpot_ms": 40}, "b": {"ttft_ms": 2000, "tpot_ms": 50},
            "c": {"ttft_ms": 1000, "tpot_ms": 60}, "p": {"ttft_ms": 2000, "tpot_ms": 60, "percentile": 90}}
    work = Workload.model_validate({
        "model": "llama-3.1-8b", "dtype": "bf16", "strategies": ["aggregated"], "shared_pools": True,
        "classes": [{"name": k, "rate_rps": 1, "input_tokens": 1024, "output_tokens": 256, "slo": slo} for k, slo in slos.items()],
        "constraints": {"power_budget_kw": 100, "devices": ["h100-sxm", "l40s"]},
    })
    graph = task_graph.build_task_graph(work, ModelProfile.of(catalog.model(work.model), "bf16", work.kv_dtype), None)
    candidates, _ = generate_candidates(work, catalog, graph)
    mixes = {tuple(sorted(load.class_name for load in c.mix)) for c in candidates if c.mix}
    assert mixes == {("a", "b", "c"), ("b", "c")}
    assert len({c.key for c in candidates}) == len(candidates)


def solve(work, cands, units):
    model = build_model(work, units, cands, BuildOptions(objective=work.objective))
    return model, get_backend("ortools").solve(model, SolveOptions(time_limit_s=10))


def test_the_prompts_row_keeps_the_prompt_server_within_its_cap():
    """A shared aggregated replica whose slots take 10 req/s of each class but whose prompts take S = 0.25 s each
    (4 prompts/s): at 1 req/s per class, 2 prompts/s keep half its prompt server busy, one replica; at 3 req/s each,
    6 prompts/s need 1.5 servers, so 2 replicas, though 0.6 replica's slots would do."""
    units = {(k, "aggregated"): ["aggregated"] for k in ("a", "b")}
    base = replace(candidate("a", "aggregated", "s", 10.0, 1000.0, strategy="aggregated"), tpot_ms=40.0,
                   mix=tuple(ClassLoad(k, 10.0, 0.020, prompt_rps=4.0) for k in ("a", "b")))
    own = [candidate(k, "aggregated", "d", 10.0, 50_000.0, strategy="aggregated") for k in ("a", "b")]  # never worth it
    for rate, replicas in ((1.0, 1), (3.0, 2)):
        model, result = solve(synthetic({"a": rate, "b": rate}, 1000.0, objective="min_power"), [base] + own, units)
        assert result.termination is Termination.OPTIMAL
        x = dict(zip(model.var_names, result.x))
        assert x[f"n:{base.key}"] == pytest.approx(replicas)
        assert x[f"x:{base.key}>a"] == pytest.approx(rate / 10.0) and x[f"n:{own[0].key}"] == pytest.approx(0.0)


def test_the_prompts_row_admits_what_the_recheck_does(costs):
    """4,000-token prompts, 16-token answers: a shared replica's prompt server (1 / S prompts/s) binds before its
    slots do. Loaded with each class at half its prompt limit (what the MILP's prompts row allows at one replica), the
    re-check finds the prompt server at its cap; 5% more and it finds it beyond."""
    from planner.candidates import CandidateOptions
    from planner.graph import build_task_graph
    from planner.plan import pools_of
    from planner.strategies.aggregated import price_shared, recheck
    from planner.strategies.base import Pricing
    from planner.verify import checking_at

    work = two_apps(True)
    work = work.model_copy(update={"classes": tuple(rc.model_copy(update={"input_tokens": 4000, "output_tokens": 16})
                                                    for rc in work.classes)})
    model, options = costs.profile(work.model, work.dtype, work.kv_dtype), CandidateOptions()
    ctx = Pricing(work, model, None, [costs.silicon("h100-sxm", "bf16")], build_task_graph(work, model, None), options, costs)
    bound = [c for c in price_shared(ctx) if all(1 / c.extra["service_s"] < load.capacity_rps for load in c.mix)]
    assert bound
    for c in bound:
        for more, ok in ((1.0, True), (1.05, False)):
            loads = {(c.key, load.class_name): more * load.prompt_rps / (2 * load.capacity_rps) for load in c.mix}
            (pool,) = pools_of(work, [c], np.array([1]), {}, loads)
            assert recheck(pool, work.classes[0], checking_at(work, options, costs)).latency_ok is ok, (c.key, more)

@pytest.fixture(scope="module")
def shared_plan():
    catalog = load_catalog()
    return catalog, plan_workload(two_apps(True), catalog, PlanOptions(baseline=False))


def tampered(plan, **update):
    return plan.model_copy(update={"pools": tuple(p.model_copy(update=update) for p in plan.pools)})


@pytest.mark.parametrize("update, check", [
    ({"tpot_ms": 20.0}, "latency_recomputed"),                 # a TPOT the mix does not step at
    ({"ttft_ms": 10.0}, "latency_recomputed"),                 # a TTFT the prompt queue does not reach
    ({"serves": {"a": 3.0, "b": 9.0}}, "latency_recomputed"),  # more of b than its utilisation says
    ({"utilization": 0.1}, "latency_recomputed"),              # a utilisation its shares do not give
    ({"utilization_cap": 0.01}, "latency_recomputed"),         # a prompt server beyond its cap
    ({"serves": {"a": 3.0, "b": 0.0}}, "demand"),              # b's traffic served nowhere
    ({"batch": 4096}, "memory"),                               # 4,096 sequences' KV and 16,384 prefill tokens a step
])
def test_verify_recomputes_a_shared_aggregated_pool(shared_plan, update, check):
    catalog, plan = shared_plan
    assert verify_plan(plan, catalog).ok
    result = verify_plan(tampered(plan, **update), catalog)
    assert not result.checks[check], result.messages


def test_a_shared_aggregated_pool_meets_every_slo_it_serves(shared_plan):
    catalog, plan = shared_plan
    tight = plan.workload.model_copy(update={"classes": (plan.workload.classes[0], plan.workload.classes[1].model_copy(
        update={"slo": plan.workload.classes[1].slo.model_copy(update={"ttft_ms": 10.0})}))})
    result = verify_plan(plan.model_copy(update={"workload": tight}), catalog)
    assert not result.checks["slo"] and any("b/aggregated/aggregated" in m for m in result.messages)


def test_the_replay_sends_both_classes_to_the_shared_aggregated_pool(shared_plan):
    catalog, plan = shared_plan
    sim = simulate_plan(plan, RooflineModel(catalog), SimulationOptions(duration_s=120.0, seed=1))
    assert {c.name for c in sim.classes} == {"a", "b"}
    assert all(c.simulated_tpot_ms is not None and np.isfinite(c.simulated_tpot_ms) for c in sim.classes)
    assert sim.verdict == "meets"


def test_the_replay_steps_a_shared_aggregated_pool_at_its_longest_contexts():
    """As the plan prices it: prefill chunks at the longest prompt context (b: 6,000 / 2 = 3,000), whichever class
    they come from; each class's decode sequences at their own mean context (c: 500 + 12,000 / 2 = 6,500; a: 1,050)."""
    from planner.simulate.service import ServiceContext, service_for
    from planner.schema import Pool

    seen = []

    class Recording:
        def silicon(self, device, dtype):
            return None

        def decode(self, model, hw, devices, batch, context_tokens, prefill_tokens=0.0, ep=1, prefill_context_tokens=None,
                   pp=1):
            seen.append((context_tokens, prefill_context_tokens))
            return SimpleNamespace(total_s=np.zeros(np.shape(batch)))

    classes = [rc("a", 1000, 100), rc("b", 6000, 100), rc("c", 500, 12000)]
    pool = Pool(role="aggregated", class_name="a", strategy="aggregated", device="d", tp=1, batch=4, replicas=1, devices=1,
                devices_by_type={"d": 1}, power_kw=1.0, cost_usd_per_hour=1.0, capex_usd=1.0, utilization=0.5,
                utilization_cap=0.9, capacity_rps=1.0, served_rps=1.0, ttft_ms=1.0, tpot_ms=1.0, limited_by="slo",
                serves={"a": 0.5, "b": 0.5, "c": 0.0})
    ctx = ServiceContext(SimpleNamespace(dtype="bf16"), None, None, Recording(), 2048)
    service_for(pool, classes[2], ctx, classes).step_s(2, 16)
    assert seen == [(6500.0, 3000.0)]
    service_for(pool, classes[0], ctx).step_s(2, 16)  # alone: its own
    assert seen[-1] == (1050.0, 500.0)
    service_for(pool, classes[0], ctx, classes).step_s(2, 16)  # in the mix: its decode context, the longest prompt's
    assert seen[-1] == (1050.0, 3000.0)


def test_a_shared_aggregated_pools_engine_takes_every_class_it_serves(shared_plan):
    """Its engine's context is the longest request any served class sends, and its options are all documented ones."""
    from planner.deploy.engines import pool_spec
    from planner.deploy.tree import deployment_tree
    from tests.deploy_trees import unknown_options

    _, plan = shared_plan
    longer = plan.workload.model_copy(update={"classes": (plan.workload.classes[0], plan.workload.classes[1].model_copy(
        update={"input_tokens": 3000, "output_tokens": 500}))})
    (pool,) = plan.pools
    spec = pool_spec(plan.model_copy(update={"workload": longer}), pool, moe=False, vllm_device=None)
    assert (spec.request_class.input_tokens, spec.request_class.output_tokens) == (3000, 500)
    for target in ("vllm", "sglang"):
        files = deployment_tree(plan, target, {"h100-sxm": "nvidia"}, moe=False)
        assert files and unknown_options(files) == []


def deepseek_pair(shared: bool) -> Workload:
    return Workload.model_validate({
        "model": "deepseek-v3", "dtype": "fp8", "kv_dtype": "fp8", "strategies": ["aggregated"], "shared_pools": shared,
        "classes": [{"name": k, "rate_rps": 4, "input_tokens": 2000, "output_tokens": 500,
                     "slo": {"ttft_ms": 2000, "tpot_ms": tpot}} for k, tpot in (("a", 40), ("b", 50))],
        "constraints": {"power_budget_kw": 400, "pue": 1.2, "devices": ["b200"]}, "objective": "min_power",
    })


def test_a_shared_aggregated_moe_replica_runs_expert_groups(costs):
    """Each rank of a shared DeepSeek-V3 replica in 8 groups carries an eighth of the tier's prefill (4b tokens a step:
    b/2 per rank) and a prompt's step is priced with every rank carrying its 2,000-token chunk."""
    model, b200 = costs.profile("deepseek-v3", "fp8", "fp8"), costs.silicon("b200", "fp8")
    a, b = deepseek_pair(True).classes
    tau, service, per_rank = shared_steps(costs, model, b200, 8, [512], [a, b], 2048, 8)
    assert per_rank == pytest.approx([256.0])
    busiest = costs.decode(model, b200, 8, 512.0, 2250.0, prefill_tokens=16000.0, ep=8, prefill_context_tokens=1000.0)
    assert service == pytest.approx(busiest.total_s.reshape(-1))
    assert tau[:, 0] == pytest.approx([steps(costs, model, b200, 8, [512], a, 2048, 8)[0][0]] * 2)  # alike: exact


@pytest.mark.parametrize("solver", ["ortools", "pulp"])
def test_two_moe_classes_share_one_expert_parallel_aggregated_replica(catalog, solver):
    """4 req/s each of two alike DeepSeek-V3 chats: each fills under a fifth of an 8-B200 replica alone (16 B200 for
    two), one shared replica carries both (8 B200), at y = 8 · 500 · τ / b."""
    own = plan_workload(deepseek_pair(False), catalog, PlanOptions(solver=solver, baseline=False))
    shared = plan_workload(deepseek_pair(True), catalog, PlanOptions(solver=solver, baseline=False))
    assert own.totals.devices_by_type == {"b200": 16} and shared.totals.devices_by_type == {"b200": 8}
    assert shared.status == "optimal" and shared.verification.ok, shared.verification.messages
    (pool,) = shared.pools
    assert pool.serves == pytest.approx({"a": 4.0, "b": 4.0}) and pool.ep > 1 and pool.batch % pool.ep == 0
    assert pool.utilization == pytest.approx(8 * 500 * pool.tpot_ms / 1000 / pool.batch)
    other = 1 if pool.ep > 2 else 8
    tampered = shared.model_copy(update={"pools": (pool.model_copy(update={"ep": other}),)})
    assert not verify_plan(tampered, catalog).checks["latency_recomputed"]


def test_the_mean_step_weighs_the_steps_that_carry_a_chunk_and_those_that_carry_none():
    """A 900-token chunk on one step in five (a mean of 180 prefill tokens a step): 0.2 × 197 ms + 0.8 × 37 ms = 69 ms,
    not the roofline at 180 tokens; a replica that carries nothing steps plainly."""
    assert mean_step_s(np.array([0.197]), np.array([0.037]), 180.0, np.array([900.0])) == pytest.approx([0.069])
    assert mean_step_s(np.array([0.197]), np.array([0.037]), 0.0, np.array([0.0])) == pytest.approx([0.037])
