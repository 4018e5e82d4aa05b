"""/v1/studies behind a live server: the job lifecycle, results as JSON and CSV, the export, cancel,
what a restart does to an unfinished study (marked interrupted, or resumed from the journal), 404/409/422."""

from __future__ import annotations

import copy
import csv
import io
import json
import time
from pathlib import Path

import openpyxl
import pytest
from apitest import assert_problem, serve
from sqlalchemy import create_engine, text

from api.examples import CHAT_70B

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


def wait_for(http, url: str, until, timeout_s: float = 60) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        record = http.get(url).json()
        if until(record):
            return record
        time.sleep(0.05)
    raise AssertionError(f"{url} never got there: {record}")


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


def test_cancel_stops_scheduling_and_no_row_follows(settings, tmp_path):
    with serve(settings()) as http:
        posted = http.post("/v1/studies", json=study(LONG, "long"))
        location = posted.headers["location"]
        wait_for(http, location, lambda r: r["done"] >= 1)
        cancelled = http.delete(location)
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        folder = tmp_path / "studies" / posted.json()["id"]
        rows = journal_lines(folder)
        assert 1 <= len(rows) < len(LONG)
        time.sleep(1.5)  # longer than a solve: a scenario in flight would have landed by now
        assert journal_lines(folder) == rows
        record = http.get(location).json()
        assert record["status"] == "cancelled" and record["done"] == len(rows) < record["total"]
        assert len(http.get(f"{location}/results").json()["rows"]) == len(rows)  # the finished ones stay
        assert http.delete(location).json()["status"] == "cancelled"  # again: the same answer
        assert_problem(http.get(f"{location}/export"), 409)
        assert not (folder / "results.csv").exists()


def test_a_restart_marks_unfinished_studies_interrupted_or_resumes_them(settings, tmp_path, db_url):
    with serve(settings()) as http:
        posted = http.post("/v1/studies", json=study(LONG, "restart"))
        location = posted.headers["location"]
        wait_for(http, location, lambda r: r["done"] >= 1)
    # the server stopped: after its current scenario, the study says so
    folder = tmp_path / "studies" / posted.json()["id"]
    stopped_at = len(journal_lines(folder))
    engine = create_engine(db_url)
    with engine.begin() as connection:  # as a crash would leave it: still 'running'
        status = connection.execute(text("SELECT status FROM studies")).scalar()
        connection.execute(text("UPDATE studies SET status = 'running'"))
    engine.dispose()
    assert status == "interrupted" and 1 <= stopped_at < len(LONG)

    with serve(settings()) as http:  # default: never lost silently, marked interrupted
        record = http.get(location).json()
        assert record["status"] == "interrupted" and "server stopped" in record["error"]
        assert len(http.get(f"{location}/results").json()["rows"]) == stopped_at
        assert_problem(http.get(f"{location}/export"), 409)
        assert http.delete(location).status_code == 409

    with serve(settings(study_resume=True)) as http:  # resumed from its journal
        record = wait_for(http, location, final)
        assert record["status"] == "succeeded" and record["done"] == len(LONG)
        assert len(http.get(f"{location}/results").json()["rows"]) == len(LONG)
    lines = journal_lines(folder)
    assert len(lines) == len({line["scenario"] for line in lines}) == len(LONG)  # nothing solved twice


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
