"""Bill-of-materials lines, TCO and assumption rows, checked against hand-computed cases."""

from __future__ import annotations

import pytest

from planner.export.assumptions import device_assumptions, model_assumptions, unit_of
from planner.export.bom import BomLine, TcoInputs, tco_from_totals
from planner.export.frontier import parse_value
from planner.export.study_workbook import number_format


def dgx_line(**changes) -> BomLine:
    """10 H100-like devices: 8 per node, 8U nodes, 700 W + 4,600 W per node, $27,500 and $1.69/h."""
    values = dict(vendor="nvidia", device="h100-sxm", name="H100", devices=10, devices_per_node=8, rack_units=8.0,
                  price_usd=27_500.0, price_usd_per_hour=1.69, tdp_w=700.0, node_overhead_w=4_600.0)
    return BomLine(**{**values, **changes})


def test_bom_line_by_hand():
    line = dgx_line()
    assert line.nodes == 2  # ceil(10 / 8)
    assert line.nodes_per_rack == 5  # floor(42 / 8)
    assert line.racks == 1
    assert line.extended_price_usd == 275_000.0
    assert line.power_per_device_w == 700 + 4_600 / 8 == 1_275.0
    assert line.power_per_node_w == 8 * 700 + 4_600 == 10_200.0
    assert line.planned_it_power_kw == pytest.approx(10 * 1.275)  # the planner's share of overhead per device
    assert line.it_power_kw == pytest.approx((10 * 700 + 2 * 4_600) / 1000) == 16.2  # two whole nodes
    assert line.facility_power_kw(1.2) == pytest.approx(16.2 * 1.2)
    assert line.rack_it_kw == pytest.approx(5 * 10.2)
    assert line.fleet_usd_per_hour == pytest.approx(16.9)


def test_a_partly_filled_node_draws_its_whole_overhead():
    """9 devices on 8-per-node = 2 nodes: 9 x 700 W + 2 x 4,600 W = 15.5 kW (the share model said 11.475)."""
    line = dgx_line(devices=9)
    assert line.nodes == 2
    assert line.it_power_kw == pytest.approx(15.5)
    assert line.planned_it_power_kw == pytest.approx(9 * (700 + 4_600 / 8) / 1000) == pytest.approx(11.475)
    assert dgx_line(devices=16).it_power_kw == pytest.approx(dgx_line(devices=16).planned_it_power_kw)  # full nodes


def test_racks_follow_rack_space_and_are_unknown_without_rack_units():
    assert dgx_line(devices=48, rack_units_per_rack=48).racks == 1  # 6 nodes of 8U in 48U
    assert dgx_line(devices=48).racks == 2  # 6 nodes, 5 per 42U rack
    tall = dgx_line(rack_units=50.0)
    assert tall.nodes_per_rack == 1  # a node taller than a rack still takes one rack
    unknown = dgx_line(rack_units=None)
    assert unknown.nodes_per_rack is None and unknown.racks is None and unknown.rack_it_kw is None


def test_tco_by_hand():
    """capex $1.2M, 100 kW IT, PUE 1.5, $0.10/kWh, 4 years, $150/kW-month, $80/h, 10,000 tokens/s at 50 %."""
    inputs = TcoInputs(pue=1.5, electricity_usd_per_kwh=0.10, depreciation_years=4, utilization=0.5,
                       hosting_usd_per_kw_month=150)
    tco = tco_from_totals(inputs, capex_usd=1_000_000.0, it_power_kw=100.0, fleet_usd_per_hour=80.0,
                          output_tokens_per_s=10_000.0, network_capex_usd=200_000.0)
    assert tco.facility_power_kw == pytest.approx(150.0)
    assert tco.energy_kwh_per_year == pytest.approx(150 * 8760)
    assert tco.energy_usd_per_year == pytest.approx(131_400.0)
    assert tco.hosting_usd_per_year == pytest.approx(100 * 150 * 12)
    assert tco.opex_usd_per_year == pytest.approx(131_400 + 180_000)
    assert tco.depreciation_usd_per_year == pytest.approx(300_000.0)  # ($1.0M devices + $0.2M network) / 4
    assert tco.total_usd_per_year == pytest.approx(611_400.0)
    assert tco.million_tokens_per_hour == pytest.approx(18.0)  # 10,000 x 3,600 x 0.5 / 1e6
    assert tco.million_tokens_per_year == pytest.approx(18 * 8760)
    assert tco.usd_per_million_tokens == pytest.approx(611_400 / (18 * 8760))
    assert tco.usd_per_million_tokens_hourly == pytest.approx(80 / 18)


def test_no_tokens_no_price_per_token():
    tco = tco_from_totals(TcoInputs(pue=1.2), capex_usd=1.0, it_power_kw=1.0, fleet_usd_per_hour=1.0,
                          output_tokens_per_s=0.0)
    assert tco.usd_per_million_tokens is None and tco.usd_per_million_tokens_hourly is None


@pytest.mark.parametrize("path, unit", [
    ("tdp_w", "W"), ("node.overhead_w", "W"), ("node.rack_units", "U"), ("price_usd", "$"),
    ("price_usd_per_hour", "$/h"), ("peak_dense_tflops.bf16", "TFLOP/s"), ("memory_tiers[0].capacity_gb", "GB"),
    ("memory_tiers[1].bandwidth_tb_s", "TB/s"), ("scale_up.bandwidth_gb_s", "GB/s"), ("scale_up.latency_us", "µs"),
    ("efficiency.mfu", "fraction"), ("published_params_b.total", "billion"), ("layers", "count"),
    ("max_context_tokens", "tokens"), ("node.devices_per_node", "devices"),
])
def test_units_come_from_field_names(path, unit):
    assert unit_of(path) == unit


def test_every_provenance_entry_becomes_a_row_with_the_catalog_value(catalog):
    device = catalog.device("h100-sxm")
    rows = {row.field: row for row in device_assumptions(device)}
    assert set(rows) == set(device.provenance)
    assert rows["tdp_w"].value == device.tdp_w
    assert rows["node.overhead_w"].value == device.node_overhead_w
    assert rows["node.devices_per_node"].value == device.devices_per_node
    assert rows["price_usd"].value == device.price_usd
    assert rows["price_usd"].estimate == device.provenance["price_usd"].estimate
    assert rows["memory_tiers[0].capacity_gb"].value == device.memory_tiers[0].capacity_gb
    assert rows["efficiency.mbu"].value == device.mbu
    assert all(row.source == device.provenance[row.field].source for row in rows.values())
    model = catalog.model("llama-3.3-70b")
    model_rows = {row.field: row for row in model_assumptions(model)}
    assert model_rows["layers"].value == model.layers and model_rows["layers"].source == model.source


def test_csv_fields_parse_to_numbers_except_text_columns():
    assert parse_value("hash", "12345678") == "12345678"
    assert parse_value("devices", "12") == 12 and isinstance(parse_value("devices", "12"), int)
    assert parse_value("power_kw", "12.0") == 12.0 and isinstance(parse_value("power_kw", "12.0"), float)
    assert parse_value("axis.devices", "h100-sxm") == "h100-sxm"
    assert parse_value("ttft_ms", "") is None


@pytest.mark.parametrize("column, number", [
    ("usd_per_million_tokens", "usd3"), ("capex_usd", "usd"), ("cost_usd_per_hour", "usd2"), ("power_kw", "dec1"),
    ("output_tokens_per_s", "int"), ("output_tokens_per_s_per_user", "dec1"), ("tokens_per_s_per_mw", "int"),
    ("ttft_ms", "dec1"), ("gain", "gain"), ("solve_time_s", "dec2"), ("devices", "int"), ("scenario", "text"),
    ("axis.power_budget_kw", "dec1"),
])
def test_study_columns_are_formatted_by_their_unit(column, number):
    assert number_format(column) == number
