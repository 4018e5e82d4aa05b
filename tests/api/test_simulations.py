"""Background simulations behind a live server: 202 and Location, the job's lifecycle to the simulation, the same
answer as the library for the same seed, cancel (a job held at its start until cancelled, never after a delay),
and bad input (problem+json naming the field)."""

from __future__ import annotations

import threading

from apitest import assert_problem, serve_app, wait_for
from apitest import job_final as final
from apitest import small_workload as small

from api.models import SimulationRecord
from planner.catalog import load_catalog
from planner.perf.model import RooflineModel
from planner.schema import Plan
from planner.simulate import SimulationOptions, simulate_plan




def a_plan(http) -> tuple[str, dict]:
    posted = http.post("/v1/plans", json=small(), params={"time_limit_s": 30})
    assert posted.status_code == 201, posted.text
    return posted.json()["id"], posted.json()["plan"]


def test_simulate_a_stored_plan_202_then_done_as_the_library_answers(make_settings):
    with serve_app(make_settings()) as (http, _app):
        plan_id, plan = a_plan(http)
        posted = http.post(f"/v1/plans/{plan_id}/simulate", json={"duration_s": 60, "seed": 2})
        assert posted.status_code == 202, posted.text
        location = posted.headers["location"]
        accepted = SimulationRecord.model_validate_json(posted.content)
        assert location == f"/v1/plans/{plan_id}/simulations/{accepted.id}" == accepted.href
        assert accepted.state in ("queued", "running") and accepted.simulation is None
        done = SimulationRecord.model_validate(wait_for(http, location, final))
        assert done.state == "done" and done.error is None and done.options.duration_s == 60
        sim = done.simulation
        assert sim.verdict in ("meets", "misses") and [c.name for c in sim.classes] == ["chat"]
        assert sim.siliconmix_version and sim.created_at is not None
        local = simulate_plan(Plan.model_validate(plan), RooflineModel(load_catalog()),
                              SimulationOptions(duration_s=60, seed=2))
        assert sim.classes == local.classes and sim.pools == local.pools and sim.verdict == local.verdict
        assert http.delete(location).status_code == 409  # over: nothing to cancel


def held(jobs) -> threading.Event:
    """Hold every simulation ``jobs`` starts until it is told to stop (bounded: 60 s); the event is set once one is
    held."""
    reached = threading.Event()

    def hold(_sim_id: str, stop: threading.Event) -> None:
        reached.set()
        stop.wait(60)  # bounded; a DELETE or the server's stop sets it

    jobs.at_start = hold
    return reached


def test_cancel_a_running_simulation(make_settings):
    with serve_app(make_settings()) as (http, app):
        reached = held(app.state.services.simulations)
        plan_id, _ = a_plan(http)
        location = http.post(f"/v1/plans/{plan_id}/simulate", json={}).headers["location"]
        assert reached.wait(60)
        assert http.get(location).json()["state"] == "running"
        cancelled = http.delete(location)
        assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
        assert wait_for(http, location, final)["state"] == "cancelled"
        assert http.delete(location).json()["state"] == "cancelled"  # again: the same answer
        jobs = app.state.services.simulations
        assert wait_for(http, location, lambda r: not jobs._stops)["simulation"] is None  # the thread let go


def test_bad_requests_name_what_was_wrong(client):
    plan_id, _ = a_plan(client)
    url = f"/v1/plans/{plan_id}/simulate"
    assert_problem(client.post("/v1/plans/nope/simulate", json={}), 404)
    assert_problem(client.post(url, json={"duration_s": 7200}), 422, fields=["duration_s"])
    assert_problem(client.post(url, json={"max_replicas": None}), 422, fields=["max_replicas"])
    assert_problem(client.post(url, json={"duration_s": "60"}), 422, fields=["duration_s"])  # strict JSON types
    assert_problem(client.post(url, json={"arrivals": "uniform"}), 422, fields=["arrivals"])
    assert_problem(client.post(url, content=b"duration_s: 60", headers={"Content-Type": "text/plain"}), 415)
    assert_problem(client.get(f"/v1/plans/{plan_id}/simulations/nope"), 404)


def test_a_server_stop_fails_the_running_simulation(make_settings):
    with serve_app(make_settings()) as (http, app):
        jobs = app.state.services.simulations
        reached = held(jobs)
        plan_id, _ = a_plan(http)
        sim_id = http.post(f"/v1/plans/{plan_id}/simulate", json={}).json()["id"]
        assert reached.wait(60)
    row = jobs.store.get(sim_id)  # the server has stopped: its lifespan shut the jobs down
    assert row.state == "failed" and "server stopped" in row.error and row.result_json is None
