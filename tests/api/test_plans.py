"""/v1/plans behind a live server: the answer, options, listing order and pages, the graph, the stored request."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import yaml
from apitest import serve
from sqlalchemy import create_engine, text

from api.examples import CHAT_70B, UNREACHABLE_SLO
from api.models import PlanPage, PlanRecord, TaskGraph
import planner.optimize
from planner.catalog import load_catalog
from planner.optimize import PlanOptions, plan_workload
from planner.schema import Workload
from planner.solvers.cancel import current_token


def infeasible(name: str) -> dict:
    body = copy.deepcopy(UNREACHABLE_SLO)
    body["classes"][0]["name"] = name
    return body


def test_the_answer_is_the_planners_plan_with_an_id(client, catalog):
    response = client.post("/v1/plans", json=CHAT_70B, params={"time_limit_s": 20})
    assert response.status_code == 201
    record = PlanRecord.model_validate_json(response.content)  # the documented schema
    assert record.solver == "ortools" and record.engine == "scip" and record.time_limit_s == 20
    assert record.created_at.tzinfo is not None and record.solve_time_s > 0
    direct = plan_workload(Workload.model_validate(CHAT_70B), catalog, PlanOptions(baseline=False))
    assert record.plan.goodput_scale == direct.goodput_scale
    assert record.plan.totals.devices_by_type == direct.totals.devices_by_type
    assert record.plan.verification is not None and record.plan.verification.ok
    pools = response.json()["plan"]["pools"]
    assert pools and all("class" in p for p in pools)  # serialised by alias, as the CLI's --json


def test_solver_and_baseline_options_reach_the_planner(client):
    response = client.post("/v1/plans", json=CHAT_70B,
                           params={"solver": "pulp", "engine": "highs", "baseline": True, "time_limit_s": 10,
                                   "relative_gap": 0.02})
    assert response.status_code == 201, response.text
    record = response.json()
    assert (record["solver"], record["engine"]) == ("pulp", "highs")
    assert record["plan"]["solver"]["backend"] == "pulp"
    assert record["plan"]["options"]["relative_gap"] == 0.02  # what the planner was given, not its default
    assert record["plan"]["baseline"]["device"] is not None and record["plan"]["gain"] >= 1 - 1e-9


def test_the_request_is_stored_with_the_plan(client, db_url):
    response = client.post("/v1/plans", json=CHAT_70B, params={"time_limit_s": 7})
    engine = create_engine(db_url)
    with engine.connect() as connection:
        row = connection.execute(text("SELECT id, status, request_json, plan_json, solve_time_s, created_at FROM plans")).one()
    engine.dispose()
    assert row.id == response.json()["id"] and row.status == response.json()["plan"]["status"]
    assert row.solve_time_s > 0 and row.created_at
    request = json.loads(row.request_json)
    assert request["time_limit_s"] == 7 and request["solver"] == "ortools" and request["baseline"] is False
    assert Workload.model_validate(request["workload"]) == Workload.model_validate(CHAT_70B)
    assert response.content.endswith(b',"plan":' + row.plan_json.encode() + b"}")


def test_list_is_newest_first_and_paginated(client):
    ids = [client.post("/v1/plans", json=infeasible(f"c{i}")).json()["id"] for i in range(5)]
    feasible = client.post("/v1/plans", json=CHAT_70B).json()["id"]
    newest_first = [feasible, *reversed(ids)]

    first = PlanPage.model_validate(client.get("/v1/plans", params={"limit": 4}).json())
    assert [i.id for i in first.items] == newest_first[:4]
    assert (first.total, first.limit, first.offset, first.next_offset) == (6, 4, 0, 4)
    last = PlanPage.model_validate(client.get("/v1/plans", params={"limit": 4, "offset": first.next_offset}).json())
    assert [i.id for i in last.items] == newest_first[4:] and last.next_offset is None
    assert sorted(newest_first, reverse=True) == newest_first  # ids are time-ordered too

    status = client.get(f"/v1/plans/{feasible}").json()["status"]
    assert status != "infeasible"
    only = client.get("/v1/plans", params={"status": status}).json()
    assert [i["id"] for i in only["items"]] == [feasible] and only["total"] == 1
    summary = only["items"][0]
    assert summary["model"] == "llama-3.3-70b" and summary["devices"] > 0 and 0 < summary["power_kw"] <= 500
    assert summary["created_at"].endswith("Z")
    assert client.get("/v1/plans", params={"model": "qwen3-0.6b"}).json() == {
        "items": [], "total": 0, "limit": 20, "offset": 0, "next_offset": None}
    assert client.get("/v1/plans", params={"offset": 100}).json()["items"] == []


def test_graph_of_a_plan(client):
    posted = client.post("/v1/plans", json=CHAT_70B).json()
    graph = TaskGraph.model_validate(client.get(f"/v1/plans/{posted['id']}/graph").json())
    assert graph.plan_id == posted["id"]
    assert graph.nodes == posted["plan"]["graph"]["nodes"] and graph.links == posted["plan"]["graph"]["links"]
    assert {n["id"] for n in graph.nodes} == {"chat/aggregated/aggregated", "chat/pd_disagg/prefill", "chat/pd_disagg/decode"}
    assert graph.links[0]["kind"] == "kv_cache"


def test_process_pool_executor_plans_too(make_settings):
    with serve(make_settings(plan_executor="process", plan_workers=1)) as http:
        response = http.post("/v1/plans", json=CHAT_70B)
        assert response.status_code == 201, response.text
        assert response.json()["plan"]["pools"]
        assert "process pool" in http.get("/readyz").json()["checks"]["planner"]["detail"]


def test_example_workload_matches_the_examples_folder():
    example = Path(__file__).resolve().parents[2] / "examples" / "workloads" / "chat-70b.yaml"
    assert Workload.model_validate(CHAT_70B) == Workload.model_validate(yaml.safe_load(example.read_text()))
    assert load_catalog().model(CHAT_70B["model"])


def hold_after_first_plan(monkeypatch) -> None:
    """Hold the planner once its first stage has a plan (at the tie-break) until its solve's token is cancelled."""
    report = planner.optimize.report

    def holding(progress) -> None:
        report(progress)
        token = current_token()
        if progress.stage == "tie_break" and token is not None:
            for _ in range(6000):  # bounded: 60 s at most
                if token.cancelled:
                    return
                time.sleep(0.01)

    monkeypatch.setattr(planner.optimize, "report", holding)


def test_a_synchronous_plan_stops_at_its_time_limit_with_the_best_plan_so_far(client, monkeypatch):
    hold_after_first_plan(monkeypatch)
    answer = client.post("/v1/plans", json=CHAT_70B, params={"time_limit_s": 2})
    assert answer.status_code == 201
    plan = answer.json()["plan"]
    assert plan["status"] == "time_limit" and plan["pools"]  # the first stage's plan, not a failure
    assert answer.json()["time_limit_s"] == 2


def test_a_synchronous_plan_whose_time_limit_passes_before_any_plan_says_so(client):
    answer = client.post("/v1/plans", json=CHAT_70B, params={"time_limit_s": 0.001})
    assert answer.status_code == 201  # an answer, not an error: no plan within the time the client gave
    plan = answer.json()["plan"]
    assert plan["pools"] == [] and plan["diagnosis"]["reason"] == "no_candidates"
    assert plan["diagnosis"]["message"].startswith("time_limit_s (0.001 s) passed before any plan was found")
    assert plan["options"]["time_limit_s"] == 0.001
