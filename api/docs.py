"""``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) served without a CDN.

The JavaScript and CSS come from the ``fastapi-offline`` package, which ships the Swagger UI and ReDoc
bundles as package data: the service's own copy of them, mounted under ``STATIC_URL``, so the pages
work on a machine with no internet.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

STATIC_URL = "/docs-assets"
ASSETS = {"swagger_js": "swagger-ui-bundle.js", "swagger_css": "swagger-ui.css",
          "redoc_js": "redoc.standalone.js", "favicon": "favicon.png"}


def assets_dir() -> Path:
    """Where ``fastapi-offline`` installed the Swagger UI and ReDoc bundles."""
    return Path(str(files("fastapi_offline") / "static"))


def install(app: FastAPI, docs_url: str = "/docs", redoc_url: str = "/redoc") -> None:
    """Mount the bundled assets and add the two documentation pages (left out of the OpenAPI schema)."""
    app.mount(STATIC_URL, StaticFiles(directory=assets_dir()), name="docs-assets")
    redirect_url = app.swagger_ui_oauth2_redirect_url or f"{docs_url}/oauth2-redirect"

    def asset(request: Request, name: str) -> str:
        return f"{request.scope.get('root_path', '')}{STATIC_URL}/{ASSETS[name]}"

    @app.get(docs_url, include_in_schema=False)
    def swagger_ui(request: Request) -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=f"{request.scope.get('root_path', '')}{app.openapi_url}", title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=redirect_url, swagger_js_url=asset(request, "swagger_js"),
            swagger_css_url=asset(request, "swagger_css"), swagger_favicon_url=asset(request, "favicon"),
            swagger_ui_parameters=app.swagger_ui_parameters,
        )

    @app.get(redirect_url, include_in_schema=False)
    def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get(redoc_url, include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        return get_redoc_html(
            openapi_url=f"{request.scope.get('root_path', '')}{app.openapi_url}", title=f"{app.title} - ReDoc",
            redoc_js_url=asset(request, "redoc_js"), redoc_favicon_url=asset(request, "favicon"),
            with_google_fonts=False,
        )
