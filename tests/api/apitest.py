"""What the REST tests share: live servers (in a thread or a process) and the problem+json assertion.

``serve(settings)`` runs uvicorn in a thread on a free loopback port (port 0: the OS picks, so no race)
and yields an httpx client; ``ServiceProcess`` runs ``python -m planner serve`` as its own process.
"""

from __future__ import annotations

import copy
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import httpx
import uvicorn
from fastapi import FastAPI

from api.examples import CHAT_70B
from api.main import create_app
from api.settings import Settings

REPO = Path(__file__).resolve().parents[2]

PROBLEM_KEYS = {"type", "title", "status", "detail", "instance", "errors"}


def assert_problem(response: httpx.Response, status: int, *, fields: list[str] | None = None,
                   kind: str | None = None) -> dict:
    """``response`` is an RFC 9457 problem with ``status``; returns its body.

    ``fields``: the dotted paths ``errors[]`` must name (in any order); ``kind``: the ``type`` URI's tail.
    """
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json", response.headers
    body = response.json()
    assert set(body) <= PROBLEM_KEYS and {"type", "title", "status"} <= set(body), body
    assert body["status"] == status and body["title"]
    assert "Traceback" not in response.text and 'File "' not in response.text
    if kind is not None:
        assert body["type"].endswith(kind), body["type"]
    if fields is not None:
        assert sorted(e["field"] for e in body["errors"]) == sorted(fields), body["errors"]
        assert all(e["message"] for e in body["errors"])
    return body


class LiveServer:
    """uvicorn serving ``app`` in a thread on 127.0.0.1, port chosen by the OS."""

    def __init__(self, app, access_log: bool = False):
        self.app = app
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="info" if access_log else "warning",
                                                    access_log=access_log, lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self, timeout_s: float = 20.0) -> str:
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), "uvicorn did not stop"


@contextmanager
def serve_app(settings: Settings, access_log: bool = False) -> Iterator[tuple[httpx.Client, FastAPI]]:
    """A client for a fresh app with ``settings`` behind a real uvicorn server, and the app (started)."""
    app = create_app(settings)
    server = LiveServer(app, access_log)
    base_url = server.start()
    try:
        with httpx.Client(base_url=base_url, timeout=60) as client:
            yield client, app
    finally:
        server.stop()


@contextmanager
def serve(settings: Settings, access_log: bool = False) -> Iterator[httpx.Client]:
    """A client for a fresh app with ``settings`` behind a real uvicorn server."""
    with serve_app(settings, access_log) as (client, _app):
        yield client


def small_workload() -> dict:
    """chat-70b on H100s only: max_goodput, so a first stage and a tie-break; each solve well under a second."""
    body = copy.deepcopy(CHAT_70B)
    body["constraints"]["devices"] = ["h100-sxm"]
    return body


def job_final(record: dict) -> bool:
    """A plan job's or a simulation's record has reached an end state."""
    return record["state"] in ("done", "cancelled", "failed")


def wait_for(http, url: str, until, polls: int = 1200) -> dict:
    """The record at ``url`` once ``until(record)`` holds (polled every 50 ms, at most ``polls`` times)."""
    for _ in range(polls):
        record = http.get(url).json()
        if until(record):
            return record
        time.sleep(0.05)
    raise AssertionError(f"{url} never got there: {record}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServiceProcess:
    """``python -m planner serve`` in its own process; ``stop()`` sends SIGINT like Ctrl-C."""

    def __init__(self, db_url: str, log_path: Path, env: dict[str, str] | None = None):
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self._log = open(log_path, "ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "planner", "serve", "--port", str(self.port), "--db", db_url, "--no-access-log"],
            cwd=REPO, stdout=self._log, stderr=subprocess.STDOUT,
            env={**os.environ, "SILICONMIX_PLAN_BASELINE": "false", **(env or {})},
        )

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}: {self.log()}")
            try:
                if httpx.get(f"{self.base_url}/readyz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"server not ready in {timeout_s} s: {self.log()}")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")
