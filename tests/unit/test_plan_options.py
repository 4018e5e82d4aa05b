"""One reading of a request's solve options for every caller (CLI, REST, studies, jobs)."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

import planner.optimize
from api.runner import PlanJob
from planner.cli import app
from planner.files import read_document
from planner.optimize import PlanOptions
from planner.schema import Workload
from planner.sensitivity import SensitivityOptions
from planner.simulate import SimulationOptions
from planner.study import StudyOptions

WORKLOAD = Path(__file__).resolve().parents[2] / "examples" / "workloads" / "chat-70b.yaml"


def test_options_of_a_mapping_keep_every_stated_field_and_default_the_rest():
    options = PlanOptions.of({"solver": "pulp", "engine": "cbc", "time_limit_s": 7.5, "relative_gap": 0.01,
                              "baseline": False, "alternatives": 2, "sensitivity_delta": 0.3, "simulate": True,
                              "unrelated": 1})
    assert (options.solver, options.engine, options.time_limit_s, options.relative_gap, options.baseline) == (
        "pulp", "cbc", 7.5, 0.01, False)
    assert options.alternatives == 2 and options.sensitivity == SensitivityOptions(delta=0.3)
    assert options.simulate == SimulationOptions()
    assert PlanOptions.of({}) == PlanOptions()
    assert PlanOptions.of({"sensitivity_delta": None, "simulate": False}) == PlanOptions()


def test_a_studys_gap_reaches_its_plans():
    stated = StudyOptions(relative_gap=0.003, time_limit_s=4.0, node_limit=300)
    options = PlanOptions.of(stated.model_dump())
    assert options.relative_gap == 0.003 and options.time_limit_s == 4.0 and options.baseline is False
    assert options.node_limit == 300


def test_the_cli_and_a_rest_plan_job_read_the_same_stated_options_alike(monkeypatch):
    """``siliconmix plan`` and POST /v1/plans (its PlanJob) with the same settings solve with equal PlanOptions."""
    seen = []

    def capture(workload, catalog, options):
        seen.append(options)
        raise ValueError("captured")  # the CLI's bad-input exit: nothing is solved

    monkeypatch.setattr(planner.optimize, "plan_workload", capture)
    result = CliRunner().invoke(app, ["plan", str(WORKLOAD), "--solver", "pulp",
                                      "--engine", "cbc", "--time-limit-s", "7", "--gap", "0.01", "--no-baseline",
                                      "--alternatives", "2", "--sensitivity", "--sensitivity-delta", "0.3", "--simulate",
                                      "--node-limit", "500"])
    assert result.exit_code == 2 and "captured" in result.output, result.output
    job = PlanJob(workload=Workload.model_validate(read_document(WORKLOAD)), solver="pulp", engine="cbc", time_limit_s=7.0, baseline=False, relative_gap=0.01, sensitivity_delta=0.3,
        alternatives=2, simulate=True, node_limit=500)
    expected = PlanOptions(solver="pulp", engine="cbc", time_limit_s=7.0, relative_gap=0.01, node_limit=500, baseline=False, alternatives=2,
                           sensitivity=SensitivityOptions(delta=0.3), simulate=SimulationOptions())
    assert seen == [expected] and job.options() == expected
    assert job.options(0.5).time_limit_s == pytest.approx(3.5)


def test_a_baseline_solves_to_the_looser_gap_and_the_shorter_limit():
    looser = PlanOptions(time_limit_s=5.0, relative_gap=1e-4, baseline_gap=5e-3, baseline_time_limit_s=2.0).for_baseline()
    assert (looser.time_limit_s, looser.relative_gap) == (2.0, 5e-3)
    already = PlanOptions(time_limit_s=1.0, relative_gap=0.01, baseline_gap=5e-3, baseline_time_limit_s=2.0).for_baseline()
    assert (already.time_limit_s, already.relative_gap) == (1.0, 0.01)  # never longer or tighter than the plan's own


def test_a_re_solve_plans_alone():
    """A sensitivity re-solve is the plan alone: no baseline, no alternatives, no analysis of its own, no replay."""
    stated = PlanOptions(solver="pulp", engine="cbc", time_limit_s=7.0, relative_gap=0.01, node_limit=500, alternatives=2,
                         sensitivity=SensitivityOptions(delta=0.3), simulate=SimulationOptions())
    assert stated.for_resolve() == PlanOptions(solver="pulp", engine="cbc", time_limit_s=7.0, relative_gap=0.01,
                                               node_limit=500, baseline=False)


def test_the_stated_engine_solves_the_plan(catalog):
    """OR-Tools solves with SCIP unless told otherwise; told HiGHS, every solve of the plan is HiGHS's."""
    workload = Workload.model_validate({
        "model": "llama-3.1-8b", "dtype": "bf16", "strategies": ["aggregated"], "objective": "min_power",
        "classes": [{"name": "chat", "rate_rps": 3, "input_tokens": 1024, "output_tokens": 256,
                     "slo": {"ttft_ms": 2000, "tpot_ms": 50}}],
        "constraints": {"power_budget_kw": 100, "devices": ["h100-sxm"]}})
    plain = planner.optimize.plan_workload(workload, catalog, PlanOptions(baseline=False))
    highs = planner.optimize.plan_workload(workload, catalog, PlanOptions(engine="highs", baseline=False))
    assert (plain.solver.engine, highs.solver.engine) == ("scip", "highs")
    assert highs.totals.devices_by_type == plain.totals.devices_by_type  # the same optimum either way
