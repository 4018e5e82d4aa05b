"""Synthetic placement problems small enough to enumerate by hand."""

from __future__ import annotations

import numpy as np
import pytest

from planner.candidates import Candidate
from planner.milp.model import IlpModel
from planner.schema import Workload


def candidate(class_name: str, role: str, device: str, capacity_rps: float, power_w: float,
              strategy: str = "pd_disagg", devices: int = 1, cost: float = 1.0) -> Candidate:
    return Candidate(
        class_name=class_name, strategy=strategy, role=role, device=device, tp=devices, batch=1,
        devices_by_type={device: devices}, power_w=power_w, cost_usd_per_hour=cost, capex_usd=1000.0 * cost,
        capacity_rps=capacity_rps, utilization_cap=1.0, ttft_ms=None, tpot_ms=None, limited_by="memory",
    )


def workload(classes: dict[str, float], power_budget_kw: float, objective: str = "max_goodput",
             inventory: dict | None = None) -> Workload:
    return Workload.model_validate({
        "model": "llama-3.1-8b",
        "classes": [{"name": k, "rate_rps": r, "input_tokens": 100, "output_tokens": 10,
                     "slo": {"ttft_ms": 1000, "tpot_ms": 100}} for k, r in classes.items()],
        "strategies": ["pd_disagg"],
        "constraints": {"power_budget_kw": power_budget_kw, "pue": 1.0, "inventory": inventory or {}},
        "objective": objective,
    })


def units_for(classes) -> dict:
    return {(k, "pd_disagg"): ["decode", "prefill"] for k in classes}


@pytest.fixture()
def tiny():
    """One class at 1 req/s; prefill on A (2 rps, 1 kW) or B (5 rps, 2.2 kW); decode on C (3 rps, 1.5 kW) or D (7 rps, 3 kW)."""
    cands = [
        candidate("chat", "prefill", "a", 2.0, 1000.0),
        candidate("chat", "prefill", "b", 5.0, 2200.0),
        candidate("chat", "decode", "c", 3.0, 1500.0),
        candidate("chat", "decode", "d", 7.0, 3000.0),
    ]
    return workload({"chat": 1.0}, 10.0), units_for(["chat"]), cands


def market_split(rows: int = 5, columns: int = 40, seed: int = 1) -> IlpModel:
    """Cornuéjols–Dawande market split: binary x with Σ a_ij x_j = ⌊Σ_j a_ij / 2⌋ (slack penalised), a_ij in
    [0, 99]. Branch and bound needs far longer than any test waits for this size (every engine hits its limit)."""
    a = np.random.default_rng(seed).integers(0, 100, size=(rows, columns))
    target = (a.sum(axis=1) // 2).astype(float)
    n = columns + 2 * rows
    row = np.concatenate([np.repeat(np.arange(rows), columns), np.arange(rows), np.arange(rows)])
    col = np.concatenate([np.tile(np.arange(columns), rows), columns + np.arange(rows), columns + rows + np.arange(rows)])
    val = np.concatenate([a.ravel().astype(float), np.ones(rows), -np.ones(rows)])
    return IlpModel(var_names=tuple(f"x{j}" for j in range(n)), var_lb=np.zeros(n),
                    var_ub=np.r_[np.ones(columns), np.full(2 * rows, np.inf)],
                    var_is_integer=np.r_[np.ones(columns, bool), np.zeros(2 * rows, bool)],
                    objective=np.r_[np.zeros(columns), np.ones(2 * rows)], row_names=tuple(f"r{i}" for i in range(rows)),
                    row_lo=target, row_hi=target, row=row, col=col, val=val)


def small_ilp(objective, rows, lb=None, ub=None, integer=True, offset: float = 0.0) -> IlpModel:
    """A MILP written out: ``rows`` as (coefficients, lo, hi); variables x0.. ≥ 0 (or ``lb``), all integer or none."""
    n = len(objective)
    nz = [(i, j, a) for i, (coefs, _, _) in enumerate(rows) for j, a in enumerate(coefs) if a]
    return IlpModel(var_names=tuple(f"x{j}" for j in range(n)),
                    var_lb=np.zeros(n) if lb is None else np.asarray(lb, float),
                    var_ub=np.full(n, np.inf) if ub is None else np.asarray(ub, float),
                    var_is_integer=np.full(n, integer), objective=np.asarray(objective, float),
                    row_names=tuple(f"r{i}" for i in range(len(rows))),
                    row_lo=np.array([lo for _, lo, _ in rows], float), row_hi=np.array([hi for _, _, hi in rows], float),
                    row=np.array([i for i, _, _ in nz], int), col=np.array([j for _, j, _ in nz], int),
                    val=np.array([a for _, _, a in nz], float), objective_offset=offset)


def knapsack(items: int = 60, seed: int = 3) -> IlpModel:
    """max Σ v_j x_j s.t. Σ w_j x_j ≤ ⌊Σ w / 2⌋, x binary, as min −v·x: its LP bound is a few tenths of a
    percent above its optimum, so a 5% gap stops every engine at (or near) the root, an exact gap after search."""
    rng = np.random.default_rng(seed)
    w = rng.integers(10, 100, items)
    v = w + rng.integers(0, 10, items)
    return small_ilp(-v, [(w, -np.inf, float(w.sum() // 2))], ub=np.ones(items))
