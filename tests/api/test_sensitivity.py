"""``POST /v1/plans?sensitivity=true``: the plan's sensitivity section over REST, the delta as asked, bad deltas 422."""

from __future__ import annotations

import json

import pytest
from apitest import assert_problem
from sqlalchemy import create_engine, text

SMALL = {"model": "llama-3.1-8b", "dtype": "fp8", "strategies": ["aggregated"],
         "classes": [{"name": "chat", "rate_rps": 20, "input_tokens": 1000, "output_tokens": 200,
                      "slo": {"ttft_ms": 1000, "tpot_ms": 50}}],
         "constraints": {"power_budget_kw": 300, "devices": ["h200", "mi300x"]}}


def test_the_option_reaches_the_planner_with_its_delta(client, db_url):
    response = client.post("/v1/plans", json=SMALL, params={"sensitivity": True, "sensitivity_delta": 0.1,
                                                            "time_limit_s": 60})
    assert response.status_code == 201, response.text
    section = response.json()["plan"]["sensitivity"]
    assert section["delta"] == 0.1 and section["devices"][0] == "h200" and section["inputs"]
    for row in section["inputs"]:
        assert row["low"]["factor"] == pytest.approx(0.9) and row["high"]["factor"] == pytest.approx(1.1)
    tdp = next(r for r in section["inputs"] if r["key"] == "h200.tdp_w")
    assert tdp["low"]["value"] == pytest.approx(630.0) and tdp["low"]["objective_change_pct"] > 0  # less power each
    engine = create_engine(db_url)
    with engine.connect() as connection:
        stored = json.loads(connection.execute(text("SELECT request_json FROM plans")).scalar_one())
    engine.dispose()
    assert stored["sensitivity_delta"] == 0.1


def test_without_the_option_there_is_no_section(client):
    response = client.post("/v1/plans", json=SMALL, params={"sensitivity_delta": 0.1, "time_limit_s": 30})
    assert response.status_code == 201, response.text
    assert response.json()["plan"]["sensitivity"] is None


@pytest.mark.parametrize("delta", [0, 1, -0.1, "lots"])
def test_a_delta_outside_zero_to_one_is_a_422_naming_it(client, delta):
    response = client.post("/v1/plans", json=SMALL, params={"sensitivity": True, "sensitivity_delta": delta})
    assert_problem(response, 422, fields=["sensitivity_delta"])
