"""Background studies: a small thread pool owned by the app's lifespan (``SILICONMIX_STUDY_WORKERS``).

Each study solves its scenarios one after the other in its pool thread (no process pool inside the server:
the catalog is shared, and each solve is bounded by the study's ``options.time_limit_s``). Under the job's
cancel token the MILPs themselves run in the solver child processes (``planner.solvers.isolated``), so a
cancel, or the server stopping, also stops the scenario being solved. Every finished scenario is appended to
the study folder's ``rows.jsonl`` journal, the same journal ``siliconmix study`` writes, so a study resumed
after a restart solves only what is missing; at the end the folder gets the CLI's outputs (results.csv/.parquet,
pareto.csv, charts, report.html).

Status changes are conditional updates in the database: ``queued -> running -> succeeded | failed``,
``queued | running -> cancelled`` (DELETE), ``queued | running -> interrupted`` (server stopped). A cancel
holds the job's lock while it marks the study, and the job journals a row only under that lock after
checking the flag, so no row is added once a study reads ``cancelled``.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from api.store import StudyRow, StudyStore
from planner.catalog import Catalog
from planner.optimize import PlanOptions, plan_workload
from planner.schema import Workload
from planner.solvers.cancel import CancelToken, SolveCancelled, cancellable
from planner.study import StudySpec, analyse, error_row, expand, result_row, table_row, with_prices
from planner.study_runner import (
    JOURNAL, Journal, run_key, scenario_task, solve_context, write_outputs, write_provenance, write_spec,
)

log = logging.getLogger("siliconmix.api")
STOPPED = "the server stopped before the study finished"


def solve_in_process(task: dict, catalog: Catalog) -> dict:
    """``study_runner.solve_scenario`` with the server's catalog: one row; raises only SolveCancelled."""
    start = time.perf_counter()
    try:
        plan = plan_workload(Workload.model_validate(task["workload"]), with_prices(catalog, task["prices"]),
                             PlanOptions.of(task["options"]))
        return result_row(plan, time.perf_counter() - start)
    except SolveCancelled:  # cancelled or stopping: no row, the scenario is not done
        raise
    except Exception as exc:  # noqa: BLE001 - a study records failures instead of stopping
        return error_row(f"{type(exc).__name__}: {exc}", time.perf_counter() - start)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


@dataclass
class _Job:
    study_id: str
    cancel: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    token: CancelToken = field(default_factory=CancelToken)  # interrupts the scenario being solved
    future: Future | None = None


class StudyJobs:
    """Runs studies on ``workers`` threads; ``start`` handles what a previous process left unfinished."""

    def __init__(self, store: StudyStore, catalog: Catalog | None, workers: int, study_dir: Path):
        self.store, self.catalog, self.workers, self.study_dir = store, catalog, workers, study_dir
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="siliconmix-study")
        self._jobs: dict[str, _Job] = {}
        self._guard = threading.Lock()
        self._stopping = threading.Event()
        #: called in a study's thread before each scenario it solves, with the study id and the scenario's
        #: index; tests stop a study at a known scenario with it
        self.before_scenario: Callable[[str, int], None] | None = None

    # ------------------------------------------------------------------------------- lifecycle
    def start(self, resume: bool) -> tuple[int, int]:
        """Studies left queued/running by a previous process: resumed (``resume``; also ones marked
        interrupted) or marked ``interrupted``. Returns (resumed, interrupted)."""
        if resume:
            rows = self.store.with_status(("queued", "running", "interrupted"))
            for row in rows:
                if self.catalog is not None and self.store.transition(row.id, "queued", ("queued", "running", "interrupted"),
                                                                      clear_error=True):
                    self.submit(row.id, StudySpec.model_validate_json(row.spec_json))
            return len(rows), 0
        rows = self.store.with_status(("queued", "running"))
        for row in rows:
            self.store.transition(row.id, "interrupted", ("queued", "running"),
                                  error=STOPPED)
        return 0, len(rows)

    def stop(self) -> None:
        """Start no scenario and interrupt the ones being solved (they are solved again on resume)."""
        self._stopping.set()
        with self._guard:
            jobs = list(self._jobs.values())
        for job in jobs:
            job.token.cancel()

    @property
    def stopping(self) -> threading.Event:
        return self._stopping

    def shutdown(self) -> None:
        """``stop``, wait for the study threads; running and queued studies become ``interrupted``."""
        self.stop()
        self._pool.shutdown(wait=True, cancel_futures=True)
        for study_id in list(self._jobs):
            self.store.transition(study_id, "interrupted", ("queued", "running"),
                                  error=STOPPED)

    def active(self) -> int:
        with self._guard:
            return len(self._jobs)

    # ---------------------------------------------------------------------------------- studies
    def folder(self, study_id: str) -> Path:
        return (self.study_dir / study_id).resolve()

    def submit(self, study_id: str, spec: StudySpec) -> None:
        job = _Job(study_id)
        with self._guard:
            self._jobs[study_id] = job
        job.future = self._pool.submit(self._run, job, spec)

    def cancel(self, study_id: str) -> bool:
        """Mark a queued or running study cancelled; True when it was one. Waits for the job's lock (at most
        the end of a journal write, or of writing the outputs) so no row follows the cancel."""
        with self._guard:
            job = self._jobs.get(study_id)
        if job is None:
            return self.store.transition(study_id, "cancelled", ("queued", "running"))
        with job.lock:
            job.cancel.set()
            job.token.cancel()
            return self.store.transition(study_id, "cancelled", ("queued", "running"))

    def _run(self, job: _Job, spec: StudySpec) -> None:
        try:
            self._solve(job, spec)
        except Exception as exc:  # noqa: BLE001 - recorded on the study, never lost
            log.exception("study %s failed", job.study_id)
            with job.lock:
                self.store.transition(job.study_id, "failed", ("running", "queued"), error=first_line(exc))
        finally:
            with self._guard:
                self._jobs.pop(job.study_id, None)

    def _solve(self, job: _Job, spec: StudySpec) -> None:
        study_id, catalog = job.study_id, self.catalog
        with job.lock:
            if job.cancel.is_set():
                return
            if self._stopping.is_set():  # dequeued while the server stops: it never started
                self.store.transition(study_id, "interrupted", ("queued",), error=STOPPED)
                return
            if not self.store.transition(study_id, "running", ("queued",)):
                return  # cancelled while queued
        if catalog is None:
            raise RuntimeError("the catalog is not loaded")
        out = self.folder(study_id)
        out.mkdir(parents=True, exist_ok=True)
        scenarios = expand(spec, catalog)
        context = solve_context(catalog)
        write_spec(spec, out / "study.yaml", f"POST /v1/studies ({study_id})")
        write_provenance(spec, catalog, out)
        journal = Journal(out / JOURNAL)
        done = journal.load()
        keys = [run_key(s, spec, context) for s in scenarios]
        self.store.progress(study_id, sum(k in done for k in keys))
        for scenario, key in zip(scenarios, keys):
            if key in done:
                continue
            if self.before_scenario is not None:
                self.before_scenario(study_id, scenario.index)
            if job.cancel.is_set() or self._stopping.is_set():
                break
            try:
                with cancellable(job.token):
                    result = solve_in_process(scenario_task(scenario, spec), catalog)
            except SolveCancelled:
                break
            with job.lock:
                if job.cancel.is_set():  # DELETE marked it cancelled while this scenario solved: drop the row
                    return
                record = {"run_key": key, "hash": scenario.hash, "scenario": scenario.key,
                          "finished_at": datetime.datetime.now(datetime.UTC).isoformat(), **result}
                journal.append(record)
                done[key] = record
                self.store.progress(study_id, sum(k in done for k in keys))
        if job.cancel.is_set():
            return
        if self._stopping.is_set() and not all(k in done for k in keys):
            self.store.transition(study_id, "interrupted", ("running",),
                                  error=STOPPED)
            return
        with job.lock:
            if job.cancel.is_set():
                return
            rows = [table_row(s, done[k]) for s, k in zip(scenarios, keys)]
            write_outputs(spec, rows, analyse(spec, scenarios, rows), out)
            self.store.transition(study_id, "succeeded", ("running",), done=len(scenarios))


def row_is_final(row: StudyRow) -> bool:
    return row.status in ("succeeded", "failed", "cancelled", "interrupted")
