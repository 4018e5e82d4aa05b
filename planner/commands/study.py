"""``siliconmix study``: run a what-if study (a grid of scenarios) and write its table, frontiers and report."""

from __future__ import annotations

import math
from enum import Enum
from pathlib import Path

import typer
from pydantic import ValidationError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from planner.catalog import CatalogError
from planner.cli import app, catalog_or_fail, console, fail, print_json, validation_line
from planner.files import InputFileError

#: most local worker processes (or local Dask workers) one study starts
MAX_WORKERS = 256


class ExecutorChoice(str, Enum):
    local = "local"
    dask = "dask"


class RateColumn(ProgressColumn):
    """Scenarios per second, from rich's moving-window speed."""

    def render(self, task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("-- scen/s" if speed is None else f"{speed:.2f} scen/s", style="cyan")


@app.command("study")
def study_command(
    study_file: Path = typer.Argument(..., help="study YAML or JSON (examples/studies/)"),
    executor: ExecutorChoice = typer.Option(ExecutorChoice.local, help="local process pool or Dask distributed"),
    workers: int = typer.Option(2, help="worker processes (local pool, or a local Dask cluster)"),
    address: str | None = typer.Option(None, help="Dask scheduler, e.g. tcp://10.0.0.5:8786 (default: a local cluster)"),
    output: Path | None = typer.Option(None, "-o", "--output", help="output folder (default: out/<study name>)"),
    max_tasks_per_child: int = typer.Option(100, help="local pool: recycle a worker after this many scenarios"),
    as_json: bool = typer.Option(False, "--json", help="print a JSON summary instead of tables"),
) -> None:
    """Solve every scenario of a study; write results.csv/.parquet, pareto.png and report.html.

    Finished scenarios are kept in the output folder: rerunning the same study there resumes it.
    """
    from planner.study import StudyError, expand
    from planner.study_runner import ExecutorSpec, load_study, run_study

    if not 1 <= workers <= MAX_WORKERS:
        fail(f"--workers: must be in [1, {MAX_WORKERS}] (got {workers})")
    if max_tasks_per_child < 1:
        fail(f"--max-tasks-per-child: must be at least 1 (got {max_tasks_per_child})")
    if address is not None and executor is not ExecutorChoice.dask:
        fail("--address: only with --executor dask")
    catalog = catalog_or_fail()
    try:
        spec = load_study(study_file)
        expand(spec, catalog)  # every scenario valid before anything runs or is written
    except ValidationError as exc:
        fail(f"{study_file}: {validation_line(exc)}")
    except (InputFileError, StudyError) as exc:
        fail(f"{study_file}: {exc}" if isinstance(exc, StudyError) else str(exc))
    except (TypeError, AttributeError, KeyError) as exc:  # expansion met a value of the wrong kind
        fail(f"{study_file}: the axes cannot be applied to the base workload ({type(exc).__name__}: {exc})")
    out_dir = output or Path("out") / spec.name
    runner = ExecutorSpec(kind=executor.value, workers=workers, address=address, max_tasks_per_child=max_tasks_per_child)
    try:
        with _progress(disable=as_json) as bar:
            task = bar.add_task(spec.name, total=None)
            summary = run_study(spec, out_dir, runner, lambda done, total: bar.update(task, completed=done, total=total),
                                catalog, source=str(study_file))
    except KeyboardInterrupt:
        fail(f"interrupted; finished scenarios are kept in {out_dir}/ and the same command resumes the study", code=130)
    except (CatalogError, OSError) as exc:
        fail(str(exc), code=1)
    _report(summary, spec, out_dir, as_json)
    if summary.rows and summary.failed + summary.infeasible == summary.total:
        raise typer.Exit(1)


def _progress(disable: bool) -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), RateColumn(),
                    TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=console, disable=disable)


def _report(summary, spec, out_dir: Path, as_json: bool) -> None:
    """What ran, where the outputs are, and each frontier's points."""
    frontiers = summary.analysis.frontiers
    if as_json:
        print_json({**summary.provenance, "study": spec.name, "output": str(out_dir), "scenarios": summary.total, "skipped": summary.skipped,
                    "computed": summary.computed, "failed": summary.failed, "infeasible": summary.infeasible,
                    "elapsed_s": summary.elapsed_s, "outputs": [str(p) for p in summary.outputs], "frontiers": frontiers,
                    "comparison": summary.analysis.comparison})
        return
    rate = summary.computed / summary.elapsed_s if summary.elapsed_s > 0 else 0.0
    console.print(f"[bold]{spec.name}[/]: {summary.total} scenarios ({summary.skipped} already done, {summary.computed} "
                  f"solved, {rate:.2f}/s); {summary.infeasible} infeasible, {summary.failed} failed", highlight=False)
    for f in spec.pareto:
        table = Table(title=f"Pareto frontier {f.label}")
        for col in ("series", "scenario", f.x, f.y):
            table.add_column(col, justify="right" if col in (f.x, f.y) else "left")
        for p in frontiers[f.label]:
            table.add_row(p["series"], p["scenario"], f"{p['x']:,.4g}", f"{p['y']:,.6g}")
        console.print(table)
    if spec.compare is not None:
        _print_comparison(summary, spec)
    console.print(f"outputs in {out_dir}/: " + ", ".join(p.name for p in summary.outputs), highlight=False, markup=False)


def _print_comparison(summary, spec) -> None:
    """Each multi-device fleet against the best single-device fleet, per combination of the other axes."""
    metric = spec.compare.metric
    table = Table(title=f"{spec.compare.axis}: multi-device vs best single-device fleet ({metric})")
    for col in ("group", spec.compare.axis, metric, "best single", f"its {metric}", "gain"):
        table.add_column(col, justify="left" if col in ("group", spec.compare.axis, "best single") else "right")
    for r in summary.analysis.comparison:
        table.add_row(r["group"], str(r[spec.compare.axis]), _num(r[metric]), r["best_single"] or "-",
                      _num(r[f"best_single_{metric}"]), "-" if math.isnan(r["gain"]) else f"{r['gain']:.2f}x")
    console.print(table)


def _num(value: float) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:,.4g}"
