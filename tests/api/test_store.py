"""Persistence: migrations (by the service and by hand), SQLite settings, the store, PostgreSQL when given."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from apitest import REPO, serve
from sqlalchemy import inspect, text

from api.examples import CHAT_70B, UNREACHABLE_SLO
from api.store import Base, NewPlan, PlanStore, create_db_engine, migrate, new_id, record_json, timestamp


def plan_text(status: str = "optimal", model: str = "llama-3.3-70b") -> str:
    return ('{"status":"%s","objective":"max_goodput","model":"%s","goodput_scale":1.5,'
            '"solver":{"backend":"ortools","engine":"scip","time_s":0.25,"gap":0.0},'
            '"totals":{"devices":16,"power_kw":12.5},"graph":{"nodes":[],"links":[]}}' % (status, model))


def test_migrations_create_exactly_the_models_schema(db_url):
    engine = create_db_engine(db_url)
    migrate(engine)
    migrate(engine)  # idempotent
    with engine.connect() as connection:
        assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []
        assert connection.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0004"
    assert {ix["name"] for ix in inspect(engine).get_indexes("plans")} == {"ix_plans_created_at"}
    engine.dispose()


def test_alembic_command_line_upgrades_and_downgrades(tmp_path):
    url = f"sqlite:///{tmp_path / 'by-hand.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SILICONMIX_")}

    def alembic(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "alembic", "-c", str(REPO / "api" / "alembic.ini"), *args],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)

    up = alembic("-x", f"url={url}", "upgrade", "head")
    assert up.returncode == 0, up.stderr
    assert "Running upgrade  -> 0001" in up.stderr
    engine = create_db_engine(url)
    assert "plans" in inspect(engine).get_table_names()
    assert alembic("-x", f"url={url}", "downgrade", "base").returncode == 0
    assert "plans" not in inspect(engine).get_table_names()
    engine.dispose()
    env["SILICONMIX_DATABASE_URL"] = url  # the service's own setting works too
    sql = alembic("upgrade", "head", "--sql")
    assert sql.returncode == 0 and "CREATE TABLE plans" in sql.stdout


def test_sqlite_runs_in_wal_mode_with_a_busy_timeout(db_url):
    engine = create_db_engine(db_url)
    with engine.connect() as connection:
        assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert connection.execute(text("PRAGMA busy_timeout")).scalar() == 5000
    engine.dispose()


def test_store_round_trip_order_and_concurrent_writers(db_url):
    store = PlanStore.from_url(db_url)
    store.ensure_schema(auto_migrate=True)
    with ThreadPoolExecutor(8) as pool:  # concurrent writers: WAL + busy timeout, no 'database is locked'
        rows = list(pool.map(lambda i: store.add(NewPlan("{}", plan_text("infeasible" if i % 2 else "optimal"),
                                                         "ortools", 30.0)), range(16)))
    assert len({r.id for r in rows}) == 16
    page, total = store.page(limit=100, offset=0)
    assert total == 16 and [r.created_at for r in page] == sorted((r.created_at for r in page), reverse=True)
    assert store.page(limit=5, offset=0, status="optimal")[1] == 8
    again = store.get(rows[3].id)
    assert record_json(again) == record_json(rows[3])
    assert record_json(again).endswith(',"plan":' + rows[3].plan_json + "}")
    assert store.get("missing") is None
    store.dispose()


def test_ids_are_uuid7_and_timestamps_keep_microseconds():
    first, second = new_id(), new_id()
    assert uuid.UUID(first).version == 7 and first[:8] <= second[:8]
    moment = dt.datetime(2026, 12, 1, 4, 5, 6, 789, tzinfo=dt.UTC)
    assert timestamp(moment) == "2026-12-01T04:05:06.000789Z"
    assert timestamp(moment.replace(tzinfo=None)) == timestamp(moment)  # SQLite gives it back naive
    assert timestamp(moment.astimezone(dt.timezone(dt.timedelta(hours=2)))) == timestamp(moment)


# ------------------------------------------------------------------------------------------- PostgreSQL
POSTGRES_URL = os.environ.get("SILICONMIX_TEST_POSTGRES_URL")


@pytest.mark.skipif(not POSTGRES_URL, reason="no PostgreSQL server: set SILICONMIX_TEST_POSTGRES_URL")
def test_postgresql_end_to_end(make_settings):
    engine = create_db_engine(POSTGRES_URL)
    with engine.begin() as connection:  # a clean database: the test owns it
        connection.execute(text("DROP TABLE IF EXISTS simulations, plan_jobs, studies, plans, alembic_version"))
    settings = make_settings(database_url=POSTGRES_URL)
    with serve(settings) as http:
        assert http.get("/readyz").json()["checks"]["database"]["detail"] == "postgresql reachable and writable"
        posted = [http.post("/v1/plans", json=body) for body in (CHAT_70B, UNREACHABLE_SLO)]
        assert [p.status_code for p in posted] == [201, 201], [p.text for p in posted]
        with ThreadPoolExecutor(6) as pool:
            more = list(pool.map(lambda _: http.post("/v1/plans", json=UNREACHABLE_SLO), range(6)))
        assert [m.status_code for m in more] == [201] * 6
        listing = http.get("/v1/plans", params={"limit": 100}).content
    with serve(settings) as http:  # a restart on the same database
        for p in posted:
            assert http.get(p.headers["location"]).content == p.content
        assert http.get("/v1/plans", params={"limit": 100}).content == listing
        assert http.get("/v1/plans").json()["total"] == 8
    with engine.connect() as connection:
        assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []
    with engine.begin() as connection:
        connection.execute(text("DROP TABLE plan_jobs, studies, plans, alembic_version"))
    engine.dispose()
