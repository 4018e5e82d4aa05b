"""Expert parallelism with data-parallel attention as a decision of MoE pools (``Pool.ep``)."""

from __future__ import annotations

import pytest

from planner.catalog import load_catalog
from planner.optimize import PlanOptions, plan_workload
from planner.perf.model import RooflineModel
from planner.schema import Workload
from planner.strategies.base import decode_fits, expert_groups
from planner.verify import verify_plan


@pytest.fixture(scope="module")
def costs():
    return RooflineModel(load_catalog())


def deepseek_chat(**extra) -> Workload:
    return Workload.model_validate({
        "model": "deepseek-v3", "dtype": "fp8", "kv_dtype": "fp8", "strategies": ["pd_disagg"],
        "classes": [{"name": "chat", "rate_rps": 100, "input_tokens": 2000, "output_tokens": 500,
                     "slo": {"ttft_ms": 2000, "tpot_ms": 50}}],
        "constraints": {"power_budget_kw": 400, "pue": 1.2, "devices": ["b200"]}, **extra,
    })


def test_expert_groups_are_for_moe_models_on_gpu_like_devices(costs):
    moe, dense = costs.profile("deepseek-v3", "fp8", "fp8"), costs.profile("llama-3.3-70b", "fp8", None)
    assert expert_groups(moe, costs.silicon("b200", "fp8"), 8) == [1, 2, 4, 8]
    assert expert_groups(moe, costs.silicon("b200", "fp8"), 4) == [1, 2, 4]
    assert expert_groups(dense, costs.silicon("b200", "fp8"), 8) == [1]
    assert expert_groups(moe, costs.silicon("cs-3", "fp8"), 16) == [1]  # an SRAM pipeline splits by layers


def test_data_parallel_attention_stops_copying_mla_kv_to_every_rank(costs):
    """DeepSeek-V3 fp8 on 8 B200 (162 GB usable each), isl 2,000, osl 500: a sequence's live MLA KV is 79.27 MB.
    TP8 copies it to every rank: 671.03 GB / 8 = 83.88 GB of weights, 78.12 GB left, 985 sequences. EP8: the
    17.12 GB dense part on every device and 653.91 GB of routed experts over 8 (98.86 GB), 63.14 GB left, each
    device holding its own eighth of the sequences: 63.14 GB / 9.91 MB = 6,372, so 796 whole requests per group (6,368)."""
    model, b200 = costs.profile("deepseek-v3", "fp8", "fp8"), costs.silicon("b200", "fp8")
    rc = deepseek_chat().classes[0]
    assert decode_fits(model, costs, b200, 8, 985, rc) and not decode_fits(model, costs, b200, 8, 986, rc)
    assert decode_fits(model, costs, b200, 8, 6368, rc, ep=8) and not decode_fits(model, costs, b200, 8, 6376, rc, ep=8)
    assert not decode_fits(model, costs, b200, 8, 6364, rc, ep=8)  # fits in memory, but not whole requests per group
    # EP4: attention replicas of 2 (MLA's KV on both), 90.30 GB of weights, 71.70 GB left: 3,618 -> 3,616 in fours
    assert decode_fits(model, costs, b200, 8, 3616, rc, ep=4) and not decode_fits(model, costs, b200, 8, 3620, rc, ep=4)
    assert not decode_fits(model, costs, b200, 8, 1, rc, ep=16)  # more groups than devices


@pytest.fixture(scope="module")
def plans():
    catalog = load_catalog()
    return catalog, plan_workload(deepseek_chat(), catalog, PlanOptions(baseline=False))


def test_a_moe_decode_pool_chooses_its_expert_groups(plans):
    catalog, plan = plans
    assert plan.status == "optimal" and plan.verification.ok, plan.verification.messages
    decode = max((p for p in plan.pools if p.role == "decode"), key=lambda p: p.devices)
    # batch 2,048 > the 985 sequences TP8 holds: only expert groups fit it
    assert decode.ep > 1 and decode.batch > 985


@pytest.mark.parametrize("ep, check", [(1, "memory"), (16, "memory")])
def test_verify_recomputes_a_pool_at_its_expert_groups(plans, ep, check):
    catalog, plan = plans
    pool = max((p for p in plan.pools if p.role == "decode"), key=lambda p: p.devices)
    tampered = plan.model_copy(update={"pools": tuple(p.model_copy(update={"ep": ep}) if p is pool else p for p in plan.pools)})
    result = verify_plan(tampered, catalog)
    assert not result.checks[check], result.messages


def test_verify_recomputes_the_step_at_other_expert_groups(plans):
    catalog, plan = plans
    pool = max((p for p in plan.pools if p.role == "decode"), key=lambda p: p.devices)
    other = 4 if pool.ep == 8 else 8
    tampered = plan.model_copy(update={"pools": tuple(p.model_copy(update={"ep": other}) if p is pool else p for p in plan.pools)})
    assert not verify_plan(tampered, catalog).ok
