"""/docs and /redoc work offline: their pages load only the service's own assets, which it serves.

The rendering check loads /docs in headless Chromium with every host but the loopback one unresolvable,
so a page that still reached for a CDN would render no operation. It is skipped where no Chromium is
installed. The other checks use the ``client`` fixture (the app behind uvicorn, as every REST test here).
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from apitest import LiveServer

from api.docs import ASSETS, STATIC_URL
from api.main import create_app

ASSET_TYPES = {"swagger_js": "text/javascript", "swagger_css": "text/css", "redoc_js": "text/javascript",
               "favicon": "image/png"}
CHROMIUM = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome") if shutil.which(name)),
                None)


def referenced_urls(html: str) -> list[str]:
    """Every src/href in the page and the OpenAPI url it loads (Swagger UI's ``url:``, ReDoc's ``spec-url``)."""
    return re.findall(r'(?:src|href|spec-url)="([^"]+)"', html) + re.findall(r"url: '([^']+)'", html)


@pytest.mark.parametrize(("page", "expected_assets"), [
    ("/docs", ("swagger_js", "swagger_css", "favicon")),
    ("/redoc", ("redoc_js", "favicon")),
])
def test_doc_pages_reference_only_local_assets(client, page, expected_assets):
    response = client.get(page)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    urls = referenced_urls(response.text)
    assert urls and all(url.startswith("/") and not url.startswith("//") for url in urls), urls
    assert "/openapi.json" in urls
    for name in expected_assets:
        assert f"{STATIC_URL}/{ASSETS[name]}" in urls
    assert "http://" not in response.text and "https://" not in response.text  # no CDN, no Google fonts


@pytest.mark.parametrize("name", sorted(ASSETS))
def test_assets_are_served_with_their_content_type(client, name):
    response = client.get(f"{STATIC_URL}/{ASSETS[name]}")
    assert response.status_code == 200
    assert response.headers["content-type"].split(";")[0] == ASSET_TYPES[name]
    assert len(response.content) > 1000


def test_docs_pages_are_not_operations(client):
    paths = client.get("/openapi.json").json()["paths"]
    assert not any(p.startswith(("/docs", "/redoc", STATIC_URL)) for p in paths)


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary installed")
def test_swagger_ui_renders_the_operations_in_chromium(make_settings, tmp_path):
    server = LiveServer(create_app(make_settings()))
    base_url = server.start()
    try:
        dom = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
             "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",  # offline: nothing but the service
             "--virtual-time-budget=20000", "--dump-dom", f"{base_url}/docs"],
            capture_output=True, text=True, timeout=180, check=True,
        ).stdout
    finally:
        server.stop()
    rendered = set(re.findall(r'class="opblock-summary-path" data-path="([^"]+)"', dom))
    assert {"/v1/plans", "/v1/estimate", "/v1/catalog/hardware", "/v1/studies/{study_id}", "/healthz"} <= rendered
    assert 'id="operations-plans-create_plan"' in dom
