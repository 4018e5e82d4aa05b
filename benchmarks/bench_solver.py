"""Solve-time scaling: number of request classes (1 to 50) x catalog size (1 device to all), both backends.

Run: python benchmarks/bench_solver.py [--classes 1,5,10,25,50] [--devices 1,4,9,18] [--gap 1e-4] [--time-limit-s 5]
Prints one row per run: classes, devices, backend, candidates, candidate-generation s, the LP relaxation's solve
(the floor any MILP solve stands on), the whole plan s (candidates, solve, verification), status and gap.
Each plan is solved with the default options (or the given gap and time limit per MILP stage), no baseline.

    python benchmarks/bench_solver.py --example mixed-agents --repeat 5   # median solve and plan time per backend
    python benchmarks/bench_solver.py --process                           # a one-class plan's whole process
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

from planner import graph as task_graph
from planner.candidates import generate_candidates
from planner.catalog import load_catalog
from planner.milp.build import BuildOptions, build_model
from planner.milp.rounding import relaxed
from planner.optimize import PlanOptions, plan_workload, price_workload, solve_candidates
from planner.solvers import SolveOptions, get_backend
from planner.perf.model import RooflineModel
from planner.perf.profile import ModelProfile
from planner.schema import Workload

DEVICE_ORDER = ["h200", "b200", "mi355x", "trn2", "cs-3", "h100-sxm", "mi300x", "gaudi3", "gb200", "a100-80gb",
                "l40s", "mi325x", "inf2", "tpu-v5e", "tpu-v6e", "groq-lpu", "dmatrix-corsair", "sn40l"]


def workload(classes: int, devices: list[str]) -> Workload:
    """``classes`` request classes spread over prompt/answer lengths and SLOs, deterministic."""
    shapes = [(500, 1500, 2000, 40), (2000, 300, 1500, 50), (8000, 200, 4000, 80), (1000, 1000, 1000, 30), (30000, 500, 8000, 60)]
    rows = []
    for i in range(classes):
        isl, osl, ttft, tpot = shapes[i % len(shapes)]
        scale = 1 + (i // len(shapes)) * 0.15
        rows.append({"name": f"c{i:02d}", "rate_rps": 5 + i % 7, "input_tokens": int(isl * scale), "output_tokens": osl,
                     "slo": {"ttft_ms": ttft, "tpot_ms": tpot * scale}})
    return Workload.model_validate({
        "model": "llama-3.3-70b", "dtype": "fp8", "kv_dtype": "fp8", "classes": rows,
        "strategies": ["aggregated", "pd_disagg"],
        # every class needs its own prefill and decode pools, so the budget grows with the class count
        "constraints": {"power_budget_kw": 400 * classes, "pue": 1.2, "devices": devices},
    })


def lp_seconds(wl: Workload, cands, units: dict, backend: str) -> float:
    """Wall time of the LP relaxation of the plan's first stage."""
    model = relaxed(build_model(wl, units, cands, BuildOptions(objective=wl.objective)))
    start = time.perf_counter()
    get_backend(backend).solve(model, SolveOptions())
    return time.perf_counter() - start


def scaling(args, catalog) -> None:
    options = dict(relative_gap=args.gap, time_limit_s=args.time_limit_s, baseline=False)
    print(f"{'classes':>7} {'devices':>7} {'backend':>8} {'cands':>6} {'gen s':>6} {'lp s':>6} {'plan s':>7} {'status':>10} {'gap':>8}")
    for n_classes in map(int, args.classes.split(",")):
        for n_devices in map(int, args.devices.split(",")):
            wl = workload(n_classes, DEVICE_ORDER[:n_devices])
            model = ModelProfile.of(catalog.model(wl.model), wl.dtype, wl.kv_dtype)
            graph = task_graph.build_task_graph(wl, model, None)
            start = time.perf_counter()
            cands, _ = generate_candidates(wl, catalog, graph)
            gen_s = time.perf_counter() - start
            units = {(rc.name, s): task_graph.units(graph, rc.name, s) for rc in wl.classes for s in wl.strategies}
            for backend in ("ortools", "pulp"):
                lp_s = lp_seconds(wl, cands, units, backend)
                start = time.perf_counter()
                plan = plan_workload(wl, catalog, PlanOptions(solver=backend, **options))
                plan_s = time.perf_counter() - start
                gap = f"{plan.solver.gap:.1e}" if plan.solver.gap is not None else "-"
                print(f"{n_classes:>7} {n_devices:>7} {backend:>8} {len(cands):>6} {gen_s:>6.2f} {lp_s:>6.2f} {plan_s:>7.2f} "
                      f"{plan.status:>10} {gap:>8}", flush=True)


def example(args, catalog) -> None:
    """One example per backend over ``--repeat`` runs (no baseline): the median of the solve alone (both MILP stages
    on candidates priced once), the LP relaxation beside it as the floor, and the median whole plan."""
    wl = Workload.model_validate(yaml.safe_load(Path(f"examples/workloads/{args.example}.yaml").read_text()))
    for backend in ("ortools", "pulp"):
        options = PlanOptions(solver=backend, baseline=False, relative_gap=args.gap, time_limit_s=args.time_limit_s)
        start = time.perf_counter()
        priced = price_workload(wl, catalog, options, RooflineModel(catalog))
        price_s = time.perf_counter() - start
        solve_candidates(wl, priced.units, priced.candidates, options)  # untimed: starts the solver child
        solves, plans, plan = [], [], None
        for _ in range(args.repeat):
            start = time.perf_counter()
            solved = solve_candidates(wl, priced.units, priced.candidates, options)
            solves.append(time.perf_counter() - start)
            start = time.perf_counter()
            plan = plan_workload(wl, catalog, options)
            plans.append(time.perf_counter() - start)
        lp_s = lp_seconds(wl, priced.candidates, priced.units, backend)
        gap = "-" if solved.gap is None else f"{solved.gap:.1e}"
        print(f"{args.example} {backend}: {len(priced.candidates)} candidates priced in {price_s:.2f} s; LP relaxation "
              f"{lp_s:.2f} s; solve median {statistics.median(solves):.2f} s (min {min(solves):.2f}, max {max(solves):.2f}) "
              f"{solved.status}, gap {gap}; whole plan median {statistics.median(plans):.2f} s over {args.repeat}; "
              f"{plan.status}, goodput scale {plan.goodput_scale:.4f}", flush=True)


def process(args) -> None:
    """The wall time of ``siliconmix plan`` on a one-class example as a new process (start-up included)."""
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "planner", "plan", "examples/workloads/chat-70b.yaml", "--json"],
                       check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    print(f"one-class plan, whole process: median {statistics.median(times):.2f} s over {args.repeat}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--classes", default="1,5,10,25,50")
    parser.add_argument("--devices", default="1,4,9,18")
    parser.add_argument("--gap", type=float, default=PlanOptions.relative_gap)
    parser.add_argument("--time-limit-s", type=float, default=PlanOptions.time_limit_s)
    parser.add_argument("--example", help="time one example instead (e.g. mixed-agents)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--process", action="store_true", help="time a one-class plan as a whole process")
    args = parser.parse_args()
    if args.process:
        return process(args)
    catalog = load_catalog()
    if args.example:
        return example(args, catalog)
    scaling(args, catalog)


if __name__ == "__main__":
    main()
