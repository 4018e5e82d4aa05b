"""The study workbook: one row per scenario, the frontier table and a native scatter chart of it."""

from __future__ import annotations

import csv
import json
import re
import zipfile
from pathlib import Path

import openpyxl
import pytest
from openpyxl.utils import get_column_letter
from typer.testing import CliRunner

from planner.cli import app
from planner.export import read_results, write_study_workbook
from planner.export.study_workbook import header as _header

COLUMNS = [
    "scenario", "hash", "status", "reason", "goodput_scale", "served_rps", "output_tokens_per_s",
    "output_tokens_per_s_per_user", "ttft_ms", "tpot_ms", "power_kw", "cost_usd_per_hour", "capex_usd", "devices",
    "devices_by_type", "tokens_per_s_per_mw", "usd_per_million_tokens", "gain", "baseline_device", "solve_time_s",
    "axis.power_budget_kw", "axis.devices",
]
# (scenario, status, tokens/s per user, tokens/s per MW): frontier = a, c, e (b dominated by c, d by e, f failed,
# g would dominate all but serves 40% of demand)
POINTS = [
    ("a-h100-500", "optimal", 20.0, 900_000.0),
    ("b-h100-1000", "optimal", 30.0, 400_000.0),
    ("c-b200-500", "optimal", 40.0, 700_000.0),
    ("d-b200-1000", "feasible", 50.0, 100_000.0),
    ("e-mixed-500", "time_limit", 80.0, 300_000.0),
    ("f-cs3-500", "infeasible", None, None),
    ("g-cs3-250", "optimal", 90.0, 950_000.0),
]
FRONTIER = ["a-h100-500", "c-b200-500", "e-mixed-500"]


def _row(i: int, scenario: str, status: str, per_user: float | None, per_mw: float | None) -> dict:
    served = per_mw is not None
    budget, devices = scenario.split("-")[2], scenario.split("-")[1]
    return {
        "scenario": scenario, "hash": f"{10_000_000 + i}", "status": status,
        "reason": "" if served else "slo_unreachable",
        "goodput_scale": (0.4 if scenario.startswith("g-") else 1.5) if served else 0,
        "served_rps": 600.25 if served else 0, "output_tokens_per_s": per_mw * 0.5 if served else 0,
        "output_tokens_per_s_per_user": per_user if served else "", "ttft_ms": 800.0 if served else "",
        "tpot_ms": 1000 / per_user if served else "", "power_kw": 500.0 if served else 0,
        "cost_usd_per_hour": 1234.5 if served else 0, "capex_usd": 8e6 if served else 0,
        "devices": 600 if served else 0, "devices_by_type": json.dumps({devices: 600} if served else {}),
        "tokens_per_s_per_mw": per_mw if served else 0, "usd_per_million_tokens": 0.75 if served else "",
        "gain": 1.4 if served else "", "baseline_device": "h200", "solve_time_s": 0.25,
        "axis.power_budget_kw": int(budget), "axis.devices": devices,
    }


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("study")
    with (folder / "results.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(_row(i, *point) for i, point in enumerate(POINTS))
    return folder


@pytest.fixture(scope="module")
def workbook_path(study) -> Path:
    path = study / "study.xlsx"
    write_study_workbook(read_results(study), path, title="test")
    return path


def test_results_are_read_with_numbers_and_text(study):
    table = read_results(study)
    assert table.columns == COLUMNS and len(table.rows) == len(POINTS)
    assert table.axes == ["axis.power_budget_kw", "axis.devices"]
    first = table.rows[0]
    assert first["hash"] == "10000000" and first["devices"] == 600 and first["power_kw"] == 500.0
    assert table.rows[-2]["output_tokens_per_s_per_user"] is None
    assert [table.rows[i]["scenario"] for i in table.frontier_indices()] == FRONTIER


def test_one_row_per_scenario_with_every_column(workbook_path, study):
    book = openpyxl.load_workbook(workbook_path)
    assert book.sheetnames == ["Scenarios", "Frontier"]
    ws = book["Scenarios"]
    headers = [c.value for c in ws[1]]
    assert headers[:4] == ["scenario", "axis.power_budget_kw", "axis.devices", "status"]
    assert headers[-6:] == ["Meets demand", "On frontier", "hash", "reason", "baseline_device", "solve_time_s"]
    last = get_column_letter(headers.index("On frontier") + 1)
    assert ws.print_area == f"'Scenarios'!$A$1:${last}${len(POINTS) + 1}"  # up to "On frontier": no long text
    names = {"Meets demand": "meets", "On frontier": "front", **{h: c for c in COLUMNS for h in [_header(c)]}}
    assert ws.freeze_panes == "B2" and ws.auto_filter.ref
    rows = [dict(zip([names[h] for h in headers], r)) for r in ws.iter_rows(min_row=2, values_only=True)]
    assert [r["scenario"] for r in rows] == [p[0] for p in POINTS]
    assert {r["scenario"] for r in rows if r["front"] == "yes"} == set(FRONTIER)
    assert {r["scenario"] for r in rows if r["meets"] == "no"} == {"f-cs3-500", "g-cs3-250"}
    by_name = {r["scenario"]: r for r in rows}
    assert by_name["a-h100-500"]["tokens_per_s_per_mw"] == 900_000.0
    assert by_name["a-h100-500"]["hash"] == "10000000"  # text, not a number
    assert by_name["f-cs3-500"]["output_tokens_per_s_per_user"] is None
    assert by_name["a-h100-500"]["devices_by_type"] == "600× h100"  # text a person reads, not JSON
    letter = {names[h]: get_column_letter(i + 1) for i, h in enumerate(headers)}
    assert ws[f"{letter['tokens_per_s_per_mw']}2"].number_format == "#,##0"
    assert ws[f"{letter['cost_usd_per_hour']}2"].number_format == "$#,##0.00"


def test_frontier_sheet_lists_the_non_dominated_scenarios_in_order(workbook_path):
    ws = openpyxl.load_workbook(workbook_path)["Frontier"]
    headers = [c.value for c in ws[3]]
    assert headers[:3] == ["scenario", "axis.power_budget_kw", "axis.devices"]
    assert "40% of" not in str(ws["A1"].value) and "3 non-dominated of 5 scenarios that meet demand" in ws["A1"].value
    assert "1 solved scenarios serve less than demand" in ws["A2"].value
    names = [ws.cell(row=r, column=1).value for r in range(4, 4 + len(FRONTIER))]
    assert names == FRONTIER
    x = headers.index("Output tokens/s per user") + 1
    assert [ws.cell(row=r, column=x).value for r in range(4, 4 + len(FRONTIER))] == [20.0, 40.0, 80.0]
    assert ws.cell(row=4 + len(FRONTIER), column=1).value is None


def test_the_frontier_is_a_native_scatter_chart(workbook_path):
    with zipfile.ZipFile(workbook_path) as archive:
        charts = [n for n in archive.namelist() if n.startswith("xl/charts/chart")]
        assert len(charts) == 1
        xml = archive.read(charts[0]).decode()
    assert "<c:scatterChart>" in xml
    assert xml.count("<c:ser>") == 3
    refs = re.findall(r"<c:f>([^<]*)</c:f>", xml)
    assert "'Frontier'!$D$4:$D$6" in refs and "'Frontier'!$E$4:$E$6" in refs  # x, y of the 3 frontier rows
    assert "'Frontier'!$P$4:$P$5" in refs and "'Frontier'!$Q$4:$Q$5" in refs  # b and d: meet demand, dominated
    assert "'Frontier'!$T$4:$T$4" in refs and "'Frontier'!$U$4:$U$4" in refs  # g: below demand, apart
    assert "Frontier (non-dominated)" in xml and "Below demand (not on the frontier)" in xml
    ws = openpyxl.load_workbook(workbook_path)["Frontier"]
    assert len(ws._charts) == 1  # openpyxl reads it back as a chart, not a picture


def test_cli_exports_a_study_folder(study):
    runner = CliRunner()
    result = runner.invoke(app, ["export", str(study), "-o", str(study / "out.xlsx")])
    assert result.exit_code == 0, result.output
    assert "3 on the frontier" in result.stdout
    result = runner.invoke(app, ["export", str(study), "--format", "csv"])
    assert result.exit_code == 0, result.output
    with (study / "scenarios.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["scenario"] for r in rows if r["frontier"] == "True"] == FRONTIER
    with (study / "results.csv").open(newline="") as handle:
        original = list(csv.DictReader(handle))
    assert [{k: v for k, v in r.items() if k not in ("frontier", "meets_demand")} for r in rows] == original
    assert [r["scenario"] for r in rows if r["meets_demand"] == "False"] == ["f-cs3-500", "g-cs3-250"]


def test_a_results_table_without_the_frontier_columns_is_refused(tmp_path):
    (tmp_path / "results.csv").write_text("scenario,status\ns1,optimal\n")
    result = CliRunner().invoke(app, ["export", str(tmp_path)])
    assert result.exit_code == 2 and "missing columns" in result.stderr


def test_a_study_with_no_feasible_scenario_still_exports(tmp_path):
    with (tmp_path / "results.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerow(_row(0, "f-cs3-500", "infeasible", None, None))
    frontier = write_study_workbook(read_results(tmp_path), tmp_path / "s.xlsx")
    assert frontier == []
    assert openpyxl.load_workbook(tmp_path / "s.xlsx")["Scenarios"].max_row == 2
