"""/readyz says what is wrong without the driver's words (no host, port or path) and notices failing writes."""

from __future__ import annotations

import httpx
from apitest import LiveServer
from sqlalchemy import event

from api.main import create_app


def test_an_unreachable_database_is_named_without_driver_details(make_settings, tmp_path, caplog):
    missing = tmp_path / "no" / "such" / "dir" / "secret-name.db"
    server = LiveServer(create_app(make_settings(database_url=f"sqlite:///{missing}")))
    url = server.start()
    try:
        ready = httpx.get(f"{url}/readyz")
    finally:
        server.stop()
    assert ready.status_code == 503
    detail = ready.json()["checks"]["database"]["detail"]
    assert detail == "sqlite not reachable (the server log says why)"
    assert "secret-name" not in ready.text and "OperationalError" not in ready.text
    assert any("unable to open database file" in r.getMessage() for r in caplog.records)  # said in the log


def test_failing_writes_make_the_service_not_ready(make_settings, caplog):
    app = create_app(make_settings())
    server = LiveServer(app)
    url = server.start()
    try:
        assert httpx.get(f"{url}/readyz").status_code == 200
        engine = app.state.services.store.engine

        def read_only(dbapi_connection, _record):  # as a full disk or a read-only volume would leave it
            dbapi_connection.execute("PRAGMA query_only=ON")

        event.listen(engine, "connect", read_only)
        engine.dispose()  # new connections get the pragma
        ready = httpx.get(f"{url}/readyz")
        assert ready.status_code == 503, ready.text
        assert ready.json()["checks"]["database"] == {"ok": False,
                                                      "detail": "sqlite reachable, but writes fail (the server log says why)"}
        assert httpx.get(f"{url}/v1/plans").status_code == 200  # reads still answer
        event.remove(engine, "connect", read_only)
        engine.dispose()
        assert httpx.get(f"{url}/readyz").status_code == 200  # writable again: ready again
        assert httpx.get(f"{url}/v1/plans").json()["total"] == 0  # the probe's row was rolled back
    finally:
        server.stop()
    assert any("writes fail" in r.getMessage() and "readonly" in r.getMessage() for r in caplog.records)
