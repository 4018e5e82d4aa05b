"""Simulation benchmark: simulated requests per second of wall time, replaying the mixed-agents plan.

Run: python benchmarks/bench_simulate.py [PLAN.json] [--all]
(PLAN.json from ``python -m planner plan examples/workloads/mixed-agents.yaml -o PLAN.json``; without it the
plan is solved here first, untimed). Prints, per number of replicas simulated per pool, the requests simulated
in a 10-minute window (counted where they enter the fleet, measured or not, including those that arrive while
the last measured ones drain), the wall time and requests per wall second; ``--all`` adds the whole fleet (every replica of every pool).
Target (issue 14): a 10-minute, 10,000-request replay in under 30 s on 2 cores, i.e. ≥ 333 requests/s.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import yaml

from planner.catalog import load_catalog
from planner.export import read_plan
from planner.optimize import plan_workload
from planner.perf.model import RooflineModel
from planner.schema import Workload
from planner.simulate import SimulationOptions, simulate_plan

WORKLOAD = Path(__file__).resolve().parent.parent / "examples" / "workloads" / "mixed-agents.yaml"
REPLICAS = (1, 4, 16)
TARGET_RPS = 10_000 / 30.0


def main(argv: list[str]) -> None:
    catalog = load_catalog()
    files = [a for a in argv if not a.startswith("--")]
    if files:
        plan = read_plan(files[0])
    else:
        plan = plan_workload(Workload.model_validate(yaml.safe_load(WORKLOAD.read_text())), catalog)
    costs = RooflineModel(catalog)
    fleet = sum(p.replicas for p in plan.pools)
    print(f"plan: {plan.model}, {len(plan.pools)} pools, {fleet} replicas, {sum(p.served_rps for p in plan.pools if p.role != 'prefill'):,.0f} req/s served")
    for replicas in REPLICAS + ((None,) if "--all" in argv else ()):
        options = SimulationOptions(duration_s=600.0, seed=1, max_replicas=replicas)
        start = time.perf_counter()
        sim = simulate_plan(plan, costs, options)
        wall = time.perf_counter() - start
        label = "every" if replicas is None else str(replicas)
        print(f"{label:>5} replica(s)/pool: {sim.requests:>9,} requests, {sim.simulated_s:6.0f} s simulated, "
              f"{wall:6.2f} s wall, {sim.requests / wall:>9,.0f} requests/s (target {TARGET_RPS:,.0f}); verdict {sim.verdict}")


if __name__ == "__main__":
    main(sys.argv[1:])
