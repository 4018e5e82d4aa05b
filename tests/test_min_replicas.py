"""``min_replicas_per_pool`` on the real catalog, checked by hand: llama-3.1-8b in fp8, one class at 5 req/s (one
H100 tp=1 replica at batch 192 serves about 30 req/s). Catalog figures written out: H100 SXM $1.69/h, B200
$2.34/h."""

from __future__ import annotations

from dataclasses import replace

import pytest
from typer.testing import CliRunner

from planner.cli import app
from planner.optimize import PlanOptions, plan_workload
from planner.schema import Workload
from planner.verify import verify_plan

EXACT = PlanOptions(relative_gap=1e-9, time_limit_s=30, baseline=False)


def chat(rate: float = 5.0, devices=("h100-sxm",), strategies=("aggregated",), **constraints) -> Workload:
    return Workload.model_validate({
        "model": "llama-3.1-8b", "dtype": "fp8", "kv_dtype": "fp8", "objective": "min_cost",
        "classes": [{"name": "chat", "rate_rps": rate, "input_tokens": 1000, "output_tokens": 200,
                     "slo": {"ttft_ms": 1000, "tpot_ms": 30}}],
        "strategies": list(strategies),
        "constraints": {"power_budget_kw": 100, "pue": 1.2, "devices": list(devices), **constraints}})


@pytest.fixture(scope="module")
def single(catalog):
    return plan_workload(chat(), catalog, EXACT)


@pytest.mark.parametrize("solver", ["ortools", "pulp"])
def test_a_one_replica_pool_becomes_n_replicas(catalog, single, solver):
    """One replica: $1.69/h. Two: $3.38/h; three: $5.07/h (the same replica, each a whole copy)."""
    assert [p.replicas for p in single.pools] == [1] and single.totals.cost_usd_per_hour == pytest.approx(1.69)
    for need, usd in ((2, 3.38), (3, 5.07)):
        plan = plan_workload(chat(min_replicas_per_pool=need), catalog, replace(EXACT, solver=solver))
        assert plan.solver.backend == solver and plan.status == "optimal" and plan.verification.ok
        assert [p.replicas for p in plan.pools] == [need] and plan.totals.cost_usd_per_hour == pytest.approx(usd)


def test_two_replicas_change_the_device(catalog):
    """40 req/s: one B200 replica ($2.34/h) beats two H100s ($3.38/h); with two replicas each, two B200s cost $4.68/h,
    so the plan moves to two H100s."""
    both = ("h100-sxm", "b200")
    one = plan_workload(chat(40, both), catalog, EXACT)
    assert [(p.device, p.replicas) for p in one.pools] == [("b200", 1)] and one.totals.cost_usd_per_hour == pytest.approx(2.34)
    two = plan_workload(chat(40, both, min_replicas_per_pool=2), catalog, EXACT)
    assert [(p.device, p.replicas) for p in two.pools] == [("h100-sxm", 2)]
    assert two.totals.cost_usd_per_hour == pytest.approx(3.38) and two.verification.ok


def test_every_pool_of_a_disaggregated_plan_has_the_minimum(catalog):
    plan = plan_workload(chat(strategies=("pd_disagg",), min_replicas_per_pool=2), catalog, EXACT)
    assert plan.status == "optimal" and plan.verification.ok
    assert {p.role for p in plan.pools} == {"prefill", "decode"} and min(p.replicas for p in plan.pools) >= 2


def test_the_verifier_counts_the_replicas_of_every_pool(catalog, single):
    """The one-replica plan relabelled as needing two fails the minimum, and nothing else."""
    relabelled = single.model_copy(update={"workload": chat(min_replicas_per_pool=2)})
    result = verify_plan(relabelled, catalog)
    assert {name for name, ok in result.checks.items() if not ok} == {"min_replicas"}
    assert any("1 replicas < min_replicas_per_pool 2" in m for m in result.messages)
    assert verify_plan(single, catalog).checks["min_replicas"]


def test_a_shared_partner_counts_its_own_replicas(catalog):
    """Two target replicas sharing one partner replica (a draft server, an expert pool) have one partner: below a
    minimum of two, though the targets meet it."""
    plan = plan_workload(chat(min_replicas_per_pool=2), catalog, EXACT)
    pool = plan.pools[0].model_copy(update={"partner_device": "h100-sxm", "partner_tp": 1, "partner_role": "draft",
                                            "partner_replicas": 1})
    assert pool.replicas == 2
    result = verify_plan(plan.model_copy(update={"pools": (pool,)}), catalog)
    assert not result.checks["min_replicas"]
    assert any("2 replicas (1 partner replicas) < min_replicas_per_pool 2" in m for m in result.messages)


@pytest.mark.parametrize("value, allowed", [(0, "greater than or equal to 1"), (1001, "less than or equal to 1000")])
def test_the_cli_names_a_bad_minimum_in_one_line(tmp_path, value, allowed):
    path = tmp_path / "w.json"
    path.write_text(chat(min_replicas_per_pool=2).model_dump_json().replace('"min_replicas_per_pool":2',
                                                                            f'"min_replicas_per_pool":{value}'))
    result = CliRunner().invoke(app, ["plan", str(path)])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert f"constraints.min_replicas_per_pool: Input should be {allowed}" in result.output
