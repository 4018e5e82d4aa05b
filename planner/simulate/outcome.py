"""What a simulation is asked (``SimulationOptions``) and what it answers (``Simulation``), in milliseconds
and requests/s, each simulated figure next to the plan's prediction."""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Field, model_validator

from planner.schema import Frozen, Out, Stamped
from planner.simulate.traffic import Arrivals, load_integral
from planner.strategies.base import CandidateOptions

#: longest simulated window (s): a day of traffic
MAX_DURATION_S = 86_400.0
#: the quantiles a class's latency curve is reported at (percent)
CURVE_PERCENTILES = tuple(range(1, 100))


#: most steps of a load curve
MAX_LOAD_STEPS = 10_000
#: time buckets of a class's timeline over the window
TIMELINE_BUCKETS = 20


class LoadStep(Frozen):
    """From ``start_s`` on (until the next step), every class arrives at ``multiplier`` × the plan's rate."""

    start_s: Annotated[float, Field(ge=0, le=MAX_DURATION_S)]
    multiplier: Annotated[float, Field(ge=0, le=100)]


class SimulationOptions(Frozen):
    """How to replay a plan: the window, the seed, the arrival process, how many replicas of each pool to run,
    and the load over time (``load``: steps from t = 0; empty: the plan's rates throughout).

    Replicas of a pool are independent under random routing, so running ``max_replicas`` of them (the plan's
    per-replica rate each) samples the pool; ``None`` runs every replica."""

    duration_s: Annotated[float, Field(gt=0, le=MAX_DURATION_S)] = 600.0
    seed: Annotated[int, Field(ge=0, le=2**63 - 1)] = 1
    arrivals: Arrivals = "poisson"
    cv: Annotated[float, Field(gt=0, le=20)] = 2.0  # gamma arrivals' coefficient of variation
    #: requests arriving before this are not measured (default: a tenth of the window)
    warmup_s: Annotated[float, Field(ge=0)] | None = None
    max_replicas: Annotated[int, Field(ge=1, le=100_000)] | None = 4
    chunk_tokens: Annotated[int, Field(ge=1, le=1_000_000)] = CandidateOptions.chunk_tokens
    load: tuple[LoadStep, ...] = Field(default=(), max_length=MAX_LOAD_STEPS)

    @model_validator(mode="after")
    def _load_steps(self) -> SimulationOptions:
        starts = [step.start_s for step in self.load]
        if starts and starts[0] != 0:
            raise ValueError(f"load: the first step must start at 0 s (got {starts[0]:g})")
        if any(b <= a for a, b in zip(starts, starts[1:])):
            raise ValueError("load: step starts must increase")
        return self

    @property
    def load_arrays(self):
        """The load as (starts, multipliers) arrays, or None for the plan's rates throughout."""
        if not self.load:
            return None
        return (np.array([s.start_s for s in self.load]), np.array([s.multiplier for s in self.load]))

    def mean_load(self, start_s: float, end_s: float) -> float:
        """The mean multiplier over ``[start_s, end_s]`` (1 without a load curve): ``(Λ(end) − Λ(start)) / (end − start)``."""
        if not self.load or end_s <= start_s:
            return 1.0
        return float(np.diff(load_integral(np.array([start_s, end_s]), *self.load_arrays))[0] / (end_s - start_s))

    @property
    def window_start_s(self) -> float:
        return self.duration_s / 10.0 if self.warmup_s is None else min(self.warmup_s, self.duration_s)


class Latency(Out):
    """A latency's distribution over measured requests (ms): mean and percentiles."""

    mean_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    #: the value at each of CURVE_PERCENTILES (for plots)
    curve_ms: tuple[float, ...]


class TimelinePoint(Out):
    """A class over one stretch of the window, by arrival time: the load, and its SLO statistic there."""

    start_s: float
    end_s: float
    load: float  # the mean multiplier of the plan's rates over the stretch
    ttft_ms: float | None
    tpot_ms: float | None
    ttft_attainment: float | None
    tpot_attainment: float | None


class ClassSimulation(Out):
    """One class: simulated TTFT and TPOT against its SLO and the plan's prediction, at the SLO's statistic
    (``statistic``: ``mean`` or ``pNN``), the share of requests within the SLO, and throughput. Percentiles are
    over requests: a request's TPOT is its mean time per output token after the first (a percentile TPOT SLO is
    read as that many requests' TPOT within it)."""

    name: str
    statistic: str
    slo_ttft_ms: float
    slo_tpot_ms: float
    predicted_ttft_ms: float | None
    predicted_tpot_ms: float | None
    simulated_ttft_ms: float | None
    simulated_tpot_ms: float | None
    #: ± half-width (ms) of the simulated statistic from the spread across sampled replicas (``sampling_noise_ms``);
    #: None when no pool of the class ran two replicas
    ttft_noise_ms: float | None = None
    tpot_noise_ms: float | None = None
    ttft: Latency | None
    tpot: Latency | None
    ttft_attainment: float | None
    tpot_attainment: float | None
    predicted_rps: float
    throughput_rps: float
    measured_requests: int
    #: the window in TIMELINE_BUCKETS stretches, by arrival time
    timeline: tuple[TimelinePoint, ...] = ()
    #: start of the first stretch whose TTFT or TPOT statistic is over the SLO (None: none is)
    behind_from_s: float | None = None


class PoolSimulation(Out):
    """One pool: its simulated replicas' busy fraction, batch occupancy, queue, link use, against the plan.

    ``utilization``: time stepping or prefilling; ``occupancy``: mean sequences running / batch (what the plan's
    ``utilization`` of a decode pool is); ``mean_queue``/``mean_in_system``: per replica; ``littles_ratio``:
    ``L / (λ·W)`` over the window (1 when the counts are consistent)."""

    class_name: str = Field(alias="class")
    strategy: str
    role: str
    device: str
    replicas: int
    simulated_replicas: int
    predicted_utilization: float
    utilization: float
    occupancy: float
    mean_queue: float
    mean_in_system: float
    arrival_rps: float
    mean_sojourn_ms: float | None
    littles_ratio: float | None
    link_utilization: float | None
    #: the pool's TTFT / TPOT as the plan predicts it (TPOT: its step and slot wait) and as simulated, at its class's
    #: SLO statistic
    predicted_ttft_ms: float | None
    simulated_ttft_ms: float | None
    predicted_tpot_ms: float | None
    simulated_tpot_ms: float | None


class Miss(Out):
    """Where the simulated fleet misses: a class's metric at the SLO's statistic over its target, or its
    backlog (measured requests still unfinished when the simulation had to stop). ``within_noise``: the excess is
    no larger than the statistic's sampling noise (a plan that binds at an SLO sits there), so it does not make
    the verdict ``misses``."""

    class_name: str = Field(alias="class")
    metric: Literal["ttft_ms", "tpot_ms", "unfinished"]
    statistic: str
    simulated: float
    target: float
    excess: float  # simulated − target
    relative: float | None  # excess / target (None for a count)
    noise: float | None = None  # the statistic's sampling noise (ms): an excess below it may be the sample's
    within_noise: bool = False


class Simulation(Out, Stamped):
    """A plan replayed: the verdict (``misses`` when a miss exceeds its sampling noise or requests were left
    unfinished, else ``meets``), every miss, per class and per pool figures, and how it was run."""

    verdict: Literal["meets", "misses"]
    misses: tuple[Miss, ...]
    classes: tuple[ClassSimulation, ...]
    pools: tuple[PoolSimulation, ...]
    requests: int  # requests simulated: arrivals at the pools they enter by (prefill or aggregated), measured or not
    unfinished: int  # measured requests still in the fleet when the simulation stopped
    simulated_s: float  # simulated clock at the end, past the window while measured requests drained
    options: SimulationOptions
