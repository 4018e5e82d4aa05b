"""Procurement downloads: ``/v1/plans/{id}/export`` (workbook with live formulas, or the BoM CSV) and
``/v1/studies/{id}/export`` (the study workbook with its frontier chart, or the scenarios CSV), as
``siliconmix export`` writes them."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Response

from api.deps import get_catalog, get_store, get_study_jobs
from api.errors import ProblemError, problem_docs
from api.routes.plans import PlanId, _row as plan_row
from api.routes.studies import StudyId, study_row
from api.store import PlanStore
from api.study_jobs import StudyJobs
from planner.catalog import Catalog, UnknownId
from planner.export import (
    StudyResultsError, read_results, write_bom_csv, write_plan_workbook, write_scenarios_csv, write_study_workbook,
)
from planner.export.workbook import plan_book
from planner.schema import Plan

router = APIRouter(tags=["exports"])

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
CSV = "text/csv"
Format = Literal["xlsx", "csv"]
FORMAT_QUERY = Query(description="xlsx (a workbook) or csv")
CONFLICT = "urn:siliconmix:problem:conflict"


def download_docs(what: str) -> dict:
    return {200: {"description": what, "content": {XLSX: {"schema": {"type": "string", "format": "binary"}},
                                                   CSV: {"schema": {"type": "string"}}},
                  "headers": {"Content-Disposition": {"description": "attachment; filename=...",
                                                      "schema": {"type": "string"}}}},
            **problem_docs(401, 404, 409, 422, 503)}


def attachment(data: bytes, media_type: str, filename: str) -> Response:
    return Response(data, media_type=media_type, headers={"Content-Disposition": f'attachment; filename="{filename}"'})


def safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", name)[:80]


@router.get("/v1/plans/{plan_id}/export", response_class=Response, summary="Download a plan for procurement",
            responses=download_docs("plan.xlsx (Summary, Bill of Materials, Pools, TCO, Assumptions) or the BoM CSV"))
def export_plan(plan_id: PlanId, store: Annotated[PlanStore, Depends(get_store)],
                catalog: Annotated[Catalog, Depends(get_catalog)],
                format: Annotated[Format, FORMAT_QUERY] = "xlsx") -> Response:
    """The plan as `siliconmix export` writes it, priced with the service's catalog: a workbook with live
    formulas, or the bill of materials as CSV (one row per device type). An infeasible plan has nothing
    to procure: 409."""
    plan = Plan.model_validate_json(plan_row(store, plan_id).plan_json)
    if plan.status == "infeasible" or plan.totals.devices == 0:
        reason = plan.diagnosis.message if plan.diagnosis else "no fleet"
        raise ProblemError(409, f"plan {plan_id} is {plan.status}, nothing to procure ({reason})", type=CONFLICT)
    with tempfile.TemporaryDirectory(prefix="siliconmix-export-") as tmp:
        target = Path(tmp) / f"plan.{format}"
        try:
            if format == "xlsx":
                write_plan_workbook(plan, catalog, target, source=f"plan {plan_id}")
            else:
                book = plan_book(plan, catalog)
                write_bom_csv(book.lines, book.tco.inputs.pue, target)
        except UnknownId as exc:
            raise ProblemError(409, f"the catalog no longer has what plan {plan_id} uses: {exc}", type=CONFLICT) from exc
        data = target.read_bytes()
    if format == "xlsx":
        return attachment(data, XLSX, f"plan-{plan_id}.xlsx")
    return attachment(data, CSV, f"bom-{plan_id}.csv")


@router.get("/v1/studies/{study_id}/export", response_class=Response, summary="Download a study's scenarios",
            responses=download_docs("study.xlsx (Scenarios, Frontier with a native chart) or scenarios.csv"))
def export_study(study_id: StudyId, jobs: Annotated[StudyJobs, Depends(get_study_jobs)],
                 format: Annotated[Format, FORMAT_QUERY] = "xlsx") -> Response:
    """One row per scenario with a `frontier` column, and (xlsx) the frontier of output tokens/s per MW
    against output tokens/s per user as an Excel scatter chart. A study that has not succeeded yet: 409."""
    row = study_row(jobs, study_id)
    if row.status != "succeeded":
        raise ProblemError(409, f"study {study_id} is {row.status}: no results to export yet", type=CONFLICT)
    try:
        table = read_results(row.output_dir)
    except StudyResultsError as exc:
        raise ProblemError(409, f"study {study_id} has no readable results: {exc}", type=CONFLICT) from exc
    with tempfile.TemporaryDirectory(prefix="siliconmix-export-") as tmp:
        target = Path(tmp) / f"study.{format}"
        if format == "xlsx":
            write_study_workbook(table, target, title=row.name)
        else:
            write_scenarios_csv(table, target)
        data = target.read_bytes()
    if format == "xlsx":
        return attachment(data, XLSX, f"study-{safe(row.name)}.xlsx")
    return attachment(data, CSV, f"scenarios-{safe(row.name)}.csv")
