"""Limits are checked before work is done: scenario counts from the axes, 413 for bytes, 422 for counts."""

from __future__ import annotations

import copy
import socket

import httpx
from apitest import LiveServer, assert_problem, serve

import api.routes.studies
from api.examples import CHAT_70B
from api.main import create_app

PARAMS = ["slo.tpot_ms", "slo.ttft_ms", "rate_rps", "input_tokens", "output_tokens", "power_budget_kw"]


def million_scenarios() -> dict:
    """Six 10-value axes: 10^6 scenarios in about 1 KB."""
    axes = [{"name": f"a{i}", "param": p, "values": [10 * (j + 1) for j in range(10)]} for i, p in enumerate(PARAMS)]
    return {"name": "bomb", "base": copy.deepcopy(CHAT_70B), "axes": axes}


def test_a_million_scenario_study_is_refused_before_one_is_built(make_settings, tmp_path, monkeypatch):
    def must_not_expand(*_args, **_kwargs):
        raise AssertionError("expand() ran on a study over the scenario limit")

    monkeypatch.setattr(api.routes.studies, "expand", must_not_expand)
    with serve(make_settings(study_dir=tmp_path / "studies")) as http:
        response = http.post("/v1/studies", json=million_scenarios())
        body = assert_problem(response, 422, fields=["axes"], kind="validation-error")
        assert body["errors"][0]["type"] == "too_many"
        assert "1000000 scenarios; at most 500" in body["detail"]
        assert not (tmp_path / "studies").exists()


def raw_request(port: int, head: bytes, body: bytes, wait_s: float = 30) -> bytes:
    """Send ``head`` and a partial ``body``, then stall; what the server answers until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as sock:
        sock.sendall(head + body)
        received = b""
        while chunk := sock.recv(65536):  # returns b"" once the server closed the connection
            received += chunk
        return received


def test_a_stalled_body_is_cut_off_with_408(make_settings):
    server = LiveServer(create_app(make_settings(body_timeout_s=0.5)))
    port = int(server.start().rsplit(":", 1)[1])
    try:
        head = (b"POST /v1/plans HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: 1000\r\n\r\n")
        answer = raw_request(port, head, b'{"model": "llama')  # 16 of 1000 bytes, then nothing
        status, _, rest = answer.partition(b"\r\n")
        assert status == b"HTTP/1.1 408 Request Timeout", answer
        assert b"connection: close" in rest.lower() and b"16 bytes came" in rest
        # chunked, trickling: the deadline is for the whole body, not for each chunk
        chunked = head.replace(b"Content-Length: 1000", b"Transfer-Encoding: chunked")
        assert raw_request(port, chunked, b"5\r\n{\"mod\r\n").startswith(b"HTTP/1.1 408")
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:  # and the server goes on
            assert http.get("/healthz").status_code == 200
    finally:
        server.stop()
