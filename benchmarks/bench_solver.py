"""Solve-time scaling: number of request classes (1 to 50) x catalog size (1 device to all), both backends.

Run: python benchmarks/bench_solver.py [--classes 1,5,10,25,50] [--devices 1,4,9,18]
Prints one row per run: classes, devices, backend, candidates, candidate-generation s, solve s, status, gap.
Each plan is solved with the default options (gap 1e-4, 10 s per MILP stage) and no baseline.
"""

from __future__ import annotations

import argparse
import time

from planner import graph as task_graph
from planner.candidates import generate_candidates
from planner.catalog import load_catalog
from planner.optimize import PlanOptions, plan_workload
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--classes", default="1,5,10,25,50")
    parser.add_argument("--devices", default="1,4,9,18")
    args = parser.parse_args()
    catalog = load_catalog()
    print(f"{'classes':>7} {'devices':>7} {'backend':>8} {'cands':>6} {'gen s':>6} {'plan s':>7} {'status':>10} {'gap':>8}")
    for n_classes in map(int, args.classes.split(",")):
        for n_devices in map(int, args.devices.split(",")):
            wl = workload(n_classes, DEVICE_ORDER[:n_devices])
            model = ModelProfile.of(catalog.model(wl.model), wl.dtype, wl.kv_dtype)
            start = time.perf_counter()
            cands, _ = generate_candidates(wl, catalog, task_graph.build_task_graph(wl, model, None))
            gen_s = time.perf_counter() - start
            for backend in ("ortools", "pulp"):
                start = time.perf_counter()
                plan = plan_workload(wl, catalog, PlanOptions(solver=backend, baseline=False))
                plan_s = time.perf_counter() - start
                gap = f"{plan.solver.gap:.1e}" if plan.solver.gap is not None else "-"
                print(f"{n_classes:>7} {n_devices:>7} {backend:>8} {len(cands):>6} {gen_s:>6.2f} {plan_s:>7.2f} {plan.status:>10} {gap:>8}",
                      flush=True)


if __name__ == "__main__":
    main()
