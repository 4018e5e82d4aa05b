"""Cost-model grid benchmark: the whole hardware catalog x TP x batch x prompt length in one call.

Run: python benchmarks/bench_cost_grid.py   (prints points, seconds and points per second; the
baseline is the same grid priced one configuration at a time through ``estimate`` on a sample).
The grid is the steady-state one ``estimate`` reports (decode, serving step and prefill per point).
Target (issue 10): at least 5 M points/s on 2 cores.
"""

from __future__ import annotations

import time

import numpy as np

from planner.catalog import load_catalog
from planner.estimate import estimate
from planner.perf.model import GridSpec, RooflineModel
from planner.schema import EstimateRequest

TP = (1, 2, 4, 8, 16, 32, 64)
BATCH = tuple(2**i for i in range(11))
ISL = (128, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)


def main() -> None:
    catalog = load_catalog()
    costs = RooflineModel(catalog)
    devices = [d for d in catalog.devices.values() if "fp8" in d.peak_dense_tflops or "int8" in d.peak_dense_tflops]
    model = costs.profile("llama-3.3-70b", "fp8", "fp8")
    spec = GridSpec(tp=TP, batch=BATCH, input_tokens=ISL, output_tokens=512, steady_state=True)
    silicon = [costs.silicon(d, "fp8") for d in devices]
    costs.grid(model, silicon, spec)  # warm-up
    repeats = 20
    start = time.perf_counter()
    for _ in range(repeats):
        grid = costs.grid(model, silicon, spec)
    vector_s = (time.perf_counter() - start) / repeats
    points = grid.tpot_s.size
    sample = 200
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for _ in range(sample):
        d = devices[rng.integers(len(devices))]
        estimate(EstimateRequest(model="llama-3.3-70b", device=d.id, dtype="fp8", tp=int(rng.choice(TP)),
                                 batch=int(rng.choice(BATCH)), isl=int(rng.choice(ISL)), osl=512), catalog)
    scalar_s = (time.perf_counter() - start) / sample
    print(f"grid: {len(devices)} devices x {len(TP)} TP x {len(BATCH)} batch x {len(ISL)} prompt lengths = {points:,} points")
    print(f"vectorised: {vector_s * 1e3:.2f} ms per grid, {points / vector_s:,.0f} points/s")
    print(f"one at a time (estimate): {scalar_s * 1e6:.0f} us per point, {1 / scalar_s:,.0f} points/s")
    print(f"speed-up of the vectorised grid: {scalar_s * points / vector_s:,.0f}x")


if __name__ == "__main__":
    main()
