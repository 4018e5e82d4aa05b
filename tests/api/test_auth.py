"""API keys: off by default (and said so at start-up); when set, every /v1 route needs one, probes never."""

from __future__ import annotations

import logging

import pytest
from apitest import assert_problem, serve

from api.deps import key_matches
from api.settings import Settings

V1_GETS = ["/v1/plans", "/v1/catalog/hardware", "/v1/catalog/models", "/v1/catalog/hardware/h100-sxm",
           "/v1/catalog/models/llama-3.3-70b"]
ESTIMATE = {"model": "llama-3.3-70b", "device": "h100-sxm", "tp": 8}


def test_without_keys_the_service_is_open_and_says_so(make_settings, caplog):
    with caplog.at_level(logging.INFO, logger="siliconmix.api"), serve(make_settings()) as http:
        for path in V1_GETS:
            assert http.get(path).status_code == 200, path
        assert http.post("/v1/estimate", json=ESTIMATE).status_code == 200
        assert "securitySchemes" not in http.get("/openapi.json").json().get("components", {})
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("runs OPEN" in m for m in warnings), warnings


def test_with_keys_every_v1_route_needs_one(make_settings, caplog):
    with caplog.at_level(logging.INFO, logger="siliconmix.api"), \
            serve(make_settings(api_keys=["k-alpha-123", "k-beta-456"])) as http:
        for path in V1_GETS:
            response = http.get(path)
            assert_problem(response, 401, kind="unauthorized")
            assert response.headers["www-authenticate"].startswith("Bearer")
        assert_problem(http.post("/v1/estimate", json=ESTIMATE), 401)
        assert_problem(http.post("/v1/plans", json={}), 401)  # auth before validation
        assert_problem(http.get("/v1/plans", headers={"Authorization": "Bearer k-alpha-12"}), 401)
        assert_problem(http.get("/v1/plans", headers={"X-API-Key": "k-alpha-1234"}), 401)
        assert_problem(http.get("/v1/plans", headers={"Authorization": "Basic k-alpha-123"}), 401)
        assert http.get("/v1/plans", headers={"Authorization": "Bearer k-alpha-123"}).status_code == 200
        assert http.get("/v1/plans", headers={"X-API-Key": "k-beta-456"}).status_code == 200
        both = {"X-API-Key": "k-beta-456", "Authorization": "Bearer not-a-key"}  # one valid key does not cover a bad one
        assert_problem(http.get("/v1/plans", headers=both), 401)
        estimate = http.post("/v1/estimate", json=ESTIMATE, headers={"X-API-Key": "k-alpha-123"})
        assert estimate.status_code == 200
        for probe in ("/healthz", "/readyz", "/openapi.json", "/docs"):
            assert http.get(probe).status_code == 200, probe
        schemes = http.get("/openapi.json").json()["components"]["securitySchemes"]
        assert {s["type"] for s in schemes.values()} == {"http", "apiKey"}
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "API keys required on /v1 (2 configured)" in messages and "runs OPEN" not in messages
    assert "k-alpha-123" not in messages  # keys never reach the log


def test_keys_from_the_environment(monkeypatch):
    monkeypatch.setenv("SILICONMIX_API_KEYS", " one, two ,,three ")
    assert Settings().api_keys == ["one", "two", "three"]
    monkeypatch.setenv("SILICONMIX_API_KEYS", '["a,b", "c"]')
    assert Settings().api_keys == ["a,b", "c"]
    monkeypatch.setenv("SILICONMIX_API_KEYS", "")
    assert Settings().api_keys == []
    assert "s3cret-key" not in repr(Settings(api_keys=["s3cret-key"]))


@pytest.mark.parametrize(("given", "expected"), [("abc", True), ("xyz", True), ("ab", False), ("abcd", False),
                                                 ("", False), ("ABC", False)])
def test_key_matches(given, expected):
    assert key_matches(given, ["abc", "xyz"]) is expected


def test_cors_only_for_configured_origins(make_settings):
    preflight = {"Origin": "https://ui.example", "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "x-api-key,content-type"}
    with serve(make_settings(cors_origins=["https://ui.example"], api_keys=["k1"])) as http:
        allowed = http.options("/v1/plans", headers=preflight)
        assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == "https://ui.example"
        refused = http.options("/v1/plans", headers={**preflight, "Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in refused.headers
    with serve(make_settings()) as http:  # no origins configured: no CORS headers at all
        response = http.get("/healthz", headers={"Origin": "https://ui.example"})
        assert "access-control-allow-origin" not in response.headers


def test_keys_in_the_query_string_are_refused_and_never_logged(make_settings, caplog):
    access = logging.getLogger("uvicorn.access")
    with serve(make_settings(api_keys=["k-alpha-123"]), access_log=True) as http:
        access.addHandler(caplog.handler)
        try:
            for name in ("api_key", "X-API-Key", "token"):
                response = http.get("/v1/plans", params={name: "k-alpha-123", "limit": 5})
                body = assert_problem(response, 401, kind="unauthorized")
                assert "header" in body["detail"] and "k-alpha-123" not in response.text
            assert http.get("/v1/plans", params={"limit": 5}, headers={"X-API-Key": "k-alpha-123"}).status_code == 200
        finally:
            access.removeHandler(caplog.handler)
    lines = [r.getMessage() for r in caplog.records if r.name == "uvicorn.access"]
    assert len(lines) == 4 and all("/v1/plans?" in line for line in lines), lines
    assert "k-alpha-123" not in " ".join(lines) and "api_key=***" in lines[0]
    assert "limit=5" in lines[0]  # other parameters stay readable


def test_an_open_service_still_keeps_query_keys_out_of_the_log(make_settings, caplog):
    access = logging.getLogger("uvicorn.access")
    with serve(make_settings(), access_log=True) as http:
        access.addHandler(caplog.handler)
        try:
            assert http.get("/v1/plans", params={"apikey": "leaked-456"}).status_code == 200
        finally:
            access.removeHandler(caplog.handler)
    lines = [r.getMessage() for r in caplog.records if r.name == "uvicorn.access"]
    assert lines and "leaked-456" not in " ".join(lines) and "apikey=***" in lines[0]
