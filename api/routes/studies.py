"""``/v1/studies``: submit a what-if study (202, runs in the background), list them newest first, follow one, fetch
its rows, cancel it."""

from __future__ import annotations

import datetime as dt
import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import pandas as pd
from fastapi import APIRouter, Body, Depends, Path as PathParam, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from api.deps import get_catalog, get_study_jobs, strict_json
from api.errors import NOT_FOUND, VALIDATION, FieldError, ProblemError, problem_docs
from api.examples import STUDY_EXAMPLES
from api.routes.plans import check_input, check_size
from api.settings import Settings, get_settings
from api.store import StudyRow, as_utc, new_id
from api.study_jobs import StudyJobs
from planner.catalog import Catalog
from planner.schema import Workload
from planner.study import RESULT_COLUMNS, StudyError, StudyOptions, StudySpec, ZipSpec, expand, scenario_count, table_row
from planner.study_runner import JOURNAL, Journal, read_provenance, results_frame, run_key, solve_context

router = APIRouter(prefix="/v1/studies", tags=["studies"])

StudyId = Annotated[str, PathParam(description="the id POST /v1/studies answered with", max_length=64)]
StudyStatus = Literal["queued", "running", "succeeded", "failed", "cancelled", "interrupted"]
CSV = "text/csv"

class StudyRecord(BaseModel):
    """A study job: where it is, how far it got, and where its rows are."""

    id: str = Field(description="study id (UUIDv7: sorts by creation time)")
    name: str
    status: StudyStatus = Field(description="queued, running, succeeded, failed, cancelled or interrupted (the "
                                            "server stopped before it finished)")
    done: int = Field(description="scenarios finished (solved, infeasible or failed)")
    total: int = Field(description="scenarios in the study")
    created_at: dt.datetime
    updated_at: dt.datetime
    error: str | None = Field(None, description="why the study failed or was interrupted")
    results: str = Field(description="URL of its rows (JSON, or CSV with Accept: text/csv)")
    export: str = Field(description="URL of its workbook (?format=xlsx) or scenarios CSV (?format=csv)")
    siliconmix_version: str | None = Field(None, description="siliconmix version that solved its rows (once running)")
    catalog_fingerprint: str | None = Field(None, description="fingerprint of the catalog files that priced its rows")
    options: StudyOptions | None = Field(None, description="how every scenario is solved")


class StudyPage(BaseModel):
    """A page of studies, newest first."""

    items: list[StudyRecord]
    total: int = Field(description="studies over all pages")
    limit: int
    offset: int
    next_offset: int | None = Field(description="offset of the next page; null on the last page")


class StudyResults(BaseModel):
    """The rows finished so far (every scenario once the study succeeded): the columns of results.csv."""

    id: str
    status: StudyStatus
    done: int
    total: int
    columns: list[str]
    rows: list[dict[str, Any]] = Field(description="one per scenario; NaN as null")


def record_of(row: StudyRow) -> StudyRecord:
    href = f"{router.prefix}/{row.id}"
    return StudyRecord(id=row.id, name=row.name, status=row.status, done=row.done, total=row.total,  # type: ignore[arg-type]
                       created_at=as_utc(row.created_at), updated_at=as_utc(row.updated_at), error=row.error,
                       results=f"{href}/results", export=f"{href}/export", **run_stamp(row))


def run_stamp(row: StudyRow) -> dict[str, Any]:
    """Version and catalog of the run that solved the rows (in its folder once it started), and the options."""
    stamp = read_provenance(Path(row.output_dir))
    return {"siliconmix_version": stamp.get("siliconmix_version"), "catalog_fingerprint": stamp.get("catalog_fingerprint"),
            "options": StudySpec.model_validate_json(row.spec_json).options}


def study_row(jobs: StudyJobs, study_id: str) -> StudyRow:
    row = jobs.store.get(study_id)
    if row is None:
        raise ProblemError(404, f"no study with id {study_id!r}", type=NOT_FOUND)
    return row


@router.post(
    "",
    status_code=202,
    response_model=StudyRecord,
    summary="Submit a what-if study",
    dependencies=[strict_json(StudySpec, yaml=True)],
    openapi_extra={"requestBody": {"content": {media: {"schema": {"$ref": "#/components/schemas/StudySpec"}}
                                               for media in ("application/yaml", "text/yaml")}}},
    responses={202: {"description": "Accepted: the study is queued (follow `Location`)",
                     "headers": {"Location": {"description": "the study's URL", "schema": {"type": "string"}}}},
               **problem_docs(401, 413, 415, 422, 503)},
)
async def create_study(
    spec: Annotated[StudySpec, Body(openapi_examples=STUDY_EXAMPLES)],
    settings: Annotated[Settings, Depends(get_settings)],
    catalog: Annotated[Catalog, Depends(get_catalog)],
    jobs: Annotated[StudyJobs, Depends(get_study_jobs)],
) -> Response:
    """The study file's schema as JSON, with `base` an inline workload. A study of more than
    SILICONMIX_STUDY_MAX_SCENARIOS scenarios (the product of the axes' lengths) is refused (422) before any
    is built; every scenario is expanded and validated before anything runs (422 naming the field); then the study waits for one of
    SILICONMIX_STUDY_WORKERS and solves its scenarios in turn. Outputs go to a folder of its own under
    SILICONMIX_STUDY_DIR (the CLI's outputs and resume journal). The body is JSON, or YAML as `application/yaml`
    / `text/yaml` (a study file's text, with `base` inline)."""
    count = scenario_count(spec)  # from the axes' lengths: nothing is expanded over the limit
    if count > settings.study_max_scenarios:
        raise invalid("axes", f"{count} scenarios; at most {settings.study_max_scenarios} "
                              "(SILICONMIX_STUDY_MAX_SCENARIOS)", "too_many")
    check_base(spec, catalog, settings)
    try:
        scenarios = await run_in_threadpool(expand, spec, catalog)
    except StudyError as exc:
        raise invalid(study_error_field(spec, str(exc)), str(exc)) from exc
    study_id = new_id()
    row = await run_in_threadpool(jobs.store.add, study_id, spec.name, spec.model_dump_json(), len(scenarios),
                                  str(jobs.folder(study_id)))
    jobs.submit(study_id, spec)
    return Response(record_of(row).model_dump_json(), status_code=202, media_type="application/json",
                    headers={"Location": f"{router.prefix}/{study_id}"})


@router.get("", response_model=StudyPage, summary="List studies, newest first", responses=problem_docs(401, 422, 503))
def list_studies(
    jobs: Annotated[StudyJobs, Depends(get_study_jobs)],
    limit: Annotated[int, Query(ge=1, le=100, description="studies per page")] = 20,
    offset: Annotated[int, Query(ge=0, le=10_000_000, description="studies to skip")] = 0,
) -> StudyPage:
    """Every study's record (status, progress, links), newest first; follow `next_offset` for the next page."""
    rows, total = jobs.store.page(limit, offset)
    following = offset + len(rows)
    return StudyPage(items=[record_of(r) for r in rows], total=total, limit=limit, offset=offset,
                     next_offset=following if following < total else None)


@router.get("/{study_id}", response_model=StudyRecord, summary="Follow a study",
            responses=problem_docs(401, 404, 422, 503))
def get_study(study_id: StudyId, jobs: Annotated[StudyJobs, Depends(get_study_jobs)]) -> StudyRecord:
    """Its status and progress (`done` of `total` scenarios); also after a restart."""
    return record_of(study_row(jobs, study_id))


@router.get("/{study_id}/results", response_model=StudyResults, summary="A study's rows",
            responses={200: {"description": "JSON, or results.csv with `Accept: text/csv`",
                             "content": {CSV: {"schema": {"type": "string"}}}},
                       **problem_docs(401, 404, 422, 503)})
def get_study_results(study_id: StudyId, request: Request, jobs: Annotated[StudyJobs, Depends(get_study_jobs)],
                      catalog: Annotated[Catalog, Depends(get_catalog)]) -> Response:
    """The rows of results.csv: every scenario once the study succeeded, the ones finished so far (from
    its journal) while it runs or after it stopped. `Accept: text/csv` answers the CSV."""
    row = study_row(jobs, study_id)
    folder = Path(row.output_dir)
    wants_csv = CSV in request.headers.get("accept", "")
    if row.status == "succeeded" and (folder / "results.parquet").is_file():
        if wants_csv:
            return Response((folder / "results.csv").read_bytes(), media_type=CSV)
        frame = pd.read_parquet(folder / "results.parquet")
    else:
        frame = journal_frame(StudySpec.model_validate_json(row.spec_json), folder, catalog)
        if wants_csv:
            return Response(frame.to_csv(index=False), media_type=CSV)
    body = StudyResults(id=row.id, status=row.status, done=row.done, total=row.total,  # type: ignore[arg-type]
                        columns=list(frame.columns), rows=[clean(r) for r in frame.to_dict("records")])
    return Response(body.model_dump_json(), media_type="application/json")


@router.delete("/{study_id}", response_model=StudyRecord, summary="Cancel a study",
               responses=problem_docs(401, 404, 409, 422, 503))
def cancel_study(study_id: StudyId, jobs: Annotated[StudyJobs, Depends(get_study_jobs)]) -> StudyRecord:
    """A queued or running study stops: no new scenario starts, one being solved is dropped, and the study
    reads `cancelled` (its finished rows stay). Cancelling a cancelled study answers it again; a study that
    already ended otherwise is a 409."""
    row = study_row(jobs, study_id)
    if row.status != "cancelled" and not jobs.cancel(study_id):
        row = study_row(jobs, study_id)
        if row.status != "cancelled":
            raise ProblemError(409, f"study {study_id} already {row.status}; nothing to cancel")
    return record_of(study_row(jobs, study_id))


# ------------------------------------------------------------------------------------------ helpers
def journal_frame(spec: StudySpec, folder: Path, catalog: Catalog) -> pd.DataFrame:
    """The results table of the scenarios the journal holds (in scenario order)."""
    scenarios = expand(spec, catalog)
    done = Journal(folder / JOURNAL).load()
    context = solve_context(catalog)
    rows = [table_row(s, done[k]) for s in scenarios if (k := run_key(s, spec, context)) in done]
    if rows:
        return results_frame(rows)
    return pd.DataFrame(columns=["scenario", "hash", *[f"axis.{a.name}" for a in spec.all_axes()], *RESULT_COLUMNS])


def clean(record: dict[str, Any]) -> dict[str, Any]:
    """JSON-safe values: NaN and infinities as null, numpy scalars as Python numbers."""
    out = {}
    for key, value in record.items():
        if hasattr(value, "item"):
            value = value.item()
        if isinstance(value, float) and not math.isfinite(value):
            value = None
        out[key] = value
    return out


def invalid(field: str, message: str, kind: str = "value_error") -> ProblemError:
    return ProblemError(422, f"{field}: {message}" if field else message, type=VALIDATION, title="Invalid input",
                        errors=[FieldError(location="body", field=field, message=message, type=kind)])


def check_base(spec: StudySpec, catalog: Catalog, settings: Settings) -> None:
    """The base workload as POST /v1/plans checks a workload; fields named under ``base.`` (and ``options.``)."""
    try:
        base = Workload.model_validate(spec.base)
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("body", "base", *e["loc"])}
                                      for e in exc.errors(include_url=False)]) from exc
    try:
        check_size(base, settings)
        check_input(base, catalog, spec.options.solver, spec.options.engine, spec.options.time_limit_s, settings)
    except ProblemError as exc:
        for error in exc.errors or []:
            error.field = f"options.{error.field}" if error.location == "query" else f"base.{error.field}"
            error.location = "body"
        exc.detail = "; ".join(f"{e.field}: {e.message}" for e in exc.errors or []) or exc.detail
        raise


def study_error_field(spec: StudySpec, message: str) -> str:
    """The body field a StudyError is about: the axis it names (``axes.1``, ``axes.2.zip.0``), ``set``, or ``axes``."""
    found = re.match(r"^axis (\S+?)(?::| value )", message)
    if found:
        for i, entry in enumerate(spec.axes):
            members = entry.zip if isinstance(entry, ZipSpec) else [entry]
            for j, axis in enumerate(members):
                if axis.name == found.group(1):
                    return f"axes.{i}.zip.{j}" if isinstance(entry, ZipSpec) else f"axes.{i}"
    if message.startswith("set:"):
        return "set"
    return "axes"
