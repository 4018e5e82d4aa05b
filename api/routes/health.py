"""Probes: ``/healthz`` (the process answers) and ``/readyz`` (database reachable, catalog loaded)."""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from api.deps import Services, first_line, services
from api.models import Check, Health, Readiness

log = logging.getLogger("siliconmix.api")
router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, summary="Liveness")
async def healthz() -> Health:
    """Always 200 while the process serves requests (answered on the event loop, never behind a solve)."""
    return Health()


@router.get("/readyz", response_model=Readiness, summary="Readiness",
            responses={503: {"model": Readiness, "description": "Not ready: a check failed (see `checks`)"}})
async def readyz(svc: Annotated[Services, Depends(services)]) -> JSONResponse:
    """200 when the database answers (with the plans table) and takes a write (a row inserted and rolled back),
    and the catalog is loaded; 503 otherwise. Driver errors go to the server log, never into this open answer."""
    step = "not reachable"
    try:
        await run_in_threadpool(svc.store.ensure_schema, svc.settings.auto_migrate)
        await run_in_threadpool(svc.store.ping)
        step = "reachable, but writes fail"
        await run_in_threadpool(svc.store.probe_write)
        database = Check(ok=True, detail=f"{svc.store.dialect()} reachable and writable")
    except Exception as exc:  # whatever the driver raises, the answer is "not ready"
        log.warning("readiness: database %s: %s", step, first_line(exc))
        database = Check(ok=False, detail=f"{svc.store.dialect()} {step} (the server log says why)")
    if svc.catalog is not None:
        catalog = Check(ok=True, detail=f"{len(svc.catalog.devices)} devices, {len(svc.catalog.models)} models")
    else:
        catalog = Check(ok=False, detail=svc.catalog_error or "not loaded")
    runner = svc.runner
    planner = Check(ok=runner.pending < runner.queue_limit,
                    detail=f"{runner.kind} pool, {runner.workers} workers, {runner.pending}/{runner.queue_limit} plans "
                           "running or waiting")
    ready = database.ok and catalog.ok
    body = Readiness(status="ready" if ready else "not_ready",
                     checks={"database": database, "catalog": catalog, "planner": planner})
    return JSONResponse(body.model_dump(mode="json"), status_code=200 if ready else 503)
