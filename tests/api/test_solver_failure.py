"""A solve the engine failed is a 500 problem naming the solver and its reason (sync), or a failed job saying
so (async); never a stored plan with status infeasible."""

from __future__ import annotations

from apitest import assert_problem, wait_for

from api.examples import CHAT_70B
from planner.solvers.base import BACKENDS
from tests.solvers.fixed import REASON


def test_a_failed_solve_is_a_500_problem_naming_the_solver(client, monkeypatch):
    monkeypatch.setitem(BACKENDS, "ortools", "tests.solvers.fixed:Failing")
    body = assert_problem(client.post("/v1/plans", json=CHAT_70B), 500, kind="solver-failed")
    assert body["detail"] == f"the solver failed (fixed/fixed): {REASON}"
    assert client.get("/v1/plans").json()["items"] == []  # nothing stored as if it were an answer


def test_a_failed_background_solve_is_a_failed_job_saying_why(client, monkeypatch):
    monkeypatch.setitem(BACKENDS, "ortools", "tests.solvers.fixed:Unbounded")
    job = client.post("/v1/plans", json=CHAT_70B, params={"async": "true"})
    assert job.status_code == 202, job.text
    record = wait_for(client, job.headers["Location"], lambda r: r["state"] not in ("queued", "running"))
    assert record["state"] == "failed" and "found the placement MILP unbounded" in record["error"], record
