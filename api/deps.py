"""Request dependencies: settings, the store, the catalog, the planner pool, the API-key check."""

from __future__ import annotations

import hashlib
import hmac
import logging
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, Iterator

from fastapi import Depends, Request
from fastapi.exceptions import RequestValidationError
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool

from api.errors import UNAUTHORIZED, UNAVAILABLE, UNSUPPORTED_MEDIA, VALIDATION, FieldError, ProblemError, clipped, summary
from api.logs import secret_params
from api.plan_jobs import PlanJobs
from api.simulation_jobs import SimulationJobs
from api.runner import PlanRunner
from api.settings import Settings, get_settings
from api.store import PlanStore
from api.study_jobs import StudyJobs
from planner.catalog import Catalog
from planner.solvers.cancel import CancelToken

log = logging.getLogger("siliconmix.api")


@dataclass
class Services:
    """What the lifespan builds and the routes use (one per app)."""

    settings: Settings
    store: PlanStore
    runner: PlanRunner
    catalog: Catalog | None = None
    catalog_error: str | None = None
    studies: StudyJobs | None = None
    plan_jobs: PlanJobs | None = None
    simulations: SimulationJobs | None = None
    stopping: bool = False
    solving: set[CancelToken] = field(default_factory=set)  # tokens of the plans being solved (event loop only)

    @contextmanager
    def tracked(self, token: CancelToken) -> Iterator[CancelToken]:
        """``token`` is cancelled by ``stop`` while inside."""
        if self.stopping:
            token.cancel()
        self.solving.add(token)
        try:
            yield token
        finally:
            self.solving.discard(token)

    def stop(self) -> None:
        """The server is stopping: cancel every plan being solved, interrupt every study and plan job (on the event loop)."""
        self.stopping = True
        for token in list(self.solving):
            token.cancel()
        if self.studies is not None:
            self.studies.stop()
        if self.plan_jobs is not None:
            self.plan_jobs.stop()
        if self.simulations is not None:
            self.simulations.stop()


def first_line(exc: BaseException) -> str:
    """``Type: first line of the message`` (driver messages can run to many lines)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


async def services(request: Request) -> Services:
    return request.app.state.services


async def get_store(svc: Annotated[Services, Depends(services)]) -> PlanStore:
    """The store, once its schema is there (a database that was down at start-up is migrated now)."""
    if svc.store.ready:
        return svc.store
    try:
        await run_in_threadpool(svc.store.ensure_schema, svc.settings.auto_migrate)
    except Exception as exc:  # any driver or migration error means the same to the client: not available
        log.warning("database not available: %s", first_line(exc))
        raise ProblemError(503, "the database is not reachable; see /readyz", type=UNAVAILABLE,
                           headers={"Retry-After": "5"}) from exc
    return svc.store


async def get_catalog(svc: Annotated[Services, Depends(services)]) -> Catalog:
    if svc.catalog is None:
        raise ProblemError(503, f"the catalog did not load: {svc.catalog_error}", type=UNAVAILABLE)
    return svc.catalog


async def get_study_jobs(svc: Annotated[Services, Depends(services)],
                         _store: Annotated[PlanStore, Depends(get_store)]) -> StudyJobs:
    """The study job manager (its tables are there: the store's schema was ensured first)."""
    if svc.studies is None:
        raise ProblemError(503, "the study runner is not available", type=UNAVAILABLE)
    return svc.studies


async def get_plan_jobs(svc: Annotated[Services, Depends(services)],
                        _store: Annotated[PlanStore, Depends(get_store)]) -> PlanJobs:
    """The plan job manager (its table is there: the store's schema was ensured first)."""
    if svc.plan_jobs is None:
        raise ProblemError(503, "the plan job runner is not available", type=UNAVAILABLE)
    return svc.plan_jobs


async def get_simulation_jobs(svc: Annotated[Services, Depends(services)],
                              _store: Annotated[PlanStore, Depends(get_store)]) -> SimulationJobs:
    """The simulation job manager (its table is there: the store's schema was ensured first)."""
    if svc.simulations is None:
        raise ProblemError(503, "the simulation runner is not available", type=UNAVAILABLE)
    return svc.simulations


async def get_runner(svc: Annotated[Services, Depends(services)]) -> PlanRunner:
    return svc.runner


def is_json(content_type: str) -> bool:
    """``application/json`` or ``application/<x>+json``, parameters (``charset``) aside."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def strict_json(model: type[BaseModel], yaml: bool = False) -> Any:
    """A route dependency: the body must be sent as JSON (else 415) and match ``model`` strictly (no ``false``
    for a number, no ``"12"`` for an integer), as the OpenAPI schema says; FastAPI's own parse is lax python mode.
    ``yaml``: the route also takes YAML (``api.yaml_body`` turned it into JSON before it got here)."""
    allowed = "JSON sent as 'Content-Type: application/json'" + (" or YAML as 'application/yaml' / 'text/yaml'"
                                                               if yaml else "")

    async def check(request: Request) -> None:
        content_type = request.headers.get("content-type", "")
        if not is_json(content_type):
            sent = f"Content-Type {clipped(content_type, 80)!r}" if content_type else "no Content-Type"
            raise ProblemError(415, f"the body must be {allowed} (got {sent})", type=UNSUPPORTED_MEDIA)
        try:
            model.model_validate_json(await request.body(), strict=True)
        except ValidationError as exc:
            raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]) from exc

    return Depends(check)


def single_query_values(request: Request) -> None:
    """Every route: a query parameter given twice is a 422 (each is one value; none is a list)."""
    names = [name for name, _ in request.query_params.multi_items()]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        errors = [FieldError(location="query", field=n, type="repeated",
                             message=f"given {names.count(n)} times; give it once") for n in repeated]
        raise ProblemError(422, summary(errors), type=VALIDATION, title="Invalid input", errors=errors)


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def key_matches(given: str, keys: list[str]) -> bool:
    """Constant time: every configured key is compared (as equal-length digests), no early exit."""
    given_digest = _digest(given)
    found = False
    for key in keys:
        found |= hmac.compare_digest(given_digest, _digest(key))
    return found


_bearer = HTTPBearer(auto_error=False, description="one of SILICONMIX_API_KEYS as a bearer token")
_api_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="one of SILICONMIX_API_KEYS")


def require_api_key(
    request: Request,
    settings: Annotated[Settings, Depends(get_settings)],
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    api_key: Annotated[str | None, Depends(_api_key)],
) -> None:
    """Every /v1 route when SILICONMIX_API_KEYS is set: ``Authorization: Bearer <key>`` or ``X-API-Key``; when both
    are sent, both must be valid. A key in the query string is refused, valid or not (URLs end up in logs)."""
    if not settings.api_keys:
        return
    in_url = secret_params(request.url.query)
    if in_url:
        raise ProblemError(401, f"credentials go in the 'Authorization: Bearer <key>' or 'X-API-Key' header, never in "
                                f"the URL (query parameter {clipped(in_url[0], 40)!r})", type=UNAUTHORIZED,
                           headers={"WWW-Authenticate": "Bearer"})
    given = [k for k in (bearer.credentials if bearer else None, api_key) if k]
    if not given:
        raise ProblemError(401, "this service needs an API key: 'Authorization: Bearer <key>' or 'X-API-Key: <key>'",
                           type=UNAUTHORIZED, headers={"WWW-Authenticate": "Bearer"})
    if not all([key_matches(k, settings.api_keys) for k in given]):  # a list: both are checked; both must be valid
        raise ProblemError(401, "the API key is not valid", type=UNAUTHORIZED,
                           headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
