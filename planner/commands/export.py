"""``siliconmix export``: a plan as a procurement workbook or BoM CSV; a study folder as a workbook or CSV."""

from __future__ import annotations

from pathlib import Path

import typer
from xlsxwriter.exceptions import XlsxWriterException

from planner.catalog import UnknownId
from planner.cli import app, catalog_or_fail, console, fail
from planner.export import (
    ExportInputError,
    StudyResultsError,
    read_plan,
    read_results,
    write_bom_csv,
    write_plan_workbook,
    write_scenarios_csv,
    write_study_workbook,
)
from planner.export.workbook import catalog_matches_plan, plan_book

FORMATS = ("xlsx", "csv")


@app.command("export")
def export_command(
    source: Path = typer.Argument(..., help="a plan JSON file (siliconmix plan ... -o plan.json) or a study folder"),
    fmt: str = typer.Option("xlsx", "--format", "-f", help="xlsx (workbook with live formulas) or csv"),
    output: Path | None = typer.Option(None, "-o", "--output",
                                       help="file to write (default: plan.xlsx/plan.csv next to the plan; "
                                            "study.xlsx/scenarios.csv in the study folder)"),
) -> None:
    """Export a plan for procurement (workbook or bill-of-materials CSV), or a study's scenarios and frontier."""
    fmt = fmt.lower()
    if fmt not in FORMATS:
        fail(f"--format: unknown format {fmt!r} (choose xlsx or csv)")
    if not source.exists():
        fail(f"{source}: no such file or folder")
    try:
        if source.is_dir():
            _export_study(source, fmt, output)
        else:
            _export_plan(source, fmt, output)
    except (ExportInputError, StudyResultsError) as exc:
        fail(str(exc))
    except (OSError, XlsxWriterException) as exc:
        fail(f"{output or source}: cannot write ({getattr(exc, 'strerror', None) or exc})", code=1)


def _export_plan(source: Path, fmt: str, output: Path | None) -> None:
    plan = read_plan(source)
    if plan.status == "infeasible":
        reason = plan.diagnosis.message if plan.diagnosis else "no fleet"
        fail(f"{source}: the plan is infeasible, nothing to procure ({reason})", code=1)
    catalog = catalog_or_fail()
    target = _target(output, source.with_suffix(f".{fmt}"), source)
    try:
        if fmt == "xlsx":
            book = write_plan_workbook(plan, catalog, target, source=source.name)
        else:
            book = plan_book(plan, catalog)
            write_bom_csv(book.lines, book.tco.inputs.pue, target)
    except UnknownId as exc:
        fail(f"{source}: the catalog does not have what the plan uses: {exc}")
    tco = book.tco
    cost = f", ${tco.usd_per_million_tokens:,.3f} per million output tokens owned" if tco.usd_per_million_tokens else ""
    console.print(f"wrote {target}: {sum(line.devices for line in book.lines):,} devices of {len(book.lines)} types, "
                  f"capex ${tco.capex_usd:,.0f}, {tco.facility_power_kw:,.1f} kW facility{cost}", highlight=False, markup=False)
    if not catalog_matches_plan(plan, book):
        console.print(f"[yellow]note:[/] the catalog changed since planning: capex ${tco.capex_usd:,.0f} and "
                      f"{tco.it_power_kw:,.1f} kW IT now, ${plan.totals.capex_usd:,.0f} and "
                      f"{plan.totals.it_power_kw:,.1f} kW when planned", highlight=False)


def _export_study(folder: Path, fmt: str, output: Path | None) -> None:
    table = read_results(folder)
    default = folder / ("study.xlsx" if fmt == "xlsx" else "scenarios.csv")
    target = _target(output, default, folder / "results.csv")
    if fmt == "xlsx":
        frontier = write_study_workbook(table, target, title=folder.name)
        console.print(f"wrote {target}: {len(table.rows)} scenarios, {len(frontier)} on the frontier", highlight=False, markup=False)
    else:
        write_scenarios_csv(table, target)
        console.print(f"wrote {target}: {len(table.rows)} scenarios with a frontier column", highlight=False, markup=False)


def _target(output: Path | None, default: Path, source: Path) -> Path:
    """Where to write, creating its folder; never over the input."""
    target = output or default
    if target.resolve() == source.resolve():
        fail(f"{target}: would overwrite the input; choose another -o")
    target.parent.mkdir(parents=True, exist_ok=True)
    return target
