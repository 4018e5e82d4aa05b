"""What binds (plan.binding_constraints): a budget binds when its headroom cannot buy one more replica; and the
class figures (plan.classes_of) a plan reports from its pools."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from planner.plan import binding_constraints, classes_of, pools_of, totals_of
from tests.solvers.conftest import candidate, workload


def _binding(power_kw: float, cost_per_hour: float | None = None, owned: dict | None = None) -> list[str]:
    # one prefill replica on A (1 kW, $1/h) and one decode replica on C (1.5 kW, $1/h) serve chat's 1 req/s
    wl = workload({"chat": 1.0}, power_kw)
    wl = wl.model_copy(update={"constraints": wl.constraints.model_copy(
        update={"cost_budget_usd_per_hour": cost_per_hour, "owned": owned or {}})})
    cands = [replace(candidate("chat", "prefill", "a", 2.0, 1000.0), price_by_type={"a": 1.0}),
             replace(candidate("chat", "decode", "c", 3.0, 1500.0), price_by_type={"c": 1.0})]
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


def test_cost_counts_only_the_devices_paid_for():
    """Owning A makes its replica free: $2/h used, $1/h paid. Owning five A still frees only the one in use."""
    assert _binding(10.0, cost_per_hour=1.5) == ["cost"]  # $2/h paid > $1.50/h
    assert _binding(10.0, cost_per_hour=1.5, owned={"a": 1}) == []  # $1/h paid, $0.50/h left buys A's free replica
    assert _binding(10.0, cost_per_hour=0.5, owned={"a": 5}) == ["cost"]  # still $1/h paid, not $2 − $5


def test_a_class_under_one_request_a_second_reports_its_served_weighted_latencies():
    """0.75 req/s split by usable capacity: prefill A (1 rps, TTFT 100 ms) takes 0.25, B (2 rps, 200 ms) 0.5; decode
    C (1 rps, TPOT 20 ms) 0.25, D (2 rps, 50 ms) 0.5. TTFT (0.25·100 + 0.5·200) / 0.75 = 166.7 ms, TPOT
    (0.25·20 + 0.5·50) / 0.75 = 40 ms (25 tokens/s per user)."""
    wl = workload({"chat": 0.75}, 10.0)
    cands = [replace(candidate("chat", "prefill", "a", 1.0, 1000.0), ttft_ms=100.0),
             replace(candidate("chat", "prefill", "b", 2.0, 1000.0), ttft_ms=200.0),
             replace(candidate("chat", "decode", "c", 1.0, 1000.0), tpot_ms=20.0),
             replace(candidate("chat", "decode", "d", 2.0, 1000.0), tpot_ms=50.0)]
    split = {("chat", "pd_disagg"): 1.0}
    (chat,) = classes_of(wl, pools_of(wl, cands, np.array([1, 1, 1, 1]), split), split, 1.0)
    assert chat.ttft_ms == pytest.approx(500.0 / 3) and chat.tpot_ms == pytest.approx(40.0)
    assert chat.output_tokens_per_s_per_user == pytest.approx(25.0)
