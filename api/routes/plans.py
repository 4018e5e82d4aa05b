"""``/v1/plans``: plan a workload (201, stored; or 202 and a background job with ``Prefer: respond-async``), fetch
one or follow its job, cancel a job, list plans newest first, a plan's task graph."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Literal

from fastapi import APIRouter, Body, Depends, Header, Path, Query, Request, Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from api import plan_jobs
from api.deps import Services, get_catalog, get_plan_jobs, get_runner, get_store, services, strict_json
from api.errors import (BUSY, NOT_FOUND, SOLVER_FAILED, UNAVAILABLE, VALIDATION, FieldError, ProblemError, field_errors,
                        problem_docs, summary)
from api.examples import PLAN_JOB_EXAMPLES, WORKLOAD_EXAMPLES
from api.lifecycle import cancel_on_disconnect
from api.models import PlanJobRecord, PlanPage, PlanRecord, PlanSummary, TaskGraph
from api.plan_jobs import PlanJobs
from api.runner import Busy, PlanJob, PlanRunner, PoolBroken
from api.settings import Settings, get_settings
from api.store import NewPlan, PlanJobRow, PlanRow, PlanStore, as_utc, record_json
from planner.catalog import Catalog, UnknownId
from planner.optimize import PlanOptions
from planner.perf.model import UnsupportedDtype
from planner.schema import MAX_ALTERNATIVES, PlanStatus, Workload
from planner.sensitivity import SensitivityOptions
from planner.solvers.base import SolverFailed
from planner.solvers.cancel import CancelToken, SolveCancelled

router = APIRouter(prefix="/v1/plans", tags=["plans"])

Solver = Literal["ortools", "pulp"]
Engine = Literal["scip", "highs", "cbc"]
ENGINES: dict[str, tuple[str, ...]] = {"ortools": ("scip", "highs"), "pulp": ("highs", "cbc")}
PlanId = Annotated[str, Path(description="the id POST /v1/plans answered with", max_length=64)]


YAML_BODY = {"requestBody": {"content": {media: {"schema": {"$ref": "#/components/schemas/Workload"}}
                                         for media in ("application/yaml", "text/yaml")}}}


@router.post(
    "",
    status_code=201,
    response_model=PlanRecord,
    summary="Plan a fleet for a workload",
    dependencies=[strict_json(Workload, yaml=True)],
    openapi_extra=YAML_BODY,
    responses={201: {"description": "The plan (also when it is infeasible: status `infeasible` and `plan.diagnosis`)",
                     "headers": {"Location": {"description": "the plan's URL", "schema": {"type": "string"}}},
                     "links": {op: {"operationId": op, "parameters": {"plan_id": "$response.body#/id"}}
                               for op in ("get_plan", "get_plan_graph")}},
               202: {"model": PlanJobRecord,
                     "description": "Accepted (`Prefer: respond-async` or `?async=true`): the plan job is queued; "
                                    "follow `Location`",
                     "content": {"application/json": {"examples": PLAN_JOB_EXAMPLES}},
                     "headers": {"Location": {"description": "the job's URL", "schema": {"type": "string"}},
                                 "Preference-Applied": {"description": "respond-async", "schema": {"type": "string"}}},
                     "links": {op: {"operationId": op, "parameters": {"plan_id": "$response.body#/id"}}
                               for op in ("get_plan", "cancel_plan")}},
               **problem_docs(401, 413, 415, 422, 500, 503)},
)
async def create_plan(
    request: Request,
    workload: Annotated[Workload, Body(openapi_examples=WORKLOAD_EXAMPLES)],
    svc: Annotated[Services, Depends(services)],
    settings: Annotated[Settings, Depends(get_settings)],
    catalog: Annotated[Catalog, Depends(get_catalog)],
    store: Annotated[PlanStore, Depends(get_store)],
    runner: Annotated[PlanRunner, Depends(get_runner)],
    jobs: Annotated[PlanJobs, Depends(get_plan_jobs)],
    solver: Annotated[Solver, Query(description="MILP backend")] = "ortools",
    engine: Annotated[Engine | None, Query(
        description="engine of the backend: ortools scip (default) | highs; pulp highs (default) | cbc")] = None,
    time_limit_s: Annotated[float | None, Query(
        gt=0, description="cap on the whole request or background job (each MILP solve gets a share; when it "
                          "passes, the best plan so far, status `time_limit`), seconds. Default SILICONMIX_DEFAULT_TIME_LIMIT_S, else the "
                          "planner's default; at most SILICONMIX_MAX_TIME_LIMIT_S")] = None,
    relative_gap: Annotated[float, Query(
        ge=0, lt=1, description="relative optimality gap at which each MILP solve stops (0.0001 = 0.01 %)")] = PlanOptions.relative_gap,
    node_limit: Annotated[int | None, Query(
        ge=1, le=10**9, description="branch-and-bound nodes per MILP solve: a work limit, so where it binds before "
                                    "the time limit the answer does not depend on the server's load")] = None,
    baseline: Annotated[bool | None, Query(
        description="also solve the best single-device-type fleet (default SILICONMIX_PLAN_BASELINE)")] = None,
    sensitivity: Annotated[bool, Query(
        description="also re-solve with each estimated input (TDP, prices, derived FLOP/s, family efficiencies) moved "
                    "by ±sensitivity_delta and report which flip the device mix or move the objective by more than 5 % "
                    "(`plan.sensitivity`; up to 48 more solves, within the same time_limit_s)")] = False,
    sensitivity_delta: Annotated[float, Query(
        gt=0, lt=1, description="with sensitivity: the relative move of each input (0.2 = ±20 %)")] = SensitivityOptions.delta,
    alternatives: Annotated[int, Query(
        ge=0, le=MAX_ALTERNATIVES, description="also solve the N best plans whose device-type mix differs from every "
                                               "plan found before (`plan.alternatives`, each with its shortfall)")] = 0,
    simulate: Annotated[bool, Query(
        description="also replay the plan request by request, 10 simulated minutes (`plan.simulation`: the verdict "
                    "and what misses; POST /v1/plans/{id}/simulate for every figure)")] = False,
    run_async: Annotated[bool, Query(alias="async", description="solve in the background: 202 and a job to follow "
                                                                "(as `Prefer: respond-async`)")] = False,
    prefer: Annotated[str | None, Header(max_length=200, description="`respond-async`: solve in the background "
                                                                     "(RFC 7240)")] = None,
) -> Response:
    """Solve the placement MILP for the workload, store the plan and answer with it and its id.

    The planner runs on a bounded pool, away from the event loop; its solve stops when the client disconnects.
    A workload no fleet can serve is an answer, not an error: 201 with status `infeasible` and a diagnosis
    (which SLO or limit must bend). With `Prefer: respond-async` (or `?async=true`) the plan is solved in the
    background instead: 202 and a job whose `state` and `progress` GET /v1/plans/{id} shows, and DELETE cancels.
    The body is JSON, or YAML as `application/yaml` / `text/yaml`.
    """
    check_size(workload, settings)
    limit = time_limit_s or settings.default_time_limit_s or PlanOptions().time_limit_s
    check_input(workload, catalog, solver, engine, limit, settings)
    job = PlanJob(workload=workload, solver=solver, engine=engine, time_limit_s=limit, relative_gap=relative_gap,
                  node_limit=node_limit,
                  baseline=settings.plan_baseline if baseline is None else baseline,
                  sensitivity_delta=sensitivity_delta if sensitivity else None, alternatives=alternatives,
                  simulate=simulate,
                  catalog_dir=str(settings.catalog_dir) if settings.catalog_dir else None)
    if run_async or wants_async(prefer):
        return await submit(jobs, job)
    try:
        with svc.tracked(CancelToken()) as token:
            watcher = asyncio.create_task(cancel_on_disconnect(request, token))
            try:
                plan_json = await runner.run(job, token)
            finally:
                watcher.cancel()
    except SolveCancelled as exc:  # the client left (nobody reads this) or the server is stopping
        raise ProblemError(503, "the server is shutting down; retry on another instance or later" if svc.stopping
                           else "the request was cancelled", type=UNAVAILABLE, headers={"Retry-After": "5"}) from exc
    except (Busy, PoolBroken) as exc:
        raise ProblemError(503, f"{exc}; retry later", type=BUSY, headers={"Retry-After": "2"}) from exc
    except SolverFailed as exc:  # no answer about the workload (an infeasible one is a 201)
        raise ProblemError(500, str(exc), type=SOLVER_FAILED, title="Solver failed") from exc
    except ValidationError as exc:  # a model the planner derived from the workload: its fields, not its input
        errors = field_errors({**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False))
        raise ProblemError(422, summary(errors), type=VALIDATION, title="Invalid input", errors=errors) from exc
    except (UnknownId, UnsupportedDtype, ValueError) as exc:  # what the CLI calls bad input (exit 2)
        raise ProblemError(422, str(exc), type=VALIDATION, title="Invalid input",
                           errors=[FieldError(location="body", field="", message=str(exc), type="value_error")]) from exc
    row = await run_in_threadpool(store.add, NewPlan(request_json=request_json_of(job), plan_json=plan_json,
                                                     solver=solver, time_limit_s=limit))
    return Response(record_json(row), status_code=201, media_type="application/json",
                    headers={"Location": f"{router.prefix}/{row.id}"})


def wants_async(prefer: str | None) -> bool:
    """``Prefer`` holds the ``respond-async`` preference (RFC 7240: comma-separated, parameters after ``;``)."""
    return prefer is not None and any(p.split(";", 1)[0].strip().lower() == "respond-async" for p in prefer.split(","))


def request_json_of(job: PlanJob) -> str:
    return json.dumps({"solver": job.solver, "engine": job.engine, "time_limit_s": job.time_limit_s,
                       "relative_gap": job.relative_gap, "node_limit": job.node_limit,
                       "sensitivity_delta": job.sensitivity_delta,
                       "alternatives": job.alternatives, "simulate": job.simulate,
                       "baseline": job.baseline, "workload": job.workload.model_dump(mode="json")}, separators=(",", ":"))


async def submit(jobs: PlanJobs, job: PlanJob) -> Response:
    """Queue ``job`` in the background: 202, its record and Location."""
    try:
        job_id = await run_in_threadpool(jobs.submit, job, request_json_of(job))
    except plan_jobs.Busy as exc:
        raise ProblemError(503, f"{exc}; retry later", type=BUSY, headers={"Retry-After": "2"}) from exc
    row = await run_in_threadpool(jobs.store.get, job_id)
    return Response(job_json(row, None), status_code=202, media_type="application/json",
                    headers={"Location": f"{router.prefix}/{job_id}", "Preference-Applied": "respond-async"})


@router.get("", response_model=PlanPage, summary="List plans, newest first", responses=problem_docs(401, 422, 503))
def list_plans(
    store: Annotated[PlanStore, Depends(get_store)],
    limit: Annotated[int, Query(ge=1, le=100, description="plans per page")] = 20,
    offset: Annotated[int, Query(ge=0, le=10_000_000, description="plans to skip")] = 0,
    status: Annotated[PlanStatus | None, Query(description="only plans with this status")] = None,
    model: Annotated[str | None, Query(max_length=64, description="only plans of this model id")] = None,
) -> PlanPage:
    """Summaries of stored plans, newest first; follow `next_offset` for the next page."""
    rows, total = store.page(limit, offset, status=status, model=model)
    following = offset + len(rows)
    return PlanPage(items=[summary_of(r) for r in rows], total=total, limit=limit, offset=offset,
                    next_offset=following if following < total else None)


@router.get("/{plan_id}", response_model=PlanRecord | PlanJobRecord, summary="Fetch a plan or follow its job",
            responses={200: {"description": "A plan solved synchronously (PlanRecord), or a background job "
                                            "(PlanJobRecord: `state`, `progress`, and `plan` once there is one)",
                             "content": {"application/json": {"examples": PLAN_JOB_EXAMPLES}}},
                       **problem_docs(401, 404, 422, 503)})
def get_plan(plan_id: PlanId, store: Annotated[PlanStore, Depends(get_store)],
             jobs: Annotated[PlanJobs, Depends(get_plan_jobs)]) -> Response:
    """A plan exactly as POST /v1/plans answered it (the same bytes, also after a restart); for a plan asked for
    in the background, its job: `state` (queued, running, done, cancelled, failed) apart from the plan's `status`,
    the last stage reached while it runs, and the plan once there is one."""
    job = jobs.store.get(plan_id)
    if job is not None:
        return Response(job_json(job, store.get(plan_id)), media_type="application/json")
    return Response(record_json(_row(store, plan_id)), media_type="application/json")


@router.delete("/{plan_id}", response_model=PlanJobRecord, summary="Cancel a plan job",
               responses={200: {"description": "The job, cancelled: `plan` is the best plan found before, or null",
                                "content": {"application/json": {"examples": {"cancelled": PLAN_JOB_EXAMPLES["cancelled"]}}}},
                          **problem_docs(401, 404, 409, 422, 503)})
def cancel_plan(plan_id: PlanId, store: Annotated[PlanStore, Depends(get_store)],
                jobs: Annotated[PlanJobs, Depends(get_plan_jobs)]) -> Response:
    """A queued or running plan job stops; it reads `cancelled`, with the best plan found so far when there is one
    (e.g. the first stage's plan while the tie-break or the baseline solves). Cancelling a cancelled job answers it
    again; a job that already ended otherwise, or a plan solved synchronously, is a 409."""
    job = jobs.store.get(plan_id)
    if job is None:
        _row(store, plan_id)  # 404 when there is no such plan either
        raise ProblemError(409, f"plan {plan_id} was solved synchronously; there is no job to cancel")
    if job.state != "cancelled" and not jobs.cancel(plan_id):
        job = jobs.store.get(plan_id)
        if job is not None and job.state != "cancelled":
            raise ProblemError(409, f"plan job {plan_id} already {job.state}; nothing to cancel")
    return Response(job_json(jobs.store.get(plan_id), store.get(plan_id)), media_type="application/json")


@router.get("/{plan_id}/graph", response_model=TaskGraph, summary="A plan's task graph",
            responses=problem_docs(401, 404, 422, 503))
def get_plan_graph(plan_id: PlanId, store: Annotated[PlanStore, Depends(get_store)]) -> TaskGraph:
    """The workload's task graph the plan was solved on: a node per class x strategy x task, a link per transfer."""
    graph = json.loads(_row(store, plan_id).plan_json)["graph"]
    return TaskGraph(plan_id=plan_id, **graph)


def job_json(job: PlanJobRow | None, plan: PlanRow | None) -> str:
    """The body of a plan job: its record, with the stored plan's exact text as ``plan`` once there is one."""
    if job is None:
        raise ProblemError(404, "the plan job is gone", type=NOT_FOUND)
    head = PlanJobRecord(
        id=job.id, state=job.state, status=plan.status if plan else None,  # type: ignore[arg-type]
        created_at=as_utc(job.created_at), updated_at=as_utc(job.updated_at), time_limit_s=job.time_limit_s,
        progress=json.loads(job.progress_json) if job.progress_json else None, error=job.error,
        href=f"{router.prefix}/{job.id}").model_dump_json(exclude={"plan"})
    return f'{head[:-1]},"plan":{record_json(plan) if plan else "null"}}}'


def _row(store: PlanStore, plan_id: str) -> PlanRow:
    row = store.get(plan_id)
    if row is None:
        raise ProblemError(404, f"no plan with id {plan_id!r}", type=NOT_FOUND)
    return row


def summary_of(row: PlanRow) -> PlanSummary:
    return PlanSummary(id=row.id, created_at=as_utc(row.created_at), status=row.status, model=row.model,
                       objective=row.objective, solver=row.solver, engine=row.engine, solve_time_s=row.solve_time_s,
                       goodput_scale=row.goodput_scale, devices=row.devices, power_kw=row.power_kw,
                       href=f"{router.prefix}/{row.id}")


def check_size(workload: Workload, settings: Settings) -> None:
    """422 (a count over a limit, like the schema's own list limits) when the workload has more request classes
    or device ids than this service allows."""
    errors = []
    if len(workload.classes) > settings.max_classes:
        errors.append(FieldError(location="body", field="classes", type="too_long",
                                 message=f"{len(workload.classes)} request classes; at most {settings.max_classes} "
                                         "(SILICONMIX_MAX_CLASSES)"))
    for name, ids in (("constraints.devices", workload.constraints.devices or ()),
                      ("constraints.inventory", workload.constraints.inventory)):
        if len(ids) > settings.max_devices:
            errors.append(FieldError(location="body", field=name, type="too_long",
                                     message=f"{len(ids)} devices; at most {settings.max_devices} (SILICONMIX_MAX_DEVICES)"))
    if errors:
        raise ProblemError(422, summary(errors), type=VALIDATION, title="Invalid input", errors=errors)


def check_input(workload: Workload, catalog: Catalog, solver: str, engine: str | None, time_limit_s: float,
                settings: Settings) -> None:
    """422 naming every unknown id, a solver/engine mismatch or a time limit over the maximum."""
    errors = []

    def bad(location: str, field: str, message: str, kind: str = "value_error") -> None:
        errors.append(FieldError(location=location, field=field, message=message, type=kind))

    if workload.model not in catalog.models:
        bad("body", "model", f"unknown model {workload.model!r}; known: {', '.join(catalog.models)}", "unknown_id")
    if workload.spec_decode is not None and workload.spec_decode.draft_model not in catalog.models:
        bad("body", "spec_decode.draft_model", f"unknown model {workload.spec_decode.draft_model!r}", "unknown_id")
    seen = set()
    for i, device in enumerate(workload.constraints.devices or ()):
        if device not in catalog.devices:
            bad("body", f"constraints.devices.{i}", f"unknown device {device!r}; known: {', '.join(catalog.devices)}",
                "unknown_id")
        elif device in seen:
            bad("body", f"constraints.devices.{i}", f"device {device!r} is listed twice", "duplicate")
        seen.add(device)
    for device in workload.constraints.inventory:
        if device not in catalog.devices:
            bad("body", f"constraints.inventory.{device}", f"unknown device {device!r}", "unknown_id")
    if engine is not None and engine not in ENGINES[solver]:
        bad("query", "engine", f"{engine!r} is not an engine of {solver}; known: {', '.join(ENGINES[solver])}")
    if time_limit_s > settings.max_time_limit_s:
        bad("query", "time_limit_s", f"{time_limit_s:g} s is over the maximum of {settings.max_time_limit_s:g} s "
                                     "(SILICONMIX_MAX_TIME_LIMIT_S)", "less_than_equal")
    if errors:
        raise ProblemError(422, summary(errors), type=VALIDATION, title="Invalid input", errors=errors)
