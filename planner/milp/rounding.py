"""A feasible plan from the LP relaxation, for the solvers to beat.

Large instances (tens of classes x the whole catalog) can stop at the time limit with a poor
incumbent. The LP relaxation points the way in milliseconds: keep its traffic split scaled by
``t ≤ 1``, and cover each demand row ``Σ cap_c n_c ≥ rate · z`` with the single candidate that the
LP used with the most capacity per watt, ``n_c = ⌈rate · t·z_LP / cap_c⌉`` (at most one replica of
waste per pool unit). The largest ``t`` whose fleet respects the budget rows is found by bisection.
The result is a feasible point of the same MILP, so either backend can use it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from planner.milp.build import completed_point
from planner.milp.model import IlpModel

BISECTION_STEPS = 40


def relaxed(model: IlpModel) -> IlpModel:
    """The LP relaxation: the same model with every variable continuous."""
    return replace(model, var_is_integer=np.zeros_like(model.var_is_integer))


def _demand_rows(model: IlpModel, x_lp: np.ndarray) -> list[tuple[int, int, float, float]]:
    """Per demand row: (traffic column, chosen replica column, its capacity, the traffic's rate)."""
    power = np.zeros(model.n_vars)
    for j in (i for i, name in enumerate(model.row_names) if name == "power"):
        cols, vals = model.rows_of(j)
        power[cols] = vals
    n_block = model.blocks["n"]
    rows = []
    for i, name in enumerate(model.row_names):
        if not name.startswith("demand:"):
            continue
        cols, vals = model.rows_of(i)
        traffic = [(c, -v) for c, v in zip(cols, vals) if v < 0]
        replicas = [(c, v) for c, v in zip(cols, vals) if v > 0 and n_block.start <= c < n_block.stop]
        if not traffic or not replicas:
            continue
        used = [(c, v) for c, v in replicas if x_lp[c] > 1e-9] or replicas
        best = max(used, key=lambda cv: cv[1] / max(power[cv[0]], 1e-12))
        rows.append((traffic[0][0], best[0], best[1], traffic[0][1]))
    return rows


def greedy_point(model: IlpModel, x_lp: np.ndarray, t: float, rows) -> np.ndarray:
    """The LP point's continuous part scaled by ``t``, replicas covering each demand row with one candidate (and the
    columns they decide: minimum replicas, whole nodes)."""
    x = t * np.asarray(x_lp, dtype=float)
    x[model.blocks["n"]] = 0.0
    if "x" in model.blocks:  # shared replicas' shares go with their replicas: the point covers demand without them
        x[model.blocks["x"]] = 0.0
    for z_col, n_col, capacity, rate in rows:
        x[n_col] += np.ceil(rate * x[z_col] / capacity - 1e-9)
    return np.clip(completed_point(model, x), model.var_lb, model.var_ub)


def rounded_solution(model: IlpModel, x_lp: np.ndarray, tolerance: float = 1e-6) -> np.ndarray | None:
    """The feasible greedy rounding with the largest scale ``t ∈ (0, 1]``, or None when none is feasible."""
    rows = _demand_rows(model, x_lp)
    full = greedy_point(model, x_lp, 1.0, rows)
    if model.max_violation(full) <= tolerance:
        return full
    lo, hi, best = 0.0, 1.0, None
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2
        x = greedy_point(model, x_lp, mid, rows)
        if model.max_violation(x) <= tolerance:
            lo, best = mid, x
        else:
            hi = mid
    return best
