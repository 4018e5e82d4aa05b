"""Replay a plan: build each pool's sampled replicas, feed them their arrival streams, run the clock.

Stages are joined in distribution, not request by request: each pool's replicas get their own renewal
stream at the plan's per-replica rate (a decode pool's arrivals are the merged output of many prefill
replicas, which is close to the same process). A class's TTFT is what its prefill-bearing pools measure and
its TPOT what its decode-bearing pools measure, mixed by the traffic each pool carries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import simpy

from planner.perf.model import CostModel
from planner.schema import Plan, Pool, RequestClass
from planner.simulate.engine import BatchReplica, Outstanding, PrefillReplica, Request, Tally
from planner.simulate.outcome import Simulation, SimulationOptions
from planner.simulate.service import PrefillService, ServiceContext, SimulationError, StepService, service_for
from planner.simulate.summary import summarize
from planner.simulate.traffic import arrival_times, served_by_class
from planner.strategies.base import mean_context, profiles, prompt_tokens
from planner.units import ms_to_s


@dataclass
class PoolRun:
    """One pool under simulation: its replicas' tallies and the traffic each replica gets."""

    pool: Pool
    traffic: dict[str, float]  # class -> requests/s of the whole pool
    tallies: list[Tally]


class SimulationStopped(Exception):
    """``should_stop`` answered true: the simulation was abandoned part-way."""


#: the clock runs in this many slices of the window, ``should_stop`` asked between them
SLICES = 100


def simulate_plan(plan: Plan, costs: CostModel, options: SimulationOptions = SimulationOptions(),
                  should_stop: Callable[[], bool] | None = None) -> Simulation:
    """Simulate ``plan``'s pools at their planned traffic (``options``: window, seed, arrivals, sampling);
    ``should_stop`` is asked a hundred times over the window (and as often while it drains)."""
    runs = [PoolRun(p, served_by_class(p), []) for p in plan.pools]
    runs = [r for r in runs if r.traffic]
    if not runs:
        raise SimulationError(f"pools: the plan (status {plan.status}) has no pool that serves traffic")
    workload = plan.workload
    contexts = {d: context_at(workload.at_dtype(d), costs, options.chunk_tokens) for d in workload.allowed_dtypes}
    classes = {rc.name: rc for rc in workload.classes}
    env = simpy.Environment()
    outstanding = Outstanding(env)
    for i, run in enumerate(runs):
        _start_pool(env, i, run, classes, contexts[run.pool.dtype or workload.dtype], options, outstanding)
    _run(env, options.duration_s, outstanding, should_stop or (lambda: False))
    # a request is counted where it enters the fleet: at its prefill or aggregated pool
    requests = sum(t.entered for r in runs if r.pool.role != "decode" for t in r.tallies)
    return summarize(plan, runs, options, requests=requests, unfinished=outstanding.by_class, end_s=float(env.now))


def context_at(workload: Workload, costs: CostModel, chunk_tokens: int) -> ServiceContext:
    """Service times of pools at ``workload.dtype``."""
    return ServiceContext(workload, *profiles(costs, workload), costs, chunk_tokens)


def _run(env: simpy.Environment, horizon: float, outstanding: Outstanding, should_stop: Callable[[], bool]) -> None:
    """The window, then the drain: on until every measured request has left, for at most another window."""
    step = horizon / SLICES
    for i in range(1, SLICES + 1):
        env.run(until=i * step)
        if should_stop():
            raise SimulationStopped(f"stopped at {env.now:g} s of {horizon:g} s")
    outstanding.closed = True
    outstanding.check()
    for _ in range(SLICES):
        if outstanding.drained.triggered:
            return
        env.run(until=env.any_of([outstanding.drained, env.timeout(step)]))
        if should_stop():
            raise SimulationStopped(f"stopped while draining, at {env.now:g} s")


def _start_pool(env, index: int, run: PoolRun, classes: dict[str, RequestClass], ctx: ServiceContext,
                options: SimulationOptions, outstanding: Outstanding) -> None:
    """Create the pool's sampled replicas, warm the batched ones to steady state, start their arrival streams."""
    pool = run.pool
    missing = [c for c in run.traffic if c not in classes]
    if missing:
        raise SimulationError(f"pools: {pool.class_name}/{pool.strategy}/{pool.role} serves unknown class {missing[0]!r}")
    lead = slowest(pool, [classes[name] for name in run.traffic])
    members = [classes[n] for n in pool.serves if n in classes] if pool.serves and pool.role == "aggregated" else [lead]
    service = service_for(pool, lead, ctx, members)
    if isinstance(service, StepService) and len(run.traffic) > 1:  # a shared pool steps at its running mix
        service.by_class = {name: service_for(pool, classes[name], ctx, members) for name in run.traffic}
    count = pool.replicas if options.max_replicas is None else min(pool.replicas, options.max_replicas)
    for j in range(count):
        tally = Tally(horizon=options.duration_s, window_start=options.window_start_s)
        run.tallies.append(tally)
        rng = np.random.default_rng([options.seed, index, j, 0])
        if isinstance(service, PrefillService):
            replica = PrefillReplica(env, tally, outstanding, service)
        else:
            replica = BatchReplica(env, tally, outstanding, service, rng)
            _warm(replica, service, pool, lead, run.traffic, rng, options.load[0].multiplier if options.load else 1.0)
        env.process(replica.run())
        for k, (name, rps) in enumerate(run.traffic.items()):
            stream = np.random.default_rng([options.seed, index, j, k + 1])
            env.process(_arrivals(env, replica, classes[name], rps / pool.replicas, stream, options))


def slowest(pool: Pool, served: list[RequestClass]) -> RequestClass:
    """The class a pool's service is priced at: its only one, or for a shared pool the one its pricing tier counts
    every request at (the longest prompt for prefill, as its plan prices it; for decode the longest mean context,
    which its warm start runs at, while its steps follow the running mix of classes)."""
    if len(served) == 1:
        return served[0]
    if pool.role == "prefill":
        return max(served, key=lambda rc: (rc.input_tokens, -rc.prefix_cache_hit))
    return max(served, key=mean_context)


def _warm(replica: BatchReplica, service: StepService, pool: Pool, rc: RequestClass, traffic: dict[str, float],
          rng: np.random.Generator, load: float) -> None:
    """Little's law at the plan's TPOT: ``λ · (osl − 1) · TPOT`` sequences already running (λ at the load in force at
    t = 0), within the batch."""
    rate = load * sum(traffic.values()) / pool.replicas
    tpot_s = ms_to_s(pool.tpot_ms or 0.0)
    sequences = min(pool.batch, int(round(rate * (rc.output_tokens - 1) * tpot_s)))
    replica.warm_start(sequences, service.rounds_for(rng, rc.output_tokens - 1))


def _arrivals(env, replica, rc: RequestClass, rate_rps: float, rng, options: SimulationOptions):
    """One class's arrivals at one replica, from t = 0 until the simulation stops."""
    start, end = options.window_start_s, options.duration_s
    prefill = int(round(prompt_tokens(rc)[0]))
    for t in arrival_times(rng, rate_rps, options.arrivals, options.cv, options.load_arrays):
        yield env.timeout(t - env.now)
        replica.arrive(Request(cls=rc.name, arrival=t, measured=start <= t <= end, output_tokens=rc.output_tokens,
                               prefill_tokens=prefill))
