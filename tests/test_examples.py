"""Every example a new user runs first is run here, through the real command line, and its plan checked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from planner.cli import load_workload
from planner.optimize import PlanOptions, plan_workload

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples" / "workloads").glob("*.yaml"))
PROVABLE = [p for p in EXAMPLES if p.stem != "mixed-agents"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "planner", *args], capture_output=True, text=True, timeout=600)


def test_the_examples_are_there():
    assert {p.stem for p in EXAMPLES} >= {"chat-70b", "mixed-agents", "seed-prefill-decode", "spec-decode", "moe-af"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_plans_through_the_cli(path, tmp_path):
    out = tmp_path / "plan.json"
    proc = run("plan", str(path), "--json", "-o", str(out), "--no-baseline")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan == json.loads(out.read_text())
    assert plan["status"] in {"optimal", "feasible", "time_limit"}
    assert plan["verification"]["ok"], plan["verification"]["messages"]
    assert plan["goodput_scale"] > 0 and plan["pools"]
    for pool in plan["pools"]:
        assert {"role", "class", "strategy", "device", "tp", "batch", "replicas", "devices", "power_kw",
                "cost_usd_per_hour", "utilization"} <= set(pool)


@pytest.mark.parametrize("path", PROVABLE, ids=lambda p: p.stem)
def test_both_backends_reach_the_same_optimum(path, catalog):
    workload = load_workload(path, {})
    scip = plan_workload(workload, catalog, PlanOptions(solver="ortools", relative_gap=1e-9, time_limit_s=60, baseline=False))
    highs = plan_workload(workload, catalog, PlanOptions(solver="pulp", relative_gap=1e-9, time_limit_s=60, baseline=False))
    assert scip.status == highs.status == "optimal"
    assert highs.goodput_scale == pytest.approx(scip.goodput_scale, rel=1e-6)
    assert highs.totals.power_kw == pytest.approx(scip.totals.power_kw, rel=1e-6)


def test_mixed_agents_backends_agree_within_their_certified_gaps(catalog):
    """The four-class example does not close to 1e-6 in seconds; both engines agree within the gap they prove."""
    workload = load_workload(EXAMPLES[[p.stem for p in EXAMPLES].index("mixed-agents")], {})
    plans = [plan_workload(workload, catalog, PlanOptions(solver=s, baseline=False)) for s in ("ortools", "pulp")]
    gap = max(p.solver.gap or 0.0 for p in plans) + 1e-6
    assert plans[1].goodput_scale == pytest.approx(plans[0].goodput_scale, rel=2 * gap)
    assert all(p.verification.ok for p in plans)


def test_infeasible_plan_exits_1_with_the_diagnosis(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text(EXAMPLES[0].read_text().replace("tpot_ms: 50", "tpot_ms: 0.01"))
    proc = run("plan", str(path), "--no-baseline")
    assert proc.returncode == 1
    assert "infeasible" in proc.stdout and "tpot_ms" in proc.stdout


@pytest.mark.parametrize(
    "args, fragment",
    [
        (("missing.yaml",), "cannot read"),
        (("{example}", "--devices", "h100-sxm,nope"), "h200"),
        (("{example}", "--power-budget-kw", "-5"), "power_budget_kw"),
        (("{example}", "--solver", "gurobi"), "solver"),
        (("{example}", "--engine", "cplex"), "engine"),
        (("{example}", "--time-limit-s", "0"), "time-limit"),
    ],
)
def test_bad_plan_input_exits_2_with_one_line(args, fragment):
    args = tuple(a.replace("{example}", str(EXAMPLES[0])) for a in args)
    proc = run("plan", *args, "--no-baseline")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert fragment in proc.stderr


def test_bad_workload_field_is_named(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text(EXAMPLES[0].read_text().replace("rate_rps: 400", "rate_rps: -1"))
    proc = run("plan", str(path))
    assert proc.returncode == 2
    assert "classes.0.rate_rps" in proc.stderr
