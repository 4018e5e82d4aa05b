"""What each pool is sent, and when requests arrive.

Routing reads a pool's traffic through one function, ``served_by_class``: a pool serves one class at its ``served_rps``,
or a shared pool every class it carries. Within a pool the router
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
    return pool.served_by_class()


def interarrival_gaps(rng: np.random.Generator, rate_rps: float, arrivals: Arrivals, cv: float, size: int) -> np.ndarray:
    """``size`` gaps (s) of a renewal stream at ``rate_rps``: exponential (Poisson arrivals, CV 1), or gamma with
    shape ``1/cv²`` and scale ``cv²/rate`` (mean ``1/rate``, coefficient of variation ``cv``)."""
    if arrivals == "poisson":
        return rng.exponential(1.0 / rate_rps, size)
    shape = 1.0 / (cv * cv)
    return rng.gamma(shape, 1.0 / (shape * rate_rps), size)


def load_integral(t: np.ndarray, starts: np.ndarray, multipliers: np.ndarray) -> np.ndarray:
    """``Λ(t) = ∫₀ᵗ m`` of a stepped load (multiplier-seconds): ``Λ(starts[i]) + m[i]·(t − starts[i])`` in step ``i``."""
    at_start = np.concatenate(([0.0], np.cumsum(multipliers[:-1] * np.diff(starts))))
    i = np.searchsorted(starts, t, side="right") - 1
    return at_start[i] + multipliers[i] * (t - starts[i])


def clock_of(u: np.ndarray, starts: np.ndarray, multipliers: np.ndarray) -> np.ndarray:
    """Clock instants (s) of operational times ``u`` under a stepped load: ``Λ(t) = ∫₀ᵗ m``, with ``m = multipliers[i]``
    from ``starts[i]`` (``starts[0] = 0``; the last step holds on), and ``t = Λ⁻¹(u)``: in step ``i``,
    ``t = starts[i] + (u − Λ(starts[i])) / m[i]``; steps at ``m = 0`` are skipped; ``inf`` past a last step at 0."""
    widths = np.diff(starts)
    at_start = np.concatenate(([0.0], np.cumsum(multipliers[:-1] * widths)))
    i = np.searchsorted(at_start, u, side="right") - 1
    m = multipliers[i]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(m > 0, starts[i] + (u - at_start[i]) / np.where(m > 0, m, 1.0), np.inf)


def arrival_times(rng: np.random.Generator, rate_rps: float, arrivals: Arrivals, cv: float,
                  load: tuple[np.ndarray, np.ndarray] | None = None):
    """Arrival instants (s) of one replica's stream from t = 0, without end (or until a load of 0 that holds on).
    Under a stepped ``load`` (starts, multipliers) the stream runs in operational time and is mapped to the clock by
    ``clock_of`` (a time change: the renewal process keeps its CV while its rate follows the load)."""
    u = 0.0
    while True:
        block = u + np.cumsum(interarrival_gaps(rng, rate_rps, arrivals, cv, GAP_BLOCK))
        u = float(block[-1])
        for t in (block if load is None else clock_of(block, *load)):
            if t == np.inf:
                return
            yield float(t)


def diurnal_load(duration_s: float, swing: float, steps: int = 48) -> tuple[tuple[float, float], ...]:
    """A day compressed into the window, as ``(start_s, multiplier)`` steps: ``1 − swing·cos(2π(i + ½)/steps)`` on
    the ``i``-th of ``steps`` equal steps (troughs at both ends, a peak of about ``1 + swing`` mid-window, mean 1)."""
    return tuple((duration_s * i / steps, 1.0 - swing * float(np.cos(2 * np.pi * (i + 0.5) / steps)))
                 for i in range(steps))
