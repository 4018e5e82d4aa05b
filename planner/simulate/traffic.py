"""What each pool is sent, and when requests arrive.

Routing reads a pool's traffic through one function, ``served_by_class``: today a pool serves one class at its
``served_rps``; a pool shared across classes answers with every class it carries. Within a pool the router
sends each request to a replica picked uniformly at random, the assumption behind the plan's per-replica
M/D/1 queues: every replica then sees its own renewal stream at ``rps / replicas``.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from planner.schema import Pool

Arrivals = Literal["poisson", "gamma"]
#: interarrival gaps drawn from the generator at a time (one numpy call per this many arrivals)
GAP_BLOCK = 1024


def served_by_class(pool: Pool) -> dict[str, float]:
    """Requests/s of each class the pool carries (the whole pool, all replicas)."""
    return {pool.class_name: pool.served_rps} if pool.served_rps > 0 else {}


def interarrival_gaps(rng: np.random.Generator, rate_rps: float, arrivals: Arrivals, cv: float, size: int) -> np.ndarray:
    """``size`` gaps (s) of a renewal stream at ``rate_rps``: exponential (Poisson arrivals, CV 1), or gamma with
    shape ``1/cv²`` and scale ``cv²/rate`` (mean ``1/rate``, coefficient of variation ``cv``)."""
    if arrivals == "poisson":
        return rng.exponential(1.0 / rate_rps, size)
    shape = 1.0 / (cv * cv)
    return rng.gamma(shape, 1.0 / (shape * rate_rps), size)


def arrival_times(rng: np.random.Generator, rate_rps: float, arrivals: Arrivals, cv: float):
    """Arrival instants (s) of one replica's stream from t = 0, without end."""
    t = 0.0
    while True:
        for gap in interarrival_gaps(rng, rate_rps, arrivals, cv, GAP_BLOCK):
            t += float(gap)
            yield t
