"""From the replicas' tallies to the answer: per class latency distributions mixed over the pools that carry
the class (each pool's samples weighted by its share of the class's traffic), per pool utilisation and
queues, and the verdict against the SLOs."""

from __future__ import annotations

import numpy as np

from planner.schema import Plan, RequestClass
from planner.simulate.outcome import (
    CURVE_PERCENTILES,
    ClassSimulation,
    Latency,
    Miss,
    PoolSimulation,
    Simulation,
    SimulationOptions,
    TIMELINE_BUCKETS,
    TimelinePoint,
)
from planner.units import s_to_ms


def weighted_quantiles(values: np.ndarray, weights: np.ndarray, percents) -> np.ndarray:
    """The inverse of the weighted empirical CDF: for each ``p``, the smallest value whose cumulative weight share
    reaches ``p / 100``."""
    order = np.argsort(values, kind="stable")
    v, cum = values[order], np.cumsum(weights[order])
    idx = np.searchsorted(cum / cum[-1], np.asarray(percents, dtype=float) / 100.0 - 1e-12, side="left")
    return v[np.minimum(idx, len(v) - 1)]


def mixed_samples(runs, cls: str, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every measured sample (s) of ``metric`` (``ttft_s`` / ``tpot_s``) of class ``cls``, each weighted by its
    pool's share of the class's traffic over the pool's sample count, and its arrival time (s)."""
    values, weights, arrivals = [], [], []
    for run in runs:
        samples = [x for tally in run.tallies for x in getattr(tally, metric).get(cls, ())]
        if samples:
            pairs = np.asarray(samples)
            arrivals.append(pairs[:, 0])
            values.append(pairs[:, 1])
            weights.append(np.full(len(samples), run.traffic[cls] / len(samples)))
    if not values:
        return np.empty(0), np.empty(0), np.empty(0)
    return np.concatenate(values), np.concatenate(weights), np.concatenate(arrivals)


def latency(values: np.ndarray, weights: np.ndarray) -> Latency | None:
    if not len(values):
        return None
    ms = s_to_ms(values)
    p50, p90, p99 = weighted_quantiles(ms, weights, (50, 90, 99))
    return Latency(mean_ms=float(np.average(ms, weights=weights)), p50_ms=float(p50), p90_ms=float(p90),
                   p99_ms=float(p99), curve_ms=tuple(float(x) for x in weighted_quantiles(ms, weights, CURVE_PERCENTILES)))


def at_statistic(values: np.ndarray, weights: np.ndarray, percentile: float | None) -> float | None:
    """The SLO's statistic of a weighted sample in ms: its mean, or its ``percentile``."""
    if not len(values):
        return None
    if percentile is None:
        return float(s_to_ms(np.average(values, weights=weights)))
    return float(s_to_ms(weighted_quantiles(values, weights, (percentile,))[0]))


#: two-sided 95 % normal quantile
Z95 = 1.96


def sampling_noise_ms(runs, cls: str, metric: str, percentile: float | None) -> float | None:
    """± half-width (ms) of a class's statistic from the spread across each pool's sampled replicas:
    ``Z95 · √(Σ_p (w_p · s_p / √r_p)²)``, ``w_p`` the pool's share of the class's traffic, ``s_p`` the standard
    deviation of the statistic over its ``r_p`` replicas (pools that ran one replica add nothing, so it is a floor;
    for a percentile, the linear mix of pool percentiles is itself an approximation). None when no pool ran two."""
    total = sum(r.traffic[cls] for r in runs if cls in r.traffic and any(getattr(t, metric).get(cls) for t in r.tallies))
    parts = []
    for run in runs:
        per_replica = [at_statistic(pairs[:, 1], np.ones(len(pairs)), percentile)
                       for pairs in (np.asarray(getattr(t, metric).get(cls, ())) for t in run.tallies) if len(pairs)]
        if len(per_replica) >= 2:
            share = run.traffic[cls] / total
            parts.append((share * np.std(per_replica, ddof=1) / np.sqrt(len(per_replica))) ** 2)
    return float(Z95 * np.sqrt(sum(parts))) if parts else None


def attainment(values: np.ndarray, weights: np.ndarray, slo_ms: float) -> float | None:
    """Share of the (weighted) requests within ``slo_ms``."""
    if not len(values):
        return None
    return float(weights[s_to_ms(values) <= slo_ms].sum() / weights.sum())


def timeline(ttft, tpot, rc: RequestClass, options: SimulationOptions) -> tuple[TimelinePoint, ...]:
    """The class's SLO statistics and attainment per stretch of the window, by arrival time."""
    edges = np.linspace(0.0, options.duration_s, TIMELINE_BUCKETS + 1)
    points = []
    for start, end in zip(edges, edges[1:]):
        a = (ttft[2] >= start) & (ttft[2] < end)
        b = (tpot[2] >= start) & (tpot[2] < end)
        inside_ttft, inside_tpot = (ttft[0][a], ttft[1][a]), (tpot[0][b], tpot[1][b])
        points.append(TimelinePoint(
            start_s=float(start), end_s=float(end), load=options.mean_load(float(start), float(end)),
            ttft_ms=at_statistic(*inside_ttft, rc.slo.percentile), tpot_ms=at_statistic(*inside_tpot, rc.slo.percentile),
            ttft_attainment=attainment(*inside_ttft, rc.slo.ttft_ms),
            tpot_attainment=attainment(*inside_tpot, rc.slo.tpot_ms)))
    return tuple(points)


def behind_from(points: tuple[TimelinePoint, ...], rc: RequestClass) -> float | None:
    """Start of the first stretch whose TTFT or TPOT statistic is over the class's SLO."""
    for p in points:
        if (p.ttft_ms or 0.0) > rc.slo.ttft_ms or (p.tpot_ms or 0.0) > rc.slo.tpot_ms:
            return p.start_s
    return None


def class_summary(plan: Plan, runs, rc: RequestClass, options: SimulationOptions) -> ClassSimulation:
    predicted = next((c for c in plan.classes if c.name == rc.name), None)
    ttft_all, tpot_all = mixed_samples(runs, rc.name, "ttft_s"), mixed_samples(runs, rc.name, "tpot_s")
    ttft, tpot = ttft_all[:2], tpot_all[:2]
    points = timeline(ttft_all, tpot_all, rc, options)
    window = options.duration_s - options.window_start_s
    final = [r for r in runs if rc.name in r.traffic and r.pool.role != "prefill"]
    throughput = sum(sum(t.completed_in_window.get(rc.name, 0) for t in r.tallies) * r.pool.replicas / len(r.tallies)
                     for r in final) / window
    p = rc.slo.percentile
    return ClassSimulation(
        name=rc.name, statistic="mean" if p is None else f"p{p:g}", slo_ttft_ms=rc.slo.ttft_ms,
        slo_tpot_ms=rc.slo.tpot_ms, predicted_ttft_ms=predicted.ttft_ms if predicted else None,
        predicted_tpot_ms=predicted.tpot_ms if predicted else None,
        simulated_ttft_ms=at_statistic(*ttft, p), simulated_tpot_ms=at_statistic(*tpot, p),
        ttft_noise_ms=sampling_noise_ms(runs, rc.name, "ttft_s", p),
        tpot_noise_ms=sampling_noise_ms(runs, rc.name, "tpot_s", p),
        ttft=latency(*ttft), tpot=latency(*tpot), ttft_attainment=attainment(*ttft, rc.slo.ttft_ms),
        tpot_attainment=attainment(*tpot, rc.slo.tpot_ms), predicted_rps=sum(r.traffic[rc.name] for r in final),
        throughput_rps=throughput, measured_requests=len(ttft[0]) + len(tpot[0]),
        timeline=points, behind_from_s=behind_from(points, rc),
    )


def pool_latency(run, metric: str, percentile: float | None) -> float | None:
    """The pool's own ``metric`` at the SLO statistic over its measured requests (ms)."""
    samples = [x for tally in run.tallies for pairs in getattr(tally, metric).values() for _, x in pairs]
    return at_statistic(np.asarray(samples), np.ones(len(samples)), percentile)


def pool_summary(run, horizon: float, percentile: float | None) -> PoolSimulation:
    pool, tallies = run.pool, run.tallies
    span = len(tallies) * horizon  # replica-seconds simulated inside the window
    arrivals = sum(t.arrivals for t in tallies)
    departures = sum(t.departures for t in tallies)
    sojourn = sum(t.sojourn_s for t in tallies) / departures if departures else None
    in_system = sum(t.system_area for t in tallies) / span
    rate = arrivals / span
    link = sum(t.link_busy_s for t in tallies) / span if pool.role == "prefill" else None
    return PoolSimulation(
        class_name=pool.class_name, strategy=pool.strategy, role=pool.role, device=pool.device,
        replicas=pool.replicas, simulated_replicas=len(tallies), predicted_utilization=pool.utilization,
        utilization=sum(t.busy_s for t in tallies) / span,
        occupancy=sum(t.running_area for t in tallies) / (span * pool.batch),
        mean_queue=sum(t.queue_area for t in tallies) / span, mean_in_system=in_system,
        arrival_rps=rate * pool.replicas, mean_sojourn_ms=None if sojourn is None else float(s_to_ms(sojourn)),
        littles_ratio=in_system / (rate * sojourn) if sojourn and rate else None, link_utilization=link,
        predicted_ttft_ms=pool.ttft_ms, simulated_ttft_ms=pool_latency(run, "ttft_s", percentile),
        predicted_tpot_ms=None if pool.tpot_ms is None else pool.tpot_ms + pool.slot_wait_ms, simulated_tpot_ms=pool_latency(run, "tpot_s", percentile),
    )


def misses_of(results: list[ClassSimulation], unfinished: dict[str, int]) -> list[Miss]:
    """Each class metric whose SLO statistic exceeds its SLO, and each class with unfinished requests."""
    out = []
    for c in results:
        for metric, value, target, noise in (("ttft_ms", c.simulated_ttft_ms, c.slo_ttft_ms, c.ttft_noise_ms),
                                             ("tpot_ms", c.simulated_tpot_ms, c.slo_tpot_ms, c.tpot_noise_ms)):
            if value is not None and value > target:
                out.append(Miss(class_name=c.name, metric=metric, statistic=c.statistic, simulated=value,
                                target=target, excess=value - target, relative=(value - target) / target,
                                noise=noise, within_noise=noise is not None and value - target <= noise))
        left = unfinished.get(c.name, 0)
        if left:
            out.append(Miss(class_name=c.name, metric="unfinished", statistic="count", simulated=float(left),
                            target=0.0, excess=float(left), relative=None))
    return out


def summarize(plan: Plan, runs, options: SimulationOptions, requests: int, unfinished: dict[str, int],
              end_s: float) -> Simulation:
    classes = [class_summary(plan, runs, rc, options) for rc in plan.workload.classes
               if any(rc.name in r.traffic for r in runs)]
    misses = misses_of(classes, unfinished)
    percentile = {rc.name: rc.slo.percentile for rc in plan.workload.classes}
    verdict = "misses" if any(not m.within_noise for m in misses) else "meets"
    return Simulation(verdict=verdict, misses=tuple(misses), classes=tuple(classes),
                      pools=tuple(pool_summary(r, options.duration_s, percentile[r.pool.class_name]) for r in runs), requests=requests,
                      unfinished=sum(unfinished.values()), simulated_s=end_s, options=options)
