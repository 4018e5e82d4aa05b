"""Run a study: scenarios through any ``concurrent.futures.Executor``, each result journaled the moment it
arrives (so a killed study resumes where it stopped), then the tables, frontiers, charts and report.

Executors: a local process pool (spawned workers, recycled every ``max_tasks_per_child`` scenarios
because solver libraries leak) or Dask distributed (``Client(address).get_executor()``, or a
``LocalCluster`` of single-threaded worker processes). Scenario results are identical either way:
every worker loads the same catalog and solves with one thread and a fixed seed. Local workers die
with the process that started them, even when it is killed with SIGKILL.
"""

from __future__ import annotations

import ctypes
import datetime
import hashlib
import json
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import BrokenExecutor, Executor, Future, ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd
import yaml

from planner.catalog import Catalog, load_catalog
from planner.files import InputFileError, read_document
from planner.messages import excerpt
from planner.schema import Workload
from planner.study import (
    RESULT_COLUMNS, Analysis, Scenario, StudySpec, analyse, error_row, expand, result_row, table_row, with_prices,
)

JOURNAL = "rows.jsonl"
#: how the study's rows were made: siliconmix version, catalog fingerprint, when the run began, solve options
PROVENANCE = "provenance.json"
#: times a scenario is resubmitted after its worker process died (a crash breaks the whole pool)
RETRIES_AFTER_CRASH = 1
#: Linux prctl(2) option: the signal a process gets when the thread that started it exits
PR_SET_PDEATHSIG = 1
#: where prctl is missing, how often a worker checks that its parent is alive (s)
PARENT_POLL_S = 1.0
WORKLOAD_FIELDS = tuple(Workload.model_fields)


def load_study(path: str | Path) -> StudySpec:
    """Read and validate a study file; ``base`` may be a workload file path relative to the study file."""
    path = Path(path)
    raw = read_document(path)
    if not isinstance(raw, dict):
        raise InputFileError(f"{path}: a study is a mapping (name, base, axes, ...)")
    base = raw.get("base")
    if isinstance(base, str):
        base_path = path.parent / base
        base_doc = read_document(base_path)
        unknown = sorted(map(str, set(base_doc) - set(WORKLOAD_FIELDS))) if isinstance(base_doc, dict) else []
        if not isinstance(base_doc, dict) or unknown:
            found = f" (it has {excerpt(unknown[:8])})" if unknown else ""
            raise InputFileError(f"{path}: base: {base_path} is not a workload{found}; a workload is a mapping "
                                 f"of {', '.join(WORKLOAD_FIELDS)}")
        raw = {**raw, "base": base_doc}
    return StudySpec.model_validate(raw)


# ------------------------------------------------------------------------------------- executors
@dataclass(frozen=True)
class ExecutorSpec:
    """Where scenarios run: ``local`` process pool or ``dask`` (``address`` None = a local cluster)."""

    kind: Literal["local", "dask"] = "local"
    workers: int = 2
    address: str | None = None
    max_tasks_per_child: int = 100


class RecyclingProcessPool(ProcessPoolExecutor):
    """A process pool whose workers exit after ``max_tasks_per_child`` tasks and are always replaced.

    CPython 3.11-3.13 may never replace a worker that reached its task limit while tasks are queued
    (the idle-worker semaphore holds stale tokens) and the pool then hangs (gh-115634). The upstream
    fix replaces a dead worker whenever the pool is below ``max_workers``; this does the same.
    """

    def _adjust_process_count(self) -> None:
        if len(self._processes) < self._max_workers:
            self._spawn_process()


def die_with_parent(parent_pid: int) -> None:
    """Worker initializer: end this process as soon as ``parent_pid`` (the study) dies, SIGKILL included.

    Linux: the kernel sends SIGKILL on the parent's death (prctl PR_SET_PDEATHSIG), even mid-solve in C.
    Elsewhere: a daemon thread polls the parent pid. Either way, a parent already gone ends the worker now.
    """
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    else:
        threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True, name="parent-watch").start()
    if os.getppid() != parent_pid:
        os._exit(1)


def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(PARENT_POLL_S)
    os._exit(1)


@contextmanager
def open_executor(spec: ExecutorSpec) -> Iterator[Executor]:
    """A ``concurrent.futures.Executor`` for ``spec``; pending work is cancelled on the way out."""
    if spec.kind == "local":
        pool = RecyclingProcessPool(max_workers=spec.workers, mp_context=multiprocessing.get_context("spawn"),
                                    max_tasks_per_child=spec.max_tasks_per_child,
                                    initializer=die_with_parent, initargs=(os.getpid(),))
        try:
            yield pool
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return
    from distributed import Client, LocalCluster

    cluster = None
    if spec.address is None:
        cluster = LocalCluster(n_workers=spec.workers, threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=logging.ERROR)
    client = Client(spec.address or cluster)
    try:
        yield client.get_executor(pure=False, retries=RETRIES_AFTER_CRASH)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


# ------------------------------------------------------------------------------------ the worker
def scenario_task(scenario: Scenario, spec: StudySpec) -> dict:
    """What a worker needs to solve a scenario: plain data, cheap to pickle."""
    return {"workload": scenario.workload.model_dump(mode="json"), "prices": scenario.prices,
            "options": spec.options.model_dump(mode="json")}


def solve_scenario(task: dict) -> dict:
    """Solve one scenario in a worker process; any error becomes a row with its reason, never a raise."""
    from planner.optimize import PlanOptions, plan_workload

    start = time.perf_counter()
    try:
        catalog = with_prices(load_catalog(), task["prices"])
        plan = plan_workload(Workload.model_validate(task["workload"]), catalog, PlanOptions.of(task["options"]))
        row = result_row(plan, time.perf_counter() - start)
    except Exception as exc:  # noqa: BLE001 - a study records failures instead of stopping
        row = error_row(f"{type(exc).__name__}: {exc}", time.perf_counter() - start)
    return {**row, "worker_pid": os.getpid()}


def run_key(scenario: Scenario, spec: StudySpec, context: str = "") -> str:
    """Identity of a result in the journal: the scenario's inputs, the solve options and ``context``
    (siliconmix version and catalog), so a result is reused only where it would come out the same."""
    text = scenario.hash + json.dumps(spec.options.model_dump(mode="json"), sort_keys=True) + context
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def solve_context(catalog: Catalog) -> str:
    """siliconmix's version and a fingerprint of the catalog every worker plans with."""
    from planner import __version__

    payload = {"devices": {k: v.model_dump(mode="json") for k, v in catalog.devices.items()},
               "models": {k: v.model_dump(mode="json") for k, v in catalog.models.items()}}
    return __version__ + hashlib.sha1(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


# ------------------------------------------------------------------------------------ the journal
class Journal:
    """Append-only JSON lines, one finished scenario per line, flushed to disk as each arrives."""

    def __init__(self, path: Path):
        self.path = path

    def load(self) -> dict[str, dict]:
        """Finished results by run key.

        A last line without its newline was cut short by a kill: it is cut off the file (so the next
        record starts a line of its own) and its scenario is solved again.
        """
        if not self.path.exists():
            return {}
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            data = data[:data.rfind(b"\n") + 1]
            with self.path.open("r+b") as fh:
                fh.truncate(len(data))
        out = {}
        for line in data.decode("utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
                out[record["run_key"]] = record
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
        return out

    def append(self, record: dict) -> None:
        with self.path.open("a") as fh:
            fh.write(json.dumps(record) + "\n")
            fh.flush()
            os.fsync(fh.fileno())


# ----------------------------------------------------------------------------------------- running
@dataclass
class RunSummary:
    """What a run did: scenarios in the study, found already done, solved now (``elapsed_s`` covers
    expansion, start-up and solving, not writing outputs), the rows and what they show."""

    total: int
    skipped: int
    computed: int
    elapsed_s: float
    rows: list[dict]
    analysis: Analysis
    outputs: list[Path] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> int:
        return sum(r["status"] == "error" for r in self.rows)

    @property
    def infeasible(self) -> int:
        return sum(r["status"] == "infeasible" for r in self.rows)


Progress = Callable[[int, int], None]


def run_study(spec: StudySpec, out_dir: Path, executor: ExecutorSpec = ExecutorSpec(),
              on_progress: Progress | None = None, catalog: Catalog | None = None,
              source: str | None = None) -> RunSummary:
    """Solve every scenario not already in ``out_dir``'s journal, then write all outputs there."""
    start = time.perf_counter()
    catalog = catalog or load_catalog()
    scenarios = expand(spec, catalog)
    context = solve_context(catalog)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_spec(spec, out_dir / "study.yaml", source)
    provenance = write_provenance(spec, catalog, out_dir)
    journal = Journal(out_dir / JOURNAL)
    done = journal.load()
    tasks: dict[str, dict] = {}
    keys = [run_key(s, spec, context) for s in scenarios]
    for s, key in zip(scenarios, keys):
        if key not in done:
            tasks.setdefault(key, {"task": scenario_task(s, spec), "hash": s.hash, "scenario": s.key, "count": 0})
            tasks[key]["count"] += 1
    skipped = len(scenarios) - sum(t["count"] for t in tasks.values())
    progress = on_progress or (lambda finished, total: None)
    progress(skipped, len(scenarios))
    for attempt in range(RETRIES_AFTER_CRASH + 1):
        if not tasks:
            break
        tasks = _solve_all(tasks, executor, journal, done, len(scenarios), progress, last=attempt == RETRIES_AFTER_CRASH)
    rows = [table_row(s, done[key]) for s, key in zip(scenarios, keys)]
    analysis = analyse(spec, scenarios, rows)
    summary = RunSummary(len(scenarios), skipped, len(scenarios) - skipped, time.perf_counter() - start, rows, analysis,
                         provenance=provenance)
    summary.outputs = write_outputs(spec, rows, analysis, out_dir)
    return summary


def _solve_all(tasks: dict[str, dict], executor: ExecutorSpec, journal: Journal, done: dict, total: int,
               progress: Progress, last: bool) -> dict[str, dict]:
    """Submit every task and journal each result as it completes; returns the tasks a crash interrupted.

    A scenario the planner fails on is journaled like any result (solving it again fails again); one
    lost to the infrastructure (a dead worker process, a lost Dask worker) is a row of this run only,
    so the next run tries it again.
    """
    broken: dict[str, dict] = {}
    finished = total - sum(t["count"] for t in tasks.values())
    with open_executor(executor) as pool:
        futures: dict[Future, str] = {pool.submit(solve_scenario, t["task"]): k for k, t in tasks.items()}
        for future in as_completed(futures):
            key = futures[future]
            transient = True
            try:
                result, transient = future.result(), False
            except BrokenExecutor:
                if not last:
                    broken[key] = tasks[key]
                    continue
                result = error_row("the worker process died while solving this scenario; rerun to retry")
            except Exception as exc:  # noqa: BLE001 - infrastructure errors become rows, the study goes on
                result = error_row(f"{type(exc).__name__}: {exc}; rerun to retry")
            record = {"run_key": key, "hash": tasks[key]["hash"], "scenario": tasks[key]["scenario"],
                      "finished_at": datetime.datetime.now(datetime.UTC).isoformat(), **result}
            if not transient:
                journal.append(record)
            done[key] = record
            finished += tasks[key]["count"]
            progress(finished, total)
    return broken


# ----------------------------------------------------------------------------------------- outputs
def write_spec(spec: StudySpec, path: Path, source: str | None) -> Path:
    """The study as run: defaults filled in and the base workload inlined."""
    header = f"# siliconmix study as run{f' (from {source})' if source else ''}\n"
    path.write_text(header + yaml.safe_dump(spec.model_dump(mode="json", exclude_none=True), sort_keys=False))
    return path


def write_provenance(spec: StudySpec, catalog: Catalog, out_dir: Path) -> dict[str, Any]:
    """Write and return the run's stamp (``planner.provenance.stamp``) with the study's solve options.

    Journaled rows are reused only under the same version and catalog (``run_key``), so the stamp of the
    latest run holds for every row of the folder.
    """
    from planner.provenance import stamp

    body = {**stamp(catalog), "options": spec.options.model_dump(mode="json")}
    body["created_at"] = body["created_at"].isoformat()
    (out_dir / PROVENANCE).write_text(json.dumps(body, indent=2) + "\n")
    return body


def read_provenance(out_dir: Path) -> dict[str, Any]:
    """The stamp ``write_provenance`` left in ``out_dir``; empty where there is none (a run not started yet,
    or a folder written before stamps)."""
    try:
        body = json.loads((out_dir / PROVENANCE).read_text())
    except (OSError, ValueError):  # not there yet, or not ours
        return {}
    return body if isinstance(body, dict) else {}


def results_frame(rows: list[dict]) -> pd.DataFrame:
    """The tidy results table; an axis column mixing numbers and labels becomes text."""
    frame = pd.DataFrame(rows)
    for column in [c for c in frame.columns if c.startswith("axis.")]:
        kinds = {type(v) for v in frame[column]}
        if len(kinds) > 1 and not kinds <= {int, float}:
            frame[column] = frame[column].map(str)
    frame = frame.reindex(columns=[*frame.columns, *[c for c in RESULT_COLUMNS if c not in frame.columns]])  # older rows
    for column in ("status", "reason", "devices_by_type", "baseline_device", "simulated_verdict"):
        frame[column] = frame[column].fillna("").astype(str)
    return frame[["scenario", "hash", *[c for c in frame.columns if c.startswith("axis.")], *RESULT_COLUMNS]]


def write_outputs(spec: StudySpec, rows: list[dict], analysis: Analysis, out_dir: Path) -> list[Path]:
    """results.csv/.parquet, pareto.csv, comparison.csv (with ``compare``), charts and report.html."""
    from planner.report import write_report

    frame = results_frame(rows)
    paths = [out_dir / "results.csv", out_dir / "results.parquet", out_dir / "pareto.csv"]
    frame.to_csv(paths[0], index=False)
    frame.to_parquet(paths[1], index=False)
    pd.DataFrame([p for points in analysis.frontiers.values() for p in points],
                 columns=["frontier", "series", "scenario", "x", "y"]).to_csv(paths[2], index=False)
    if spec.compare is not None:
        paths.append(out_dir / "comparison.csv")
        pd.DataFrame(analysis.comparison).to_csv(paths[-1], index=False)
    paths += write_report(out_dir, spec, rows, analysis)
    return paths


def read_results(out_dir: Path) -> pd.DataFrame:
    """The results table a finished study left in ``out_dir``."""
    return pd.read_parquet(out_dir / "results.parquet")


def journal_records(out_dir: Path) -> list[dict[str, Any]]:
    """Every journal line, in the order scenarios finished (repeats included)."""
    path = out_dir / JOURNAL
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
