"""Queueing approximation behind the utilisation caps of prefill-bearing pools.

Each replica is treated as an M/D/1 queue (Poisson arrivals, deterministic service ``S``): the mean
wait is ``W = ρ·S / (2(1−ρ))`` (Pollaczek–Khinchine with zero service variance). A pool whose SLO
allows ``T`` seconds of TTFT, of which ``S`` are service and ``t`` transfer, may run at utilisation up to

``ρ_max = 2R / (2R + S)`` with ``R = T − S − t`` (no utilisation meets the SLO when ``R ≤ 0``),

capped at ``UTILIZATION_CAP``. Decode pools carry no TTFT queue (continuous batching admits a
request at the next step) and run at ``DECODE_UTILIZATION`` to absorb bursts.
"""

from __future__ import annotations

import numpy as np

#: no pool is planned above this utilisation.
UTILIZATION_CAP = 0.95
#: decode pools keep 10 % headroom for bursts and output-length variance.
DECODE_UTILIZATION = 0.90


def md1_wait_s(utilization, service_s):
    """Mean M/D/1 wait: ``ρ·S / (2(1−ρ))``."""
    rho = np.asarray(utilization, dtype=float)
    return rho * service_s / (2.0 * (1.0 - rho))


def max_utilization(slo_s, service_s, transfer_s=0.0):
    """Largest ρ with ``W(ρ) + S + t ≤ T``: ``2R/(2R+S)``, clipped to ``[0, UTILIZATION_CAP]``."""
    slack = np.asarray(slo_s, dtype=float) - service_s - transfer_s
    rho = np.where(slack > 0, 2.0 * slack / (2.0 * slack + service_s), 0.0)
    return np.minimum(rho, UTILIZATION_CAP)
