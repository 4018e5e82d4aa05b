"""Run a study: the one study loop (``run_scenarios``) of the CLI and the REST service. Its scenarios are
solved through any ``concurrent.futures.Executor`` (``through``, ``planner.executors``) or one after another in
the caller's thread (``in_thread``), each result journaled the moment it arrives (so a killed study resumes
where it stopped), then the tables, frontiers, charts and report.

Scenario results are identical on every path: each solve loads the same catalog and solves with one thread
and a fixed seed.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import time
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import BrokenExecutor, Future, as_completed
from contextlib import AbstractContextManager, closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from planner.catalog import Catalog, load_catalog
from planner.executors import RETRIES_AFTER_CRASH, ExecutorSpec, open_executor
from planner.files import InputFileError, read_document
from planner.messages import excerpt
from planner.schema import Workload
from planner.solvers.cancel import CancelToken, SolveCancelled, cancellable
from planner.study import (
    RESULT_COLUMNS, Analysis, Scenario, StudySpec, analyse, error_row, expand, result_row, table_row, with_prices,
)

JOURNAL = "rows.jsonl"
#: how the study's rows were made: siliconmix version, catalog fingerprint, when the run began, solve options
PROVENANCE = "provenance.json"
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


# ---------------------------------------------------------------------------------- one scenario
def scenario_task(scenario: Scenario, spec: StudySpec) -> dict:
    """What a worker needs to solve a scenario: plain data, cheap to pickle."""
    return {"workload": scenario.workload.model_dump(mode="json"), "prices": scenario.prices,
            "options": spec.options.model_dump(mode="json")}


def solve_task(task: dict, catalog: Catalog | None = None) -> dict:
    """One scenario's row, solved with ``catalog`` (default: the installed one); any error becomes a row with its
    reason, never a raise, except ``SolveCancelled`` (a cancelled scenario has no row: it is not done)."""
    from planner.optimize import PlanOptions, plan_workload

    start = time.perf_counter()
    try:
        priced = with_prices(load_catalog() if catalog is None else catalog, task["prices"])
        plan = plan_workload(Workload.model_validate(task["workload"]), priced, PlanOptions.of(task["options"]))
        return result_row(plan, time.perf_counter() - start)
    except SolveCancelled:
        raise
    except Exception as exc:  # noqa: BLE001 - a study records failures instead of stopping
        return error_row(f"{type(exc).__name__}: {exc}", time.perf_counter() - start)


def solve_scenario(task: dict) -> dict:
    """Solve one scenario in a worker process (``solve_task``), saying which process solved it."""
    return {**solve_task(task), "worker_pid": os.getpid()}


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


@dataclass(frozen=True)
class Pending:
    """A scenario the journal does not hold yet, and how many scenarios of the study share its run key."""

    run_key: str
    index: int
    scenario: str
    hash: str
    task: dict
    count: int


@dataclass(frozen=True)
class Outcome:
    """A pending scenario's row; ``transient``: lost to the infrastructure (a dead worker), a row of this run only,
    not journaled, so the next run tries the scenario again."""

    pending: Pending
    row: dict
    transient: bool = False


#: how a study's pending scenarios are solved: a generator of their outcomes as each finishes (it may stop early;
#: the run closes it when it ends first)
Solve = Callable[[list[Pending]], Generator[Outcome, None, None]]


@contextmanager
def _always() -> Iterator[bool]:
    yield True


@dataclass(frozen=True)
class StudyLoop:
    """What differs between the study runs of the CLI and of the REST service; ``run_scenarios`` is the rest.

    ``admit`` is entered around journaling each row and around writing the outputs; when it yields False the
    run ends there, with nothing more kept (REST: the study was cancelled). ``on_complete`` gets the summary
    inside the admit that wrote the outputs.
    """

    solve: Solve
    admit: Callable[[], AbstractContextManager[bool]] = _always
    on_progress: Progress | None = None
    on_complete: Callable[[RunSummary], None] | None = None


def run_scenarios(spec: StudySpec, out_dir: Path, catalog: Catalog, loop: StudyLoop,
                  source: str | None = None) -> RunSummary | None:
    """The study loop of every caller: expand the scenarios, write the spec and the stamp, solve those the
    journal of ``out_dir`` does not hold (``loop.solve``), journal each row as it arrives, then write the
    tables, frontiers and report. None when the run ended before its outputs (``loop.solve`` stopped early,
    or ``loop.admit`` refused); the journal keeps what finished."""
    start = time.perf_counter()
    scenarios = expand(spec, catalog)
    context = solve_context(catalog)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_spec(spec, out_dir / "study.yaml", source)
    provenance = write_provenance(spec, catalog, out_dir)
    journal = Journal(out_dir / JOURNAL)
    done = journal.load()
    keys = [run_key(s, spec, context) for s in scenarios]
    waiting: dict[str, list[Scenario]] = {}
    for s, key in zip(scenarios, keys):
        if key not in done:
            waiting.setdefault(key, []).append(s)
    pending = [Pending(key, same[0].index, same[0].key, same[0].hash, scenario_task(same[0], spec), len(same))
               for key, same in waiting.items()]
    skipped = finished = len(scenarios) - sum(p.count for p in pending)
    progress = loop.on_progress or (lambda finished, total: None)
    progress(skipped, len(scenarios))
    with closing(loop.solve(pending)) as outcomes:
        for outcome in outcomes:
            p = outcome.pending
            record = {"run_key": p.run_key, "hash": p.hash, "scenario": p.scenario,
                      "finished_at": datetime.datetime.now(datetime.UTC).isoformat(), **outcome.row}
            with loop.admit() as admitted:
                if not admitted:
                    return None
                if not outcome.transient:
                    journal.append(record)
                done[p.run_key] = record
                finished += p.count
                progress(finished, len(scenarios))
    if any(key not in done for key in keys):
        return None
    rows = [table_row(s, done[key]) for s, key in zip(scenarios, keys)]
    summary = RunSummary(len(scenarios), skipped, len(scenarios) - skipped, time.perf_counter() - start, rows,
                         analyse(spec, scenarios, rows), provenance=provenance)
    with loop.admit() as admitted:
        if not admitted:
            return None
        summary.outputs = write_outputs(spec, rows, summary.analysis, out_dir)
        if loop.on_complete is not None:
            loop.on_complete(summary)
    return summary


def run_study(spec: StudySpec, out_dir: Path, executor: ExecutorSpec = ExecutorSpec(),
              on_progress: Progress | None = None, catalog: Catalog | None = None,
              source: str | None = None) -> RunSummary:
    """Solve every scenario not already in ``out_dir``'s journal through ``executor``, then write all outputs there."""
    summary = run_scenarios(spec, out_dir, catalog or load_catalog(), StudyLoop(through(executor), on_progress=on_progress),
                            source)
    if summary is None:  # through() answers every scenario and nothing refuses a row
        raise RuntimeError(f"the study stopped before writing its outputs to {out_dir}")
    return summary


def through(executor: ExecutorSpec, work: Callable[[dict], dict] = solve_scenario) -> Solve:
    """Scenarios on ``executor``'s workers (each runs ``work`` on a scenario's task), outcomes as they complete;
    the ones a crash interrupted are submitted again on a fresh executor, ``RETRIES_AFTER_CRASH`` times.

    A scenario the planner fails on is an outcome like any other (solving it again fails again); one lost to
    the infrastructure (a dead worker process, a lost Dask worker) is transient.
    """

    def solve(pending: list[Pending]) -> Generator[Outcome, None, None]:
        for attempt in range(RETRIES_AFTER_CRASH + 1):
            broken: list[Pending] = []
            with open_executor(executor) as pool:
                futures: dict[Future, Pending] = {pool.submit(work, p.task): p for p in pending}
                for future in as_completed(futures):
                    p = futures[future]
                    try:
                        outcome = Outcome(p, future.result())
                    except BrokenExecutor:
                        if attempt < RETRIES_AFTER_CRASH:
                            broken.append(p)
                            continue
                        outcome = Outcome(p, error_row("the worker process died while solving this scenario; rerun to "
                                                       "retry"), transient=True)
                    except Exception as exc:  # noqa: BLE001 - infrastructure errors become rows, the study goes on
                        outcome = Outcome(p, error_row(f"{type(exc).__name__}: {exc}; rerun to retry"), transient=True)
                    yield outcome
            if not broken:
                return
            pending = broken

    return solve


def in_thread(catalog: Catalog, token: CancelToken, may_start: Callable[[int], bool] | None = None) -> Solve:
    """Scenarios one after another in the calling thread with ``catalog`` (a server's), each solved under ``token``.

    ``may_start(index)`` is asked before each scenario; False ends the run there. A cancel of ``token``
    interrupts the scenario being solved, which leaves no outcome, and ends the run too.
    """

    def solve(pending: list[Pending]) -> Generator[Outcome, None, None]:
        for p in pending:
            if may_start is not None and not may_start(p.index):
                return
            try:
                with cancellable(token):
                    row = solve_task(p.task, catalog)
            except SolveCancelled:
                return
            yield Outcome(p, row)

    return solve


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
