"""What binds (plan.binding_constraints): a budget binds when its headroom cannot buy one more replica."""

from __future__ import annotations

import numpy as np

from planner.plan import binding_constraints, pools_of, totals_of
from tests.solvers.conftest import candidate, workload


def _binding(power_kw: float, cost_per_hour: float | None = None) -> list[str]:
    # one prefill replica on A (1 kW, $1/h) and one decode replica on C (1.5 kW, $1/h) serve chat's 1 req/s
    wl = workload({"chat": 1.0}, power_kw)
    wl = wl.model_copy(update={"constraints": wl.constraints.model_copy(update={"cost_budget_usd_per_hour": cost_per_hour})})
    cands = [candidate("chat", "prefill", "a", 2.0, 1000.0), candidate("chat", "decode", "c", 3.0, 1500.0)]
    pools = pools_of(wl, cands, np.array([1, 1]), {("chat", "pd_disagg"): 1.0})
    return binding_constraints(wl, cands, pools, totals_of(pools, 1.0))


def test_power_binds_when_its_headroom_cannot_buy_the_hungriest_units_smallest_replica():
    assert _binding(3.0) == ["power"]  # 0.5 kW left < 1.5 kW (decode's replica)
    assert _binding(4.0) == []  # 1.5 kW left buys it
    assert _binding(10.0) == []


def test_cost_binds_when_its_headroom_cannot_buy_the_cheapest_replica():
    assert _binding(10.0, cost_per_hour=2.5) == ["cost"]  # $0.50/h left < $1/h
    assert _binding(10.0, cost_per_hour=3.0) == []
    assert _binding(3.0, cost_per_hour=2.5) == ["power", "cost"]
