"""Background studies: a small thread pool owned by the app's lifespan (``SILICONMIX_STUDY_WORKERS``).

Each study runs the study loop of ``siliconmix study`` (``planner.study_runner.run_scenarios``: the same
journal, rows and outputs) with its scenarios solved one after the other in its pool thread (``in_thread``: no
process pool inside the server, the catalog is shared, and each solve is bounded by the study's
``options.time_limit_s``). Under the job's cancel token the MILPs themselves run in the solver child processes
(``planner.solvers.isolated``), so a cancel, or the server stopping, also stops the scenario being solved.
Every finished scenario is appended to the study folder's ``rows.jsonl`` journal, so a study resumed after a
restart solves only what is missing; at the end the folder gets results.csv/.parquet, pareto.csv, charts and
report.html.

Status changes are conditional updates in the database: ``queued -> running -> succeeded | failed``,
``queued | running -> cancelled`` (DELETE), ``queued | running -> interrupted`` (server stopped). A cancel
holds the job's lock while it marks the study, and the job journals a row (and writes the outputs and marks
the study succeeded) only under that lock after checking the flag, so no row is added once a study reads
``cancelled``.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from api.store import StudyRow, StudyStore
from planner.catalog import Catalog
from planner.solvers.cancel import CancelToken
from planner.study import StudySpec
from planner.study_runner import StudyLoop, in_thread, run_scenarios

log = logging.getLogger("siliconmix.api")
STOPPED = "the server stopped before the study finished"


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

        def may_start(index: int) -> bool:
            if self.before_scenario is not None:
                self.before_scenario(study_id, index)
            return not (job.cancel.is_set() or self._stopping.is_set())

        @contextmanager
        def unless_cancelled() -> Iterator[bool]:
            """A row (or the outputs) is kept only under the lock, and only while DELETE has not marked the study."""
            with job.lock:
                yield not job.cancel.is_set()

        loop = StudyLoop(in_thread(catalog, job.token, may_start), unless_cancelled,
                         on_progress=lambda done, _total: self.store.progress(study_id, done),
                         on_complete=lambda s: self.store.transition(study_id, "succeeded", ("running",), done=s.total))
        finished = run_scenarios(spec, self.folder(study_id), catalog, loop, f"POST /v1/studies ({study_id})")
        if finished is None and not job.cancel.is_set():  # only the server stopping ends a study early otherwise
            self.store.transition(study_id, "interrupted", ("running",), error=STOPPED)


def row_is_final(row: StudyRow) -> bool:
    return row.status in ("succeeded", "failed", "cancelled", "interrupted")
