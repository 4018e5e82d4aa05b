"""Pipeline parallelism across nodes (``Pool.pp``): a model no scale-up domain holds becomes placeable.

Llama-3.1-405B in bf16 is 812 GB of weights; 8 H100-SXM (one NVLink domain) hold 8 · 0.9 · 80 = 576 GB. Without
pipelines no H100 replica exists; with ``max_pp: 4`` a replica may be 2 stages of TP 8 (406 GB a stage) or 4 stages
of TP 4 or 8 (203 GB a stage, 288 GB in 4 H100s).
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import openpyxl
import pytest
import yaml
from tests.deploy_trees import unknown_options
from typer.testing import CliRunner

from planner.cli import app
from planner.deploy import deployment_for
from planner.estimate import DoesNotFit, estimate
from planner.export import write_plan_workbook
from planner.optimize import PlanOptions, plan_workload
from planner.perf.model import RooflineModel
from planner.plan import shape_text
from planner.schema import EstimateRequest, Plan, SpecDecodeSettings, Workload
from planner.simulate.service import ServiceContext, service_for
from planner.strategies.base import profiles
from planner.verify import verify_plan

EXACT = PlanOptions(relative_gap=1e-9, time_limit_s=30, baseline=False)


def big_on_h100(max_pp: int, **constraints) -> Workload:
    return Workload.model_validate({
        "model": "llama-3.1-405b", "dtype": "bf16", "strategies": ["aggregated", "pd_disagg"],
        "classes": [{"name": "chat", "rate_rps": 20, "input_tokens": 2000, "output_tokens": 500,
                     "slo": {"ttft_ms": 3000, "tpot_ms": 100}}],
        "constraints": {"power_budget_kw": 400, "pue": 1.2, "devices": ["h100-sxm"], "max_pp": max_pp, **constraints},
    })


@pytest.fixture(scope="module")
def plans(catalog) -> dict[str, Plan]:
    return {solver: plan_workload(big_on_h100(4), catalog, replace(EXACT, solver=solver)) for solver in ("ortools", "pulp")}


def test_without_pipelines_no_h100_replica_holds_the_model(catalog):
    plan = plan_workload(big_on_h100(1), catalog, EXACT)
    assert plan.status == "infeasible" and not plan.pools
    assert plan.diagnosis.reason == "slo_unreachable" and "constraints.max_pp" in plan.diagnosis.message


def test_an_slo_no_pipeline_meets_is_diagnosed_with_the_pipelines_best(catalog):
    workload = big_on_h100(4)
    tight = workload.model_copy(update={"classes": (workload.classes[0].model_copy(
        update={"slo": workload.classes[0].slo.model_copy(update={"tpot_ms": 5.0})}),)})
    plan = plan_workload(tight, catalog, EXACT)
    assert plan.status == "infeasible" and plan.diagnosis.reason == "slo_unreachable"
    (tpot,) = [s for s in plan.diagnosis.slo_shortfalls if s.slo == "tpot_ms"]
    assert tpot.best_device == "h100-sxm" and tpot.best_ms > 5.0  # a batch-1 step on a pipeline, not "none runs it"


def test_with_pipelines_both_backends_place_it_on_tp_times_pp_devices(plans):
    ortools, pulp = plans["ortools"], plans["pulp"]
    for plan in (ortools, pulp):
        assert plan.status == "optimal" and plan.verification.ok, plan.verification.messages
        assert plan.goodput_scale > 1.0  # 20 req/s served, with room to spare in 400 kW
        assert plan.pools and all((p.tp, p.pp) in ((8, 2), (4, 4), (8, 4)) for p in plan.pools)
        for p in plan.pools:
            assert p.devices == p.devices_by_type["h100-sxm"] == p.tp * p.pp * p.replicas
        assert plan.totals.devices == sum(p.devices for p in plan.pools)
    assert pulp.goodput_scale == pytest.approx(ortools.goodput_scale, rel=1e-6)
    # tp8×pp2 and tp4×pp4 are the same 16 devices at the same power: the backends may break that tie either way
    assert sorted((p.role, p.tp * p.pp * p.replicas) for p in pulp.pools) == sorted(
        (p.role, p.tp * p.pp * p.replicas) for p in ortools.pools)


def test_a_pipeline_pool_is_written_tp_by_pp(plans):
    pool = plans["ortools"].pools[0]
    assert shape_text(pool) == f"tp{pool.tp}×pp{pool.pp}"
    assert shape_text(pool.model_copy(update={"tp": 8, "pp": 1, "ep": 2})) == "8 ep2"


def test_whole_nodes_count_the_nodes_a_pipeline_spans(catalog):
    plan = plan_workload(big_on_h100(4, whole_nodes=True), catalog, EXACT)
    assert plan.status == "optimal" and plan.verification.ok, plan.verification.messages
    used = sum(p.tp * p.pp * p.replicas for p in plan.pools)
    assert plan.totals.nodes_by_type == {"h100-sxm": -(-used // 8)}


def _edit(plan: Plan, **update) -> Plan:
    pools = list(plan.pools)
    pools[0] = pools[0].model_copy(update=update)
    return plan.model_copy(update={"pools": tuple(pools)})


def _failed(plan: Plan, catalog) -> tuple[set[str], tuple[str, ...]]:
    result = verify_plan(plan, catalog)
    return {name for name, ok in result.checks.items() if not ok}, result.messages


def test_a_plan_edited_on_pp_alone_fails_the_device_recount(catalog, plans):
    plan = plans["ortools"]
    pool = plan.pools[0]
    failed, messages = _failed(_edit(plan, pp=pool.pp * 2), catalog)
    assert "devices" in failed
    assert any(f"reports {pool.devices} devices" in m and f"{2 * pool.devices}" in m for m in messages)


def test_a_pipeline_refolded_on_the_same_devices_fails_the_recomputation(catalog, plans):
    """tp 8 × pp 2 claimed as tp 16 × pp 1 (16 devices, so every count and the power agree): no H100 domain runs
    TP 16, so the re-check refuses the shape."""
    plan = plans["ortools"]
    pool = next(p for p in plan.pools if p.tp * p.pp == 16)
    i = plan.pools.index(pool)
    pools = list(plan.pools)
    pools[i] = pool.model_copy(update={"tp": 16, "pp": 1})
    failed, messages = _failed(plan.model_copy(update={"pools": tuple(pools)}), catalog)
    assert "latency_recomputed" in failed and "devices" not in failed and "power" not in failed
    assert any("tp 16 × pp 1 is not a shape the planner offers" in m for m in messages)


def test_a_pipeline_beyond_max_pp_fails_the_recomputation(catalog, plans):
    plan = plans["ortools"]
    tighter = plan.model_copy(update={"workload": plan.workload.model_copy(
        update={"constraints": plan.workload.constraints.model_copy(update={"max_pp": 1})})})
    failed, messages = _failed(tighter, catalog)
    assert "latency_recomputed" in failed and "devices" not in failed


def test_the_deployment_writes_the_stages_and_no_single_node_deployment(catalog, plans):
    plan = plans["ortools"]
    vllm = deployment_for(plan, "vllm", catalog)
    assert unknown_options(vllm) == []
    for pool in plan.pools:
        folder = next(p.rsplit("/", 1)[0] for p in vllm if p.startswith("pools/") and f"-tp{pool.tp}pp{pool.pp}/" in p)
        launch = vllm[f"{folder}/launch.sh"]
        assert f"--tensor-parallel-size {pool.tp}" in launch and f"--pipeline-parallel-size {pool.pp}" in launch
        assert f"{pool.tp * pool.pp}x h100-sxm (tp {pool.tp} × pp {pool.pp})" in vllm[f"{folder}/README.md"]
    assert not any(p.endswith("k8s.yaml") for p in vllm)  # no Deployment places one replica on several nodes
    dynamo = deployment_for(plan, "dynamo", catalog)
    assert unknown_options(dynamo) == []
    workers = [svc for path, text in dynamo.items() if path.startswith("dynamo/")
               for name, svc in yaml.safe_load(text)["spec"]["services"].items() if name != "Frontend"]
    assert sorted((int(w["resources"]["limits"]["gpu"]), w["multinode"]["nodeCount"]) for w in workers) == sorted(
        (p.tp, p.pp) for p in plan.pools)


def test_the_workbook_lists_each_pools_stages(catalog, plans, tmp_path):
    plan = plans["ortools"]
    write_plan_workbook(plan, catalog, tmp_path / "plan.xlsx")
    ws = openpyxl.load_workbook(tmp_path / "plan.xlsx", data_only=True)["Pools"]
    headers = [c.value for c in ws[1]]
    rows = [dict(zip(headers, (c.value for c in row))) for row in ws.iter_rows(min_row=2, max_row=len(plan.pools) + 1)]
    assert [(r["TP (devices per stage)"], r["PP stages (replica: TP x PP devices)"], r["Devices"]) for r in rows] == [
        (p.tp, p.pp, p.tp * p.pp * p.replicas) for p in plan.pools]


def test_the_replay_steps_a_pipeline_as_the_planner_priced_it(catalog, plans):
    """A decode pool's step at its full batch in the replay is the TPOT the plan reports; a prefill pool's pass of its
    batch of prompts is the service the plan's TTFT was built on (the pd_disagg pools of the plan)."""
    plan = plans["ortools"]
    assert any(p.strategy == "pd_disagg" and p.pp > 1 for p in plan.pools)
    costs = RooflineModel(catalog)
    ctx = ServiceContext(plan.workload, *profiles(costs, plan.workload), costs, chunk_tokens=2048)
    rc = plan.workload.classes[0]
    for pool in (p for p in plan.pools if p.strategy == "pd_disagg"):
        service = service_for(pool, rc, ctx)
        if pool.role == "decode":
            assert service.step_s(pool.batch) * 1e3 == pytest.approx(pool.tpot_ms, rel=1e-9)
        else:
            assert service.seconds[pool.batch - 1] * 1e3 < pool.ttft_ms  # the pass, without its wait and hand-off
            assert service.seconds[pool.batch - 1] == pytest.approx(float(costs.prefill(
                ctx.model, costs.silicon("h100-sxm", "bf16"), pool.tp * pool.pp, 2000, prompts=pool.batch,
                pp=pool.pp).total_s.reshape(-1)[0]), rel=1e-12)


@pytest.mark.parametrize("solver", ["ortools", "pulp"])
def test_aggregated_replicas_pipeline_too(catalog, solver):
    plan = plan_workload(big_on_h100(4).model_copy(update={"strategies": ("aggregated",)}), catalog,
                         replace(EXACT, solver=solver))
    assert plan.status == "optimal" and plan.verification.ok, plan.verification.messages
    assert plan.pools and all(p.role == "aggregated" and p.pp > 1 for p in plan.pools)


def test_shared_pools_pipeline_too(catalog):
    """Two small classes on one shared prefill and one shared decode pool, each a pipeline (the cheapest fleet)."""
    workload = Workload.model_validate({
        "model": "llama-3.1-405b", "dtype": "bf16", "strategies": ["pd_disagg"], "shared_pools": True,
        "objective": "min_cost",
        "classes": [{"name": "chat", "rate_rps": 0.5, "input_tokens": 2000, "output_tokens": 500,
                     "slo": {"ttft_ms": 3000, "tpot_ms": 100}},
                    {"name": "rag", "rate_rps": 0.3, "input_tokens": 4000, "output_tokens": 200,
                     "slo": {"ttft_ms": 4000, "tpot_ms": 150}}],
        "constraints": {"power_budget_kw": 200, "pue": 1.2, "devices": ["h100-sxm"]}})
    plans = [plan_workload(workload, catalog, replace(EXACT, solver=s)) for s in ("ortools", "pulp")]
    for plan in plans:
        assert plan.status == "optimal" and plan.verification.ok, plan.verification.messages
        assert {p.role for p in plan.pools} == {"prefill", "decode"}
        assert all(p.serves is not None and p.pp > 1 for p in plan.pools)
    assert plans[1].totals.cost_usd_per_hour == pytest.approx(plans[0].totals.cost_usd_per_hour, rel=1e-6)


def test_estimate_prices_a_pipeline_where_tensor_parallelism_alone_cannot_hold_it(catalog):
    flat = EstimateRequest(model="llama-3.1-405b", device="h100-sxm", tp=8, batch=1)
    with pytest.raises(DoesNotFit, match="weights need 101.5 GB per device"):  # 812 GB / 8 > 72 GB usable
        estimate(flat, catalog, require_fit=True)
    staged = estimate(flat.model_copy(update={"pp": 2}), catalog, require_fit=True)
    assert (staged.tp, staged.pp, staged.fits) == (8, 2, True)
    assert staged.weights_bytes_per_device == pytest.approx(1.0150e11 / 2, rel=1e-3)  # 50.75 GB on each of 16
    assert staged.output_tokens_per_s_per_device == pytest.approx(staged.output_tokens_per_s / 16)
    with pytest.raises(DoesNotFit, match="pipelines its layers over its own chips"):
        estimate(EstimateRequest(model="llama-3.1-405b", device="cs-3", tp=32, pp=2), catalog)


def test_the_estimate_command_takes_pp():
    result = CliRunner().invoke(app, ["estimate", "--model", "llama-3.1-405b", "--device", "h100-sxm", "--tp", "8",
                                      "--pp", "2", "--json"])
    assert result.exit_code == 0, result.output
    assert (json.loads(result.output)["tp"], json.loads(result.output)["pp"]) == (8, 2)
    result = CliRunner().invoke(app, ["estimate", "--model", "llama-3.1-405b", "--device", "h100-sxm", "--tp", "8",
                                      "--pp", "9"])
    assert result.exit_code == 2 and "pp" in result.output


@pytest.mark.parametrize("solver", ["ortools", "pulp"])
def test_a_pipelined_aggregated_replica_may_be_shared(catalog, solver):
    """Two 0.2 req/s classes of Llama-3.1-405B bf16 on H100s, TPOT 150 and 200 ms: each needs a pipelined replica of
    16 H100s of its own (32 in all); shared, one replica of 16 (tp8×pp2 or tp4×pp4: the same power) serves both."""
    def work(shared):
        return Workload.model_validate({
            "model": "llama-3.1-405b", "dtype": "bf16", "strategies": ["aggregated"], "shared_pools": shared,
            "classes": [{"name": n, "rate_rps": 0.2, "input_tokens": 1000, "output_tokens": 200,
                         "slo": {"ttft_ms": 5000, "tpot_ms": t}} for n, t in (("a", 150), ("b", 200))],
            "constraints": {"power_budget_kw": 400, "devices": ["h100-sxm"]}, "objective": "min_power"})
    own = plan_workload(work(False), catalog, PlanOptions(solver=solver, baseline=False))
    shared = plan_workload(work(True), catalog, PlanOptions(solver=solver, baseline=False))
    assert own.totals.devices_by_type == {"h100-sxm": 32} and shared.totals.devices_by_type == {"h100-sxm": 16}
    (pool,) = shared.pools
    assert pool.tp * pool.pp == 16 and pool.pp > 1 and pool.replicas == 1
    assert pool.serves == pytest.approx({"a": 0.2, "b": 0.2})
    assert shared.verification.ok, shared.verification.messages
    tampered = shared.model_copy(update={"pools": (pool.model_copy(update={"pp": 1}),)})
    assert not verify_plan(tampered, catalog).ok


def test_the_diagnosis_prices_no_decode_pipeline_a_strategy_never_offers(catalog):
    """Speculative decoding alone: verify+draft replicas stay tensor parallel, so no H100 decode replica holds the
    405B at all, which the diagnosis says rather than "each SLO is reachable alone"."""
    work = big_on_h100(4).model_copy(update={"strategies": ("spec_decode",), "spec_decode": SpecDecodeSettings(
        draft_model="llama-3.2-1b", acceptance_rate=0.7)})
    plan = plan_workload(work, catalog, EXACT)
    assert plan.status == "infeasible" and plan.diagnosis.reason == "slo_unreachable"
    (tpot,) = [s for s in plan.diagnosis.slo_shortfalls if s.slo == "tpot_ms"]
    assert tpot.best_ms is None and tpot.best_device is None


def test_a_pipelined_shared_aggregated_replica_splits_its_kv_over_its_stages(catalog):
    """Llama-3.1-405B bf16, 16,000-token prompts, 500-token answers, loose SLOs (60 s, 1 s): a sequence holds 16,256
    tokens of 516,096 B of KV, 0.524 GB a device of 16 (head-split 8 ways, layer-split over 2 or 4 stages); beside
    50.73 GB of weights an H100 has 21.27 GB left, room for 40, so of the grid's 32 and 48 a shared replica of 16
    runs 32 (were the KV not split over the stages, 1.05 GB a device: 16). The re-check agrees: 32 fit, 48 do not."""
    from planner.candidates import CandidateOptions
    from planner.graph import build_task_graph
    from planner.plan import pools_of
    from planner.strategies.aggregated import price_shared, recheck
    from planner.strategies.base import Pricing
    from planner.verify import checking_at

    work = Workload.model_validate({
        "model": "llama-3.1-405b", "dtype": "bf16", "strategies": ["aggregated"], "shared_pools": True,
        "classes": [{"name": n, "rate_rps": 0.2, "input_tokens": 16_000, "output_tokens": 500,
                     "slo": {"ttft_ms": 60_000, "tpot_ms": t}} for n, t in (("a", 1000), ("b", 1250))],
        "constraints": {"power_budget_kw": 400, "devices": ["h100-sxm"]}})
    costs, options = RooflineModel(catalog), CandidateOptions()
    model = costs.profile(work.model, work.dtype, work.kv_dtype)
    ctx = Pricing(work, model, None, [costs.silicon("h100-sxm", "bf16")], build_task_graph(work, model, None), options, costs)
    sixteen = [c for c in price_shared(ctx) if c.tp * c.pp == 16]
    assert {(c.tp, c.pp): c.batch for c in sixteen} == {(8, 2): 32, (4, 4): 32}
    for c in sixteen:
        (pool,) = pools_of(work, [c], np.array([1]), {})
        for batch, fits in ((32, True), (48, False)):
            assert recheck(pool.model_copy(update={"batch": batch}), work.classes[0],
                           checking_at(work, options, costs)).memory_ok is fits
