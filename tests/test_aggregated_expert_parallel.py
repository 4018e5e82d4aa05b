"""Expert parallelism with data-parallel attention in aggregated MoE pools: each attention rank holds its share of
the sequences and runs its own chunked-prefill budget."""

from __future__ import annotations

from collections import deque
from types import SimpleNamespace

import numpy as np
import pytest

import planner.strategies.aggregated as aggregated
from planner.catalog import load_catalog
from planner.deploy.engines import PoolSpec, sglang_options, token_budget, vllm_options
from planner.optimize import PlanOptions, plan_workload
from planner.perf.model import RooflineModel
from planner.schema import Workload
from planner.simulate import SimulationOptions, simulate_plan
from planner.simulate.engine import BatchReplica
from planner.simulate.service import StepService
from planner.verify import verify_plan


def deepseek_chat() -> Workload:
    return Workload.model_validate({
        "model": "deepseek-v3", "dtype": "fp8", "kv_dtype": "fp8", "strategies": ["aggregated"],
        "classes": [{"name": "chat", "rate_rps": 100, "input_tokens": 2000, "output_tokens": 500,
                     "slo": {"ttft_ms": 2000, "tpot_ms": 50}}],
        "constraints": {"power_budget_kw": 400, "pue": 1.2, "devices": ["b200"]},
    })


@pytest.fixture(scope="module")
def costs():
    return RooflineModel(load_catalog())


def test_each_rank_carries_its_share_of_the_prefill_within_its_own_budget(costs):
    """isl 2,000, osl 500, no reuse: a step over b sequences carries 2,000·b / 500 = 4b prefill tokens. Under TP8
    one scheduler's 2,048-token budget holds b ≤ 512 (768 would need 3,072); in 8 expert groups each rank carries
    4b / 8 = b/2, so b = 4,096 still fits its budget (2,048) and b = 6,144 does not (3,072), while memory holds 985
    sequences under TP8 and 6,368 under EP8 (tests/test_expert_parallel.py)."""
    model, b200 = costs.profile("deepseek-v3", "fp8", "fp8"), costs.silicon("b200", "fp8")
    rc = deepseek_chat().classes[0]
    batches = [512, 768, 4096, 6144]
    for ep, per_rank, fits in ((1, [2048, 3072, 16384, 24576], [True, False, False, False]),
                               (8, [256, 384, 2048, 3072], [True, True, True, False])):
        _, _, _, rank_tokens = aggregated.steps(costs, model, b200, 8, batches, rc, 2048, ep)
        assert rank_tokens == pytest.approx(per_rank)
        assert list(aggregated.layout_fits(model, costs, b200, 8, ep, batches, rc, rank_tokens, 2048)) == fits


def test_a_prompt_is_served_in_steps_where_every_rank_carries_a_chunk(costs):
    """The 2,000-token prompt fits one 2,048 budget: its service is one step; in 8 groups that step is priced with
    every rank carrying 2,000 tokens (16,000 in all, each attending over 1,000 on average), the slowest such step.
    The mean step: each rank carries 4·512/8 = 256 tokens a step on average, as a share 256/2,000 = 0.128 of its steps
    carrying a whole prompt and the rest none."""
    model, b200 = costs.profile("deepseek-v3", "fp8", "fp8"), costs.silicon("b200", "fp8")
    rc = deepseek_chat().classes[0]
    step, _, service, _ = aggregated.steps(costs, model, b200, 8, [512], rc, 2048, 8)
    busiest = costs.decode(model, b200, 8, 512.0, 2250.0, prefill_tokens=16000.0, ep=8, prefill_context_tokens=1000.0)
    plain = costs.decode(model, b200, 8, 512.0, 2250.0, ep=8)
    assert service == pytest.approx(busiest.total_s.reshape(-1))
    assert step == pytest.approx(0.128 * busiest.total_s.reshape(-1) + 0.872 * plain.total_s.reshape(-1))
    assert service[0] > step[0]


@pytest.fixture(scope="module")
def plans():
    catalog = load_catalog()
    return catalog, plan_workload(deepseek_chat(), catalog, PlanOptions(baseline=False))


def test_an_aggregated_moe_pool_chooses_expert_groups_and_serves_more(plans, monkeypatch):
    """DeepSeek-V3 on B200 within 400 kW: with data-parallel attention each rank reads only its own sequences' MLA KV
    (TP copies all of it to every rank), so the same power serves about 1.5x the traffic (5.41x vs 3.54x the rate
    under the cost model of this writing)."""
    catalog, plan = plans
    assert plan.status == "optimal" and plan.verification.ok, plan.verification.messages
    (pool,) = plan.pools
    assert pool.role == "aggregated" and pool.ep > 1 and pool.batch % pool.ep == 0
    monkeypatch.setattr(aggregated, "expert_groups", lambda model, s, n, pp=1: [1])
    tensor_parallel = plan_workload(deepseek_chat(), catalog, PlanOptions(baseline=False))
    assert tensor_parallel.pools[0].ep == 1
    assert plan.goodput_scale > 1.3 * tensor_parallel.goodput_scale


@pytest.mark.parametrize("ep, check", [(16, "memory"), (1, "latency_recomputed"), (4, "latency_recomputed")])
def test_verify_recomputes_an_aggregated_pool_at_its_expert_groups(plans, ep, check):
    catalog, plan = plans
    tampered = plan.model_copy(update={"pools": tuple(p.model_copy(update={"ep": ep}) for p in plan.pools)})
    result = verify_plan(tampered, catalog)
    assert not result.checks[check], result.messages


def test_the_replay_steps_an_expert_parallel_aggregated_pool(plans):
    catalog, plan = plans
    sim = simulate_plan(plan, RooflineModel(catalog), SimulationOptions(duration_s=60.0, seed=1, max_replicas=1))
    assert sim.verdict == "meets"
    assert sim.classes[0].simulated_tpot_ms <= 50.0


def test_a_step_takes_one_budget_of_each_prompt_and_one_per_rank():
    """Prompts of 3,000, 500 and 4,000 tokens waiting, 2,048-token budgets: one rank takes 2,048 of the first; two
    ranks take 2,048 of the first, the 500 and 1,548 of the third (4,096 in all)."""
    def carried(groups):
        service = StepService(batch=8, price=lambda p: np.zeros(9), chunk_tokens=2048, groups=groups)
        replica = SimpleNamespace(service=service, prefilling=deque([["a", 3000], ["b", 500], ["c", 4000]]))
        return [(item[0], take) for item, take in BatchReplica.chunk(replica)]

    assert carried(1) == [("a", 2048)]
    assert carried(2) == [("a", 2048), ("b", 500), ("c", 1548)]


def test_an_expert_parallel_aggregated_pools_engines_take_their_ranks_budgets(plans):
    """Batch b in ep groups: SGLang's --chunked-prefill-size is the replica's b + ep·2,048 (it gives each DP rank
    1/ep), vLLM's --max-num-batched-tokens each data-parallel engine's b/ep + 2,048."""
    catalog, plan = plans
    (pool,) = plan.pools
    spec = PoolSpec(pool=pool, request_class=plan.workload.classes[0], model="deepseek-v3", dtype="fp8", kv_dtype="fp8",
                    moe=True, draft_model=None, draft_tokens=0, vllm_device=None)
    b, ep = pool.batch, pool.ep
    assert token_budget(spec) == b + ep * 2048
    assert dict(sglang_options(spec))["--chunked-prefill-size"] == str(b + ep * 2048)
    assert dict(vllm_options(spec))["--max-num-batched-tokens"] == str(b // ep + 2048)
    assert dict(vllm_options(spec))["--max-num-seqs"] == str(b // ep)
