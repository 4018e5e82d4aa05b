"""The procurement constraints ``whole_nodes`` and ``min_replicas_per_pool`` over REST: a bad value is a 422 naming the
field and what is allowed; a good one reaches the plan (its nodes, its replicas)."""

from __future__ import annotations

import pytest
from apitest import assert_problem, small_workload


def _with(**constraints) -> dict:
    body = small_workload()
    body["constraints"] = {**body["constraints"], **constraints}
    return body


@pytest.mark.parametrize("field, value, allowed", [
    ("whole_nodes", "sometimes", "valid boolean"),
    ("min_replicas_per_pool", 0, "greater than or equal to 1"),
    ("min_replicas_per_pool", 1001, "less than or equal to 1000"),
    ("min_replicas_per_pool", 1.5, "valid integer"),
])
def test_a_bad_value_names_the_field_and_what_is_allowed(client, field, value, allowed):
    body = assert_problem(client.post("/v1/plans", json=_with(**{field: value})), 422, fields=[f"constraints.{field}"])
    assert allowed in body["errors"][0]["message"]


def test_the_constraints_reach_the_plan(client):
    response = client.post("/v1/plans", json=_with(whole_nodes=True, min_replicas_per_pool=2))
    assert response.status_code == 201, response.text
    plan = response.json()["plan"]
    totals = plan["totals"]
    assert plan["verification"]["ok"] and plan["verification"]["checks"]["whole_nodes"]
    assert all(n % 8 == 0 for n in totals["devices_by_type"].values())  # H100 SXM: 8 per node
    assert totals["nodes_by_type"] == {d: n // 8 for d, n in totals["devices_by_type"].items()}
    assert min(p["replicas"] for p in plan["pools"]) >= 2
