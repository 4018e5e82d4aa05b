"""Background plans (``POST /v1/plans`` with ``Prefer: respond-async``): a thread pool owned by the app's lifespan.

A job runs ``plan_workload`` in its pool thread under its own cancel token (the MILPs run in the solver child
processes, so a cancel stops the solve at once) and a progress observer that records each stage the planner
reaches (``planner.progress``: candidates, solve, tie_break, baseline, verify) with the last finished solve's
incumbent, bound and gap, and keeps a way to build the best plan found so far.

``time_limit_s`` caps the whole job: each MILP gets ``SOLVE_SHARE`` of it, and a timer cancels what is still
running when it passes, keeping the best plan so far (status ``time_limit``), or failing when there is none.
``DELETE`` cancels: the job reads ``cancelled``, with the best plan so far when there is one.

States change by conditional updates: ``queued -> running -> done | cancelled | failed``, ``queued -> cancelled``;
a job the server stopped (or a previous process left queued or running) reads ``failed``. The job's lock is held
while it stores its outcome and while a cancel is recorded, so the two never both win.
"""

from __future__ import annotations

import json
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

from api.runner import SOLVE_SHARE, PlanJob
from api.store import NewPlan, PlanJobStore, PlanStore, new_id
from api.study_jobs import first_line
from planner.catalog import Catalog
from planner.optimize import plan_workload
from planner.progress import Progress, observed
from planner.schema import Plan
from planner.solvers.cancel import CancelToken, SolveCancelled, cancellable

log = logging.getLogger("siliconmix.api")
STOPPED = "the server stopped before the plan finished"
#: seconds DELETE waits for a running job to store what it has after its solve is interrupted
CANCEL_WAIT_S = 30.0


class Busy(Exception):
    """Too many plan jobs running or waiting."""


@dataclass
class _Job:
    job_id: str
    token: CancelToken = field(default_factory=CancelToken)
    lock: threading.Lock = field(default_factory=threading.Lock)
    reason: str | None = None  # why the token was cancelled: cancelled | time_limit | stopped
    best: Callable[[], Plan] | None = None
    ended: threading.Event = field(default_factory=threading.Event)


class PlanJobs:
    """Runs plan jobs on ``workers`` threads, at most ``queue_limit`` running or waiting."""

    def __init__(self, jobs: PlanJobStore, plans: PlanStore, catalog: Catalog | None, workers: int, queue_limit: int):
        self.store, self.plans, self.catalog, self.queue_limit = jobs, plans, catalog, queue_limit
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="siliconmix-planjob")
        self._jobs: dict[str, _Job] = {}
        self._guard = threading.Lock()
        self._stopping = threading.Event()
        #: called in a job's thread at each stage it reaches, after the stage is recorded, with the job id, the
        #: stage and the job's cancel token; tests hold a job at a known stage (until it is cancelled) with it
        self.at_stage: Callable[[str, str, CancelToken], None] | None = None

    # ------------------------------------------------------------------------------- lifecycle
    def start(self) -> int:
        """Jobs a previous process left queued or running are marked failed; returns how many."""
        ids = self.store.with_state(("queued", "running"))
        for job_id in ids:
            self.store.transition(job_id, "failed", ("queued", "running"), error=STOPPED)
        return len(ids)

    def stop(self) -> None:
        """Start no job and interrupt the running ones (they end ``failed``)."""
        self._stopping.set()
        with self._guard:
            jobs = list(self._jobs.values())
        for job in jobs:
            self._interrupt(job, "stopped")

    def shutdown(self) -> None:
        self.stop()
        self._pool.shutdown(wait=True, cancel_futures=True)
        for job_id in list(self._jobs):
            self.store.transition(job_id, "failed", ("queued", "running"), error=STOPPED)

    # ---------------------------------------------------------------------------------- jobs
    def submit(self, job: PlanJob, request_json: str) -> str:
        """Queue ``job``; its id. Busy when ``queue_limit`` jobs are running or waiting."""
        with self._guard:
            if len(self._jobs) >= self.queue_limit:
                raise Busy(f"{len(self._jobs)} plan jobs are running or waiting "
                           f"(SILICONMIX_PLAN_QUEUE_LIMIT={self.queue_limit})")
            entry = _Job(new_id())
            self._jobs[entry.job_id] = entry
        try:
            self.store.add(entry.job_id, job.solver, job.time_limit_s, request_json)
            self._pool.submit(self._run, entry, job, request_json)
        except BaseException:
            with self._guard:
                self._jobs.pop(entry.job_id, None)
            raise
        return entry.job_id

    def cancel(self, job_id: str) -> bool:
        """Cancel a queued or running job; True when it was one. A running job is interrupted and this waits (at
        most CANCEL_WAIT_S) until it has stored the best plan it found, if any."""
        with self._guard:
            job = self._jobs.get(job_id)
        if job is None:
            return self.store.transition(job_id, "cancelled", ("queued", "running"))
        self._interrupt(job, "cancelled")
        if self.store.transition(job_id, "cancelled", ("queued",)):
            return True
        job.ended.wait(CANCEL_WAIT_S)
        row = self.store.get(job_id)
        return row is not None and row.state == "cancelled"

    def _interrupt(self, job: _Job, reason: str) -> None:
        with job.lock:
            job.reason = job.reason or reason
        job.token.cancel()

    def _run(self, job: _Job, plan_job: PlanJob, request_json: str) -> None:
        timer = threading.Timer(plan_job.time_limit_s, self._interrupt, (job, "time_limit"))
        timer.daemon = True
        try:
            if self._begin(job):
                timer.start()
                self._solve(job, plan_job, request_json)
        except Exception as exc:  # noqa: BLE001 - recorded on the job, never lost
            log.exception("plan job %s failed", job.job_id)
            with job.lock:
                self.store.transition(job.job_id, "failed", ("queued", "running"), error=first_line(exc))
        finally:
            timer.cancel()
            job.ended.set()
            with self._guard:
                self._jobs.pop(job.job_id, None)

    def _begin(self, job: _Job) -> bool:
        with job.lock:
            if self._stopping.is_set():  # dequeued while the server stops: it never started
                self.store.transition(job.job_id, "failed", ("queued",), error=STOPPED)
                return False
            return job.reason is None and self.store.transition(job.job_id, "running", ("queued",))

    def _solve(self, job: _Job, plan_job: PlanJob, request_json: str) -> None:
        if self.catalog is None:
            raise RuntimeError("the catalog is not loaded")
        options = plan_job.options(SOLVE_SHARE)
        try:
            with cancellable(job.token), observed(lambda p: self._reached(job, p)):
                plan: Plan | None = plan_workload(plan_job.workload, self.catalog, options)
        except SolveCancelled:
            plan = None
        with job.lock:
            reason = job.reason
            if plan is None:
                plan = job.best() if job.best is not None else None
                if plan is not None and reason == "time_limit":
                    plan = plan.model_copy(update={"status": "time_limit"})
            if reason == "stopped":
                self.store.transition(job.job_id, "failed", ("running",), error=STOPPED)
                return
            if plan is None:
                error = (f"time_limit_s ({plan_job.time_limit_s:g} s) passed before any plan was found"
                         if reason == "time_limit" else None)
                self.store.transition(job.job_id, "failed" if error else "cancelled", ("running",), error=error)
                return
            self.plans.add(NewPlan(request_json=request_json, plan_json=plan_job.stamped(plan).model_dump_json(),
                                   solver=plan_job.solver, time_limit_s=plan_job.time_limit_s), job.job_id)
            self.store.transition(job.job_id, "cancelled" if reason == "cancelled" else "done", ("running",))

    def _reached(self, job: _Job, progress: Progress) -> None:
        """The planner reached a stage: record it, keep its best plan so far, call the test hook."""
        if progress.best is not None:
            job.best = progress.best
        facts = {"stage": progress.stage, "candidates": progress.candidates, "incumbent": progress.incumbent,
                 "bound": progress.bound, "gap": progress.gap, "has_plan": job.best is not None}
        self.store.progress(job.job_id, progress.stage, json.dumps(facts))
        if self.at_stage is not None:
            self.at_stage(job.job_id, progress.stage, job.token)
