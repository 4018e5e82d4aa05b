"""The decode slot queue (planner/queueing.py): Erlang C, the M/D/c slot wait per output token, the utilisation cap
it allows, against hand-computed values and a slot-level replay."""

from __future__ import annotations

import heapq
import math
from collections import deque

import numpy as np
import pytest

from planner.queueing import (
    CAP_GRID_POINTS,
    DECODE_UTILIZATION,
    UTILIZATION_CAP,
    admission_wait_s,
    admitted_ttft_s,
    erlang_c,
    max_admitted_utilization,
    max_slot_utilization,
    slot_holding,
    slot_wait_factor,
    slot_wait_s,
)


def erlang_b_recursion(c: int, a: float) -> float:
    """Erlang B by its textbook recursion ``B_k = a·B_{k−1} / (k + a·B_{k−1})``, ``B_0 = 1``."""
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return b


def test_erlang_c_hand_values():
    assert erlang_c(1, 0.3) == pytest.approx(0.3)  # one server: P(wait) = ρ
    # c = 2, a = 1: B = (1/2) / (1 + 1 + 1/2) = 0.2, ρ = 0.5, C = 0.2 / (1 − 0.5·0.8) = 1/3
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)
    # c = 4, a = 3: B = (81/24) / (1 + 3 + 9/2 + 27/6 + 81/24) = 3.375 / 16.375, ρ = 0.75,
    # C = B / (1 − 0.75 (1 − B)) = 27/53
    assert erlang_c(4, 3.0) == pytest.approx(27 / 53)
    assert erlang_c(8, 0.0) == 0.0 and erlang_c(8, 8.0) == 1.0 and erlang_c(8, 9.0) == 1.0


@pytest.mark.parametrize("c, rho", [(12, 0.9), (256, 0.9), (2048, 0.9), (2048, 0.5), (3, 0.1)])
def test_erlang_c_matches_the_erlang_b_recursion_up_to_the_largest_batch(c, rho):
    b = erlang_b_recursion(c, c * rho)
    expected = b / (1 - rho * (1 - b))
    assert erlang_c(c, c * rho) == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_erlang_c_is_vectorised_over_candidates():
    got = erlang_c([1, 2, 4], [0.3, 1.0, 3.0])
    assert got == pytest.approx([0.3, 1 / 3, 27 / 53])


def test_slot_holding():
    assert slot_holding([256], 256) == pytest.approx((1.0, 255 / 256, 255.0))
    # a shared replica: the longest holding (100 steps) per token of each answer (10 and 100 steps)
    assert slot_holding([101, 11], 11) == pytest.approx((10.0, 100 / 101, 100.0))
    assert slot_holding([101, 11], 101) == pytest.approx((1.0, 100 / 101, 100.0))
    assert slot_holding([101, 1], 1) == pytest.approx((0.0, 100 / 101, 100.0))  # one token: no TPOT to wait in
    assert slot_holding([1], 1) == (0.0, 0.0, 0.0)  # no request holds a slot


def test_slot_wait_factor_hand_values():
    # c = 2, ρ_s = 0.5, n = 10: C = 1/3, K = 1 + 0.5·1·(√14 − 2)/(16·0.5·2) = 1.0544268, 1/(2c(1 − ρ)) = 0.5:
    # K·C·0.5 + 0.5/10 = 0.1757378 + 0.05
    assert slot_wait_factor(2, 0.5, 10) == pytest.approx(0.2257378, rel=1e-6)
    # p90: ln((1/3) / 0.1)·0.5 + 1/10 = 0.6019864 + 0.1
    assert slot_wait_factor(2, 0.5, 10, 90) == pytest.approx(0.7019864, rel=1e-6)
    # p90 where 95 % of arrivals never wait (c = 1, ρ = 0.05): only the step an arrival may wait for
    assert slot_wait_factor(1, 0.05, 10, 90) == pytest.approx(0.1)
    # c = 1: K = 1, C = ρ: ρ / (2(1 − ρ)) + 0.5/n = 0.4/1.2 + 0.05
    assert slot_wait_factor(1, 0.4, 10) == pytest.approx(0.4 / 1.2 + 0.05)


def test_slot_wait_s_scales_with_the_step_and_the_hold():
    # τ = 10 ms, c = 1, ρ = 0.44 planned, f = 10/11 → ρ_s = 0.4: 10 ms · (0.4/1.2 + 0.05), times κ = 2
    assert slot_wait_s(0.010, 1, 0.44, (2.0, 10 / 11, 10.0)) == pytest.approx(2 * 0.010 * (0.4 / 1.2 + 0.05))
    assert slot_wait_s(0.010, 1, 0.44, (0.0, 0.0, 0.0)) == 0.0


def test_the_cap_at_a_hand_case():
    """c = 1, osl = 11 (n = 10, f = 10/11), τ = 10 ms, T = 16 ms: 10·(1 + ρ_s/(2(1 − ρ_s)) + 0.05) ≤ 16 ⇔
    ρ_s/(2(1 − ρ_s)) ≤ 0.55 ⇔ ρ_s ≤ 1.1/2.1, so ρ ≤ 1.1/2.1 · 11/10 = 0.5761905."""
    hold = slot_holding([11], 11)
    cap = max_slot_utilization(0.010, 0.016, 1, hold)
    resolution = DECODE_UTILIZATION / (CAP_GRID_POINTS - 1)  # the cap grid's step
    assert 1.1 / 2.1 * 1.1 - resolution <= cap <= 1.1 / 2.1 * 1.1
    assert 0.010 + slot_wait_s(0.010, 1, cap, hold) <= 0.016  # rounded down to the grid: the SLO holds
    assert 0.010 + slot_wait_s(0.010, 1, cap + resolution, hold) > 0.016  # and one grid step up it does not
    caps = max_slot_utilization([0.010, 0.010, 0.016, 0.020], [0.016, 1.0, 0.016, 0.016], [1, 1, 1, 1], hold)
    assert caps == pytest.approx([1.1 / 2.1 * 1.1, DECODE_UTILIZATION, 0.0, 0.0], abs=resolution)


def test_the_cap_falls_with_a_tail_slo():
    hold = slot_holding([256], 256)
    mean, tail = max_slot_utilization(0.024, 0.025, 12, hold), max_slot_utilization(0.024, 0.025, 12, hold, 99)
    assert 0 < tail < mean < DECODE_UTILIZATION


def slot_replay(c: int, rho_s: float, steps: int, requests: int, seed: int = 0) -> float:
    """Mean TPOT over the step, per output token, in steps, of a replica of ``c`` slots stepping without pause while it
    holds a sequence (steps of 1): Poisson arrivals at ``c·ρ_s/steps`` per step, each holding ``steps`` whole steps,
    admitted when a running step ends (at once into an idle replica), as the replay's continuous batching does."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(steps / (c * rho_s), requests))
    t, step, i, running, waiting, per_token = 0.0, 0, 0, [], deque(), []
    while i < requests or waiting or running:
        while i < requests and arrivals[i] <= t:
            waiting.append(arrivals[i])
            i += 1
        while waiting and len(running) < c:
            heapq.heappush(running, (step + steps, waiting.popleft()))
        if not running:
            t = arrivals[i]
            continue
        t, step = t + 1.0, step + 1
        while running and running[0][0] <= step:
            per_token.append((t - heapq.heappop(running)[1]) / steps - 1.0)
    return float(np.mean(per_token[requests // 10:]))


@pytest.mark.parametrize("c, rho", [(4, 0.9), (8, 0.8), (16, 0.7)])
def test_the_slot_wait_matches_a_slot_level_replay(c, rho):
    simulated = slot_replay(c, rho, 31, 60_000)
    assert slot_wait_factor(c, rho, 31) == pytest.approx(simulated, rel=0.06)


def test_the_cap_is_where_the_replay_meets_the_slo():
    """At the cap the replayed step + wait meets the SLO; 20 % above it (still under 1) it misses."""
    n, tau = 31, 1.0
    hold = (1.0, 1.0, float(n))  # occupancy counted as the replay's slots' (f = 1)
    cap = float(max_slot_utilization(tau, 1.10, 8, hold))
    assert 0.5 < cap < DECODE_UTILIZATION
    assert tau + slot_replay(8, cap, n, 20_000) <= 1.10 * 1.02
    assert tau + slot_replay(8, min(1.2 * cap, 0.97), n, 20_000) > 1.10
    assert math.isfinite(cap)


def test_an_aggregated_request_waits_for_a_slot_as_one_md1_server_does_plus_half_a_step():
    """One slot held 10 steps of 10 ms (D = 0.1 s) at ρ = 0.5: M/D/1's ρD/(2(1−ρ)) = 0.05 s, plus 5 ms to the next
    admission; nothing at all when the replica is idle but that half step."""
    assert admission_wait_s(0.01, 1, 0.5, 10) == pytest.approx(0.055)
    assert admission_wait_s(0.01, 1, 0.0, 10) == pytest.approx(0.005)


def test_the_admitted_utilisation_keeps_slot_and_prompt_waits_within_the_ttft():
    """T = 0.3 s, S = 0.1 s, one slot held 10 steps of 10 ms: ρ·0.1/(2(1−ρ)) + 0.1ρ/(2(1−ρ)) + 0.005 + 0.1 ≤ 0.3 gives
    ρ/(1−ρ) ≤ 1.95, ρ = 1.95/2.95 = 0.66102 (the prompt queue alone would allow 0.8); no utilisation when S alone
    exceeds T. The cap is the last point of the cap grid where the SLO holds."""
    resolution = UTILIZATION_CAP / (CAP_GRID_POINTS - 1)
    (cap,) = max_admitted_utilization(0.3, np.array([0.1]), np.array([0.01]), np.array([1.0]), 10)
    assert 1.95 / 2.95 - resolution <= cap <= 1.95 / 2.95
    assert admitted_ttft_s(cap, cap, 0.1, 0.01, 1, 10) <= 0.3 < admitted_ttft_s(cap + resolution, cap + resolution, 0.1, 0.01, 1, 10)
    assert max_admitted_utilization(0.3, np.array([0.4]), np.array([0.01]), np.array([1.0]), 10) == pytest.approx([0.0])


def test_the_cached_slot_factor_table_is_read_only_and_what_it_stands_for():
    """Every cap of a (batch, holding, statistic) reads one cached table: it must not be writable, and it is the
    slot factor at the grid's utilisations (never below it)."""
    from planner.queueing import _factor_table

    table = _factor_table(8.0, 0.9, 9.0, None, DECODE_UTILIZATION)
    assert not table.flags.writeable
    with pytest.raises(ValueError):
        table[0] = 0.0
    grid = np.linspace(0.0, DECODE_UTILIZATION, CAP_GRID_POINTS)
    assert np.all(table >= slot_wait_factor(8, 0.9 * grid, 9))
    assert table[-1] == pytest.approx(float(slot_wait_factor(8, 0.9 * DECODE_UTILIZATION, 9)))
