"""The bounded pool that runs the planner away from the event loop.

``run_plan`` is a module-level function of plain data so that both pools can run it: a thread pool
(default: no start-up cost, the catalog shared in memory; the MILP engines release the GIL while they
solve) or a process pool (``SILICONMIX_PLAN_EXECUTOR=process``: true parallelism on many cores, at the
price of a spawned interpreter and catalog per worker). At most ``plan_queue_limit`` plans run or wait;
one more is refused at once (503) rather than queued without bound. A plan on the thread pool stops when its
token is cancelled (client gone, server stopping); one in a worker process stops at its own time cap, not on a cancel.

``time_limit_s`` caps the whole request, as it does a background job: each MILP gets ``SOLVE_SHARE`` of it, and
a timer stops what still runs when it passes, answering with the best plan so far (status ``time_limit``).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

from planner.catalog import load_catalog
from planner.optimize import PlanOptions, plan_workload
from planner.progress import Progress, observed
from planner.plan import infeasible_plan
from planner.provenance import stamp
from planner.schema import Diagnosis, Plan, SolverInfo, SolveSettings, Workload
from planner.solvers.cancel import CancelToken, SolveCancelled, cancellable

#: share of a request's time_limit_s each MILP solve may take (the tie-break stage takes 30% of that, the
#: baseline at most 2 s): the first stage's plan is in before the whole request's limit passes
SOLVE_SHARE = 0.6


@dataclass(frozen=True)
class PlanJob:
    """One planning request, as plain data (picklable for a process pool)."""

    workload: Workload
    solver: str
    engine: str | None
    time_limit_s: float
    baseline: bool
    relative_gap: float = PlanOptions.relative_gap
    node_limit: int | None = None
    catalog_dir: str | None = None
    #: re-solve with each estimated input moved by ± this (planner.sensitivity); None: no analysis
    sensitivity_delta: float | None = None
    #: also the best plans with other device mixes (planner.optimize.alternatives)
    alternatives: int = 0
    #: also replay the plan request by request (planner.simulate, default settings)
    simulate: bool = False

    def stamped(self, plan: Plan) -> Plan:
        """``plan`` saying the options as requested: ``time_limit_s`` is the request's cap, not one solve's share."""
        return plan.model_copy(update={"options": plan.options.model_copy(update={"time_limit_s": self.time_limit_s})})

    def options(self, share: float = 1.0) -> PlanOptions:
        """The planner's options for this job, each MILP solve getting ``share`` of its time limit."""
        return PlanOptions.of({**vars(self), "time_limit_s": share * self.time_limit_s})


def run_plan(job: PlanJob, token: CancelToken | None = None) -> str:
    """Plan ``job`` within its ``time_limit_s`` and return the plan's JSON text (what the service answers and stores).

    When the limit passes, the solve still running is stopped and the best plan so far is the answer, with
    status ``time_limit``; when there is none yet, the answer says so (as the planner does when a MILP's own
    limit passes first: no pools, a ``no_candidates`` diagnosis). ``token`` (thread pool only: a token does not
    cross processes) also stops it, with ``SolveCancelled``.
    """
    catalog = load_catalog(Path(job.catalog_dir) if job.catalog_dir else None)
    options = job.options(SOLVE_SHARE)
    token = token or CancelToken()
    expired = threading.Event()
    best: list = [None]

    def expire() -> None:
        expired.set()
        token.cancel()

    def keep(progress: Progress) -> None:
        if progress.best is not None:
            best[0] = progress.best

    timer = threading.Timer(job.time_limit_s, expire)
    timer.daemon = True
    timer.start()
    try:
        with cancellable(token), observed(keep):
            plan: Plan = plan_workload(job.workload, catalog, options)
    except SolveCancelled:
        if not expired.is_set():
            raise
        if best[0] is None:
            plan = expired_plan(job, catalog)
        else:
            plan = best[0]().model_copy(update={"status": "time_limit"})
    finally:
        timer.cancel()
    return job.stamped(plan).model_dump_json()


def expired_plan(job: PlanJob, catalog) -> Plan:
    """The answer of a request whose time limit passed before any plan was found."""
    info = SolverInfo(backend=job.solver, engine=job.engine or "-", time_s=job.time_limit_s, gap=None)
    message = (f"time_limit_s ({job.time_limit_s:g} s) passed before any plan was found; raise it, or solve in the "
               "background (Prefer: respond-async)")
    plan = infeasible_plan(job.workload, {}, info, Diagnosis(reason="no_candidates", message=message))
    return plan.model_copy(update={**stamp(catalog), "options": SolveSettings(
        solver=job.solver, engine=job.engine, time_limit_s=job.time_limit_s, relative_gap=job.relative_gap,
        baseline=job.baseline, node_limit=job.node_limit)})


def _warm(catalog_dir: str | None) -> None:
    """Process-pool initializer: import the planner and load the catalog before the first request."""
    load_catalog(Path(catalog_dir) if catalog_dir else None)


class Busy(Exception):
    """Too many plans running or waiting."""


class PoolBroken(Exception):
    """A worker process died; the pool was replaced."""


class PlanRunner:
    """Runs PlanJobs on a bounded pool; owned by the app's lifespan."""

    def __init__(self, kind: str, workers: int, queue_limit: int, catalog_dir: str | None = None):
        self.kind, self.workers, self.queue_limit, self.catalog_dir = kind, workers, queue_limit, catalog_dir
        self.pending = 0  # running + waiting; touched only on the event loop
        self._executor = self._new_executor()

    def _new_executor(self) -> Executor:
        if self.kind == "process":
            return ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                       initializer=_warm, initargs=(self.catalog_dir,))
        return ThreadPoolExecutor(self.workers, thread_name_prefix="siliconmix-plan")

    async def run(self, job: PlanJob, token: CancelToken) -> str:
        """The plan's JSON; SolveCancelled once ``token`` is cancelled (thread pool; a process-pool worker solves on)."""
        if self.pending >= self.queue_limit:
            raise Busy(f"{self.pending} plans are running or waiting (SILICONMIX_PLAN_QUEUE_LIMIT={self.queue_limit})")
        self.pending += 1
        try:
            if self.kind == "process":
                return await asyncio.wrap_future(self._executor.submit(run_plan, job))
            return await asyncio.wrap_future(self._executor.submit(run_plan, job, token))
        except asyncio.CancelledError:  # the request's task was cancelled: so is its solve
            token.cancel()
            raise
        except BrokenProcessPool as exc:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = self._new_executor()
            raise PoolBroken("a planner worker process died; the pool was restarted") from exc
        finally:
            self.pending -= 1

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
