"""/v1/studies behind a live server: the job lifecycle, results as JSON and CSV, the export, cancel,
what a restart does to an unfinished study (marked interrupted, or resumed from the journal), 404/409/422.

Tests that need a study stopped part-way hold it at a known scenario (``StudyJobs.before_scenario``), never
after a delay."""

from __future__ import annotations

import copy
import csv
import io
import json
import time
from pathlib import Path

import threading

import openpyxl
import pytest
from apitest import assert_problem, serve, serve_app, wait_for
from sqlalchemy import create_engine, text

import planner.optimize
from api.examples import CHAT_70B
from planner.solvers import SolveOptions, get_backend
from planner.solvers.cancel import SolveCancelled
from tests.solvers.conftest import market_split

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def study(tpots: list[int], name: str = "tiny") -> dict:
    """chat-70b on H100s only, one TPOT target per scenario (each solve well under a second)."""
    base = copy.deepcopy(CHAT_70B)
    base["constraints"]["devices"] = ["h100-sxm"]
    return {"name": name, "base": base, "axes": [{"name": "tpot_ms", "param": "slo.tpot_ms", "values": tpots}],
            "options": {"time_limit_s": 5, "baseline": False}}


LONG = [60, 55, 50, 45, 40, 35, 30, 25, 20, 18, 16, 14]


@pytest.fixture()
def settings(make_settings, tmp_path):
    def make(**overrides):
        return make_settings(study_dir=tmp_path / "studies", **overrides)

    return make


def final(record: dict) -> bool:
    return record["status"] not in ("queued", "running")


def journal_lines(folder: Path) -> list[dict]:
    path = folder / "rows.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_study_runs_in_the_background_and_answers_rows_csv_and_a_workbook(settings, tmp_path):
    with serve(settings()) as http:
        posted = http.post("/v1/studies", json=study([50, 20, 30]))
        assert posted.status_code == 202, posted.text
        location = posted.headers["location"]
        assert location == f"/v1/studies/{posted.json()['id']}"
        assert posted.json()["status"] in ("queued", "running") and posted.json()["total"] == 3
        seen = []
        record = wait_for(http, location, lambda r: seen.append(r["done"]) or final(r))
        assert record["status"] == "succeeded" and record["done"] == record["total"] == 3, record
        assert seen == sorted(seen)  # progress only goes up

        results = http.get(f"{location}/results").json()
        assert results["status"] == "succeeded" and len(results["rows"]) == 3
        assert [r["scenario"] for r in results["rows"]] == ["tpot_ms=50", "tpot_ms=20", "tpot_ms=30"]
        assert {r["status"] for r in results["rows"]} <= {"optimal", "feasible", "time_limit"}
        assert results["rows"][0]["gain"] is None  # NaN as null (no baseline)
        assert results["columns"][:3] == ["scenario", "hash", "axis.tpot_ms"]

        as_csv = http.get(f"{location}/results", headers={"Accept": "text/csv"})
        assert as_csv.headers["content-type"].startswith("text/csv")
        table = list(csv.DictReader(io.StringIO(as_csv.text)))
        assert [r["scenario"] for r in table] == [r["scenario"] for r in results["rows"]]
        assert [float(r["power_kw"]) for r in table] == pytest.approx([r["power_kw"] for r in results["rows"]])

        folder = tmp_path / "studies" / posted.json()["id"]
        assert {"results.csv", "results.parquet", "report.html", "rows.jsonl", "study.yaml"} <= {
            p.name for p in folder.iterdir()}

        book = http.get(f"{location}/export", params={"format": "xlsx"})
        assert book.status_code == 200 and book.headers["content-type"] == XLSX
        assert book.headers["content-disposition"] == 'attachment; filename="study-tiny.xlsx"'
        workbook = openpyxl.load_workbook(io.BytesIO(book.content))
        assert workbook.sheetnames[:2] == ["Scenarios", "Frontier"]
        cells = [c for row in workbook["Scenarios"].iter_rows(values_only=True) for c in row]
        assert {"tpot_ms=50", "tpot_ms=20", "tpot_ms=30"} <= set(cells)

        scenarios = http.get(f"{location}/export", params={"format": "csv"})
        assert scenarios.headers["content-type"].startswith("text/csv")
        assert scenarios.headers["content-disposition"] == 'attachment; filename="scenarios-tiny.csv"'
        assert len(list(csv.DictReader(io.StringIO(scenarios.text)))) == 3
        assert http.delete(location).status_code == 409  # over: nothing to cancel


def stop_at(app, index: int, until) -> threading.Event:
    """Hold every study of ``app`` before scenario ``index`` until ``until()`` returns; returns the event set
    when a study got there (the study thread waits in ``StudyJobs.before_scenario``)."""
    reached = threading.Event()

    def hook(_study_id: str, scenario: int) -> None:
        if scenario == index:
            reached.set()
            until()

    app.state.services.studies.before_scenario = hook
    return reached


def idle(app) -> None:
    """Wait until no study thread of ``app`` is running (a condition, polled)."""
    jobs = app.state.services.studies
    for _ in range(6000):
        if not jobs.active():
            return
        time.sleep(0.01)
    raise AssertionError("a study thread is still running")


def test_cancel_stops_scheduling_and_no_row_follows(settings, tmp_path):
    deleted = threading.Event()
    with serve_app(settings()) as (http, app):
        at_one = stop_at(app, 1, lambda: deleted.wait(60))  # scenario 0 solved, scenario 1 not started
        posted = http.post("/v1/studies", json=study(LONG, "long"))
        location = posted.headers["location"]
        assert at_one.wait(60)
        cancelled = http.delete(location)
        deleted.set()
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        idle(app)  # the study's thread has ended: nothing more can land
        folder = tmp_path / "studies" / posted.json()["id"]
        assert [r["scenario"] for r in journal_lines(folder)] == ["tpot_ms=60"]
        record = http.get(location).json()
        assert record["status"] == "cancelled" and record["done"] == 1 < record["total"]
        assert len(http.get(f"{location}/results").json()["rows"]) == 1  # the finished ones stay
        assert http.delete(location).json()["status"] == "cancelled"  # again: the same answer
        assert_problem(http.get(f"{location}/export"), 409)
        assert not (folder / "results.csv").exists()


def test_cancel_interrupts_the_scenario_being_solved(settings, tmp_path, monkeypatch):
    solving, outcome = threading.Event(), []

    def endless_plan(workload, catalog, options):  # a real solve that would run for 10 minutes
        solving.set()
        try:
            get_backend("ortools").solve(market_split(), SolveOptions(time_limit_s=600, relative_gap=0.0))
        except SolveCancelled as exc:
            outcome.append(exc)
            raise
        outcome.append("not interrupted")
        raise AssertionError("the solve ran to its end")

    monkeypatch.setattr(planner.optimize, "plan_workload", endless_plan)  # what the study loop solves with
    with serve_app(settings()) as (http, app):
        posted = http.post("/v1/studies", json=study([50, 40], "endless"))
        assert solving.wait(60)
        assert http.delete(posted.headers["location"]).json()["status"] == "cancelled"
        idle(app)
        assert len(outcome) == 1 and isinstance(outcome[0], SolveCancelled)
        assert journal_lines(tmp_path / "studies" / posted.json()["id"]) == []  # the dropped scenario left no row


def test_a_restart_marks_unfinished_studies_interrupted_or_resumes_them(settings, tmp_path, db_url):
    with serve_app(settings()) as (http, app):
        jobs = app.state.services.studies
        at_two = stop_at(app, 2, lambda: jobs.stopping.wait(60))  # held before scenario 2 until the server stops
        posted = http.post("/v1/studies", json=study(LONG, "restart"))
        location = posted.headers["location"]
        assert at_two.wait(60)
    # the server stopped with the study at scenario 2: it says so, with scenarios 0 and 1 journaled
    folder = tmp_path / "studies" / posted.json()["id"]
    assert [r["scenario"] for r in journal_lines(folder)] == ["tpot_ms=60", "tpot_ms=55"]
    engine = create_engine(db_url)
    with engine.begin() as connection:  # as a crash would leave it: still 'running'
        status = connection.execute(text("SELECT status FROM studies")).scalar()
        connection.execute(text("UPDATE studies SET status = 'running'"))
    engine.dispose()
    assert status == "interrupted"

    with serve(settings()) as http:  # default: never lost silently, marked interrupted
        record = http.get(location).json()
        assert record["status"] == "interrupted" and "server stopped" in record["error"]
        assert len(http.get(f"{location}/results").json()["rows"]) == 2
        assert_problem(http.get(f"{location}/export"), 409)
        assert http.delete(location).status_code == 409

    with serve(settings(study_resume=True)) as http:  # resumed from its journal
        record = wait_for(http, location, final)
        assert record["status"] == "succeeded" and record["done"] == len(LONG)
        assert record["error"] is None  # no longer interrupted: the old reason is gone
        assert len(http.get(f"{location}/results").json()["rows"]) == len(LONG)
    lines = journal_lines(folder)
    assert len(lines) == len({line["scenario"] for line in lines}) == len(LONG)  # nothing solved twice


def test_studies_still_queued_when_the_server_stops_are_interrupted_too(settings):
    with serve_app(settings()) as (http, app):  # one study worker: the second and third wait in the queue
        jobs = app.state.services.studies
        at_zero = stop_at(app, 0, lambda: jobs.stopping.wait(60))
        locations = [http.post("/v1/studies", json=study([50, 40], f"q{i}")).headers["location"] for i in range(3)]
        assert at_zero.wait(60)
        jobs.stop()  # what SIGTERM does first; the queued studies then reach the worker and must not start
        idle(app)
        records = [http.get(location).json() for location in locations]
    assert [r["status"] for r in records] == ["interrupted"] * 3, records
    assert all("server stopped" in r["error"] for r in records)


def test_unknown_ids_and_invalid_specs(settings):
    with serve(settings()) as http:
        for method, path in (("GET", ""), ("GET", "/results"), ("DELETE", ""), ("GET", "/export")):
            assert_problem(http.request(method, f"/v1/studies/missing{path}"), 404, kind="not-found")

        def rejected(body: dict, field: str) -> None:
            response = http.post("/v1/studies", json=body)
            assert field in [e["field"] for e in assert_problem(response, 422, kind="validation-error")["errors"]]

        bad = study([50])
        bad["base"]["classes"][0]["rate_rps"] = -1
        rejected(bad, "base.classes.0.rate_rps")
        bad = study([50])
        bad["base"]["model"] = "no-such-model"
        rejected(bad, "base.model")
        bad = study([50])
        bad["options"]["time_limit_s"] = 1000
        rejected(bad, "options.time_limit_s")
        bad = study([50])
        bad["axes"] = []
        rejected(bad, "axes")
        bad = study([50])
        bad["unknown"] = 1
        rejected(bad, "unknown")
        bad = study([50])
        bad["axes"][0]["param"] = "constraints.devices"
        bad["axes"][0]["values"] = [["no-such-device"]]
        rejected(bad, "axes")
        bad = study([50, 50])
        rejected(bad, "axes.0")
        assert_problem(http.post("/v1/studies", json={"name": "x"}), 422)
        assert http.get("/v1/studies/missing").headers["content-type"] == "application/problem+json"


def test_studies_are_listed_newest_first_in_pages(settings):
    with serve_app(settings()) as (http, app):
        ids = [http.post("/v1/studies", json=study([50], f"list-{i}")).json()["id"] for i in range(3)]
        first = http.get("/v1/studies", params={"limit": 2}).json()
        assert [s["id"] for s in first["items"]] == ids[::-1][:2]
        assert (first["total"], first["limit"], first["offset"], first["next_offset"]) == (3, 2, 0, 2)
        assert first["items"][0]["name"] == "list-2" and first["items"][0]["results"].endswith("/results")
        second = http.get("/v1/studies", params={"limit": 2, "offset": first["next_offset"]}).json()
        assert [s["id"] for s in second["items"]] == ids[:1] and second["next_offset"] is None
        assert http.get("/v1/studies", params={"offset": 3}).json()["items"] == []
        assert_problem(http.get("/v1/studies", params={"limit": 0}), 422, fields=["limit"])
        assert_problem(http.get("/v1/studies", params={"limit": 101}), 422, fields=["limit"])
        idle(app)
