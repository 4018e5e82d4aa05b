"""Every error path answers RFC 9457 problem+json: 404, 405, 413, 415, 422, 500 (no traceback), 503."""

from __future__ import annotations

import copy
import json
import logging
import threading

import httpx

import api.runner
from api.examples import CHAT_70B, UNREACHABLE_SLO
from apitest import assert_problem, serve


def workload(**changes) -> dict:
    body = copy.deepcopy(CHAT_70B)
    body.update(changes)
    return body


# --------------------------------------------------------------------------------------------- 404
def test_unknown_plan_and_graph_and_route_are_404(client):
    body = assert_problem(client.get("/v1/plans/0000-no-such-plan"), 404, kind="not-found")
    assert "0000-no-such-plan" in body["detail"] and body["instance"] == "/v1/plans/0000-no-such-plan"
    assert_problem(client.get("/v1/plans/0000-no-such-plan/graph"), 404, kind="not-found")
    assert_problem(client.get("/v1/nothing-here"), 404)
    assert_problem(client.get("/v1/catalog/hardware/no-such-gpu"), 404, kind="not-found")
    assert_problem(client.get("/v1/catalog/models/no-such-model"), 404, kind="not-found")


def test_wrong_method_is_405_problem(client):
    response = client.delete("/v1/plans")
    assert_problem(response, 405)
    assert response.headers["allow"] == "GET, POST"  # every route of the path, not only the first


# --------------------------------------------------------------------------------------------- 413
def test_body_over_the_byte_limit_is_413_before_it_is_read(make_settings):
    with serve(make_settings(max_body_bytes=2_000)) as http:
        small = http.post("/v1/estimate", json={"model": "llama-3.3-70b", "device": "h100-sxm", "tp": 8})
        assert small.status_code == 200
        padded = workload(padding="x" * 3_000)
        body = assert_problem(http.post("/v1/plans", json=padded), 413, kind="too-large")
        assert "2000" in body["detail"]


def test_chunked_body_over_the_limit_is_413(make_settings):
    def chunks():  # no Content-Length: the middleware must count the streamed bytes
        yield b'{"model": "llama-3.3-70b", "pad": "'
        for _ in range(10):
            yield b"y" * 500
        yield b'"}'

    with serve(make_settings(max_body_bytes=2_000)) as http:
        response = http.post("/v1/estimate", content=chunks(), headers={"content-type": "application/json"})
        assert "content-length" not in response.request.headers
        assert_problem(response, 413, kind="too-large")


def test_workload_over_the_class_limit_is_422_as_over_the_schema_limit(make_settings):
    """A count over a limit is a 422 (invalid value), whichever limit it passes: 413 is for bytes only."""
    def classes(n: int) -> list[dict]:
        return [dict(CHAT_70B["classes"][0], name=f"c{i}") for i in range(n)]

    with serve(make_settings(max_classes=3)) as http:
        over_service = assert_problem(http.post("/v1/plans", json=workload(classes=classes(4))), 422, fields=["classes"])
        over_schema = assert_problem(http.post("/v1/plans", json=workload(classes=classes(201))), 422, fields=["classes"])
    assert over_service["errors"][0]["type"] == over_schema["errors"][0]["type"] == "too_long"
    assert "SILICONMIX_MAX_CLASSES" in over_service["detail"]


def test_workload_over_the_device_limit_is_422(make_settings):
    with serve(make_settings(max_devices=3)) as http:
        four = workload(constraints={**CHAT_70B["constraints"], "devices": ["h100-sxm", "h200", "b200", "mi300x"]})
        assert_problem(http.post("/v1/plans", json=four), 422, fields=["constraints.devices"])
        inventory = {"h100-sxm": 8, "h200": 8, "b200": 8, "mi300x": 8}
        stocked = workload(constraints={"power_budget_kw": 100, "inventory": inventory})
        assert_problem(http.post("/v1/plans", json=stocked), 422, fields=["constraints.inventory"])


# --------------------------------------------------------------------------------------------- 422
def test_malformed_json_is_422(client):
    response = client.post("/v1/plans", content=b'{"model": ', headers={"content-type": "application/json"})
    body = assert_problem(response, 422, kind="validation-error")
    assert body["errors"][0]["type"] == "json_invalid"
    not_utf8 = client.post("/v1/estimate", content=b'{"model": "\xff\xfe"}', headers={"content-type": "application/json"})
    assert assert_problem(not_utf8, 422)["errors"][0]["type"] == "json_invalid"


def test_wrong_content_types_are_415(client):
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "application/xml", None):
        headers = {"content-type": content_type} if content_type else {}
        for path, body in (("/v1/plans", CHAT_70B), ("/v1/estimate", {"model": "llama-3.3-70b", "device": "h100-sxm"}),
                           ("/v1/studies", {"name": "x"})):
            response = client.post(path, content=json.dumps(body), headers=headers)
            problem = assert_problem(response, 415, kind="unsupported-media-type")
            assert "application/json" in problem["detail"], (path, content_type)
    ok = client.post("/v1/estimate", content=json.dumps({"model": "llama-3.3-70b", "device": "h100-sxm", "tp": 8}),
                     headers={"content-type": "application/json; charset=utf-8"})
    assert ok.status_code == 200, ok.text


def test_field_errors_never_echo_the_whole_input(client):
    long_name = "c" * 64
    twins = workload(classes=[dict(CHAT_70B["classes"][0], name=long_name) for _ in range(40)])
    body = assert_problem(client.post("/v1/plans", json=twins), 422)
    assert "duplicate class names" in body["detail"]
    assert all(len(e["message"]) <= 250 for e in body["errors"]) and len(body["detail"]) <= 1_600
    assert body["detail"].count(long_name) <= 3  # not 40 times

    bad = [dict(CHAT_70B["classes"][0], name=f"c{i}", rate_rps=-1) for i in range(20)]
    body = assert_problem(client.post("/v1/plans", json=workload(classes=bad)), 422)
    assert [e["field"] for e in body["errors"]] == [f"classes.{i}.rate_rps" for i in range(20)]  # no "at least 1 item"
    assert "at least 1 item" not in json.dumps(body) and "rate_rps': -1" not in json.dumps(body)
    assert body["detail"].endswith("and 15 more (see errors)")


def test_every_invalid_field_is_listed(client):
    bad = workload(dtype="fp3", classes=[{**CHAT_70B["classes"][0], "slo": {"ttft_ms": -1, "tpot_ms": 50}}])
    del bad["constraints"]
    body = assert_problem(client.post("/v1/plans", json=bad), 422,
                          fields=["dtype", "classes.0.slo.ttft_ms", "constraints"])
    assert all(e["location"] == "body" for e in body["errors"])
    assert "classes.0.slo.ttft_ms" in body["detail"]


def test_an_empty_list_is_still_named(client):
    assert_problem(client.post("/v1/plans", json=workload(classes=[])), 422, fields=["classes"])


def test_unknown_field_is_422(client):
    assert_problem(client.post("/v1/plans", json=workload(colour="blue")), 422, fields=["colour"])


def test_types_are_checked_strictly_as_the_schema_says(client):
    loose = workload(classes=[{**CHAT_70B["classes"][0], "prefix_cache_hit": False, "input_tokens": "1500"}])
    assert_problem(client.post("/v1/plans", json=loose), 422,
                   fields=["classes.0.prefix_cache_hit", "classes.0.input_tokens"])
    estimate = {"model": "llama-3.3-70b", "device": "h100-sxm", "tp": "8", "paged_kv": "yes"}
    assert_problem(client.post("/v1/estimate", json=estimate), 422, fields=["tp", "paged_kv"])


def test_unknown_ids_name_their_field(client):
    bad = workload(model="llama-9", constraints={**CHAT_70B["constraints"], "devices": ["h100-sxm", "tpu-v99"],
                                                 "inventory": {"gpu-x": 4}})
    body = assert_problem(client.post("/v1/plans", json=bad), 422,
                          fields=["model", "constraints.devices.1", "constraints.inventory.gpu-x"])
    assert "llama-3.3-70b" in body["errors"][0]["message"]  # the known ids are listed


def test_bad_query_parameters_are_422(client):
    assert_problem(client.post("/v1/plans", params={"solver": "gurobi"}, json=CHAT_70B), 422, fields=["solver"])
    assert_problem(client.post("/v1/plans", params={"time_limit_s": 0}, json=CHAT_70B), 422, fields=["time_limit_s"])
    too_long = assert_problem(client.post("/v1/plans", params={"time_limit_s": 10_000}, json=CHAT_70B), 422,
                              fields=["time_limit_s"])
    assert too_long["errors"][0]["location"] == "query"
    assert_problem(client.post("/v1/plans", params={"solver": "pulp", "engine": "scip"}, json=CHAT_70B), 422,
                   fields=["engine"])
    assert_problem(client.get("/v1/plans", params={"limit": 0}), 422, fields=["limit"])
    assert_problem(client.get("/v1/plans", params={"status": "great"}), 422, fields=["status"])


def test_a_query_parameter_given_twice_is_422(client):
    body = assert_problem(client.get("/v1/catalog/models?family=llama&family=qwen3"), 422, fields=["family"])
    assert body["errors"][0]["location"] == "query" and "2 times" in body["errors"][0]["message"]
    assert client.get("/v1/catalog/models?family=llama").status_code == 200


def test_estimate_input_errors_are_422(client):
    base = {"model": "llama-3.3-70b", "device": "h100-sxm", "tp": 8}
    assert_problem(client.post("/v1/estimate", json={**base, "device": "h1000"}), 422, fields=["device"])
    assert_problem(client.post("/v1/estimate", json={**base, "model": "gpt-9"}), 422, fields=["model"])
    assert_problem(client.post("/v1/estimate", json={**base, "tp": 0}), 422, fields=["tp"])
    body = assert_problem(client.post("/v1/estimate", json={**base, "tp": 1}), 422, kind="validation-error")
    assert body["errors"][0]["type"] == "does_not_fit" and "141.1 GB" in body["detail"]


# --------------------------------------------------------------------------------------------- 201, not an error
def test_infeasible_workload_is_an_answer_not_an_error(client):
    response = client.post("/v1/plans", json=UNREACHABLE_SLO)
    assert response.status_code == 201, response.text
    record = response.json()
    assert record["status"] == "infeasible" == record["plan"]["status"]
    assert record["plan"]["diagnosis"]["reason"] == "slo_unreachable"
    assert record["plan"]["diagnosis"]["slo_shortfalls"][0]["class"] == "instant"
    assert client.get(response.headers["location"]).content == response.content


# --------------------------------------------------------------------------------------------- 500
def test_a_planner_crash_is_a_500_problem_without_traceback(make_settings, monkeypatch, caplog):
    def crash(job, token):
        raise RuntimeError("secret internal state /etc/passwd")

    monkeypatch.setattr(api.runner, "run_plan", crash)
    with caplog.at_level(logging.ERROR, logger="siliconmix.api"), serve(make_settings()) as http:
        response = http.post("/v1/plans", json=CHAT_70B)
        body = assert_problem(response, 500, kind="internal-error")
        assert "secret" not in response.text
        assert http.get("/healthz").status_code == 200  # the service goes on
    reference = body["detail"].rsplit(" ", 1)[-1]
    logged = [r for r in caplog.records if reference in r.getMessage()]
    assert logged and logged[0].exc_info is not None  # the traceback is in the log, not the answer


# --------------------------------------------------------------------------------------------- 503
def test_unreachable_database_is_503_and_not_ready(make_settings, tmp_path):
    missing = tmp_path / "no" / "such" / "dir" / "x.db"
    with serve(make_settings(database_url=f"sqlite:///{missing}")) as http:
        assert http.get("/healthz").status_code == 200
        ready = http.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["checks"]["database"]["ok"] is False and ready.json()["checks"]["catalog"]["ok"] is True
        assert_problem(http.get("/v1/plans"), 503, kind="unavailable")
        assert http.get("/v1/catalog/hardware").status_code == 200  # what needs no database still answers
        missing.parent.mkdir(parents=True)  # the database comes back: the service migrates and is ready
        assert http.get("/readyz").status_code == 200
        assert http.get("/v1/plans").json()["total"] == 0


def test_broken_catalog_is_503_and_not_ready(make_settings, tmp_path):
    (tmp_path / "catalog" / "hardware").mkdir(parents=True)
    with serve(make_settings(catalog_dir=tmp_path / "catalog")) as http:
        assert http.get("/healthz").status_code == 200
        ready = http.get("/readyz")
        assert ready.status_code == 503 and ready.json()["checks"]["catalog"]["ok"] is False
        assert "no hardware or no model files" in ready.json()["checks"]["catalog"]["detail"]
        assert_problem(http.get("/v1/catalog/hardware"), 503, kind="unavailable")
        assert_problem(http.post("/v1/plans", json=CHAT_70B), 503, kind="unavailable")


def test_a_full_planner_queue_answers_503_busy(make_settings, monkeypatch):
    release = threading.Event()
    started = threading.Event()
    real = api.runner.run_plan

    def slow(job, token):
        started.set()
        release.wait(30)
        return real(job, token)

    monkeypatch.setattr(api.runner, "run_plan", slow)
    with serve(make_settings(plan_workers=1, plan_queue_limit=1)) as http:
        first: list[httpx.Response] = []
        worker = threading.Thread(target=lambda: first.append(http.post("/v1/plans", json=UNREACHABLE_SLO)))
        worker.start()
        try:
            assert started.wait(30)
            second = http.post("/v1/plans", json=UNREACHABLE_SLO)
            body = assert_problem(second, 503, kind="busy")
            assert second.headers["retry-after"] and "SILICONMIX_PLAN_QUEUE_LIMIT=1" in body["detail"]
            assert http.get("/healthz").status_code == 200
        finally:
            release.set()
            worker.join()
        assert first[0].status_code == 201
