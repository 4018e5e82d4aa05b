"""Queueing approximations behind the utilisation caps of prefill-bearing and decode-side pools.

Each replica is treated as an M/D/1 queue (Poisson arrivals, deterministic service ``S``): the mean
wait is ``W = ρ·S / (2(1−ρ))`` (Pollaczek–Khinchine with zero service variance). A pool whose SLO
allows ``T`` seconds of TTFT, of which ``S`` are service and ``t`` transfer, may run at utilisation up to

``ρ_max = 2R / (2R + S)`` with ``R = T − S − t`` (no utilisation meets the SLO when ``R ≤ 0``),

capped at ``UTILIZATION_CAP``. A decode replica of batch ``b`` is a queue of ``b`` slots: a request
handed over when all are busy waits for one, between its first and second token, so the wait lands in its
TPOT. Decode-side pools run at most at ``DECODE_UTILIZATION``, and below it where step + slot wait per token
would exceed the TPOT SLO (``max_slot_utilization``; the M/D/c model is ``slot_wait_factor``'s). A class's own
aggregated replica admits a request when a slot frees, so there the slot wait lands in TTFT, before the prompt's
own queue (``admission_wait_s``, ``max_admitted_utilization``).

A TTFT SLO stated as a percentile ``p`` uses the waiting time's tail instead of its mean. For M/G/1 the
Cramér–Lundberg asymptotic ``P(W > t) ≈ C·e^{−θt}`` holds, with ``θ > 0`` the root of ``λ(E[e^{θS}] − 1) = θ``
and ``C = (1 − ρ) / (λ·E[S e^{θS}] − 1)``; for deterministic ``S`` (λ = ρ/S) that is ``ρ(e^{θS} − 1) = θS`` and
``C = (1 − ρ) / (ρ e^{θS} − 1)``. With ``P(W > 0) = ρ`` exactly, ``P(W > t) = min(ρ, C e^{−θt})``, so the
``p``-th percentile wait is 0 when ``1 − p/100 ≥ ρ``, else ``ln(C / (1 − p/100)) / θ``. Against the exact
M/D/1 distribution (Crommelin 1932) it is exact from ρ ≈ 0.5 up, within ±5 % at ρ = 0.3 and about 7 % low (optimistic) at
ρ = 0.2 for p90-p95; pools that meet a tail SLO at low utilisation carry that error.
"""

from __future__ import annotations

import functools

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


def md1_decay_rate(utilization, service_s):
    """θ > 0 with ``ρ(e^{θS} − 1) = θS``: the exponential decay rate of the M/D/1 waiting-time tail (1/s).

    Newton's method on ``x = θS`` from ``x₀ = min(2(1−ρ)/ρ + 2, 60)``, above the root for ρ ≥ 1e-9 (where the
    iteration falls monotonically onto it).
    """
    rho = np.asarray(utilization, dtype=float)
    x = np.minimum(2.0 * (1.0 - rho) / rho + 2.0, 60.0)
    for _ in range(80):
        f = rho * np.expm1(x) - x
        x = x - f / (rho * np.exp(x) - 1.0)
    return x / service_s


def md1_wait_quantile_s(utilization, service_s, percentile):
    """The ``p``-th percentile M/D/1 wait: 0 when ``1 − p/100 ≥ ρ``, else ``ln(C/(1 − p/100)) / θ`` (see above)."""
    rho = np.asarray(utilization, dtype=float)
    tail = 1.0 - percentile / 100.0
    theta = md1_decay_rate(np.maximum(rho, 1e-9), service_s)
    c = (1.0 - rho) / (rho * np.exp(theta * service_s) - 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        wait = np.log(c / tail) / theta
    return np.where(rho > tail, np.maximum(wait, 0.0), 0.0)


def wait_s(utilization, service_s, percentile=None):
    """The queue wait an SLO is stated in: the mean, or the ``percentile`` (``None``: the mean)."""
    if percentile is None:
        return md1_wait_s(utilization, service_s)
    return md1_wait_quantile_s(utilization, service_s, percentile)


def max_utilization_at(slo_s, service_s, transfer_s=0.0, percentile=None):
    """Largest ρ ≤ ``UTILIZATION_CAP`` with ``wait(ρ) + S + t ≤ T`` for the SLO's statistic: the closed form for
    the mean, bisection (the wait grows with ρ) for a percentile; 0 when no utilisation meets it."""
    if percentile is None:
        return max_utilization(slo_s, service_s, transfer_s)
    slack = np.asarray(slo_s, dtype=float) - service_s - transfer_s
    service = np.broadcast_to(np.asarray(service_s, dtype=float), np.broadcast(slack, service_s).shape)
    lo = np.zeros(service.shape)
    hi = np.full(service.shape, UTILIZATION_CAP)
    meets_cap = md1_wait_quantile_s(hi, service, percentile) <= slack
    for _ in range(50):
        mid = (lo + hi) / 2.0
        ok = md1_wait_quantile_s(mid, service, percentile) <= slack
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    return np.where(slack > 0, np.where(meets_cap, UTILIZATION_CAP, lo), 0.0)


# ------------------------------------------------------------------------------------- decode slots
def erlang_c(servers, offered):
    """Erlang C: the probability that an arrival to an M/M/c queue of ``c`` servers offered ``a`` erlangs
    (``a = λ·D``, ``ρ = a/c < 1``) waits. From Erlang B, ``B(c, a) = (aᶜ/c!) / Σ_{k≤c} aᵏ/k!``, as
    ``exp(c·ln a − a − ln c!) / Q(c + 1, a)`` (``Q`` the regularised upper incomplete gamma function, the Poisson CDF at
    ``c``: no sum, no overflow, ``Q ≥ ½`` for ``a < c``), then ``C = B / (1 − ρ(1 − B))``. Dimensionless; 0 at ``a = 0``,
    1 from ``a ≥ c`` on (an overloaded queue always waits)."""
    from scipy.special import gammaincc, gammaln  # lazy: a plan without decode pools never loads scipy

    c = np.asarray(servers, dtype=float)
    a = np.asarray(offered, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        b = np.where(a > 0, np.exp(c * np.log(np.where(a > 0, a, 1.0)) - a - gammaln(c + 1)) / gammaincc(c + 1, a), 0.0)
        rho = a / c
        return np.where(rho < 1, np.clip(b / (1.0 - rho * (1.0 - b)), 0.0, 1.0), 1.0)


def slot_holding(output_tokens, own: int) -> tuple[float, float, float]:
    """``(κ, f, n)`` of a request of ``own`` output tokens in a decode replica that may serve requests of the output
    lengths ``output_tokens`` (tokens; its own among them). A request holds its slot for ``osl − 1`` steps (its first
    token came from the prefill pool), so a pool planned at utilisation ``ρ`` (counted ``λ·osl·τ/b``) has its slots
    ``ρ_s = f·ρ`` busy, ``f = n/(n + 1)``, ``n = osl − 1``. A shared replica waits at most as an M/D/c queue of its
    longest holding ``n = osl_max − 1`` steps at that occupancy: for a mix of service times in ``[D_min, D_max]``,
    ``(1 + c_s²)·E[D] ≤ D_max`` whatever the mix (the variance is largest for a two-point mix at the ends, and
    ``E + (D_max − E)(E − D_min)/E`` grows with ``E`` to ``D_max``), so in the M/G/c approximation
    ``W ≈ (1 + c_s²)/2 · W_{M/M/c}(E[D])`` the mix waits no longer than holdings of ``D_max``. Per output token of this
    request that is ``κ = (osl_max − 1)/(own − 1)`` times what a request of the longest sees per token. An answer of one
    token holds no slot and has no TPOT: ``κ = 0``; ``(0, 0, 0)`` when no request has two tokens."""
    held = [n - 1 for n in output_tokens if n > 1]
    if not held:
        return 0.0, 0.0, 0.0
    longest = max(held)
    return (longest / (own - 1) if own > 1 else 0.0), longest / (longest + 1), float(longest)


def slot_wait_factor(batch, occupancy, held_steps, percentile=None):
    """A decode replica's wait for a slot, per output token, in steps (dimensionless). The replica is an M/D/c queue
    of ``c = b`` slots, each request holding one for ``D = n·τ`` s (``n = osl − 1`` steps: its first token came from
    the prefill pool), the slots busy ``ρ_s`` of the time (offered ``a = c·ρ_s`` erlangs). Its mean wait is the M/M/c
    one halved with Cosmetatos's correction (1976),

    ``W ≈ K · C(c, a)·D / (2c(1 − ρ_s))``, ``K = 1 + (1 − ρ_s)(c − 1)(√(4 + 5c) − 2) / (16·ρ_s·c)``,

    plus half a step: an arrival is admitted only when the running step ends (the replay's continuous batching).
    Per output token, ``(W + τ/2)/n = τ·(K·C / (2c(1 − ρ_s)) + 1/(2n))``: this returns the bracket. For a percentile
    ``p`` the M/M/c wait tail ``P(W > t) = C·e^{−c(1−ρ_s)t/D}`` with its time scale halved likewise (the heavy-traffic
    M/D/c wait is exponential with half the M/M/c mean), ``P(W > t) ≈ C·e^{−2c(1−ρ_s)t/D}``, gives the ``p``-th
    percentile wait ``max(0, ln(C/(1 − p/100)))·D / (2c(1 − ρ_s))`` (0 when ``C ≤ 1 − p/100``: that many requests never
    wait), plus the whole step an unlucky arrival waits for; a request's TPOT is its own mean over its tokens, so
    its percentile is the step plus that per token.

    Against a slot-level replay (Poisson arrivals, ``n`` = 31 whole steps of fixed length, admission at step ends,
    60,000 requests; tests/test_slot_queue.py holds a smaller one) at ``c`` = 4 to 64: the mean within −0.3 %…+2.1 %
    for ``ρ_s`` = 0.5 to 0.9 and high (safe) by up to 25 % at ``ρ_s`` = 0.3, ``c`` ≤ 8 (an arrival to an idle replica
    starts at once); the p90 and p99 within ±5 % at ``ρ_s`` = 0.9, and −21 %…+36 % lower down, where the percentile
    sits near ``P(wait) = 1 − p/100``. The planner's replay steps a part-full batch faster than the full one priced
    here, which leaves it on the safe side."""
    c = np.asarray(batch, dtype=float)
    rho = np.asarray(occupancy, dtype=float)
    n = np.asarray(held_steps, dtype=float)
    waits = erlang_c(c, c * rho)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = 1.0 / (2.0 * c * (1.0 - rho))
        if percentile is None:
            k = 1.0 + np.where(rho > 0, (1.0 - rho) * (c - 1.0) * (np.sqrt(4.0 + 5.0 * c) - 2.0) / (16.0 * rho * c), 0.0)
            return np.where(rho < 1, k * waits * scale + 0.5 / n, np.inf)  # a full queue waits without end
        return np.where(rho < 1, np.maximum(np.log(np.maximum(waits, 1e-300) / (1.0 - percentile / 100.0)), 0.0) * scale
                        + 1.0 / n, np.inf)


def slot_wait_s(step_s, batch, utilization, hold, percentile=None):
    """The slot wait per output token (s) of a decode replica stepping ``τ = step_s`` at batch ``b``, planned at
    utilisation ``ρ``, its requests' ``hold = (κ, f, n)`` (``slot_holding``): ``κ · τ · slot_wait_factor(b, f·ρ, n, p)``
    (0 without a second token to wait for)."""
    kappa, f, n = hold
    if n <= 0 or kappa <= 0:
        return np.zeros(np.broadcast(np.asarray(step_s), np.asarray(utilization)).shape)
    return kappa * np.asarray(step_s, dtype=float) * slot_wait_factor(batch, f * np.asarray(utilization, dtype=float), n, percentile)


#: utilisation caps under a slot queue are found on this many evenly spaced utilisations from 0 to the pool's top.
CAP_GRID_POINTS = 8193
#: the admission cap is searched on every this many grid points first (CAP_GRID_POINTS − 1 is a multiple of it).
_STRIDE = 128


@functools.lru_cache(maxsize=1024)  # 8193 floats each: at most 67 MB
def _factor_table(batch: float, occupancy_per_utilization: float, held_steps: float, percentile, top: float) -> np.ndarray:
    """``slot_wait_factor(b, f·ρ_j, n, p)`` at the grid's utilisations ``ρ_j`` (``CAP_GRID_POINTS`` from 0 to
    ``top``), made non-decreasing by a running maximum (a table value is never below the factor it stands for)."""
    grid = np.linspace(0.0, top, CAP_GRID_POINTS)
    table = np.maximum.accumulate(slot_wait_factor(batch, occupancy_per_utilization * grid, held_steps, percentile))
    table.setflags(write=False)  # shared by every caller through the cache
    return table


def max_slot_utilization(step_s, slo_s, batch, hold, percentile=None):
    """Largest ρ ≤ ``DECODE_UTILIZATION`` with ``τ + slot_wait_s(τ, b, ρ) ≤ T`` (the TPOT SLO ``T``, s), over arrays of
    candidates, to the cap grid's step (``DECODE_UTILIZATION / (CAP_GRID_POINTS − 1)`` ≈ 1.1e-4, rounded down, so the
    SLO holds at the cap); 0 where no utilisation meets it. The wait is ``κ·τ·G(ρ)`` with ``G`` (``slot_wait_factor``)
    growing with ρ and the same for every candidate of a batch and holding, so ``G`` is tabulated once per
    ``(b, n, p)`` and each candidate's cap is the last grid utilisation with ``G ≤ (T − τ)/(κ·τ)``."""
    step, slo, b = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (step_s, slo_s, batch)))
    slack = slo - step
    kappa, f, n = hold
    if n <= 0 or kappa <= 0:  # no second token waits for a slot
        return np.where(slack >= 0, DECODE_UTILIZATION, 0.0)
    grid = np.linspace(0.0, DECODE_UTILIZATION, CAP_GRID_POINTS)
    with np.errstate(divide="ignore", invalid="ignore"):
        room = slack / (kappa * step) * (1.0 - 1e-12)  # the margin covers the rounding of κ·τ·G against T − τ
    out = np.zeros(step.shape)
    values, which = np.unique(b, return_inverse=True)
    for u, value in enumerate(values):
        at = which.reshape(b.shape) == u
        j = np.searchsorted(_factor_table(float(value), f, n, percentile, DECODE_UTILIZATION), room[at], side="right") - 1
        out[at] = np.where(j >= 0, grid[np.maximum(j, 0)], 0.0)
    return np.where(slack > 0, out, 0.0)


def admission_wait_s(step_s, batch, utilization, held_steps, percentile=None):
    """An aggregated replica's wait for a free slot before a request's prefill starts (s): the M/D/c queue of
    ``slot_wait_factor`` with ``c = b`` slots, each held ``n = held_steps`` steps of ``τ = step_s`` (``osl``, as the
    replica's capacity ``b / (τ·osl)`` counts them), busy ``ρ`` of the time: ``n·τ·slot_wait_factor(b, ρ, n, p)``, the queue's wait plus the
    part of a step until the next admission. It lands in TTFT, before the prompt's own queue and service."""
    n = np.asarray(held_steps, dtype=float)
    return n * np.asarray(step_s, dtype=float) * slot_wait_factor(batch, utilization, n, percentile)


def admitted_ttft_s(prompt_utilization, slot_utilization, service_s, step_s, batch, held_steps, percentile=None):
    """TTFT of an aggregated replica (s): the wait for a free slot at its slots' occupancy (``admission_wait_s``), then
    the prompt's M/D/1 queue at its prompt server's utilisation and its chunked service ``S``."""
    return (admission_wait_s(step_s, batch, slot_utilization, held_steps, percentile)
            + wait_s(prompt_utilization, service_s, percentile) + service_s)


def max_admitted_utilization(slo_s, service_s, step_s, batch, held_steps: int, percentile=None):
    """Largest ρ (at most ``max_utilization_at``'s, the prompt queue's alone) with prompt wait + ``admission_wait_s``
    + ``S`` within the TTFT SLO ``T`` (s), over arrays of batches (one holding ``n = held_steps`` for all): that cap
    where it holds there, else the end of the first run of cap-grid utilisations (``CAP_GRID_POINTS`` from 0 to
    ``UTILIZATION_CAP``) where it holds (both waits grow with ρ), found on every ``_STRIDE``-th grid point and then
    within the stride that ends it, the slot factor tabulated per batch (``_factor_table``) and the prompt wait
    computed; 0 where none does."""
    top = np.asarray(max_utilization_at(slo_s, service_s, 0.0, percentile), dtype=float)
    top, slo, service, step, b = np.broadcast_arrays(top, *(np.asarray(x, dtype=float) for x in (slo_s, service_s, step_s, batch)))
    meets = admitted_ttft_s(top, top, service, step, b, held_steps, percentile) <= slo
    out = np.where(meets & (top > 0), top, 0.0)
    todo = (out == 0.0) & (top > 0)
    if not todo.any():
        return out
    grid = np.linspace(0.0, UTILIZATION_CAP, CAP_GRID_POINTS)
    slo, service, step, b, top = (x[todo][:, None] for x in (slo, service, step, b, top))
    tables = [_factor_table(float(v), 1.0, float(held_steps), percentile, UTILIZATION_CAP) for v in b[:, 0]]
    held = float(held_steps) * step
    below_top = np.searchsorted(grid, top, side="right")  # the grid points up to the prompt queue's cap

    def meeting(index):  # index: per batch, grid indices in increasing order; how many of them meet the SLO in a row
        factor = np.array([table[row] for table, row in zip(tables, index)])
        ttft = held * factor + wait_s(grid[index], service, percentile) + service
        return np.cumprod((ttft <= slo) & (index < below_top), axis=1).sum(axis=1)

    coarse = meeting(np.broadcast_to(np.arange(0, CAP_GRID_POINTS, _STRIDE), (len(tables), (CAP_GRID_POINTS - 1) // _STRIDE + 1)))
    start = np.minimum(np.maximum(coarse - 1, 0) * _STRIDE, CAP_GRID_POINTS - _STRIDE)[:, None]
    last = start[:, 0] + meeting(start + np.arange(_STRIDE)) - 1
    out[todo] = np.where(coarse > 0, grid[np.maximum(last, 0)], 0.0)
    return out
