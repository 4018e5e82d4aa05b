"""SimPy processes of one replica: its arrival streams, and its server (a prefill server or a continuously
batched one), with the time integrals and per-request records the summary reads.

A request is ``measured`` when it arrives inside the measurement window; arrivals go on past the window
(background load) until every measured request has left, so the last measured requests see a loaded fleet.
Time integrals (busy time, queue and in-system counts, batch occupancy, link busy time) run over
``[0, horizon]``; requests that were already running at t = 0 (``warm``) occupy the batch but are counted
nowhere else.
"""

from __future__ import annotations

import heapq
from collections import Counter, deque
from dataclasses import dataclass, field

import numpy as np
import simpy

from planner.simulate.service import PrefillService, StepService

#: aggregated steps price their prefill tokens rounded up to a multiple of this (one step table per multiple)
PREFILL_QUANTUM = 16


@dataclass
class Request:
    """One request at one pool: its class, arrival there, output tokens, and when its first token came."""

    cls: str
    arrival: float
    measured: bool
    output_tokens: int
    prefill_tokens: int = 0
    warm: bool = False
    first_token: float = 0.0


@dataclass
class Tally:
    """What one replica's run leaves behind (seconds, request counts; areas are count × seconds)."""

    horizon: float
    window_start: float
    busy_s: float = 0.0
    link_busy_s: float = 0.0
    queue_area: float = 0.0
    system_area: float = 0.0
    running_area: float = 0.0
    entered: int = 0  # non-warm arrivals, all of them
    arrivals: int = 0  # non-warm arrivals in [0, horizon]
    departures: int = 0  # of those arrivals, the ones that have left
    sojourn_s: float = 0.0  # their summed time in the pool
    completed_in_window: dict[str, int] = field(default_factory=dict)
    #: per class, (arrival, seconds) of each measured request
    ttft_s: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    tpot_s: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    def clipped(self, start: float, length: float) -> float:
        """The part of ``[start, start + length]`` inside ``[0, horizon]`` (s)."""
        return max(0.0, min(start + length, self.horizon) - min(start, self.horizon))


class Outstanding:
    """Measured requests still in the fleet; ``drained`` fires when the last leaves after the window closed."""

    def __init__(self, env: simpy.Environment):
        self.env, self.count, self.closed = env, 0, False
        self.by_class: dict[str, int] = {}
        self.drained = env.event()

    def add(self, cls: str) -> None:
        self.count += 1
        self.by_class[cls] = self.by_class.get(cls, 0) + 1

    def done(self, cls: str) -> None:
        self.count -= 1
        self.by_class[cls] -= 1
        self.check()

    def check(self) -> None:
        if self.closed and self.count == 0 and not self.drained.triggered:
            self.drained.succeed()


class Replica:
    """What both servers share: the waiting line, the wake-up, the time integrals."""

    def __init__(self, env: simpy.Environment, tally: Tally, outstanding: Outstanding):
        self.env, self.tally, self.outstanding = env, tally, outstanding
        self.waiting: deque[Request] = deque()
        self.in_system = 0  # non-warm requests waiting or in service
        self.running_count = 0
        self._last = 0.0
        self._wake: simpy.Event | None = None

    def advance(self) -> None:
        """Add the counts held since the last change to the areas (clipped to the horizon)."""
        now, t = self.env.now, self.tally
        dt = t.clipped(self._last, now - self._last)
        if dt:
            t.queue_area += len(self.waiting) * dt
            t.system_area += self.in_system * dt
            t.running_area += self.running_count * dt
        self._last = now

    def arrive(self, request: Request) -> None:
        self.advance()
        self.waiting.append(request)
        self.in_system += 1
        self.tally.entered += 1
        if request.arrival <= self.tally.horizon:
            self.tally.arrivals += 1
        if request.measured:
            self.outstanding.add(request.cls)
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()

    def sleep(self) -> simpy.Event:
        self._wake = self.env.event()
        return self._wake

    def leave(self, request: Request) -> None:
        """``request`` leaves the pool now (the caller has advanced the areas)."""
        now, t = self.env.now, self.tally
        if request.warm:
            return
        self.in_system -= 1
        if request.arrival <= t.horizon:
            t.departures += 1
            t.sojourn_s += now - request.arrival
        if t.window_start <= now <= t.horizon:
            t.completed_in_window[request.cls] = t.completed_in_window.get(request.cls, 0) + 1
        if request.measured:
            self.outstanding.done(request.cls)


class PrefillReplica(Replica):
    """Takes up to ``batch`` waiting prompts, prefills them as one pass, then sends each prompt's KV over the
    replica's NICs in turn (a FIFO link); TTFT = arrival → KV delivered."""

    def __init__(self, env, tally, outstanding, service: PrefillService):
        super().__init__(env, tally, outstanding)
        self.service = service
        self._link_free = 0.0

    def run(self):
        env, t, s = self.env, self.tally, self.service
        while True:
            if not self.waiting:
                yield self.sleep()
                continue
            self.advance()
            prompts = [self.waiting.popleft() for _ in range(min(len(self.waiting), s.batch))]
            self.running_count = len(prompts)
            dt = float(s.seconds[len(prompts) - 1])
            t.busy_s += t.clipped(env.now, dt)
            yield env.timeout(dt)
            self.advance()
            self.running_count = 0
            for r in prompts:
                start = max(env.now, self._link_free)
                self._link_free = start + s.transfer_s
                t.link_busy_s += t.clipped(start, s.transfer_s)
                if r.measured:
                    t.ttft_s.setdefault(r.cls, []).append((r.arrival, self._link_free - r.arrival))
                self.leave(r)


class BatchReplica(Replica):
    """Continuous batching up to ``batch`` sequences: a waiting request is admitted when a slot is free; each
    step runs every decode sequence (one token, or one speculative round) and, in an aggregated pool, up to
    ``chunk_tokens`` prefill tokens of admitted prompts first come first served (several short prompts share
    a step, a long one spans steps). A prompt's last chunk gives its first token; a decode-only pool's request
    counts its first token at arrival (the prefill pool made it). TPOT = (last token − first token) / (osl − 1).
    """

    def __init__(self, env, tally, outstanding, service: StepService, rng: np.random.Generator):
        super().__init__(env, tally, outstanding)
        self.service, self.rng = service, rng
        self.prefilling: deque[list] = deque()  # [request, prefill tokens left]
        self.running: list[tuple[int, int, Request]] = []  # heap of (finishing step, order, request)
        self.by_class: Counter[str] = Counter()  # running sequences per class (a shared pool's steps follow the mix)
        self.step_no = 0
        self._order = 0

    def start_decode(self, r: Request, rounds: int | None = None) -> None:
        if rounds is None:
            rounds = self.service.rounds_for(self.rng, r.output_tokens - 1)
        if rounds <= 0:
            self.finish(r)
            return
        self._order += 1
        heapq.heappush(self.running, (self.step_no + rounds, self._order, r))
        self.by_class[r.cls] += 1
        self.running_count = len(self.running)

    def finish(self, r: Request) -> None:
        if r.measured and r.output_tokens > 1:
            tpot = (self.env.now - r.first_token) / (r.output_tokens - 1)
            self.tally.tpot_s.setdefault(r.cls, []).append((r.arrival, tpot))
        self.leave(r)

    def admit(self) -> None:
        s = self.service
        while self.waiting and len(self.running) + len(self.prefilling) < s.batch:
            r = self.waiting.popleft()
            if s.chunk_tokens:
                self.prefilling.append([r, r.prefill_tokens])
            else:
                r.first_token = r.arrival
                self.start_decode(r)

    def chunk(self) -> list[tuple[list, int]]:
        """The prefill tokens this step carries: from the oldest admitted prompt on, up to the budget (with expert
        groups, one budget per attention rank: at most one budget of each prompt, ``groups`` budgets in all)."""
        s = self.service
        budget, carried = s.chunk_tokens * s.groups, []
        for item in self.prefilling:
            take = min(item[1], budget, s.chunk_tokens)
            carried.append((item, take))
            budget -= take
            if budget <= 0:
                break
        return carried

    def run(self):
        env, t, s = self.env, self.tally, self.service
        while True:
            self.advance()
            self.admit()
            if not self.running and not self.prefilling:
                yield self.sleep()
                continue
            carried = self.chunk() if self.prefilling else []
            tokens = sum(take for _, take in carried)
            priced = -(-tokens // PREFILL_QUANTUM) * PREFILL_QUANTUM
            dt = s.step_s(len(self.running), priced, self.by_class)
            t.busy_s += t.clipped(env.now, dt)
            yield env.timeout(dt)
            self.advance()
            self.step_no += 1
            for item, take in carried:
                item[1] -= take
            while self.prefilling and self.prefilling[0][1] <= 0:
                r = self.prefilling.popleft()[0]
                r.first_token = env.now
                if r.measured:
                    t.ttft_s.setdefault(r.cls, []).append((r.arrival, env.now - r.arrival))
                self.start_decode(r)
            while self.running and self.running[0][0] <= self.step_no:
                r = heapq.heappop(self.running)[2]
                self.by_class[r.cls] -= 1
                self.finish(r)
            self.running_count = len(self.running)

    def warm_start(self, sequences: int, rounds: int) -> None:
        """Begin in steady state: ``sequences`` requests already decoding at t = 0, each with a uniformly drawn
        part (1 … ``rounds``) of a full request's steps left."""
        for left in self.rng.integers(1, max(rounds, 1) + 1, size=sequences):
            self.start_decode(Request(cls="", arrival=0.0, measured=False, output_tokens=0, warm=True), int(left))
