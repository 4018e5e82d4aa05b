"""The FastAPI app factory: ``create_app(settings)``; ``uvicorn api.main:create_app --factory`` serves it.

The lifespan owns what lives as long as the app: the plan store (migrated at start-up), the catalog,
and the bounded pool that runs the planner. On SIGTERM/SIGINT (or shutdown) every plan being solved is
cancelled and every running study interrupted, so uvicorn's wait for running requests ends within seconds.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

from fastapi import Depends, FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

from api import docs, errors, logs
from api.deps import Services, first_line, require_api_key, single_query_values
from api.lifecycle import on_stop_signals
from api.middleware import BodySizeLimit
from api.plan_jobs import PlanJobs
from api.simulation_jobs import SimulationJobs
from api.routes import OPEN_ROUTERS, TAGS, V1_ROUTERS
from api.runner import PlanRunner
from api.settings import Settings, get_settings
from api.store import PlanJobStore, PlanStore, SimulationStore, StudyStore, database_label
from api.study_jobs import StudyJobs
from api.yaml_body import YamlBodies
from planner import __version__
from planner.catalog import load_catalog

log = logging.getLogger("siliconmix.api")

DESCRIPTION = """\
Which silicon should run which part of LLM inference, how many of each, configured how.

POST a workload to **/v1/plans** and get the fleet back (also when no fleet can serve it: status
`infeasible` with the diagnosis); list and fetch earlier plans; ask the cost model (**/v1/estimate**)
and the catalog directly. Errors are RFC 9457 `application/problem+json`.
"""


#: routes whose POST body may be YAML (application/yaml, text/yaml): it reaches them as JSON
YAML_PATHS = frozenset({"/v1/plans", "/v1/studies"})


def operation_id(route: APIRoute) -> str:
    """Stable operation ids: the endpoint function's name (``create_plan``, ``list_hardware``, ...)."""
    return route.name


def create_app(settings: Settings | None = None) -> FastAPI:
    """A new app; ``settings`` default to the environment (``SILICONMIX_*``)."""
    settings = settings or get_settings()
    app = FastAPI(
        title="siliconmix",
        version=__version__,
        description=DESCRIPTION,
        openapi_tags=TAGS,
        lifespan=lifespan,
        generate_unique_id_function=operation_id,
        dependencies=[Depends(single_query_values)],
        debug=False,
        docs_url=None,  # replaced by api.docs: the same pages from locally installed assets
        redoc_url=None,
    )
    app.state.settings = settings
    app.dependency_overrides[get_settings] = lambda: settings
    errors.install(app)
    docs.install(app)
    guard = [Depends(require_api_key)] if settings.api_keys else []
    for router in V1_ROUTERS:
        app.include_router(router, dependencies=guard)
    for router in OPEN_ROUTERS:
        app.include_router(router)
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=settings.cors_origins, allow_methods=["GET", "POST", "DELETE"],
                           allow_headers=["Authorization", "X-API-Key", "Content-Type"])
    app.add_middleware(errors.CatchAll)
    app.add_middleware(YamlBodies, paths=YAML_PATHS)  # after the size limit: it reads a bounded body
    app.add_middleware(BodySizeLimit, max_body_bytes=settings.max_body_bytes,
                       body_timeout_s=settings.body_timeout_s)  # outermost: before anything reads
    app.openapi = lambda: openapi(app)  # type: ignore[method-assign]
    return app


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    store = PlanStore.from_url(settings.database_url)
    runner = PlanRunner(settings.plan_executor, settings.plan_workers, settings.plan_queue_limit,
                        str(settings.catalog_dir) if settings.catalog_dir else None)
    svc = Services(settings=settings, store=store, runner=runner)
    try:
        svc.catalog = await run_in_threadpool(load_catalog, settings.catalog_dir)
    except Exception as exc:  # a broken catalog file: keep serving /healthz and say why on /readyz
        svc.catalog_error = first_line(exc)
        log.error("catalog not loaded: %s", svc.catalog_error)
    try:
        await run_in_threadpool(store.ensure_schema, settings.auto_migrate)
    except Exception as exc:  # a database that is down now is retried on /readyz and on each /v1 request
        log.error("database %s not ready: %s", database_label(settings.database_url), first_line(exc))
    svc.studies = StudyJobs(StudyStore(store.engine), svc.catalog, settings.study_workers, settings.study_dir)
    try:
        if store.ready:
            resumed, interrupted = await run_in_threadpool(svc.studies.start, settings.study_resume)
            if resumed or interrupted:
                log.warning("studies left unfinished by the previous run: %d resumed, %d marked interrupted",
                            resumed, interrupted)
    except Exception as exc:
        log.error("unfinished studies not checked: %s", first_line(exc))
    svc.plan_jobs = PlanJobs(PlanJobStore(store.engine), store, svc.catalog, settings.plan_workers,
                             settings.plan_queue_limit)
    svc.simulations = SimulationJobs(SimulationStore(store.engine), store, svc.catalog, settings.simulation_workers,
                                     settings.simulation_queue_limit)
    for what, jobs in (("plan jobs", svc.plan_jobs), ("simulations", svc.simulations)):
        try:
            if store.ready and (failed := await run_in_threadpool(jobs.start)):
                log.warning("%s left unfinished by the previous run: %d marked failed", what, failed)
        except Exception as exc:
            log.error("unfinished %s not checked: %s", what, first_line(exc))
    app.state.services = svc
    logs.install()  # here, after uvicorn configured its loggers
    log_start(settings)
    restore_signals = on_stop_signals(asyncio.get_running_loop(), svc.stop)
    try:
        yield
    finally:
        restore_signals()
        svc.stop()
        await asyncio.to_thread(svc.studies.shutdown)
        await asyncio.to_thread(svc.plan_jobs.shutdown)
        await asyncio.to_thread(svc.simulations.shutdown)
        await asyncio.to_thread(runner.shutdown)
        store.dispose()


def log_start(settings: Settings) -> None:
    log.info("database %s; planner: %s pool of %d (queue %d); body limit %d bytes in %g s",
             database_label(settings.database_url), settings.plan_executor, settings.plan_workers,
             settings.plan_queue_limit, settings.max_body_bytes, settings.body_timeout_s)
    if settings.api_keys:
        log.info("API keys required on /v1 (%d configured): 'Authorization: Bearer <key>' or 'X-API-Key'",
                 len(settings.api_keys))
    else:
        log.warning("SILICONMIX_API_KEYS is not set: the service runs OPEN, every /v1 route answers without a key")


def openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's schema plus the problem+json schemas the error responses refer to."""
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, description=app.description,
                             routes=app.routes, tags=app.openapi_tags)
        problem = errors.Problem.model_json_schema(ref_template="#/components/schemas/{model}")
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.update(problem.pop("$defs", {}))
        components["Problem"] = problem
        app.openapi_schema = schema
    return app.openapi_schema
