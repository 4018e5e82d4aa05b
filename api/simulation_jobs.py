"""Background simulations (``POST /v1/plans/{id}/simulate``): a thread pool owned by the app's lifespan.

A job reads its stored plan, replays it with ``planner.simulate.simulate_plan`` and stores the simulation's JSON.
The simulation asks its ``should_stop`` between slices of its clock, so a cancel (DELETE) or the server stopping
ends it within one slice. States change by conditional updates: ``queued -> running -> done | cancelled | failed``,
``queued -> cancelled``; a job the server stopped (or a previous process left queued or running) reads ``failed``.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from api.store import PlanStore, SimulationStore, new_id
from api.study_jobs import first_line
from planner.catalog import Catalog
from planner.perf.model import RooflineModel
from planner.provenance import stamp
from planner.schema import Plan
from planner.simulate import SimulationOptions, SimulationStopped, simulate_plan

log = logging.getLogger("siliconmix.api")
STOPPED = "the server stopped before the simulation finished"


class Busy(Exception):
    """Too many simulations running or waiting."""


class SimulationJobs:
    """Runs simulations on ``workers`` threads, at most ``queue_limit`` running or waiting."""

    def __init__(self, store: SimulationStore, plans: PlanStore, catalog: Catalog | None, workers: int,
                 queue_limit: int):
        self.store, self.plans, self.catalog, self.queue_limit = store, plans, catalog, queue_limit
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="siliconmix-simulation")
        self._stops: dict[str, threading.Event] = {}  # job id -> set to stop it (cancel or server stop)
        self._guard = threading.Lock()
        self._stopping = threading.Event()
        #: called in a job's thread once it reads ``running``, with the job id and its stop event; tests hold a job
        #: there (until it is cancelled) with it
        self.at_start: Callable[[str, threading.Event], None] | None = None

    def start(self) -> int:
        """Jobs a previous process left queued or running are marked failed; returns how many."""
        ids = self.store.with_state(("queued", "running"))
        for sim_id in ids:
            self.store.transition(sim_id, "failed", ("queued", "running"), error=STOPPED)
        return len(ids)

    def stop(self) -> None:
        """Start no job and stop the running ones (they end ``failed``)."""
        self._stopping.set()
        with self._guard:
            for stop in self._stops.values():
                stop.set()

    def shutdown(self) -> None:
        """Stop, wait for the running jobs, and mark this process's unfinished ones (never another's) failed."""
        with self._guard:
            mine = list(self._stops)
        self.stop()
        self._pool.shutdown(wait=True, cancel_futures=True)
        for sim_id in mine:
            self.store.transition(sim_id, "failed", ("queued", "running"), error=STOPPED)

    def submit(self, plan_id: str, options: SimulationOptions) -> str:
        """Queue a simulation of stored plan ``plan_id``; its id. Busy when ``queue_limit`` are running or waiting."""
        with self._guard:
            if len(self._stops) >= self.queue_limit:
                raise Busy(f"{len(self._stops)} simulations are running or waiting "
                           f"(SILICONMIX_SIMULATION_QUEUE_LIMIT={self.queue_limit})")
            sim_id = new_id()
            self._stops[sim_id] = threading.Event()
        try:
            self.store.add(sim_id, plan_id, options.model_dump_json())
            self._pool.submit(self._run, sim_id, plan_id, options)
        except BaseException:
            with self._guard:
                self._stops.pop(sim_id, None)
            raise
        return sim_id

    def cancel(self, sim_id: str) -> bool:
        """Cancel a queued or running job; True when it was one (a running one stops within a slice of its clock)."""
        with self._guard:
            stop = self._stops.get(sim_id)
        if stop is not None:
            stop.set()
        return self.store.transition(sim_id, "cancelled", ("queued", "running"))

    def _run(self, sim_id: str, plan_id: str, options: SimulationOptions) -> None:
        stop = self._stops[sim_id]
        try:
            if self._stopping.is_set():
                self.store.transition(sim_id, "failed", ("queued",), error=STOPPED)
            elif self.store.transition(sim_id, "running", ("queued",)):
                if self.at_start is not None:
                    self.at_start(sim_id, stop)
                self._simulate(sim_id, plan_id, options, stop)
        except SimulationStopped:
            if self._stopping.is_set():
                self.store.transition(sim_id, "failed", ("running",), error=STOPPED)
        except Exception as exc:  # noqa: BLE001 - recorded on the job, never lost
            log.exception("simulation %s failed", sim_id)
            self.store.transition(sim_id, "failed", ("running",), error=first_line(exc))
        finally:
            with self._guard:
                self._stops.pop(sim_id, None)

    def _simulate(self, sim_id: str, plan_id: str, options: SimulationOptions, stop: threading.Event) -> None:
        if self.catalog is None:
            raise RuntimeError("the catalog is not loaded")
        row = self.plans.get(plan_id)
        if row is None:
            raise LookupError(f"plan {plan_id} is gone")
        plan = Plan.model_validate_json(row.plan_json)
        sim = simulate_plan(plan, RooflineModel(self.catalog), options, stop.is_set)
        sim = sim.model_copy(update=stamp(self.catalog))
        self.store.transition(sim_id, "done", ("running",), result_json=sim.model_dump_json())
