"""Errors as RFC 9457 problem details (``application/problem+json``), never a traceback.

Every error the service answers goes through ``problem_response``: validation errors carry
``errors[]`` naming each field (dotted path), where it was (body, query, path, header) and what was
wrong; anything unexpected is logged with its traceback and answered as a bare 500 problem.
"""

from __future__ import annotations

import logging
import uuid
from http import HTTPStatus
from typing import Any, Iterable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, field_validator
from sqlalchemy.exc import OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

PROBLEM_MEDIA_TYPE = "application/problem+json"
log = logging.getLogger("siliconmix.api")

# problem types: URNs (RFC 9457 §3.1.1 allows any URI; these name the kind of problem, stably)
VALIDATION = "urn:siliconmix:problem:validation-error"
NOT_FOUND = "urn:siliconmix:problem:not-found"
TOO_LARGE = "urn:siliconmix:problem:too-large"
TIMEOUT = "urn:siliconmix:problem:timeout"
UNAUTHORIZED = "urn:siliconmix:problem:unauthorized"
UNSUPPORTED_MEDIA = "urn:siliconmix:problem:unsupported-media-type"
BUSY = "urn:siliconmix:problem:busy"
UNAVAILABLE = "urn:siliconmix:problem:unavailable"
INTERNAL = "urn:siliconmix:problem:internal-error"
SOLVER_FAILED = "urn:siliconmix:problem:solver-failed"


#: most characters of one error message (pydantic's value errors can quote a whole input list)
MAX_MESSAGE_CHARS = 200
#: most field errors the one-line ``detail`` names (``errors[]`` lists them all), and its most characters
MAX_DETAIL_ERRORS = 5
MAX_DETAIL_CHARS = 1_500


def clipped(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


class FieldError(BaseModel):
    """One wrong input: where it was, its dotted path, what was wrong."""

    location: str = Field(description="body, query, path or header", examples=["body"])
    field: str = Field(description="dotted path inside that location ('' for the whole body)",
                       examples=["classes.0.slo.ttft_ms"])
    message: str = Field(examples=["Input should be greater than 0"])
    type: str = Field(description="machine-readable error code", examples=["greater_than"])

    @field_validator("field", "message")
    @classmethod
    def _clip(cls, text: str) -> str:
        return clipped(text)


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str = Field("about:blank", description="URI naming the kind of problem",
                      examples=[VALIDATION])
    title: str = Field(description="short summary of the kind of problem", examples=["Invalid input"])
    status: int = Field(ge=400, le=599, description="the HTTP status code", examples=[422])
    detail: str | None = Field(None, description="what went wrong with this request",
                               examples=["classes.0.slo.ttft_ms: Input should be greater than 0"])
    instance: str | None = Field(None, description="the request path", examples=["/v1/plans"])
    errors: list[FieldError] | None = Field(None, description="every invalid field (validation errors only)")

    @field_validator("detail")
    @classmethod
    def _clip(cls, text: str | None) -> str | None:
        return None if text is None else clipped(text, MAX_DETAIL_CHARS)


class ProblemError(Exception):
    """Raise anywhere in a request to answer with a problem."""

    def __init__(self, status: int, detail: str, *, type: str = "about:blank", title: str | None = None,
                 errors: list[FieldError] | None = None, headers: dict[str, str] | None = None):
        super().__init__(detail)
        self.status, self.detail, self.type = status, detail, type
        self.title = title or HTTPStatus(status).phrase
        self.errors, self.headers = errors, headers


def problem_response(problem: Problem, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(problem.model_dump(exclude_none=True), status_code=problem.status,
                        media_type=PROBLEM_MEDIA_TYPE, headers=headers)


def field_errors(errors: Iterable[dict[str, Any]]) -> list[FieldError]:
    """Pydantic/FastAPI error dicts as FieldErrors (``loc`` = (location, *path)).

    A ``too_short`` on a list whose items already failed (pydantic counts only the valid ones) is dropped:
    the items' own errors say what is wrong.
    """
    errors = list(errors)
    locs = [tuple(e.get("loc", ())) for e in errors]
    out = []
    for err in errors:
        loc = tuple(err.get("loc", ()))
        if err.get("type") == "too_short" and any(len(o) > len(loc) and o[:len(loc)] == loc for o in locs):
            continue
        location, path = (str(loc[0]), loc[1:]) if loc else ("body", ())
        message = str(err.get("msg", "invalid"))
        if err.get("type") == "json_invalid":  # FastAPI's: loc (body, character); pydantic's: loc ()
            if path and isinstance(path[0], int):
                message = f"{message}: {err.get('ctx', {}).get('error', 'invalid JSON')} at character {path[0]}"
            path = ()
        out.append(FieldError(location=location, field=".".join(str(p) for p in path), message=message,
                              type=str(err.get("type", "value_error"))))
    return out


def summary(errors: list[FieldError]) -> str:
    """``field: message; ...`` of the first MAX_DETAIL_ERRORS errors, and how many more there are."""
    def where(e: FieldError) -> str:
        return e.field or e.location

    text = "; ".join(f"{where(e)}: {e.message}" for e in errors[:MAX_DETAIL_ERRORS])
    more = len(errors) - MAX_DETAIL_ERRORS
    return f"{text}; and {more} more (see errors)" if more > 0 else text


def install(app: FastAPI) -> None:
    """Register the handlers that turn every error into a problem."""

    @app.exception_handler(ProblemError)
    async def _problem(request: Request, exc: ProblemError) -> JSONResponse:
        return problem_response(Problem(type=exc.type, title=exc.title, status=exc.status, detail=exc.detail,
                                        instance=request.url.path, errors=exc.errors), exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = field_errors(exc.errors())
        return problem_response(Problem(type=VALIDATION, title="Invalid input", status=422, detail=summary(errors),
                                        instance=request.url.path, errors=errors))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400 and exc.__cause__ is not None:  # FastAPI could not decode the body (not UTF-8)
            error = FieldError(location="body", field="", type="json_invalid",
                               message=f"the body is not JSON text ({type(exc.__cause__).__name__})")
            return problem_response(Problem(type=VALIDATION, title="Invalid input", status=422, detail=error.message,
                                            instance=request.url.path, errors=[error]))
        title = HTTPStatus(exc.status_code).phrase
        kind = NOT_FOUND if exc.status_code == 404 else "about:blank"
        detail = exc.detail if isinstance(exc.detail, str) and exc.detail != title else None
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 404 and detail is None:
            detail = f"no route {request.method} {request.url.path}"
        if exc.status_code == 405:  # Starlette names only the first route's methods; name every route's
            headers["Allow"] = ", ".join(allowed_methods(request))
            detail = f"{request.method} is not allowed here; allowed: {headers['Allow']}"
        return problem_response(Problem(type=kind, title=title, status=exc.status_code, detail=detail,
                                        instance=request.url.path), headers or None)

    @app.exception_handler(OperationalError)
    async def _database(request: Request, exc: OperationalError) -> JSONResponse:
        log.warning("database error on %s %s: %s", request.method, request.url.path, str(exc.orig).strip()[:200])
        return problem_response(Problem(type=UNAVAILABLE, title="Service Unavailable", status=503,
                                        detail="the database did not answer; see /readyz", instance=request.url.path),
                                {"Retry-After": "5"})

    @app.exception_handler(Exception)  # backstop: CatchAll below answers first
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        return unexpected(request.method, request.url.path, exc)


def allowed_methods(request: Request) -> list[str]:
    """The methods the OpenAPI document lists for every path template matching the request's path."""
    path = request.url.path.strip("/").split("/")

    def matches(template: str) -> bool:
        parts = template.strip("/").split("/")
        return len(parts) == len(path) and all(t == p or (t.startswith("{") and p) for t, p in zip(parts, path))

    paths = request.app.openapi().get("paths", {})
    return sorted({method.upper() for template, ops in paths.items() if matches(template) for method in ops})


def unexpected(method: str, path: str, exc: BaseException) -> JSONResponse:
    """Log the traceback under a reference; answer a 500 problem that names only the reference."""
    reference = uuid.uuid4().hex[:12]
    log.error("unhandled error on %s %s (reference %s)", method, path, reference,
              exc_info=(type(exc), exc, exc.__traceback__))
    return problem_response(Problem(type=INTERNAL, title="Internal Server Error", status=500, instance=path,
                                    detail=f"the server could not answer; the error is logged as {reference}"))


class CatchAll:
    """ASGI middleware: an exception from the app becomes a 500 problem and goes no further.

    Starlette's own handler for ``Exception`` re-raises after answering, which makes uvicorn log the
    traceback again and drop the keep-alive connection; here the client keeps its connection.
    """

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as exc:
            if started:  # too late for another answer: let the server close the connection
                raise
            await unexpected(scope.get("method", "?"), scope.get("path", "?"), exc)(scope, receive, send)


def problem_docs(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` entries documenting problem+json bodies for these statuses."""
    text = {
        401: "No API key, or a key that is not one of SILICONMIX_API_KEYS",
        404: "No resource with that id",
        413: "Body larger than SILICONMIX_MAX_BODY_BYTES (a size limit; counts over a limit are 422)",
        415: "Body not sent as `Content-Type: application/json` (plans and studies also take `application/yaml`)",
        422: "Invalid input, or a count over a limit (classes, devices, scenarios): every wrong field is in `errors`",
        500: "The solver failed, or found the placement model unbounded (a bug in siliconmix): `detail` says which",
        503: "Not ready (database or catalog) or too many plans queued; retry later",
    }
    return {
        status: {
            "description": text.get(status, HTTPStatus(status).phrase),
            "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for status in statuses
    }
