"""The procurement workbook and BoM CSV of a real plan, read back with openpyxl and recalculated.

The formulas are checked three ways: openpyxl sees formula strings in every derived cell and numbers in the
cached values; the `formulas` engine recalculates the whole workbook and gets every cached value back (so
the formulas compute the plan's own totals); after a unit-price or TCO-input change it gets the totals moved
by exactly count x delta. LibreOffice, when installed, recalculates an edited copy the same way.
"""

from __future__ import annotations

import csv
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import formulas
import openpyxl
import pytest
import yaml
from openpyxl.utils import get_column_letter
from typer.testing import CliRunner

from planner.cli import app
from planner.export import BOM_CSV_COLUMNS, read_plan, write_bom_csv, write_plan_workbook
from planner.export.bom import TcoInputs, tco_from_totals
from planner.export.plan_sheets import BOM_COLUMNS
from planner.optimize import PlanOptions, plan_workload
from planner.schema import Workload

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = ROOT / "examples" / "workloads" / "chat-70b.yaml"
REL = 1e-9
SHEETS = ["Summary", "Bill of Materials", "Network", "Pools", "TCO", "TCO by year", "Assumptions"]
COL = {column.key: get_column_letter(i + 1) for i, column in enumerate(BOM_COLUMNS)}
BOM_FORMULA_KEYS = [c.key for c in BOM_COLUMNS if c.formula]
TCO_INPUT_NAMES = ("electricity_usd_per_kwh", "pue", "depreciation_years", "utilization", "hosting_usd_per_kw_month",
                   "rack_units_per_rack")


# ------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def plan(catalog):
    # disaggregated only, so the plan moves KV between pools and the network sheet has lines to size
    workload = Workload.model_validate({**yaml.safe_load(WORKLOAD.read_text()), "strategies": ["pd_disagg"]})
    solved = plan_workload(workload, catalog, PlanOptions(baseline=False))
    assert solved.status != "infeasible" and solved.totals.devices > 0
    return solved


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("export")


@pytest.fixture(scope="module")
def plan_json(plan, folder) -> Path:
    path = folder / "plan.json"
    path.write_text(json.dumps(plan.model_dump(mode="json")))
    return path


@pytest.fixture(scope="module")
def xlsx(plan, catalog, folder) -> Path:
    path = folder / "plan.xlsx"
    write_plan_workbook(plan, catalog, path, source="plan.json")
    return path


@pytest.fixture(scope="module")
def book(xlsx):
    return openpyxl.load_workbook(xlsx)


@pytest.fixture(scope="module")
def cached(xlsx):
    return openpyxl.load_workbook(xlsx, data_only=True)


@pytest.fixture(scope="module")
def engine(xlsx):
    """The workbook compiled by the `formulas` engine (a pure-Python Excel calculator)."""
    return formulas.ExcelModel().loads(str(xlsx)).finish()


@pytest.fixture(scope="module")
def recalculated(engine):
    return engine.calculate()


@pytest.fixture(scope="module")
def whole_nodes(plan, catalog) -> dict[str, float]:
    """IT kW of the plan's fleet with every node charged its whole overhead, from the catalog numbers."""
    it = sum((n * catalog.device(d).tdp_w + math.ceil(n / catalog.device(d).devices_per_node)
              * catalog.device(d).node_overhead_w) / 1000 for d, n in plan.totals.devices_by_type.items())
    return {"it_power_kw": it, "facility_power_kw": it * plan.workload.constraints.pue}


# -------------------------------------------------------------------------------------------- helpers
def bom_rows(ws) -> tuple[dict[str, int], int]:
    """Row number of each device id on the BoM sheet, and of the totals row."""
    rows = {ws[f"B{r}"].value: r for r in range(3, ws.max_row + 1)
            if ws[f"B{r}"].value and ws[f"A{r}"].value != "Total"}
    total = next(r for r in range(3, ws.max_row + 1) if ws[f"A{r}"].value == "Total")
    return rows, total


def named(book, name: str) -> tuple[str, str]:
    """(sheet, coordinate) a defined name points at."""
    (sheet, coordinate), = list(book.defined_names[name].destinations)
    return sheet, coordinate.replace("$", "")


def label_row(ws, label: str) -> int:
    return next(r for r in range(1, ws.max_row + 1) if ws[f"A{r}"].value == label)


def key(xlsx: Path, sheet: str, coordinate: str) -> str:
    """How the `formulas` engine names a cell."""
    return f"'[{xlsx.name}]{sheet.upper()}'!{coordinate}"


def value(solution, xlsx: Path, sheet: str, coordinate: str):
    result = solution[key(xlsx, sheet, coordinate)].value[0, 0]
    return float(result) if isinstance(result, (int, float)) and not isinstance(result, bool) else result


def formula_cells(book):
    for ws in book.worksheets:
        for row in ws.iter_rows():
            for c in row:
                if isinstance(c.value, str) and c.value.startswith("="):
                    yield ws.title, c.coordinate, c.value


# ----------------------------------------------------------------------------------- structure, styles
def test_sheets_names_and_frozen_headers(book):
    assert book.sheetnames == SHEETS
    assert book["Bill of Materials"].freeze_panes == "C3"
    assert book["Pools"].freeze_panes == "B2"
    assert book["Assumptions"].freeze_panes == "C2"
    assert book["TCO"].freeze_panes == "A3"
    assert book["Summary"].freeze_panes == "A2"
    assert set(TCO_INPUT_NAMES) | {"capex_usd", "it_power_kw", "facility_power_kw", "output_tokens_per_s",
                                   "usd_per_million_tokens"} <= set(book.defined_names)
    for name in TCO_INPUT_NAMES:
        assert named(book, name)[0] == "TCO"


def test_inputs_look_different_from_formulas_and_numbers_are_formatted(book, plan):
    ws = book["Bill of Materials"]
    rows, total = bom_rows(ws)
    r = next(iter(rows.values()))
    price, extended = ws[f"{COL['price_usd']}{r}"], ws[f"{COL['extended_price_usd']}{r}"]
    assert price.fill.fgColor.rgb.endswith("FFF2CC") and price.font.color.rgb.endswith("1F4E9E")
    assert extended.fill.fgColor.rgb != price.fill.fgColor.rgb
    assert price.number_format == "$#,##0" and extended.number_format == "$#,##0"
    assert ws[f"{COL['devices']}{r}"].number_format == "#,##0"
    assert ws[f"{COL['fleet_usd_per_hour']}{r}"].number_format == "$#,##0.00"
    assert ws[f"A{total}"].font.b and ws[f"{COL['extended_price_usd']}{total}"].font.b
    assert ws.column_dimensions["C"].width > 20
    assert ws["A2"].font.b and ws["A2"].fill.fgColor.rgb.endswith("1F4E79")  # header row
    sheet, coordinate = named(book, "pue")
    assert book[sheet][coordinate].fill.fgColor.rgb.endswith("FFF2CC")
    assert book[sheet].data_validations.dataValidation, "TCO inputs are validated"


# ---------------------------------------------------------------------------------- formulas (openpyxl)
def test_every_derived_bom_cell_is_a_formula_over_the_cells(book, plan):
    ws = book["Bill of Materials"]
    rows, total = bom_rows(ws)
    assert set(rows) == set(plan.totals.devices_by_type)
    for device, r in rows.items():
        assert ws[f"{COL['devices']}{r}"].value == plan.totals.devices_by_type[device]  # an input, not a formula
        for k in BOM_FORMULA_KEYS:
            assert str(ws[f"{COL[k]}{r}"].value).startswith("="), (device, k)
        assert ws[f"{COL['extended_price_usd']}{r}"].value == f"={COL['devices']}{r}*{COL['price_usd']}{r}"
        assert ws[f"{COL['facility_power_kw']}{r}"].value == f"={COL['it_power_kw']}{r}*pue"
    first, last = min(rows.values()), max(rows.values())
    for k in ("devices", "nodes", "extended_price_usd", "it_power_kw", "facility_power_kw", "fleet_usd_per_hour"):
        assert ws[f"{COL[k]}{total}"].value == f"=SUM({COL[k]}{first}:{COL[k]}{last})"


def test_tco_and_summary_are_formulas_over_named_cells(book):
    tco = book["TCO"]
    capex = f"B{label_row(tco, 'Capex (devices + network)')}"
    assert tco[f"B{label_row(tco, 'Depreciation per year')}"].value == f"={capex}/depreciation_years"
    assert tco[capex].value == "=capex_usd+network_capex_usd"
    assert "electricity_usd_per_kwh" in tco[f"B{label_row(tco, 'Energy cost per year')}"].value
    assert "hosting_usd_per_kw_month" in tco[f"B{label_row(tco, 'Hosting per year')}"].value
    assert "utilization" in tco[f"B{label_row(tco, 'Million output tokens per hour')}"].value
    summary = book["Summary"]
    assert summary[f"B{label_row(summary, 'Capex ($)')}"].value == "=capex_usd"
    headline = label_row(summary, "$ per million output tokens (owned: depreciation, energy, hosting)")
    assert summary[f"B{headline}"].value == "=usd_per_million_tokens"


def test_cached_values_are_the_plans_totals(cached, plan, whole_nodes):
    ws = cached["Bill of Materials"]
    rows, total = bom_rows(ws)
    t = plan.totals
    assert ws[f"{COL['devices']}{total}"].value == t.devices
    assert ws[f"{COL['extended_price_usd']}{total}"].value == pytest.approx(t.capex_usd, rel=REL)
    assert ws[f"{COL['it_power_kw']}{total}"].value == pytest.approx(whole_nodes["it_power_kw"], rel=REL)
    assert ws[f"{COL['it_power_kw']}{total}"].value >= t.it_power_kw * (1 - REL)  # whole nodes, never less
    assert ws[f"{COL['facility_power_kw']}{total}"].value == pytest.approx(whole_nodes["facility_power_kw"], rel=REL)
    assert ws[f"{COL['fleet_usd_per_hour']}{total}"].value == pytest.approx(t.cost_usd_per_hour, rel=REL)
    for device, r in rows.items():
        capex = sum(p.capex_usd for p in plan.pools if p.device == device and p.partner_device is None)
        if capex:
            assert ws[f"{COL['extended_price_usd']}{r}"].value == pytest.approx(capex, rel=REL)
    summary = cached["Summary"]
    row = label_row(summary, "Facility power (kW)")
    assert summary[f"B{row}"].value == pytest.approx(whole_nodes["facility_power_kw"], rel=REL)
    assert summary[f"C{row}"].value == pytest.approx(t.power_kw, rel=REL)


def test_every_formula_cell_has_a_cached_number(book, cached):
    missing = [(s, c) for s, c, _ in formula_cells(book) if cached[s][c].value is None]
    assert not missing


# ----------------------------------------------------------------------------- formulas (formula engine)
def test_engine_recalculates_every_cached_value(book, cached, recalculated, xlsx):
    checked = 0
    for sheet, coordinate, text in formula_cells(book):
        got, want = value(recalculated, xlsx, sheet, coordinate), cached[sheet][coordinate].value
        if isinstance(want, str):
            assert got == want, (sheet, coordinate, text)
        else:
            assert math.isclose(got, want, rel_tol=REL, abs_tol=1e-9), (sheet, coordinate, text, got, want)
        checked += 1
    assert checked > 40


def test_engine_totals_are_the_plans_totals(book, recalculated, xlsx, plan, whole_nodes):
    t = plan.totals
    for name, want in (("capex_usd", t.capex_usd), ("it_power_kw", whole_nodes["it_power_kw"]),
                       ("facility_power_kw", whole_nodes["facility_power_kw"]),
                       ("fleet_usd_per_hour", t.cost_usd_per_hour)):
        assert value(recalculated, xlsx, *named(book, name)) == pytest.approx(want, rel=REL), name
    tokens = sum(c.rate_rps_served * rc.output_tokens for c, rc in zip(plan.classes, plan.workload.classes))
    assert value(recalculated, xlsx, *named(book, "output_tokens_per_s")) == pytest.approx(tokens, rel=REL)
    network = value(recalculated, xlsx, *named(book, "network_capex_usd"))
    expected = tco_from_totals(TcoInputs(pue=plan.workload.constraints.pue), t.capex_usd, whole_nodes["it_power_kw"],
                               t.cost_usd_per_hour, tokens, network_capex_usd=network)
    assert value(recalculated, xlsx, *named(book, "usd_per_million_tokens")) == pytest.approx(
        expected.usd_per_million_tokens, rel=REL)
    assert value(recalculated, xlsx, *named(book, "total_usd_per_year")) == pytest.approx(
        expected.total_usd_per_year, rel=REL)


def test_a_unit_price_change_moves_every_total_by_count_times_delta(book, engine, recalculated, xlsx, plan):
    ws = book["Bill of Materials"]
    rows, total = bom_rows(ws)
    device = max(rows, key=lambda d: plan.totals.devices_by_type[d])
    r, count, delta = rows[device], plan.totals.devices_by_type[device], 1_000.0
    price_cell = f"{COL['price_usd']}{r}"
    price = ws[price_cell].value
    after = engine.calculate(inputs={key(xlsx, "Bill of Materials", price_cell): price + delta})

    def moved(sheet, coordinate):
        return value(after, xlsx, sheet, coordinate) - value(recalculated, xlsx, sheet, coordinate)

    assert moved("Bill of Materials", f"{COL['extended_price_usd']}{r}") == pytest.approx(count * delta)
    assert moved("Bill of Materials", f"{COL['extended_price_usd']}{total}") == pytest.approx(count * delta)
    assert moved(*named(book, "capex_usd")) == pytest.approx(count * delta)
    summary = book["Summary"]
    assert moved("Summary", f"B{label_row(summary, 'Capex ($)')}") == pytest.approx(count * delta)
    assert moved("Summary", f"C{label_row(summary, 'Capex ($)')}") == 0  # "as planned" stays
    tco = book["TCO"]
    years = tco[named(book, "depreciation_years")[1]].value
    assert moved("TCO", f"B{label_row(tco, 'Depreciation per year')}") == pytest.approx(count * delta / years)
    assert moved(*named(book, "total_usd_per_year")) == pytest.approx(count * delta / years)
    assert moved(*named(book, "it_power_kw")) == 0 and moved(*named(book, "fleet_usd_per_hour")) == 0
    mtok_year = value(recalculated, xlsx, "TCO", f"B{label_row(tco, 'Million output tokens per year')}")
    assert moved(*named(book, "usd_per_million_tokens")) == pytest.approx(count * delta / years / mtok_year)


def test_tco_inputs_drive_energy_power_and_depreciation(book, engine, recalculated, xlsx, plan, whole_nodes):
    tco = book["TCO"]
    pue, electricity, years = (key(xlsx, *named(book, name))
                               for name in ("pue", "electricity_usd_per_kwh", "depreciation_years"))
    base_pue = plan.workload.constraints.pue
    after = engine.calculate(inputs={pue: 2 * base_pue, electricity: 0.2, years: 5})
    energy_row = f"B{label_row(tco, 'Energy cost per year')}"
    facility = 2 * whole_nodes["facility_power_kw"]
    assert value(after, xlsx, *named(book, "facility_power_kw")) == pytest.approx(facility, rel=REL)
    assert value(after, xlsx, "TCO", energy_row) == pytest.approx(facility * 8760 * 0.2, rel=REL)
    network = value(recalculated, xlsx, *named(book, "network_capex_usd"))
    assert value(after, xlsx, "TCO", f"B{label_row(tco, 'Depreciation per year')}") == pytest.approx(
        (plan.totals.capex_usd + network) / 5, rel=REL)
    assert value(after, xlsx, *named(book, "it_power_kw")) == pytest.approx(whole_nodes["it_power_kw"], rel=REL)


def test_more_devices_mean_more_nodes_power_and_capex(book, engine, recalculated, xlsx):
    ws = book["Bill of Materials"]
    rows, _ = bom_rows(ws)
    r = next(iter(rows.values()))
    per_node = ws[f"{COL['devices_per_node']}{r}"].value
    devices = ws[f"{COL['devices']}{r}"].value
    after = engine.calculate(inputs={key(xlsx, "Bill of Materials", f"{COL['devices']}{r}"): devices + per_node})
    nodes_cell = f"{COL['nodes']}{r}"
    nodes_before = value(recalculated, xlsx, "Bill of Materials", nodes_cell)
    assert value(after, xlsx, "Bill of Materials", nodes_cell) == nodes_before + 1
    power = value(recalculated, xlsx, "Bill of Materials", f"{COL['power_per_device_w']}{r}")
    assert value(after, xlsx, *named(book, "it_power_kw")) - value(recalculated, xlsx, *named(book, "it_power_kw")) \
        == pytest.approx(per_node * power / 1000)


# ----------------------------------------------------------------------------------- the other sheets
def test_summary_says_what_was_planned(cached, plan):
    ws = cached["Summary"]
    facts = {ws[f"A{r}"].value: ws[f"B{r}"].value for r in range(1, ws.max_row + 1)}
    assert plan.objective in facts["Objective"] and plan.status in facts["Status"]
    assert facts["Goodput scale (x the workload's rates)"] == pytest.approx(plan.goodput_scale)
    assert facts["Devices"] == plan.totals.devices
    header = label_row(ws, "Class")
    for offset, result in enumerate(plan.classes, start=1):
        assert ws[f"A{header + offset}"].value == result.name
        assert ws[f"L{header + offset}"].value == "yes"
    assert ws[f"L{header + len(plan.classes) + 1}"].value == "all"
    assert facts["$ per million output tokens (owned: depreciation, energy, hosting)"] > 0


def test_pools_sheet_has_every_pool(cached, plan):
    ws = cached["Pools"]
    headers = [c.value for c in ws[1]]
    rows = [dict(zip(headers, (c.value for c in row))) for row in ws.iter_rows(min_row=2, max_row=len(plan.pools) + 1)]
    assert len(rows) == len(plan.pools)
    for row, pool in zip(rows, plan.pools):
        assert (row["Class (shared: its share of the pool's req/s)"], row["Role"], row["Device"], row["Replicas"],
                row["Devices"], row["EP groups"]) == (pool.class_name, pool.role, pool.device, pool.replicas, pool.devices, pool.ep)
        assert row["Utilisation"] == pytest.approx(pool.utilization)
    total = dict(zip(headers, (c.value for c in ws[len(plan.pools) + 2])))
    assert total["Devices"] == plan.totals.devices
    assert total["Capex ($)"] == pytest.approx(plan.totals.capex_usd)


def test_assumptions_list_every_catalog_number_with_its_source(cached, plan, catalog):
    ws = cached["Assumptions"]
    rows = {(r[0], r[1]): r for r in ws.iter_rows(min_row=2, values_only=True)}
    for device_id in plan.totals.devices_by_type:
        device = catalog.device(device_id)
        for path, provenance in device.provenance.items():
            item, field, number, unit, estimate, source = rows[(device_id, path)]
            assert source == provenance.source and estimate == ("yes" if provenance.estimate else "no")
        assert rows[(device_id, "price_usd")][2] == device.price_usd
        assert rows[(device_id, "tdp_w")][2] == device.tdp_w
    assert rows[(plan.model, "layers")][2] == catalog.model(plan.model).layers


# ------------------------------------------------------------------------------------------------ CSV
def test_bom_csv_matches_the_plan(plan, catalog, folder, whole_nodes):
    from planner.export import plan_book

    path = write_bom_csv(plan_book(plan, catalog).lines, plan.workload.constraints.pue, folder / "bom.csv")
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == list(BOM_CSV_COLUMNS)
    assert {r["device"]: int(r["devices"]) for r in rows} == plan.totals.devices_by_type
    assert not any(v.startswith("=") for r in rows for v in r.values())
    t = plan.totals
    assert sum(float(r["extended_price_usd"]) for r in rows) == pytest.approx(t.capex_usd, rel=REL)
    assert sum(float(r["it_power_kw"]) for r in rows) == pytest.approx(whole_nodes["it_power_kw"], rel=REL)
    assert sum(float(r["facility_power_kw"]) for r in rows) == pytest.approx(whole_nodes["facility_power_kw"], rel=REL)
    assert sum(float(r["fleet_usd_per_hour"]) for r in rows) == pytest.approx(t.cost_usd_per_hour, rel=REL)
    for r in rows:
        assert int(r["nodes"]) == math.ceil(int(r["devices"]) / int(r["devices_per_node"]))


# ---------------------------------------------------------------- a plan the catalog no longer matches
def test_devices_without_rack_units_and_a_changed_catalog(plan, catalog, folder):
    extra = plan.totals.model_copy(update={"devices_by_type": {**plan.totals.devices_by_type, "mi300x": 3}})
    changed = plan.model_copy(update={"totals": extra})
    path = folder / "changed.xlsx"
    write_plan_workbook(changed, catalog, path)
    values = openpyxl.load_workbook(path, data_only=True)
    ws = values["Bill of Materials"]
    rows, total = bom_rows(ws)
    assert ws[f"{COL['racks']}{rows['mi300x']}"].value == "n/a"
    assert ws[f"{COL['rack_units']}{rows['mi300x']}"].value == "n/a"
    assert ws[f"{COL['extended_price_usd']}{total}"].value == pytest.approx(
        plan.totals.capex_usd + 3 * catalog.device("mi300x").price_usd)
    summary = [c for row in values["Summary"].iter_rows(values_only=True) for c in row if isinstance(c, str)]
    assert any(text.startswith("The catalog changed") for text in summary)
    solution = formulas.ExcelModel().loads(str(path)).finish().calculate()
    racks = sum(ws[f"{COL['racks']}{r}"].value for d, r in rows.items() if d != "mi300x")
    assert value(solution, path, "Bill of Materials", f"{COL['racks']}{total}") == racks


# ------------------------------------------------------------------- whole nodes, network, years, print
def test_nine_devices_on_eight_per_node_pay_two_nodes_overhead(plan, catalog, folder):
    h100 = catalog.device("h100-sxm")
    assert (h100.tdp_w, h100.node_overhead_w, h100.devices_per_node) == (700, 4_600, 8)
    nine = plan.model_copy(update={"totals": plan.totals.model_copy(update={"devices_by_type": {"h100-sxm": 9}})})
    path = folder / "nine.xlsx"
    write_plan_workbook(nine, catalog, path)
    ws = openpyxl.load_workbook(path, data_only=True)["Bill of Materials"]
    rows, _ = bom_rows(ws)
    r = rows["h100-sxm"]
    assert ws[f"{COL['nodes']}{r}"].value == 2
    assert ws[f"{COL['it_power_kw']}{r}"].value == pytest.approx((9 * 700 + 2 * 4_600) / 1000) == 15.5
    formula = openpyxl.load_workbook(path)["Bill of Materials"][f"{COL['it_power_kw']}{r}"].value
    assert formula == f"=({COL['devices']}{r}*{COL['tdp_w']}{r}+{COL['nodes']}{r}*{COL['node_overhead_w']}{r})/1000"
    solution = formulas.ExcelModel().loads(str(path)).finish().calculate(
        inputs={key(path, "Bill of Materials", f"{COL['devices']}{r}"): 17})  # 17 devices: 3 nodes
    assert value(solution, path, "Bill of Materials", f"{COL['it_power_kw']}{r}") == pytest.approx(
        (17 * 700 + 3 * 4_600) / 1000)


def test_network_sheet_sizes_ports_from_the_transfer_volumes(book, cached, recalculated, xlsx):
    ws, values = book["Network"], cached["Network"]
    head = label_row(values, "Class")
    rows = [r for r in range(head + 1, values.max_row + 1) if values[f"B{r}"].value and values[f"D{r}"].value]
    assert rows, "the plan moves KV between prefill and decode pools"
    port, util = (values[named(book, n)[1]].value for n in ("port_gbps", "link_utilization"))
    for r in rows:
        served, mb = values[f"D{r}"].value, values[f"E{r}"].value
        assert values[f"F{r}"].value == pytest.approx(served * mb / 1000)
        assert values[f"G{r}"].value == math.ceil(served * mb / 1000 * 8 / (port * util))
        assert ws[f"G{r}"].value == f"=CEILING(F{r}*8/(port_gbps*link_utilization),1)"
    nics = sum(values[f"H{r}"].value for r in rows)
    tiers = values[named(book, "fabric_tiers")[1]].value
    assert values[named(book, "nic_ports")[1]].value == nics
    assert values[named(book, "transceivers")[1]].value == nics * 2 * tiers
    prices = {n: values[named(book, n)[1]].value for n in ("nic_usd", "transceiver_usd", "switch_port_usd")}
    assert value(recalculated, xlsx, *named(book, "network_capex_usd")) == pytest.approx(
        nics * prices["nic_usd"] + nics * 2 * tiers * prices["transceiver_usd"]
        + nics * (2 * tiers - 1) * prices["switch_port_usd"])
    sources = [values[f"D{r}"].value for r in range(4, 10)]
    assert all(s and "http" in s for s in sources if "estimate: size links" not in s)


def test_tco_by_year_is_live_and_discounts(book, cached, engine, recalculated, xlsx):
    ws = cached["TCO by year"]
    head = label_row(ws, "Year")
    years = [r for r in range(head + 1, head + 11)]
    npv = value(recalculated, xlsx, *named(book, "npv_usd"))
    assert npv == pytest.approx(cached[named(book, "npv_usd")[0]][named(book, "npv_usd")[1]].value, rel=REL)
    assert npv == pytest.approx(sum(ws[f"F{r}"].value for r in years), rel=REL)
    # at a 0% discount rate the NPV is the plain sum of the cash flows of the horizon
    rate, horizon = key(xlsx, *named(book, "discount_rate")), key(xlsx, *named(book, "tco_years"))
    flat = engine.calculate(inputs={rate: 0.0, horizon: 3})
    cash = sum(value(flat, xlsx, "TCO by year", f"{col}{r}") for r in years for col in "CDE")
    assert value(flat, xlsx, *named(book, "npv_usd")) == pytest.approx(cash, rel=REL)
    assert value(flat, xlsx, "TCO by year", f"G{years[3]}") == 0  # year 4 is past a 3-year horizon
    assert value(flat, xlsx, "TCO by year", f"J{years[3]}") == "-"
    assert value(flat, xlsx, "TCO by year", f"J{years[1]}") > 0  # $ per million tokens in year 2


def test_mix_columns_read_as_text(cached, plan):
    ws = cached["Pools"]
    column = [c.value for c in ws[1]].index("Devices by type") + 1
    first = plan.pools[0]
    device, count = next(iter(first.devices_by_type.items()))
    assert ws.cell(row=2, column=column).value == f"{count:,}× {device}"


def test_every_sheet_prints_landscape_one_page_wide_with_headers(book):
    for ws in book.worksheets:
        assert ws.page_setup.orientation == "landscape", ws.title
        wide = ws.title in ("Bill of Materials", "Pools")  # 20 columns: two pages wide, ids on both
        assert (ws.page_setup.fitToWidth or 1) == (2 if wide else 1) and ws.page_setup.fitToHeight == 0, ws.title
        assert bool(ws.print_title_cols) == wide, ws.title
        assert ws.sheet_properties.pageSetUpPr.fitToPage, ws.title
        assert ws.print_title_rows, ws.title


# ------------------------------------------------------------------------------------ LibreOffice (optional)
RECALC_ON_LOAD = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema">
<item oor:path="/org.openoffice.Office.Calc/Formula/Load">
  <prop oor:name="OOXMLRecalcMode" oor:op="fuse"><value>0</value></prop>
</item>
</oor:items>
"""


@pytest.mark.skipif(shutil.which("soffice") is None, reason="LibreOffice (soffice) is not installed")
def test_libreoffice_recalculates_an_edited_price(xlsx, plan, whole_nodes, cached, tmp_path):
    edited = openpyxl.load_workbook(xlsx)  # openpyxl saves formulas without cached values: LibreOffice must compute
    ws = edited["Bill of Materials"]
    rows, total = bom_rows(ws)
    device = max(rows, key=lambda d: plan.totals.devices_by_type[d])
    ws[f"{COL['price_usd']}{rows[device]}"].value += 1_000
    source = tmp_path / "edited.xlsx"
    edited.save(source)
    profile = tmp_path / "profile"
    (profile / "user").mkdir(parents=True)
    (profile / "user" / "registrymodifications.xcu").write_text(RECALC_ON_LOAD)
    out = tmp_path / "out"
    proc = subprocess.run(["soffice", f"-env:UserInstallation={profile.as_uri()}", "--headless", "--convert-to", "xlsx",
                           "--outdir", str(out), str(source)], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    result = openpyxl.load_workbook(out / "edited.xlsx", data_only=True)
    bom = result["Bill of Materials"]
    capex = plan.totals.capex_usd + plan.totals.devices_by_type[device] * 1_000
    assert bom[f"{COL['extended_price_usd']}{total}"].value == pytest.approx(capex, rel=REL)
    assert bom[f"{COL['facility_power_kw']}{total}"].value == pytest.approx(whole_nodes["facility_power_kw"], rel=REL)
    tokens = sum(c.rate_rps_served * rc.output_tokens for c, rc in zip(plan.classes, plan.workload.classes))
    network = cached[named(cached, "network_capex_usd")[0]][named(cached, "network_capex_usd")[1]].value
    expected = tco_from_totals(TcoInputs(pue=plan.workload.constraints.pue), capex, whole_nodes["it_power_kw"],
                               plan.totals.cost_usd_per_hour, tokens, network_capex_usd=network)
    sheet, coordinate = named(result, "usd_per_million_tokens")
    assert result[sheet][coordinate].value == pytest.approx(expected.usd_per_million_tokens, rel=REL)


# ------------------------------------------------------------------------------------------ command line
runner = CliRunner()


def test_cli_writes_the_workbook_and_csv_next_to_the_plan(plan_json, plan):
    result = runner.invoke(app, ["export", str(plan_json)])
    assert result.exit_code == 0, result.output
    assert "wrote" in result.stdout and plan_json.with_suffix(".xlsx").is_file()
    assert read_plan(plan_json).totals == plan.totals
    target = plan_json.parent / "b" / "bom.csv"
    result = runner.invoke(app, ["export", str(plan_json), "--format", "csv", "-o", str(target)])
    assert result.exit_code == 0, result.output
    with target.open() as handle:
        assert sum(int(r["devices"]) for r in csv.DictReader(handle)) == plan.totals.devices


def _bad_inputs(folder: Path, plan_json: Path) -> dict[str, tuple[list[str], str]]:
    (folder / "not-json.json").write_text("devices: [")
    (folder / "not-plan.json").write_text('{"model": "llama-3.3-70b"}')
    broken = json.loads(plan_json.read_text())
    broken["status"] = "splendid"
    (folder / "broken.json").write_text(json.dumps(broken))
    unknown = json.loads(plan_json.read_text())
    unknown["totals"]["devices_by_type"] = {"warp-drive": 4}
    (folder / "unknown.json").write_text(json.dumps(unknown))
    (folder / "empty-study").mkdir(exist_ok=True)
    return {
        "missing": ([str(folder / "nope.json")], "no such file"),
        "not json": ([str(folder / "not-json.json")], "not JSON"),
        "not a plan": ([str(folder / "not-plan.json")], "not a siliconmix plan"),
        "invalid plan": ([str(folder / "broken.json")], "status"),
        "unknown device": ([str(folder / "unknown.json")], "warp-drive"),
        "unknown format": ([str(plan_json), "--format", "pdf"], "unknown format"),
        "not a study": ([str(folder / "empty-study")], "results.csv"),
        "overwrite input": ([str(plan_json), "-o", str(plan_json)], "overwrite"),
    }


@pytest.mark.parametrize("case", ["missing", "not json", "not a plan", "invalid plan", "unknown device",
                                  "unknown format", "not a study", "overwrite input"])
def test_bad_input_exits_2_with_one_readable_line(case, folder, plan_json):
    args, fragment = _bad_inputs(folder, plan_json)[case]
    result = runner.invoke(app, ["export", *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and fragment in lines[0], result.stderr
    assert "Traceback" not in result.output


def test_an_infeasible_plan_has_nothing_to_procure(folder, plan_json):
    payload = json.loads(plan_json.read_text())
    payload["status"] = "infeasible"
    path = folder / "infeasible.json"
    path.write_text(json.dumps(payload))
    result = runner.invoke(app, ["export", str(path)])
    assert result.exit_code == 1 and "infeasible" in result.stderr


def test_the_command_line_as_a_user_runs_it(plan_json, plan, tmp_path):
    """`siliconmix export plan.json --format xlsx -o plan.xlsx` in a real process."""
    exported = subprocess.run([sys.executable, "-m", "planner", "export", str(plan_json), "--format", "xlsx", "-o",
                               "plan.xlsx"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    book = openpyxl.load_workbook(tmp_path / "plan.xlsx", data_only=True)
    sheet, coordinate = named(book, "capex_usd")
    assert book[sheet][coordinate].value == pytest.approx(plan.totals.capex_usd, rel=REL)
