"""What heterogeneity buys, against the best single-device fleet and a reference fleet the buyer names, in the
objective and in money, split into "best device" and "mixing"."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from planner.cli import app
from planner.optimize import PlanOptions, plan_workload, usd_per_million_tokens
from planner.schema import Workload


def chat(**extra) -> Workload:
    return Workload.model_validate({
        "model": "llama-3.1-8b", "dtype": "fp8",
        "classes": [{"name": "chat", "rate_rps": 20, "input_tokens": 1000, "output_tokens": 200,
                     "slo": {"ttft_ms": 1000, "tpot_ms": 50}},
                    {"name": "docs", "rate_rps": 5, "input_tokens": 6000, "output_tokens": 100,
                     "slo": {"ttft_ms": 3000, "tpot_ms": 80}}],
        "constraints": {"power_budget_kw": 300, "pue": 1.2, "devices": ["h200", "mi300x", "trn2"]},
        **extra,
    })


def test_dollars_per_million_tokens_hand_case():
    # $3.60/h at 1 token/s: 3,600 tokens an hour cost $3.60, so $1,000 per million
    assert usd_per_million_tokens(3.6, 1.0) == pytest.approx(1000.0)
    assert usd_per_million_tokens(3.6, 0.0) is None


@pytest.fixture(scope="module")
def plan(catalog):
    return plan_workload(chat(baseline_device="h100-sxm"), catalog, PlanOptions())


def test_the_reference_fleet_is_solved_although_the_plan_may_not_use_it(plan):
    assert "h100-sxm" not in plan.totals.devices_by_type
    ref = plan.reference
    assert ref.device == "h100-sxm" and ref.status != "infeasible" and ref.devices > 0 and ref.capex_usd > 0


def test_the_gain_over_the_reference_splits_into_best_device_and_mixing(plan):
    by = {g.versus: g for g in plan.gains.against}
    assert by["best_homogeneous"].device == plan.baseline.device
    assert by["reference"].objective_ratio == pytest.approx(plan.goodput_scale / plan.reference.goodput_scale)
    assert plan.gains.mixing == pytest.approx(plan.goodput_scale / plan.baseline.goodput_scale)
    assert plan.gains.best_device == pytest.approx(plan.baseline.goodput_scale / plan.reference.goodput_scale)
    assert plan.gains.best_device * plan.gains.mixing == pytest.approx(by["reference"].objective_ratio)
    assert by["reference"].cost_change_usd_per_hour == pytest.approx(
        plan.totals.cost_usd_per_hour - plan.reference.cost_usd_per_hour)
    assert by["reference"].capex_change_usd == pytest.approx(plan.totals.capex_usd - plan.reference.capex_usd)
    tokens = plan.goodput_scale * (20 * 200 + 5 * 100)
    assert by["reference"].usd_per_million_tokens == pytest.approx(plan.totals.cost_usd_per_hour / (tokens * 3600) * 1e6)


def test_under_min_cost_the_gain_is_in_dollars(catalog):
    plan = plan_workload(chat(objective="min_cost", baseline_device="h100-sxm"), catalog, PlanOptions())
    by = {g.versus: g for g in plan.gains.against}
    assert by["reference"].objective_ratio == pytest.approx(plan.reference.cost_usd_per_hour / plan.totals.cost_usd_per_hour)
    assert by["best_homogeneous"].cost_change_usd_per_hour <= 1e-6  # never dearer than the best single device


def test_a_reference_that_cannot_serve_the_workload_says_so(catalog, tmp_path):
    tight = chat(baseline_device="l4").model_dump(mode="json")  # 300 GB/s of GDDR: 8 GB of weights take > 6 ms a step
    tight["classes"][0]["slo"]["tpot_ms"] = 6
    tight["classes"][1]["slo"]["tpot_ms"] = 6
    workload = Workload.model_validate(tight)
    plan = plan_workload(workload, catalog, PlanOptions())
    assert plan.status != "infeasible"  # the H200s still do
    assert plan.reference.status == "infeasible" and plan.reference.devices == 0
    assert all(g.versus != "reference" for g in plan.gains.against)
    path = tmp_path / "w.json"
    path.write_text(workload.model_dump_json())
    out = CliRunner().invoke(app, ["plan", str(path)])
    assert "reference fleet l4: cannot serve this workload under its constraints" in out.output


def test_the_cli_prints_the_split(catalog, tmp_path):
    path = tmp_path / "w.json"
    path.write_text(chat(baseline_device="h100-sxm").model_dump_json())
    out = CliRunner().invoke(app, ["plan", str(path)])
    assert out.exit_code == 0, out.output
    assert "vs reference (h100-sxm):" in out.output and "split: best device" in out.output


def test_the_workbook_summary_states_the_gains(plan, catalog, tmp_path):
    import openpyxl

    from planner.export.workbook import write_plan_workbook

    write_plan_workbook(plan, catalog, tmp_path / "plan.xlsx")
    texts = [c.value for row in openpyxl.load_workbook(tmp_path / "plan.xlsx")["Summary"].iter_rows()
             for c in row if isinstance(c.value, str)]
    assert any(t.startswith("vs reference (h100-sxm):") for t in texts)
    assert any(t.startswith("split: best device") for t in texts)


@pytest.mark.parametrize("objective", ["max_goodput", "min_cost"])
def test_the_pruned_baseline_search_finds_what_solving_every_device_finds(catalog, objective):
    """Device types whose LP bound cannot beat the best fleet so far are skipped: the answer is the exhaustive one."""
    from planner import graph as task_graph
    from planner.candidates import generate_candidates
    from planner.optimize import best_homogeneous, homogeneous_fleet
    from planner.perf.model import RooflineModel

    workload = chat(objective=objective)
    costs = RooflineModel(catalog)
    graph = task_graph.build_task_graph(workload, costs.profile(workload.model, workload.dtype), None)
    candidates, _ = generate_candidates(workload, catalog, graph)
    units = {(rc.name, s): task_graph.units(graph, rc.name, s) for rc in workload.classes
             for s in task_graph.strategies_of(graph, rc.name)}
    options = PlanOptions()
    best = best_homogeneous(workload, units, candidates, options)
    every = [homogeneous_fleet(workload, units, candidates, d, options) for d in ("h200", "mi300x", "trn2")]
    served = [f for f in every if f.status != "infeasible"]
    if objective == "max_goodput":
        assert best.goodput_scale == pytest.approx(max(f.goodput_scale for f in served), rel=5e-3)
    else:
        assert best.cost_usd_per_hour == pytest.approx(min(f.cost_usd_per_hour for f in served), rel=5e-3)
