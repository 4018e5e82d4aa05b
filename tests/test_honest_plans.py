"""Plans say what they cannot promise: ``meets_demand`` false (and a warning in the CLI and the workbook) when only
part of the traffic is served; per device type, how far its numbers are calibrated and which inputs are estimates;
per pool and class, the range its TTFT and TPOT could take."""

from __future__ import annotations

import json
from pathlib import Path

import openpyxl
import pytest
import yaml
from typer.testing import CliRunner

from planner.cli import app
from planner.export.workbook import write_plan_workbook
from planner.optimize import PlanOptions, plan_workload
from planner.perf.model import EXTRAPOLATION_WIDENING, RooflineModel
from planner.schema import Plan, Workload

SHORT = {  # 5,000 req/s of chat on a 60 kW budget: a fraction of it fits
    "model": "llama-3.1-8b", "dtype": "fp8",
    "classes": [{"name": "chat", "rate_rps": 5000, "input_tokens": 1000, "output_tokens": 200,
                 "slo": {"ttft_ms": 1000, "tpot_ms": 50}}],
    "constraints": {"power_budget_kw": 60, "devices": ["h100-sxm"]},
}


def test_a_budget_bound_plan_does_not_meet_demand_and_says_how_much_it_serves(catalog, tmp_path):
    plan = plan_workload(Workload.model_validate(SHORT), catalog, PlanOptions(baseline=False))
    assert plan.status == "optimal" and 0 < plan.goodput_scale < 1 and not plan.meets_demand
    roomy = plan_workload(Workload.model_validate({**SHORT, "constraints": {"power_budget_kw": 6000, "devices": ["h100-sxm"]}}),
                          catalog, PlanOptions(baseline=False))
    assert roomy.goodput_scale >= 1 and roomy.meets_demand
    stored = json.loads(plan.model_dump_json())
    del stored["meets_demand"]  # a plan saved before the field existed gets it from its scale
    assert Plan.model_validate(stored).meets_demand is False

    path = tmp_path / "short.yaml"
    path.write_text(json.dumps(SHORT))
    result = CliRunner().invoke(app, ["plan", str(path), "--no-baseline"])
    assert result.exit_code == 0, result.output
    assert f"warning: serves only {plan.goodput_scale:.1%} of the demand" in " ".join(result.output.split())

    write_plan_workbook(plan, catalog, tmp_path / "short.xlsx")
    book = openpyxl.load_workbook(tmp_path / "short.xlsx")
    texts = [c.value for row in book["Summary"].iter_rows() for c in row if isinstance(c.value, str)]
    assert any(t.startswith("This plan serves only") for t in texts)


def test_each_device_type_of_a_plan_says_how_far_its_numbers_are_calibrated(catalog):
    tpu = {**SHORT, "constraints": {"power_budget_kw": 6000, "devices": ["tpu-v7"]}}
    plan = plan_workload(Workload.model_validate(tpu), catalog, PlanOptions(baseline=False))
    (only,) = plan.confidence
    # the TPU's TDP is an estimate in the catalog, so the plan's power figures are too
    assert only.device == "tpu-v7" and only.level == "estimated" and "tdp_w" in only.estimated_inputs
    h100 = plan_workload(Workload.model_validate({**SHORT, "constraints": {"power_budget_kw": 6000,
                                                                          "devices": ["h100-sxm"]}}),
                         catalog, PlanOptions(baseline=False))
    (only,) = h100.confidence
    assert only.device == "h100-sxm" and only.level in ("calibrated", "extrapolated")
    assert "tdp_w" not in only.estimated_inputs  # NVIDIA publishes the H100's TDP


def test_predicted_figures_carry_their_calibration_band(catalog):
    costs = RooflineModel(catalog)
    workload = Workload.model_validate(yaml.safe_load(Path("examples/workloads/seed-prefill-decode.yaml").read_text()))
    plan = plan_workload(workload, catalog, PlanOptions(baseline=False))
    decode = next(p for p in plan.pools if p.role == "decode")
    # CS-3's family is fitted on vendor claims only: the uncalibrated band, 0.5x to 2x the figure
    assert decode.device == "cs-3" and decode.tpot_ms_range == pytest.approx((0.5 * decode.tpot_ms, 2.0 * decode.tpot_ms))
    prefill = max((p for p in plan.pools if p.role == "prefill"), key=lambda p: p.replicas)
    band = costs.band("trn2", "ttft")
    level = next(c.level for c in plan.confidence if c.device == "trn2")
    widen = EXTRAPOLATION_WIDENING if level == "extrapolated" else 1.0
    low, high = band.low ** widen, band.high ** widen
    assert low < 1 < high
    assert prefill.ttft_ms_range == pytest.approx((low * prefill.ttft_ms, high * prefill.ttft_ms))
    (fast,) = plan.classes  # one class: its range is its pools' served-weighted ranges, each plus its slot wait
    weights = [(p.served_rps, (p.tpot_ms_range[0] + p.slot_wait_ms, p.tpot_ms_range[1] + p.slot_wait_ms))
               for p in plan.pools if p.tpot_ms_range]
    assert fast.tpot_ms_range == pytest.approx(tuple(sum(w * r[i] for w, r in weights) / sum(w for w, _ in weights)
                                                    for i in (0, 1)))
    assert fast.tpot_ms_range[0] <= fast.tpot_ms <= fast.tpot_ms_range[1]
