"""max_interactivity: the tightest TPOT (the most output tokens/s per user) at which a fleet within the budgets
still serves every class's whole rate.

Every class's TPOT SLO is scaled by one factor ``f ≤ 1``. A fleet that meets the SLOs at ``f`` meets them at any
looser ``f' > f`` (each candidate stays feasible with at least its capacity), so feasibility is monotone in f:
the search walks f down a geometric grid (``GRID_STEP`` per step) until no fleet serves the rates, then bisects
between the last feasible and the first infeasible factor ``REFINE_STEPS`` times. (Each probe is a MILP within the
time limit; one that finds no fleet in time counts as infeasible, so the factor is the tightest the probes proved
feasible.) The same search over each
single device type gives the best homogeneous fleet's factor; the ratio of the two is the interactivity gain at
the same throughput (the talk's "10x the interactivity at the same throughput").
"""

from __future__ import annotations

from typing import Callable

from planner.schema import Workload

#: the factor's grid: 1, 0.9, 0.81, ... down to MIN_FACTOR (TPOT 1/100 of the stated SLO)
GRID_STEP = 0.9
MIN_FACTOR = 0.01
#: bisection steps after the grid: the factor is known to within 0.9^(1/2^4) ≈ 0.7 % of itself
REFINE_STEPS = 4


def tightened(workload: Workload, factor: float) -> Workload:
    """``workload`` with every class's TPOT SLO scaled by ``factor``, planned for the least power at full rate."""
    classes = tuple(rc.model_copy(update={"slo": rc.slo.model_copy(update={"tpot_ms": rc.slo.tpot_ms * factor})})
                    for rc in workload.classes)
    return workload.model_copy(update={"classes": classes, "objective": "min_power"})


def grid() -> list[float]:
    """The factors the search walks: ``GRID_STEP^i`` from 1 down to ``MIN_FACTOR``."""
    out, f = [], 1.0
    while f >= MIN_FACTOR:
        out.append(f)
        f *= GRID_STEP
    return out


def tightest(feasible: Callable[[float], bool], factors: list[float] | None = None) -> tuple[float | None, list[tuple[float, bool]]]:
    """The smallest factor ``feasible`` accepts (None when not even 1 is), and every probe ``(factor, feasible)``.

    Walks ``factors`` (default: ``grid()``) down while feasible, then bisects the last step geometrically.
    """
    probes: list[tuple[float, bool]] = []

    def probe(f: float) -> bool:
        ok = feasible(f)
        probes.append((f, ok))
        return ok

    best = worst = None
    for f in factors or grid():
        if not probe(f):
            worst = f
            break
        best = f
    if best is None:
        return None, probes
    if worst is not None:
        for _ in range(REFINE_STEPS):
            middle = (best * worst) ** 0.5
            if probe(middle):
                best = middle
            else:
                worst = middle
    return best, probes
