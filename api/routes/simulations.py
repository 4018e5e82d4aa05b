"""``/v1/plans/{id}/simulate``: replay a stored plan as a discrete-event simulation in the background (202 and a job
to follow), follow it, cancel it."""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Body, Depends, Path, Response
from starlette.concurrency import run_in_threadpool

from api import simulation_jobs
from api.deps import get_simulation_jobs, get_store, strict_json
from api.errors import BUSY, NOT_FOUND, VALIDATION, FieldError, ProblemError, problem_docs, summary
from api.models import SimulationRecord
from api.settings import Settings, get_settings
from api.simulation_jobs import SimulationJobs
from api.store import PlanStore, SimulationRow, as_utc
from planner.schema import Plan
from planner.simulate import Simulation, SimulationOptions
from planner.simulate.traffic import served_by_class

router = APIRouter(prefix="/v1/plans", tags=["simulations"])

PlanId = Annotated[str, Path(description="the plan's id", max_length=64)]
SimulationId = Annotated[str, Path(description="the id POST .../simulate answered with", max_length=64)]


@router.post(
    "/{plan_id}/simulate",
    status_code=202,
    response_model=SimulationRecord,
    summary="Replay a plan as a discrete-event simulation",
    dependencies=[strict_json(SimulationOptions)],
    responses={202: {"description": "Accepted: the simulation is queued; follow `Location`",
                     "headers": {"Location": {"description": "the simulation's URL", "schema": {"type": "string"}}}},
               **problem_docs(401, 404, 409, 413, 415, 422, 503)},
)
def simulate_plan(plan_id: PlanId, options: Annotated[SimulationOptions, Body()],
             store: Annotated[PlanStore, Depends(get_store)], jobs: Annotated[SimulationJobs, Depends(get_simulation_jobs)],
             settings: Annotated[Settings, Depends(get_settings)]) -> Response:
    """Requests arrive one at a time per class, are routed by the plan's shares to its pools and batched there as
    the plan's strategies price them; the answer (once `state` is `done`) sets each class's simulated TTFT and
    TPOT percentiles and SLO attainment beside the plan's predictions, with a verdict. The body is the simulation
    options (`{}` for the defaults)."""
    row = store.get(plan_id)
    if row is None:
        raise ProblemError(404, f"no plan with id {plan_id!r}", type=NOT_FOUND)
    check_options(options, settings)
    plan = Plan.model_validate_json(row.plan_json)
    if not any(served_by_class(p) for p in plan.pools):
        raise ProblemError(409, f"plan {plan_id} (status {plan.status}) has no pool that serves traffic; "
                                "nothing to simulate")
    try:
        sim_id = jobs.submit(plan_id, options)
    except simulation_jobs.Busy as exc:
        raise ProblemError(503, f"{exc}; retry later", type=BUSY, headers={"Retry-After": "2"}) from exc
    return Response(record_of(jobs.store.get(sim_id)), status_code=202, media_type="application/json",
                    headers={"Location": href(plan_id, sim_id)})


@router.get("/{plan_id}/simulations/{sim_id}", response_model=SimulationRecord, summary="Follow a simulation",
            responses=problem_docs(401, 404, 422, 503))
def get_simulation(plan_id: PlanId, sim_id: SimulationId,
                   jobs: Annotated[SimulationJobs, Depends(get_simulation_jobs)]) -> Response:
    """The simulation job: `state`, and the simulation once it is `done`."""
    return Response(record_of(_row(jobs, plan_id, sim_id)), media_type="application/json")


@router.delete("/{plan_id}/simulations/{sim_id}", response_model=SimulationRecord, summary="Cancel a simulation",
               responses=problem_docs(401, 404, 409, 422, 503))
async def cancel_simulation(plan_id: PlanId, sim_id: SimulationId,
                            jobs: Annotated[SimulationJobs, Depends(get_simulation_jobs)]) -> Response:
    """A queued or running simulation stops (a running one within a hundredth of its window) and reads `cancelled`;
    cancelling a cancelled one answers it again; one that already ended otherwise is a 409."""
    row = await run_in_threadpool(_row, jobs, plan_id, sim_id)
    if row.state != "cancelled" and not await run_in_threadpool(jobs.cancel, sim_id):
        row = await run_in_threadpool(_row, jobs, plan_id, sim_id)
        raise ProblemError(409, f"simulation {sim_id} already {row.state}; nothing to cancel")
    return Response(record_of(await run_in_threadpool(_row, jobs, plan_id, sim_id)), media_type="application/json")


def check_options(options: SimulationOptions, settings: Settings) -> None:
    """422 when the window or the replicas per pool are over what this service runs."""
    errors = []
    if options.duration_s > settings.simulation_max_duration_s:
        errors.append(FieldError(location="body", field="duration_s", type="less_than_equal",
                                 message=f"{options.duration_s:g} s; at most {settings.simulation_max_duration_s:g} s "
                                         "(SILICONMIX_SIMULATION_MAX_DURATION_S)"))
    if options.max_replicas is None or options.max_replicas > settings.simulation_max_replicas:
        errors.append(FieldError(location="body", field="max_replicas", type="less_than_equal",
                                 message=f"{options.max_replicas or 'every replica'}; at most "
                                         f"{settings.simulation_max_replicas} per pool "
                                         "(SILICONMIX_SIMULATION_MAX_REPLICAS)"))
    if errors:
        raise ProblemError(422, summary(errors), type=VALIDATION, title="Invalid input", errors=errors)


def href(plan_id: str, sim_id: str) -> str:
    return f"{router.prefix}/{plan_id}/simulations/{sim_id}"


def _row(jobs: SimulationJobs, plan_id: str, sim_id: str) -> SimulationRow:
    row = jobs.store.get(sim_id)
    if row is None or row.plan_id != plan_id:
        raise ProblemError(404, f"no simulation {sim_id!r} of plan {plan_id!r}", type=NOT_FOUND)
    return row


def record_of(row: SimulationRow | None) -> str:
    if row is None:
        raise ProblemError(404, "the simulation is gone", type=NOT_FOUND)
    return SimulationRecord(
        id=row.id, plan_id=row.plan_id, state=row.state,  # type: ignore[arg-type]
        created_at=as_utc(row.created_at), updated_at=as_utc(row.updated_at),
        options=SimulationOptions.model_validate(json.loads(row.options_json)), error=row.error,
        href=href(row.plan_id, row.id),
        simulation=Simulation.model_validate_json(row.result_json) if row.result_json else None,
    ).model_dump_json(by_alias=True)
