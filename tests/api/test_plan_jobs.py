"""Background plans behind a live server (``Prefer: respond-async`` / ``?async=true``): 202 and Location, the job's
``state`` apart from the plan's ``status``, progress while it runs, cancel with and without a plan found before,
a solver error, the whole-job time limit, and what a stop or a restart does to an unfinished job.

A job that must be seen part-way is held at a known stage by ``PlanJobs.at_stage`` (until it is cancelled, or
released), never after a delay; waits are conditions polled a bounded number of times."""

from __future__ import annotations

import threading
import time

import pytest
from apitest import assert_problem, serve, serve_app, wait_for
from apitest import job_final as final
from apitest import small_workload as small
from sqlalchemy import create_engine, text

import planner.optimize
from api.examples import UNREACHABLE_SLO
from api.models import PlanJobRecord, PlanRecord
from api.plan_jobs import STOPPED
from api.store import utc_now

ASYNC = {"Prefer": "respond-async"}




def hold_at(app, stage: str, release: threading.Event | None = None) -> threading.Event:
    """Hold every job of ``app`` when it reaches ``stage`` until it is cancelled (or ``release`` is set); returns the
    event set once a job got there."""
    reached = threading.Event()

    def hook(_job_id: str, at: str, token) -> None:
        if at != stage:
            return
        reached.set()
        for _ in range(6000):  # bounded: 60 s at most
            if token.cancelled or (release is not None and release.is_set()):
                return
            time.sleep(0.01)

    app.state.services.plan_jobs.at_stage = hook
    return reached


def test_the_async_lifecycle_202_running_with_progress_then_done_with_the_plan(make_settings):
    release = threading.Event()
    with serve_app(make_settings()) as (http, app):
        reached = hold_at(app, "tie_break", release)
        posted = http.post("/v1/plans", json=small(), headers=ASYNC, params={"time_limit_s": 30})
        assert posted.status_code == 202, posted.text
        location = posted.headers["location"]
        assert posted.headers["preference-applied"] == "respond-async"
        accepted = PlanJobRecord.model_validate_json(posted.content)
        assert location == f"/v1/plans/{accepted.id}" and accepted.state in ("queued", "running")
        assert accepted.status is None and accepted.plan is None
        assert reached.wait(60)
        running = PlanJobRecord.model_validate(http.get(location).json())
        assert running.state == "running" and running.status is None and running.plan is None
        progress = running.progress
        assert progress is not None and progress.stage == "tie_break" and progress.candidates > 0
        assert progress.incumbent is not None and progress.bound is not None and progress.has_plan
        release.set()
        done = PlanJobRecord.model_validate(wait_for(http, location, final))
        assert done.state == "done" and done.error is None and done.status == done.plan.status
        assert done.status in ("optimal", "feasible") and done.plan.plan.verification.ok
        assert done.plan.id == accepted.id and done.plan.time_limit_s == 30
        assert done.plan.plan.options.time_limit_s == 30  # the request's cap (each solve got a share of it)
        synchronous = PlanRecord.model_validate_json(http.post("/v1/plans", json=small(), params={"time_limit_s": 30}).content)
        assert done.plan.plan.goodput_scale == pytest.approx(synchronous.plan.goodput_scale, rel=1e-6)
        assert done.plan.plan.totals.devices == synchronous.plan.totals.devices
        listed = http.get("/v1/plans").json()["items"]
        assert accepted.id in [p["id"] for p in listed]
        assert http.get(f"{location}/graph").status_code == 200
        assert http.delete(location).status_code == 409  # over: nothing to cancel


def test_async_true_in_the_query_and_an_infeasible_plan_is_done_with_status_infeasible(client):
    posted = client.post("/v1/plans", json=UNREACHABLE_SLO, params={"async": "true"})
    assert posted.status_code == 202, posted.text
    record = wait_for(client, posted.headers["location"], final)
    assert record["state"] == "done" and record["status"] == "infeasible"  # the solve's outcome, not the job's
    assert record["plan"]["plan"]["diagnosis"]["reason"]
    plain = client.post("/v1/plans", json=small(), headers={"Prefer": "return=minimal"})
    assert plain.status_code == 201 and "state" not in plain.json()  # without respond-async: synchronous as ever


def test_cancel_after_the_first_stage_keeps_its_plan(make_settings):
    with serve_app(make_settings()) as (http, app):
        reached = hold_at(app, "tie_break")
        location = http.post("/v1/plans", json=small(), headers=ASYNC).headers["location"]
        assert reached.wait(60)
        cancelled = http.delete(location)
        assert cancelled.status_code == 200, cancelled.text
        record = PlanJobRecord.model_validate_json(cancelled.content)
        assert record.state == "cancelled" and record.plan is not None and record.status == record.plan.status
        assert record.plan.plan.goodput_scale > 0 and record.plan.plan.verification.ok
        assert http.get(location).json() == cancelled.json()  # stored as answered
        assert http.delete(location).json()["state"] == "cancelled"  # cancelling again answers it again


def test_cancel_before_any_plan_is_cancelled_without_one(make_settings):
    with serve_app(make_settings()) as (http, app):
        reached = hold_at(app, "solve")
        location = http.post("/v1/plans", json=small(), headers=ASYNC).headers["location"]
        assert reached.wait(60)
        record = http.delete(location).json()
        assert record["state"] == "cancelled" and record["plan"] is None and record["status"] is None
        assert record["progress"]["stage"] == "solve" and record["progress"]["has_plan"] is False
        assert_problem(http.get(f"{location}/graph"), 404)


def test_a_solver_error_fails_the_job_and_says_why(make_settings, monkeypatch):
    class Broken:
        def solve(self, model, options):
            raise RuntimeError("engine crashed")

    monkeypatch.setattr(planner.optimize, "get_backend", lambda name: Broken())
    with serve(make_settings()) as http:
        location = http.post("/v1/plans", json=small(), headers=ASYNC).headers["location"]
        record = wait_for(http, location, final)
        assert record["state"] == "failed" and record["status"] is None and record["plan"] is None
        assert record["error"] == "RuntimeError: engine crashed"
        assert http.delete(location).status_code == 409


def test_the_time_limit_caps_the_whole_job(make_settings):
    with serve_app(make_settings()) as (http, app):
        hold_at(app, "solve")  # held until the job's own time limit cancels it
        location = http.post("/v1/plans", json=small(), headers=ASYNC, params={"time_limit_s": 0.5}).headers["location"]
        record = wait_for(http, location, final)
        assert record["state"] == "failed" and record["plan"] is None
        assert record["error"] == "time_limit_s (0.5 s) passed before any plan was found"


def test_a_stop_fails_the_running_job_and_a_restart_fails_what_a_crashed_process_left(make_settings, db_url):
    settings = make_settings()
    with serve_app(settings) as (http, app):
        reached = hold_at(app, "solve")  # the stop cancels it
        location = http.post("/v1/plans", json=small(), headers=ASYNC).headers["location"]
        assert reached.wait(60)
    engine = create_engine(db_url)
    with engine.begin() as connection:  # as a process killed with jobs queued and running leaves them
        for job_id, state in (("left-queued", "queued"), ("left-running", "running")):
            connection.execute(text(
                "INSERT INTO plan_jobs (id, created_at, updated_at, state, solver, time_limit_s, request_json) "
                "VALUES (:id, :now, :now, :state, 'ortools', 5, '{}')"), {"id": job_id, "now": utc_now(), "state": state})
    engine.dispose()
    with serve(settings) as http:
        stopped = http.get(location).json()
        assert stopped["state"] == "failed" and stopped["error"] == STOPPED and stopped["plan"] is None
        for job_id in ("left-queued", "left-running"):
            record = http.get(f"/v1/plans/{job_id}").json()
            assert record["state"] == "failed" and record["error"] == STOPPED, record


def test_unknown_and_synchronous_plans_cannot_be_cancelled(client):
    assert_problem(client.delete("/v1/plans/no-such-plan"), 404, kind="not-found")
    location = client.post("/v1/plans", json=small()).headers["location"]
    body = assert_problem(client.delete(location), 409)
    assert "synchronously" in body["detail"]


def test_an_async_request_is_checked_before_it_is_queued(client):
    bad = small()
    bad["model"] = "no-such-model"
    assert_problem(client.post("/v1/plans", json=bad, headers=ASYNC), 422, fields=["model"])
    assert_problem(client.post("/v1/plans", json=small(), headers=ASYNC, params={"time_limit_s": 1000}), 422,
                   fields=["time_limit_s"])
