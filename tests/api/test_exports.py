"""Procurement downloads of stored plans: the workbook read back with openpyxl, the BoM CSV matched to the
plan's totals; an infeasible plan is 409, an unknown one 404, an unknown format 422."""

from __future__ import annotations

import csv
import io

import openpyxl
import pytest
from apitest import assert_problem

from api.examples import CHAT_70B, UNREACHABLE_SLO

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


@pytest.fixture()
def planned(client) -> dict:
    response = client.post("/v1/plans", json=CHAT_70B, params={"time_limit_s": 20})
    assert response.status_code == 201, response.text
    return response.json()


def test_plan_workbook(client, planned):
    response = client.get(f"/v1/plans/{planned['id']}/export", params={"format": "xlsx"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == XLSX
    assert response.headers["content-disposition"] == f'attachment; filename="plan-{planned["id"]}.xlsx"'
    assert client.get(f"/v1/plans/{planned['id']}/export").headers["content-type"] == XLSX  # the default
    book = openpyxl.load_workbook(io.BytesIO(response.content))
    assert {"Summary", "Bill of Materials", "Pools", "TCO", "Assumptions"} <= set(book.sheetnames)
    cells = [c for row in book["Bill of Materials"].iter_rows(values_only=True) for c in row]
    for device, count in planned["plan"]["totals"]["devices_by_type"].items():
        assert device in cells and count in cells
    values = openpyxl.load_workbook(io.BytesIO(response.content), data_only=True)  # saved with computed values
    assert any(isinstance(c, (int, float)) and c > 0 for row in values["TCO"].iter_rows(values_only=True) for c in row)


def test_plan_bom_csv_matches_the_plans_totals(client, planned):
    response = client.get(f"/v1/plans/{planned['id']}/export", params={"format": "csv"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/csv")
    assert response.headers["content-disposition"] == f'attachment; filename="bom-{planned["id"]}.csv"'
    rows = list(csv.DictReader(io.StringIO(response.text)))
    totals = planned["plan"]["totals"]
    assert {r["device"]: int(r["devices"]) for r in rows} == totals["devices_by_type"]
    assert sum(int(r["devices"]) for r in rows) == totals["devices"]
    assert sum(float(r["extended_price_usd"]) for r in rows) == pytest.approx(totals["capex_usd"], rel=1e-6)
    assert sum(float(r["fleet_usd_per_hour"]) for r in rows) == pytest.approx(totals["cost_usd_per_hour"], rel=1e-6)
    assert sum(float(r["planned_it_power_kw"]) for r in rows) == pytest.approx(totals["it_power_kw"], rel=1e-6)
    assert sum(float(r["it_power_kw"]) for r in rows) >= totals["it_power_kw"]  # whole nodes draw whole overhead


def test_export_problems(client):
    infeasible = client.post("/v1/plans", json=UNREACHABLE_SLO).json()
    assert infeasible["status"] == "infeasible"
    for fmt in ("xlsx", "csv"):
        body = assert_problem(client.get(f"/v1/plans/{infeasible['id']}/export", params={"format": fmt}), 409)
        assert "nothing to procure" in body["detail"]
    assert_problem(client.get("/v1/plans/missing/export"), 404, kind="not-found")
    assert_problem(client.get(f"/v1/plans/{infeasible['id']}/export", params={"format": "pdf"}), 422,
                   fields=["format"])
