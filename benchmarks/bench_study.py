"""Study throughput: scenarios per second for a 200-scenario study, in process and through each executor.

Run: python benchmarks/bench_study.py [--workers 2] [--repeat 1]
The study is Llama-3.3-70B chat (examples/workloads/chat-70b.yaml) over 5 fleets (four single-device fleets
and all four together) x 8 TPOT SLOs x 5 power budgets, no baseline solves. Every run starts from an empty
output folder, so executor start-up (spawning workers, a Dask LocalCluster) is in the figure; the
in-process line is the same scenarios solved one after another without an executor, for reference.
Prints one line per configuration: wall seconds and scenarios per second with the outputs written (tables,
charts, report), the same for the solve phase alone (executor start-up included), and the median solve.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from planner.catalog import load_catalog
from planner.files import read_document
from planner.study import StudySpec, expand
from planner.study_runner import ExecutorSpec, run_study, scenario_task, solve_scenario

ROOT = Path(__file__).resolve().parent.parent
DEVICES = ["h100-sxm", "b200", "mi300x", "trn2"]


def bench_spec() -> StudySpec:
    """200 scenarios: 5 fleets x 8 TPOT SLOs x 5 power budgets."""
    return StudySpec.model_validate({
        "name": "bench-200",
        "base": read_document(ROOT / "examples" / "workloads" / "chat-70b.yaml"),
        "axes": [
            {"name": "fleet", "param": "devices", "each": DEVICES, "values": {"all": DEVICES}},
            {"name": "tpot_ms", "param": "slo.tpot_ms", "values": [80, 50, 35, 25, 18, 12, 9, 7]},
            {"name": "power_budget_kw", "param": "power_budget_kw", "values": [100, 250, 500, 1000, 2000]},
        ],
        "options": {"baseline": False, "time_limit_s": 30},
    })


def in_process(spec: StudySpec) -> tuple[float, float, list[float]]:
    """Every scenario solved in this process, one after another (no outputs written)."""
    start = time.perf_counter()
    times = [solve_scenario(scenario_task(s, spec))["solve_time_s"] for s in expand(spec, load_catalog())]
    wall = time.perf_counter() - start
    return wall, wall, times


def through(spec: StudySpec, executor: ExecutorSpec) -> tuple[float, float, list[float]]:
    """The whole study through ``run_study`` into an empty folder: (wall with outputs, solve phase, times)."""
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        summary = run_study(spec, Path(out), executor)
        return time.perf_counter() - start, summary.elapsed_s, [r["solve_time_s"] for r in summary.rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    spec = bench_spec()
    n = len(expand(spec))
    print(f"{n} scenarios; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f} at start")
    configs = [
        ("in-process, sequential", None),
        ("local pool, 1 worker", ExecutorSpec("local", workers=1)),
        (f"local pool, {args.workers} workers", ExecutorSpec("local", workers=args.workers)),
        (f"Dask LocalCluster, {args.workers} workers", ExecutorSpec("dask", workers=args.workers)),
    ]
    for name, executor in configs:
        for _ in range(args.repeat):
            wall, solving, times = in_process(spec) if executor is None else through(spec, executor)
            print(f"{name:<34} {wall:6.1f} s {n / wall:6.2f} scenarios/s | solve phase {solving:6.1f} s "
                  f"{n / solving:6.2f} scenarios/s | median solve {statistics.median(times):.3f} s "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
