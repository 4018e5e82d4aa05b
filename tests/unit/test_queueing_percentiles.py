"""Percentile TTFT from the M/D/1 waiting-time tail, against hand-computed and exact (Crommelin) values."""

import math

import numpy as np
import pytest

from planner.queueing import UTILIZATION_CAP, max_utilization_at, md1_decay_rate, md1_wait_quantile_s, wait_s


def crommelin_cdf(t: float, rho: float, service: float) -> float:
    """Exact M/D/1 ``P(W ≤ t)`` = (1−ρ) Σ_{k=0}^{⌊t/S⌋} [λ(kS − t)]^k / k! · e^{−λ(kS − t)}, λ = ρ/S (small t/S only)."""
    lam = rho / service
    return (1 - rho) * sum((lam * (k * service - t)) ** k / math.factorial(k) * math.exp(-lam * (k * service - t))
                           for k in range(int(t // service) + 1))


def test_decay_rate_solves_its_equation_hand_case():
    # ρ = 0.5, S = 1: 0.5 (e^θ − 1) = θ has the root θ = 1.25643 (e^1.25643 = 3.5129)
    theta = float(md1_decay_rate(0.5, 1.0))
    assert theta == pytest.approx(1.25643, abs=1e-5)
    assert 0.5 * (math.exp(theta) - 1) == pytest.approx(theta, rel=1e-9)
    assert float(md1_decay_rate(0.5, 2.0)) == pytest.approx(theta / 2)  # θ scales as 1/S


def test_p90_wait_hand_case_and_against_the_exact_distribution():
    # C = 0.5 / (0.5·3.5129 − 1) = 0.66113; p90: ln(0.66113 / 0.1) / 1.25643 = 1.5031 S
    assert float(md1_wait_quantile_s(0.5, 1.0, 90)) == pytest.approx(1.5031, abs=1e-3)
    # exact P(W ≤ 1.5031) = 0.5 (e^0.75157 − 0.25157 e^0.25157) = 0.8985: the approximation is p89.85
    assert crommelin_cdf(1.5031, 0.5, 1.0) == pytest.approx(0.8985, abs=1e-3)
    for rho, p in ((0.5, 99), (0.7, 90), (0.8, 95), (0.9, 90)):  # waits under 12 S: the exact sum is safe there
        t = float(md1_wait_quantile_s(rho, 1.0, p))
        assert t < 12 and crommelin_cdf(t, rho, 1.0) == pytest.approx(p / 100, abs=0.01)
    # low utilisation: the asymptotic is optimistic, about 7 % short of the exact p90 wait at ρ = 0.2 (0.548 S
    # against 0.589 S), which the module docstring states
    low = float(md1_wait_quantile_s(0.2, 1.0, 90))
    assert low == pytest.approx(0.548, abs=0.005) and crommelin_cdf(low, 0.2, 1.0) < 0.9


def test_no_wait_below_the_percentile_of_an_idle_server():
    # P(W > 0) = ρ: at ρ = 0.4 a request waits with probability 0.4, so the median (and p60) wait is 0
    assert float(md1_wait_quantile_s(0.4, 1.0, 50)) == 0.0
    assert float(md1_wait_quantile_s(0.4, 1.0, 60)) == 0.0
    assert float(md1_wait_quantile_s(0.4, 1.0, 61)) > 0.0


def test_a_tail_slo_allows_less_utilisation_than_the_same_mean_slo():
    # T = 3 s, S = 1 s: the mean allows 2·2/(2·2+1) = 0.8; the p90 wait must stay within 2 s
    assert float(max_utilization_at(3.0, 1.0)) == pytest.approx(0.8)
    rho = float(max_utilization_at(3.0, 1.0, 0.0, 90))
    assert float(md1_wait_quantile_s(rho, 1.0, 90)) == pytest.approx(2.0, rel=1e-6)
    assert rho < 0.8
    assert float(max_utilization_at(0.5, 1.0, 0.0, 90)) == 0.0  # service alone misses the SLO
    assert float(max_utilization_at(1e6, 1.0, 0.0, 99)) == UTILIZATION_CAP
    np.testing.assert_allclose(wait_s(0.5, 1.0), 0.5)  # the mean: ρS/(2(1−ρ))
