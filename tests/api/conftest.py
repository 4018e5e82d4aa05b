"""Fixtures of the REST tests: a temp SQLite file per test, the app under a real uvicorn server."""

from __future__ import annotations

import os
from typing import Iterator

import httpx
import pytest
from apitest import ServiceProcess, serve

from api.settings import Settings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    """No SILICONMIX_* setting of the machine leaks into a test (the Postgres URL for its test excepted)."""
    for name in list(os.environ):
        if name.startswith("SILICONMIX_") and name != "SILICONMIX_TEST_POSTGRES_URL":
            monkeypatch.delenv(name)


@pytest.fixture()
def db_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'siliconmix.db'}"


@pytest.fixture()
def make_settings(db_url):
    """Settings for a test: its own SQLite file, plans without the (slower) homogeneous baseline."""

    def make(**overrides) -> Settings:
        return Settings(**{"database_url": db_url, "plan_baseline": False, **overrides})

    return make


@pytest.fixture()
def client(make_settings) -> Iterator[httpx.Client]:
    """The app with default settings (open, thread pool) on a temp SQLite file."""
    with serve(make_settings()) as http:
        yield http


@pytest.fixture()
def serve_process(tmp_path):
    """Start service processes; every one still running at the end of the test is stopped."""
    started: list[ServiceProcess] = []

    def start(db_url: str, env: dict[str, str] | None = None) -> ServiceProcess:
        service = ServiceProcess(db_url, tmp_path / f"server-{len(started)}.log", env)
        started.append(service)
        service.wait_ready()
        return service

    yield start
    for service in started:
        service.stop()
