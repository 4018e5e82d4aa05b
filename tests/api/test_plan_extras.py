"""``POST /v1/plans?alternatives=N`` and ``?simulate=true``: the runner-up plans and the replay over REST, as the
CLI's ``--alternatives`` and ``--simulate``."""

from __future__ import annotations

import pytest
from apitest import assert_problem

SMALL = {"model": "llama-3.1-8b", "dtype": "fp8", "strategies": ["aggregated"],
         "classes": [{"name": "chat", "rate_rps": 20, "input_tokens": 1000, "output_tokens": 200,
                      "slo": {"ttft_ms": 1000, "tpot_ms": 50}}],
         "constraints": {"power_budget_kw": 300, "devices": ["h200", "mi300x"]}}


def test_the_runner_up_mixes_come_back_with_the_plan(client):
    response = client.post("/v1/plans", json=SMALL, params={"alternatives": 1, "time_limit_s": 60})
    assert response.status_code == 201, response.text
    plan = response.json()["plan"]
    (runner_up,) = plan["alternatives"]
    assert set(runner_up["devices_by_type"]) != set(plan["totals"]["devices_by_type"])
    assert 0 <= runner_up["shortfall"] <= 1
    assert client.post("/v1/plans", json=SMALL, params={"time_limit_s": 60}).json()["plan"]["alternatives"] == []


@pytest.mark.parametrize("count", [-1, 11, "two"])
def test_a_bad_count_is_a_422_naming_it(client, count):
    response = client.post("/v1/plans", json=SMALL, params={"alternatives": count})
    assert_problem(response, 422)
    assert "alternatives" in response.text


def test_the_replay_comes_back_with_the_plan_and_is_stored_as_asked(client):
    response = client.post("/v1/plans", json=SMALL, params={"simulate": True, "time_limit_s": 60})
    assert response.status_code == 201, response.text
    check = response.json()["plan"]["simulation"]
    assert check["verdict"] in ("meets", "misses") and check["requests"] > 0 and check["duration_s"] == 600
    assert set(check["simulated_tpot_ms"]) == {"chat"}
    assert client.post("/v1/plans", json=SMALL, params={"time_limit_s": 60}).json()["plan"]["simulation"] is None
